"""What a fresh clone gets: nothing tracked may work only on the machine that committed it.

A tracked `.venv` symlink into /tmp once made every fresh clone fail at `make` ('File exists: .venv') while
CI, whose machine had the link's target, stayed green. These tests read git's index, so they fail on the
commit that adds such a file, on any machine.
"""

import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _git(*args: str) -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return [line for line in result.stdout.splitlines() if line]


def test_git_tracks_no_symlink():
    # `git ls-files -s` prints "<mode> <object> <stage>\t<path>"; mode 120000 is a symbolic link.
    links = [line.split("\t", 1)[1] for line in _git("ls-files", "-s") if line.startswith("120000 ")]
    assert links == [], f"tracked symlinks resolve only on the committer's machine: {links}"


def test_git_tracks_no_virtual_environment():
    # Every virtual environment has a pyvenv.cfg at its root; site-packages gives away other installs.
    tracked = _git("ls-files")
    venv_files = [p for p in tracked if p.endswith("pyvenv.cfg") or "/site-packages/" in f"/{p}"]
    assert venv_files == [], f"a virtual environment is tracked: {venv_files[:5]}"


def test_git_tracks_nothing_the_ignore_rules_cover():
    ignored = _git("ls-files", "--cached", "--ignored", "--exclude-standard")
    assert ignored == [], f"tracked files that .gitignore covers (remove them or the rule): {ignored[:5]}"


def test_gitignore_covers_a_venv_link_as_well_as_a_folder(tmp_path):
    # `.venv/` matches only a directory; a symlink named .venv slipped past it once. Ask git about a dangling
    # link in a scratch repository that has this project's ignore rules.
    _git("rev-parse", "--git-dir")  # skips where git is missing
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    (tmp_path / ".venv").symlink_to(tmp_path / "elsewhere")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    result = subprocess.run(["git", "check-ignore", "-q", ".venv"], cwd=tmp_path, check=False)
    assert result.returncode == 0, ".gitignore must ignore a link named .venv, not only a folder"


def _requirement_lines(path: pathlib.Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def test_requirements_files_and_pyproject_name_the_same_dependencies():
    # Users install with pip from pyproject.toml, make installs from the requirements files: the two must agree.
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert _requirement_lines(REPO / "requirements.txt") == project["dependencies"]
    assert _requirement_lines(REPO / "requirements-dev.txt") == project["optional-dependencies"]["dev"]


def test_constraints_pin_exact_versions_and_leave_torch_to_the_makefile():
    pins = _requirement_lines(REPO / "constraints.txt")
    assert pins and all("==" in pin for pin in pins)
    names = {pin.split("==")[0].lower() for pin in pins}
    assert "torch" not in names and not any(name.startswith("nvidia") for name in names)
