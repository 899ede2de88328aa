# The two commands of README.md: `make demo` (train + evaluate DQN on CartPole) and `make test`.
# Both create .venv and install everything on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# A machine without an NVIDIA GPU gets a CPU build of torch pinned to a release that is small to
# fetch; a GPU machine gets the newest torch with CUDA. Override with `make TORCH_SPEC=... install`.
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 'torch>=2.1' || echo 'torch==2.13.0')
PYTEST_WORKERS ?= 2

.PHONY: install demo test test-quick lint benchmarks clean-venv

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

install: $(VENV)/.installed

# Each run gets its own folders, runs/DQN_CartPole-v1[-N] and checkpoints/ the same: nothing is overwritten,
# and `--resume` or `--load_checkpoint_file=latest|best` find the newest run.
demo: install
	$(PY) -m deep_rl_zoo.dqn.run_classic --environment_name=CartPole-v1 && \
	$(PY) -m deep_rl_zoo.dqn.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=best

test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

test-quick: install
	$(PY) -m pytest -q -m "not learning" -x

lint: install
	$(VENV)/bin/ruff check deep_rl_zoo unit_tests benchmarks
	$(VENV)/bin/ruff format --check deep_rl_zoo unit_tests benchmarks

clean-venv:
	rm -rf $(VENV)
