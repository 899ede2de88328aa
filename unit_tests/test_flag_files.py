"""The flag files under configs/ (read with absl's `--flagfile`): each names the command it is for in its
header, gives only flags that command defines, and, where it says it keeps the algorithm, changes only
where the run happens (layout and precision), never a hyper-parameter of the paper's defaults; a tuned one
says TUNED and names every learning flag it sets in its header."""

import glob
import re
from pathlib import Path

import pytest

from unit_tests.script_calls import run_script_call
from unit_tests.test_docs_commands import script_flags

REPO = Path(__file__).resolve().parents[1]
FLAG_FILES = sorted(glob.glob(str(REPO / "configs" / "*.flags")))
# Flags that say where and how fast a run computes, not what it learns.
PLACEMENT_FLAGS = {"environment_name", "num_actors", "num_envs", "num_threads", "bfloat16", "device"}


def _read(path: str) -> tuple[str, dict[str, str], str]:
    """(the module its header's command runs, {flag: value}, the header's text)."""
    text = Path(path).read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    module = re.search(r"python -m (deep_rl_zoo\.[\w.]+) --flagfile=configs/" + Path(path).name, header)
    assert module, f"{path}: the header must show the command, with --flagfile={Path(path).name}"
    values = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.strip().removeprefix("--").partition("=")
            values[name] = value or "True"
    return module.group(1), values, header


def test_there_is_a_flag_file():
    assert FLAG_FILES  # the glob below would pass vacuously without one


@pytest.mark.parametrize("path", FLAG_FILES, ids=lambda p: Path(p).name)
def test_a_flag_file_gives_only_flags_of_its_command(path):
    module, values, _ = _read(path)
    unknown = set(values) - script_flags(module)
    assert not unknown, f"{Path(path).name}: {module} has no flag {sorted(unknown)}"


@pytest.mark.parametrize("path", FLAG_FILES, ids=lambda p: Path(p).name)
def test_a_flag_file_that_keeps_the_algorithm_changes_only_the_placement(path):
    module, values, header = _read(path)
    if "The algorithm is the paper's" not in header:
        # A tuned configuration says so, and names in its header every learning flag it sets.
        assert "TUNED" in header, f"{Path(path).name}: neither the paper's algorithm nor marked TUNED"
        unexplained = sorted(name for name in set(values) - PLACEMENT_FLAGS if f"--{name}=" not in header)
        assert not unexplained, f"{Path(path).name}: its header does not explain {unexplained}"
        return
    assert set(values) <= PLACEMENT_FLAGS, sorted(set(values) - PLACEMENT_FLAGS)
    call = run_script_call(module)
    layout = {name: int(values[name]) for name in ("num_actors", "num_envs") if name in values}
    config = call.config_cls(**{**call.defaults, **layout})
    if "num_parallel_envs" in call.defaults:
        # The batch per update is the paper's (PPO: 8 envs x 128 steps) however the envs are spread.
        assert config.num_actors * config.num_envs == call.defaults["num_parallel_envs"]
