# The two commands of README.md: `make demo` (train + evaluate DQN on CartPole) and `make test`.
# Both create .venv and install everything on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --quiet --disable-pip-version-check
# torch comes first, chosen for the machine:
# - with an NVIDIA GPU (nvidia-smi on PATH): the newest torch from the default index, a CUDA build (several GB);
# - without one: the CPU build CI tested, from PyTorch's CPU index (about 0.8 GB installed, no NVIDIA
#   packages). Where that index cannot be reached, pip gives up within seconds and the same release comes
#   from the default index instead (on Linux a larger CUDA build, which runs on the CPU all the same).
# Choose yourself with `make install TORCH_SPEC='torch==2.5.1'` (TORCH_INDEX= skips the CPU index).
ifeq ($(shell command -v nvidia-smi >/dev/null 2>&1 && echo gpu),gpu)
TORCH_SPEC ?= torch>=2.1
TORCH_INDEX ?=
else
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
endif
PYTEST_WORKERS ?= 2

.PHONY: install demo test test-quick lint constraints clean-venv

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@# A .venv that cannot run (a dangling link, a copy from another machine, a removed Python) is rebuilt.
	@if { [ -e $(VENV) ] || [ -L $(VENV) ]; } && ! $(PY) -c "" >/dev/null 2>&1; then \
		echo "Removing $(VENV): it is not a working virtual environment"; rm -rf $(VENV); fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt --upgrade pip
	$(if $(TORCH_INDEX),$(PIP) install --timeout 10 --retries 1 --no-deps --index-url $(TORCH_INDEX) "$(TORCH_SPEC)" \
		|| echo "note: $(TORCH_INDEX) not reachable; taking $(TORCH_SPEC) from the default index")
	$(PIP) install "$(TORCH_SPEC)"
	@# The versions CI tested (constraints.txt); on a Python they do not fit, the newest that fit.
	$(PIP) install -c constraints.txt -r requirements-dev.txt || { \
		echo "note: the tested versions (constraints.txt) do not install here; installing the newest instead"; \
		$(PIP) install -r requirements-dev.txt; }
	$(PIP) install --no-deps -e .
	touch $@

install: $(VENV)/.installed

# Each run gets its own folders, runs/DQN_CartPole-v1[-N] and checkpoints/ the same: nothing is overwritten,
# and `--resume` or `--load_checkpoint_file=latest|best` find the newest run.
demo: install
	$(PY) -m deep_rl_zoo.dqn.run_classic --environment_name=CartPole-v1 && \
	$(PY) -m deep_rl_zoo.dqn.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=best

test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

# The quick tier: unit tests in-process, about a minute on 2 cores. Tests that start processes, run a script
# end to end or learn are in the slow tier (markers slow/smoke/learning; rule in unit_tests/conftest.py).
test-quick: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q -m "not slow" -x

lint: install
	$(VENV)/bin/ruff check deep_rl_zoo unit_tests benchmarks mutation
	$(VENV)/bin/ruff format --check deep_rl_zoo unit_tests benchmarks mutation

# After a dependency change: rebuild .venv from scratch, then refresh the pins CI uses.
constraints: install
	$(PY) .ci/freeze_constraints.py > constraints.txt

clean-venv:
	rm -rf $(VENV)
