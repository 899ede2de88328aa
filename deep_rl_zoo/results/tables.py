"""`python -m deep_rl_zoo.results table [--check]`: the results tables of README.md and docs/*.md.

A table sits between two marker comments naming a folder under `results/`; its rows are every published
run below that folder, e.g.

    <!-- results:classic -->
    (written by the command: do not edit)
    <!-- /results:classic -->

`results:atari/Pong` narrows it to one game. Each row reports the run's last evaluation that finished
whole episodes (the one the run stopped on: not the best, which a lucky evaluation would inflate).
`--check` changes nothing and fails when a table differs from the folders, when a published folder is in
no table, or when a folder is not publishable (`folders.folder_problems`).
"""

import csv
import difflib
import glob
import math
import os
import re
from typing import NamedTuple

from deep_rl_zoo.results import folders

# Markers are whole lines: an indented one (an example in a code block) is text.
_MARKERS = re.compile(
    r"^<!-- results:(?P<name>(?:agent=)?[\w.+-]+(?:/[\w.+-]+)*) -->\n(?P<body>.*?)^<!-- /results:(?P=name) -->$",
    re.DOTALL | re.MULTILINE,
)
_ANY_MARKER = re.compile(r"^<!-- /?results:.*-->$", re.MULTILINE)
HEADER = (
    "| agent | environment | seed | env steps | last evaluation: mean ± std [min, max] | "
    "at iteration | random play | env steps/s | wall time | CPU | run |\n"
    "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |\n"
)
RANDOM_PLAY = "random play"  # the label of references.txt that the table's column shows


class Table(NamedTuple):
    document: str  # path of the markdown file
    name: str  # the folder under results/ it covers, e.g. atari/Pong; or agent=NAME: that agent's runs
    span: tuple[int, int]  # where its body is in the document's text
    body: str


def documents(repo_root: str) -> list[str]:
    """README.md and every docs/*.md (at any depth), the files whose tables the command writes."""
    found = [os.path.join(repo_root, "README.md")]
    found += sorted(glob.glob(os.path.join(repo_root, "docs", "**", "*.md"), recursive=True))
    return [path for path in found if os.path.isfile(path)]


def find_tables(document: str, text: str) -> tuple[list[Table], list[str]]:
    """The tables of a document, and its problems (a marker without its partner)."""
    tables = [Table(document, m["name"], m.span("body"), m["body"]) for m in _MARKERS.finditer(text)]
    paired = sum(2 for _ in tables)
    problems = []
    if len(_ANY_MARKER.findall(text)) != paired:
        problems.append(
            f"{document}: a results marker without its partner: each table is <!-- results:NAME --> on its own "
            "line, then <!-- /results:NAME -->"
        )
    return tables, problems


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _last_evaluation(results_csv: str) -> tuple[str, str]:
    """`500.0 ± 0.0 [500, 500], 10 episodes` and its iteration, of the last evaluation with whole episodes."""
    with open(results_csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if _number(r.get("eval_num_episodes")) > 0]
    if not rows:
        return "no whole episode", "-"
    row = rows[-1]
    mean, std, low, high = (
        _number(row.get(f"eval_{name}_episode_return")) for name in ("mean", "std", "min", "max")
    )
    episodes = int(_number(row["eval_num_episodes"]))
    text = f"{mean:.1f}"
    if not math.isnan(std):
        text += f" ± {std:.1f}"
    if not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:.0f}, {high:.0f}]"  # whole points: Atari scores are integers, Box2D returns are not
    return f"{text}, {episodes} episode{'' if episodes == 1 else 's'}", row.get("iteration", "-")


def _wall_time(hours: str | None) -> str:
    value = _number(hours)
    if math.isnan(value):
        return "-"
    return f"{value * 60:.0f} min" if value < 1 else f"{value:.1f} h"


def cpu_label(model: str, native_bfloat16: str) -> str:
    """The CPU as the tables name it: its model, and `(bf16)` where it multiplies bfloat16 natively
    (command.txt's `cpu_native_bfloat16=yes: ...`)."""
    return model + (" (bf16)" if native_bfloat16.startswith("yes") else "")


def table_row(folder: str, link: str) -> str:
    """One markdown row for a published run folder; `link`: the folder as the document reaches it."""
    config = folders.read_name_values(os.path.join(folder, folders.CONFIG_TXT))
    command = folders.read_name_values(os.path.join(folder, folders.COMMAND_TXT))
    evaluation, iteration = _last_evaluation(os.path.join(folder, folders.RESULTS_CSV))
    references = dict(folders.read_references(os.path.dirname(os.path.normpath(folder))))
    random_play = f"{references[RANDOM_PLAY]:g}" if RANDOM_PLAY in references else "-"
    cpu = cpu_label(command.get("cpu_model", "-"), command.get("cpu_native_bfloat16", ""))
    cells = [
        config.get("agent_name", "-"),
        config.get("environment_name", "-"),
        config.get("seed", "-"),
        command.get("env_steps", "-"),
        evaluation,
        iteration,
        random_play,
        command.get("env_steps_per_second", "-"),
        _wall_time(command.get("wall_time_hours")),
        cpu,
        f"[{os.path.basename(os.path.normpath(folder))}]({link})",
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"


AGENT_PREFIX = "agent="  # <!-- results:agent=DQN -->: every published run of one agent (its page's table)


def runs_of(repo_root: str, name: str) -> list[str]:
    """The published run folders a table named `name` lists: those under results/<name>, or with
    `agent=NAME` those of that agent (its config's agent_name) anywhere under results/."""
    if name.startswith(AGENT_PREFIX):
        root = os.path.join(repo_root, "results")
        every = folders.find_published(root) if os.path.isdir(root) else []
        agent = name[len(AGENT_PREFIX) :]
        return [
            f
            for f in every
            if folders.read_name_values(os.path.join(f, "config.txt")).get("agent_name") == agent
        ]
    base = os.path.join(repo_root, "results", name)
    return folders.find_published(base) if os.path.isdir(base) else []


def table_body(repo_root: str, name: str, document: str) -> str:
    """The markdown between a table's markers: header and one row per published run it lists."""
    runs = runs_of(repo_root, name)
    if not runs:
        where = (
            f"of {name[len(AGENT_PREFIX) :]}" if name.startswith(AGENT_PREFIX) else f"under results/{name}/"
        )
        return f"_No published run {where} yet._\n"
    rows = []
    for folder in runs:
        link = os.path.relpath(folder, os.path.dirname(os.path.abspath(document))).replace(os.sep, "/")
        rows.append(table_row(folder, link))
    return HEADER + "".join(rows)


def _covered(folder: str, names: set[str], repo_root: str) -> bool:
    if any(folder in runs_of(repo_root, name) for name in names if name.startswith(AGENT_PREFIX)):
        return True
    relative = os.path.relpath(folder, os.path.join(repo_root, "results")).replace(os.sep, "/")
    return any(relative == name or relative.startswith(name.rstrip("/") + "/") for name in names)


def update(repo_root: str, write: bool) -> list[str]:
    """Regenerates every table (writing the documents if `write`); returns the problems found.

    With `write=False` (--check) a table that differs from its folders is a problem, shown as a diff.
    Either way a published folder in no table, and a folder that is not publishable, are problems.
    """
    problems = []
    names: set[str] = set()
    for document in documents(repo_root):
        with open(document) as f:
            text = f.read()
        tables, marker_problems = find_tables(document, text)
        problems += marker_problems
        new_text, end = [], 0
        for table in tables:
            names.add(table.name)
            expected = table_body(repo_root, table.name, document)
            new_text += [text[end : table.span[0]], expected]
            end = table.span[1]
            if expected != table.body and not write:
                diff = difflib.unified_diff(
                    table.body.splitlines(),
                    expected.splitlines(),
                    "in the document",
                    "from results/",
                    n=0,
                    lineterm="",
                )
                shown = "\n    ".join(line for line in diff if not line.startswith("@@"))
                problems.append(
                    f"{os.path.relpath(document, repo_root)}, table results:{table.name}:\n    {shown}"
                )
        new_text.append(text[end:])
        if write and "".join(new_text) != text:
            with open(document, "w") as f:
                f.write("".join(new_text))
    results_root = os.path.join(repo_root, "results")
    for folder in folders.find_published(results_root) if os.path.isdir(results_root) else []:
        problems += folders.folder_problems(folder)
        if not _covered(folder, names, repo_root):
            problems.append(
                f"{os.path.relpath(folder, repo_root)} is in no table: add <!-- results:NAME --> "
                "<!-- /results:NAME --> (NAME: a folder above it under results/) to README.md or docs/*.md"
            )
    return problems
