"""The mutation check (`mutation/check.py`) measures how many one-line bugs the quick tests
catch; a mutant whose text no longer occurs in the code measures nothing. This fails as soon as a
change to an agent moves code out from under a mutant, so the mutant is re-pointed in the same change.
"""

import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "mutation"))

import check as mutation_check  # noqa: E402

MUTANTS = mutation_check.load_mutants()


def test_mutant_names_are_unique():
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_text_occurs_exactly_once(mutant):
    source = (REPO / mutant.path).read_text()
    assert source.count(mutant.old) == 1, f"{mutant.name}: re-point it at {mutant.path}'s new code"
    assert mutant.new != mutant.old
