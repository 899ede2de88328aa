"""The agent pages (docs/agents/<package>.md) stay true to the code.

- Every agent package (a folder of `deep_rl_zoo/` with an `agent.py`) has a page, linked from
  docs/agents/README.md, and every page is an agent package's.
- Each page's "Flags that matter" table says what the scripts say: a column per run script
  (`classic` is `run_classic.py`, `atari` is `run_atari.py`, ...), each cell the default that script gives
  the flag (the config field's default, overridden by the script's `DEFAULTS`), `—` exactly where the
  script does not offer the flag; the Meaning column is the field's help string (what `--help` prints).
  A script without a column of its own (A2C's `run_classic_grad.py`) must have the same flags and defaults
  as one that has.
- The "Code." paragraph links only to files that exist.

In-process (quick tier): each script's config, `DEFAULTS` and excluded flags are read by running it as
`__main__` with `run_script` replaced by a recorder, as test_docs_commands does. No flag is parsed.
"""

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from unit_tests.script_calls import run_script_call

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "docs" / "agents"
PACKAGES = sorted(p.parent.name for p in (REPO / "deep_rl_zoo").glob("*/agent.py"))
NOT_OFFERED = "—"


class Script(NamedTuple):
    """What one run script's `run_script(...)` call says: its flags and their defaults."""

    path: str  # relative to the repository, for messages
    config_name: str
    defaults: dict[str, Any]  # flag -> default, for every flag the script offers
    helps: dict[str, str]  # field -> help string, for every field of the config (offered or not)


@functools.cache
def read_script(package: str, stem: str) -> Script:
    config_cls, defaults, exclude = run_script_call(f"deep_rl_zoo.{package}.{stem}")
    fields = dataclasses.fields(config_cls)
    return Script(
        path=f"deep_rl_zoo/{package}/{stem}.py",
        config_name=config_cls.__name__,
        defaults={f.name: defaults.get(f.name, f.default) for f in fields if f.name not in exclude},
        helps={f.name: f.metadata.get("help", "") for f in fields},
    )


def scripts_of(package: str) -> list[str]:
    return sorted(p.stem for p in (REPO / "deep_rl_zoo" / package).glob("run_*.py"))


# --- reading a page -------------------------------------------------------------------------------------


class FlagTable(NamedTuple):
    columns: list[str]  # the value columns, e.g. ["classic", "atari"]
    rows: list[tuple[str, list[str], str]]  # (flag, value cells, meaning)


def split_row(line: str) -> list[str]:
    """Cells of a markdown table row; `\\|` inside a cell is a literal bar."""
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [cell.strip().replace("\\|", "|") for cell in cells]


def flag_table(text: str) -> FlagTable:
    """The table under "## Flags that matter": header `| Flag | <columns> | Meaning |`."""
    section = text.split("\n## Flags that matter\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = split_row(lines[0])
    assert header[0] == "Flag" and header[-1] == "Meaning", f"unexpected table header {lines[0]!r}"
    rows = []
    for line in lines[2:]:  # after the header and its |---| line
        flag, *values, meaning = split_row(line)
        assert len(values) == len(header) - 2, f"row {line!r} has {len(values)} values for {header[1:-1]}"
        rows.append((flag.strip("`").removeprefix("--"), values, meaning))
    return FlagTable(header[1:-1], rows)


def matches(cell: str, value: Any) -> bool:
    """Whether a table cell (`250_000`, `2.5e-4`, `64,64`, `None`, `True`, `` ``) spells `value`."""
    if not (cell.startswith("`") and cell.endswith("`")):
        return False
    text = cell.strip("`").strip()
    if value is None or isinstance(value, bool) or isinstance(value, str):
        return text == str(value)
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)  # float() reads 250_000 and 1e-05 alike
        except ValueError:
            return False
    if isinstance(value, tuple):
        items = [x.strip() for x in text.strip("()").split(",") if x.strip()]
        return len(items) == len(value) and all(
            matches(f"`{x}`", v) for x, v in zip(items, value, strict=True)
        )
    raise TypeError(f"no table spelling for {value!r}")


# --- the checks -----------------------------------------------------------------------------------------


def flag_table_problems(package: str, read=read_script) -> list[str]:
    page = f"docs/agents/{package}.md"
    table = flag_table((REPO / page).read_text())
    problems = []
    stems = scripts_of(package)
    columns = {column: f"run_{column}" for column in table.columns}
    for column, stem in columns.items():
        if stem not in stems:
            problems.append(f"{page}: column {column!r} names no script deep_rl_zoo/{package}/{stem}.py")
    columns = {column: stem for column, stem in columns.items() if stem in stems}
    # A script without a column must offer what a column's script offers (A2C-grad's are A2C's).
    for stem in set(stems) - set(columns.values()):
        script = read(package, stem)
        if not any(script.defaults == read(package, other).defaults for other in columns.values()):
            problems.append(
                f"{page}: {script.path} has no column and its flags or defaults differ from every "
                f"column's script: add a column '{stem.removeprefix('run_')}'"
            )
    seen = set()
    for flag, cells, meaning in table.rows:
        if flag in seen:
            problems.append(f"{page}: --{flag} has two rows")
        seen.add(flag)
        helps = {}
        for column, cell in zip(table.columns, cells, strict=True):
            if column not in columns:
                continue
            script = read(package, columns[column])
            helps.update(script.helps)
            where = f"{page}: --{flag}, column {column!r} says {cell}"
            if flag not in script.defaults:
                if cell != NOT_OFFERED:
                    problems.append(
                        f"{where}, but {script.path} does not offer --{flag}: write {NOT_OFFERED}"
                    )
            elif cell == NOT_OFFERED or not matches(cell, script.defaults[flag]):
                problems.append(
                    f"{where}, but {script.path} ({script.config_name} with its DEFAULTS) "
                    f"has {script.defaults[flag]!r}"
                )
        if flag not in helps:
            problems.append(f"{page}: --{flag} is no field of the config of any column's script")
        elif " ".join(meaning.split()) != " ".join(helps[flag].split()):
            problems.append(
                f"{page}: --{flag}, column 'Meaning' says {meaning!r}, but its help is {helps[flag]!r}"
            )
    return problems


@pytest.mark.parametrize("package", PACKAGES)
def test_flag_table_has_each_scripts_defaults_and_help(package):
    problems = flag_table_problems(package)
    assert problems == [], "the flag table is stale (fix the page):\n" + "\n".join(problems)


@pytest.mark.parametrize("package", PACKAGES)
def test_code_links_point_to_existing_files(package):
    page = PAGES / f"{package}.md"
    paragraph = next((line for line in page.read_text().splitlines() if line.startswith("**Code.**")), "")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", paragraph)
    assert targets, f"docs/agents/{package}.md: no links in its **Code.** paragraph"
    missing = [t for t in targets if not (page.parent / t).resolve().is_file()]
    assert missing == [], f"docs/agents/{package}.md: **Code.** links to files that do not exist: {missing}"


def test_every_agent_package_has_a_page_linked_from_the_index():
    assert len(PACKAGES) >= 20
    pages = sorted(p.stem for p in PAGES.glob("*.md") if p.name != "README.md")
    assert pages == PACKAGES, "docs/agents/<package>.md for each folder of deep_rl_zoo/ with an agent.py"
    linked = set(re.findall(r"\]\((\w+)\.md\)", (PAGES / "README.md").read_text()))
    assert set(PACKAGES) - linked == set(), "docs/agents/README.md does not link these pages"


def test_cells_match_the_values_they_spell():
    assert matches("`250_000`", 250000) and matches("`0.00025`", 2.5e-4) and matches("`2.5e-4`", 0.00025)
    assert matches("`1e-05`", 1e-5) and matches("`40.0`", 40) and matches("`64,64`", (64, 64))
    assert matches("`None`", None) and matches("`False`", False) and matches("``", "")
    assert matches("`Pong`", "Pong") and matches("`128`", (128,))
    assert not matches("`25_000`", 250_000)  # a stale step count
    assert not matches("`1`", True) and not matches("`None`", "") and not matches("`64`", (64, 64))
    assert not matches("`16`", "auto") and not matches("`auto`", 16)  # a default that became 'auto'
    assert not matches("250_000", 250_000)  # a value is written in backticks


def test_a_stale_default_is_reported_with_page_flag_column_and_the_codes_value():
    def read_with_another_atari_alpha(package, stem):
        script = read_script(package, stem)
        if stem.startswith("run_atari"):  # run_atari and run_atari_grad share their DEFAULTS
            script = script._replace(defaults=dict(script.defaults, rmsprop_alpha=0.95))
        return script

    assert flag_table_problems("a2c", read_with_another_atari_alpha) == [
        "docs/agents/a2c.md: --rmsprop_alpha, column 'atari' says `0.99`, but deep_rl_zoo/a2c/run_atari.py "
        "(A2cConfig with its DEFAULTS) has 0.95"
    ]
