"""The table of the DQN scripts' flags in docs/flags.md says what the configs say: every default in its "classic
default" and "Atari default" columns is compared with `dqn.train.DqnConfig` as `run_classic` and
`run_atari` build it, and every flag of those scripts appears in the table."""

import dataclasses
import re
from pathlib import Path

import pytest

from deep_rl_zoo.config import ATARI_FIELDS
from deep_rl_zoo.dqn import run_atari, run_classic, train

FLAGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "flags.md"
HEADER = "| flag | classic default | Atari default | meaning |"


def parse_flag_table(text: str) -> list[tuple[list[str], str, str]]:
    """(flag names, classic cell, Atari cell) of each row of the table under HEADER. A name written
    `_suffix` shortens the previous name of its cell: `environment_height`, `_width` names
    environment_width."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2  # after the header and the | --- | line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        flags, classic, atari, _ = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((re.findall(r"`([a-z_0-9]+)`", flags), classic, atari))
    return rows


def expand(names: list[str], field_names: set[str]) -> list[str]:
    full = [names[0]]
    for name in names[1:]:
        if name.startswith("_"):
            parts = full[-1].split("_")
            candidates = ["_".join(parts[:i]) + name for i in range(len(parts) - 1, 0, -1)]
            name = next(c for c in candidates if c in field_names)
        full.append(name)
    return full


def cell_value(text: str, default):
    """The table's spelling of a value, as the field's type."""
    if text in ("(run folder)", "''"):
        return ""
    if text == "unset":
        return None
    if isinstance(default, bool):
        return {"true": True, "false": False}[text]
    if isinstance(default, tuple):
        return tuple(int(x) for x in text.split(","))
    if isinstance(default, (int, float)):
        return float(text)
    return text


def compare(names, cell, config, flag_kind):
    values = cell.split(", ")
    if cell == "-":
        values = ["-"] * len(names)
    assert len(values) == len(names), f"{names}: {len(names)} flags but {len(values)} values in {cell!r}"
    mismatches = {}
    for name, text in zip(names, values, strict=True):
        if text == "-":  # the script does not offer this flag
            assert name in (ATARI_FIELDS if flag_kind == "classic" else {"hidden_sizes"}), name
            continue
        if name == "num_threads" and text == "auto":  # resolved from this machine's cores
            continue
        actual = getattr(config, name)
        expected = cell_value(text, actual)
        if (
            actual if not isinstance(actual, (int, float)) or isinstance(actual, bool) else float(actual)
        ) != expected:
            mismatches[name] = (text, actual)
    return mismatches


@pytest.fixture(scope="module")
def table():
    return parse_flag_table(FLAGS_PAGE.read_text())


def test_readme_dqn_table_matches_the_classic_and_atari_defaults(table):
    classic = train.DqnConfig(**run_classic.DEFAULTS)
    atari = train.DqnConfig(**run_atari.DEFAULTS)
    field_names = {f.name for f in dataclasses.fields(train.DqnConfig)}
    mismatches = {}
    for names, classic_cell, atari_cell in table:
        names = expand(names, field_names)
        mismatches.update(
            {f"classic {k}": v for k, v in compare(names, classic_cell, classic, "classic").items()}
        )
        atari_cell = classic_cell if atari_cell == "same" else atari_cell
        mismatches.update({f"Atari {k}": v for k, v in compare(names, atari_cell, atari, "atari").items()})
    assert not mismatches, f"docs/flags.md says (value, config says): {mismatches}"


def test_readme_dqn_table_lists_every_flag(table):
    field_names = {f.name for f in dataclasses.fields(train.DqnConfig)}
    listed = {name for names, _, _ in table for name in expand(names, field_names)}
    assert field_names - listed == set()
    assert listed - field_names == set()


def test_the_parser_reads_shortened_names_and_finds_a_wrong_value():
    text = "\n".join(
        [
            HEADER,
            "| --- | --- | --- | --- |",
            "| `environment_height`, `_width` | -, - | 84, 84 | frame size |",
            "| `batch_size`, `learning_rate` | 64, 1e-3 | same | optimisation |",
            "",
        ]
    )
    rows = parse_flag_table(text)
    field_names = {f.name for f in dataclasses.fields(train.DqnConfig)}
    assert expand(rows[0][0], field_names) == ["environment_height", "environment_width"]
    # DQN's classic batch is 128 and its lr 2e-3: the stale 64, 1e-3 are both caught.
    assert compare(rows[1][0], rows[1][1], train.DqnConfig(), "classic") == {
        "batch_size": ("64", 128),
        "learning_rate": ("1e-3", 2e-3),
    }
