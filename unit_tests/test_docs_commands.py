"""The commands the documentation shows are commands that run: every `python -m deep_rl_zoo.X ...` in
README.md, QUICK_START.md, docs/**/*.md, benchmarks/README.md, mutation/README.md and the run scripts' own
docstrings (their `-h` text) names a module that exists and only flags that module defines, and every
`python benchmarks/X.py` (or `mutation/X.py`) names a file that exists.

In-process (quick tier): each script's flags are read from the config dataclass its `run_script(...)` call
names, by running the script as `__main__` with `run_script` replaced by a recorder. No flag is parsed and
no process is started. `deep_rl_zoo.plot` (argparse) parses each of its commands for real.
"""

import dataclasses
import functools
import glob
import importlib.util
import re
import shlex
import typing
from pathlib import Path

import pytest

from deep_rl_zoo import plot, pretrained
from deep_rl_zoo.results import __main__ as results_command
from unit_tests.script_calls import run_script_call

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    glob.glob(str(REPO / "deep_rl_zoo" / "*" / "run_*.py"))
    + glob.glob(str(REPO / "deep_rl_zoo" / "*" / "eval_agent.py"))
    + glob.glob(str(REPO / "deep_rl_zoo" / "*" / "value_check.py"))
)
DOCUMENTS = [
    "README.md",
    "QUICK_START.md",
    "benchmarks/README.md",
    "mutation/README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")),
]
# absl's own flags, which every script accepts.
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok", "only_check_args", "h", "?"}

COMMAND = re.compile(r"python -m (deep_rl_zoo[\w.]*)")
BENCHMARK = re.compile(r"python ((?:benchmarks|mutation)/[\w./-]+\.py)")


def module_name(path: str) -> str:
    return ".".join(Path(path).relative_to(REPO).with_suffix("").parts)


@functools.cache
def script_flags(module: str) -> frozenset[str]:
    """The flags `python -m module` defines: its config's fields minus `exclude`, absl's own, and
    `--noX` for every boolean X."""
    config_cls, _, exclude = run_script_call(module)
    hints = typing.get_type_hints(config_cls)
    names = {f.name for f in dataclasses.fields(config_cls)} - set(exclude)
    booleans = {f"no{n}" for n in names if hints[n] in (bool, bool | None)}
    return frozenset(names | booleans | ABSL_FLAGS)


def commands_in(text: str) -> list[tuple[str, list[str]]]:
    """(module, arguments) of every `python -m deep_rl_zoo...` in `text`. A command inside inline
    backticks ends at the closing backtick (it may wrap lines); elsewhere (a code block) at the end of
    its line, `\\` continuations and a `# comment` aside."""
    found = []
    for match in COMMAND.finditer(text):
        rest = text[match.end() :]
        if match.group(1).endswith("."):  # a pattern such as deep_rl_zoo.<package>.<script>
            continue
        if text[match.start() - 1] == "`":
            rest = rest.split("`", 1)[0]
        elif text[match.start() - 1] in "\"'":  # a command quoted inside another (results export --command=)
            rest = rest.split(text[match.start() - 1], 1)[0]
        else:
            rest = re.split(r"(?<!\\)\n", rest, maxsplit=1)[0].split("`", 1)[0]
            rest = rest.replace("\\\n", " ").split(" #", 1)[0]
        found.append((match.group(1), shlex.split(rest.replace("\n", " "))))
    return found


def sources() -> list[tuple[str, str]]:
    """(where, text) of every document and every script's docstring (what its `-h` prints)."""
    texts = [(name, (REPO / name).read_text()) for name in DOCUMENTS]
    for path in SCRIPTS:
        source = Path(path).read_text()
        docstring = re.match(r'\s*"""(.*?)"""', source, re.S)
        texts.append((module_name(path) + " docstring", docstring.group(1) if docstring else ""))
    return texts


# The zoo's tools with an argparse command line, each checked by its own parser.
ARGPARSE_COMMANDS = {
    "deep_rl_zoo.plot": plot.parse_args,
    "deep_rl_zoo.results": results_command.parse_args,
    "deep_rl_zoo.pretrained": pretrained.parse_args,
}


def problems_of(module: str, arguments: list[str]) -> list[str]:
    if importlib.util.find_spec(module) is None:
        return [f"no module {module}"]
    if module in ARGPARSE_COMMANDS:
        if not arguments:  # the module named in prose, not a command
            return []
        try:
            ARGPARSE_COMMANDS[module](arguments)
        except SystemExit:
            return [f"python -m {module} {' '.join(arguments)}: argparse refuses it"]
        return []
    if module + ".py" not in {module_name(p) + ".py" for p in SCRIPTS}:
        return [f"{module} is not a run script or eval_agent"]
    flags = script_flags(module)
    names = [a.lstrip("-").split("=", 1)[0] for a in arguments if a.startswith("-")]
    problems = [f"{module} has no flag --{name}" for name in names if name not in flags]
    for argument in arguments:
        # Checkpoints live in one folder per run: checkpoints/<run>/<AGENT>_<env>_<i>.ckpt.
        if argument.startswith("--load_checkpoint_file=") and re.search(
            r"checkpoints/[^/]+\.ckpt$", argument
        ):
            problems.append(f"{argument}: checkpoints sit in a folder per run, checkpoints/<run>/<file>.ckpt")
    return problems


def test_every_script_is_found_and_names_its_config():
    assert len(SCRIPTS) >= 60  # 20 agents x (run_classic, run_atari, eval_agent) and a few more
    assert {"environment_name", "seed", "noresume", "flagfile"} <= script_flags("deep_rl_zoo.dqn.run_classic")
    assert "environment_height" not in script_flags("deep_rl_zoo.dqn.run_classic")  # an Atari-only flag
    assert "environment_height" in script_flags("deep_rl_zoo.dqn.run_atari")
    assert "load_checkpoint_file" in script_flags("deep_rl_zoo.dqn.eval_agent")


def test_the_command_finder_reads_inline_and_block_commands():
    text = (
        "Run `python -m deep_rl_zoo.dqn.run_classic --seed=2\n--nostop_when_solved`, then\n"
        "```\npython -m deep_rl_zoo.dqn.run_atari --environment_name=Pong \\\n"
        "  --num_envs=8   # eight envs\npython -m deep_rl_zoo.plot runs/ --output=a.png\n```\n"
    )
    assert commands_in(text) == [
        ("deep_rl_zoo.dqn.run_classic", ["--seed=2", "--nostop_when_solved"]),
        ("deep_rl_zoo.dqn.run_atari", ["--environment_name=Pong", "--num_envs=8"]),
        ("deep_rl_zoo.plot", ["runs/", "--output=a.png"]),
    ]


def test_the_checker_finds_a_wrong_flag_and_a_wrong_module():
    assert problems_of("deep_rl_zoo.dqn.run_classic", ["--seed=1", "--nouse_tensorboard"]) == []
    assert problems_of("deep_rl_zoo.dqn.run_classic", ["--environment_height=84"]) == [
        "deep_rl_zoo.dqn.run_classic has no flag --environment_height"
    ]
    assert problems_of("deep_rl_zoo.dqn.run_clasic", []) == ["no module deep_rl_zoo.dqn.run_clasic"]
    assert problems_of("deep_rl_zoo.plot", ["runs/", "--smoothing=3"]) != []
    assert (
        problems_of("deep_rl_zoo.dqn.eval_agent", ["--load_checkpoint_file=./checkpoints/DQN_Pong_0.ckpt"])
        != []
    )
    assert (
        problems_of(
            "deep_rl_zoo.dqn.eval_agent", ["--load_checkpoint_file=checkpoints/DQN_Pong/DQN_Pong_0.ckpt"]
        )
        == []
    )


@pytest.mark.parametrize("where, text", sources(), ids=[where for where, _ in sources()])
def test_documented_commands_name_existing_scripts_and_flags(where, text):
    problems = [p for module, arguments in commands_in(text) for p in problems_of(module, arguments)]
    problems += [f"no file {path}" for path in BENCHMARK.findall(text) if not (REPO / path).is_file()]
    assert problems == [], f"{where}: {problems}"


def test_the_readme_keeps_the_two_commands_ci_reads():
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation but `-` and `_` dropped,
    spaces to `-` (`## AMD EPYC with AVX-512` -> `amd-epyc-with-avx-512`)."""
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, re.M)
    }


@pytest.mark.parametrize("name", DOCUMENTS)
def test_links_between_documents_reach_a_file_and_heading(name):
    document = REPO / name
    problems = []
    for target, anchor in re.findall(r"\]\(([^)#\s:]*\.md)(?:#([^)\s]*))?\)", document.read_text()):
        path = document.parent / target
        if not path.is_file():
            problems.append(f"no file {target}")
        elif anchor and anchor not in heading_anchors(path.read_text()):
            problems.append(f"no heading {target}#{anchor}")
    assert problems == [], f"{name}: {problems}"
