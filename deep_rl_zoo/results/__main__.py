"""The command line of `python -m deep_rl_zoo.results`: `export` (publish a run) and `table` (write or
check the results tables). See deep_rl_zoo/results/__init__.py and docs/results.md."""

import argparse
import os
import sys
from collections.abc import Sequence

from deep_rl_zoo.errors import ConfigError, exit_on_error
from deep_rl_zoo.results import export, tables


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m deep_rl_zoo.results",
        description="Publishes runs under results/ and writes their tables.",
    )
    commands = parser.add_subparsers(dest="command_name", required=True)
    publish = commands.add_parser(
        "export", help="copy a run folder's results into results/<suite>/<game>/<AGENT>_<env>_s<seed>/"
    )
    publish.add_argument("--run_dir", required=True, help="the run's folder, e.g. runs/PPO_Pong")
    publish.add_argument(
        "--dest", required=True, help="the published folder, e.g. results/atari/Pong/PPO_Pong_s1"
    )
    publish.add_argument(
        "--command",
        required=True,
        help="the command that trained it, without this machine's paths, e.g. \"python -m "
        'deep_rl_zoo.ppo.run_atari --environment_name=Pong --seed=1"',
    )
    publish.add_argument(
        "--resume_points",
        help="where the run was resumed (with the command plus --resume); default: read from its event "
        'files, e.g. "in iteration 3; in iteration 7", or "none"',
    )
    publish.add_argument("--cpu_model", help="the CPU that trained it; default: this machine's")
    publish.add_argument(
        "--cpu_bfloat16",
        help='whether that CPU has native bfloat16 ("no", "yes: amx_bf16"); default: this one\'s',
    )
    publish.add_argument(
        "--env_steps_per_second", type=float, help="default: the training phases' speed in results.csv"
    )
    publish.add_argument("--replace", action="store_true", help="write over a published folder already there")
    table = commands.add_parser("table", help="write the results tables of README.md and docs/*.md")
    table.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 listing how the tables and folders differ",
    )
    table.add_argument("--repo_root", default=".", help="the repository (README.md, docs/, results/)")
    return parser.parse_args(argv)


@exit_on_error
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command_name == "export":
        fields = export.export_run(
            args.run_dir,
            args.dest,
            args.command,
            resume_points_text=args.resume_points,
            cpu_model=args.cpu_model,
            cpu_bfloat16=args.cpu_bfloat16,
            env_steps_per_second=args.env_steps_per_second,
            replace=args.replace,
        )
        size = sum(os.path.getsize(os.path.join(args.dest, name)) for name in os.listdir(args.dest))
        print(
            f"wrote {args.dest} ({size:,} bytes): {fields['env_steps']} env steps, "
            f"{fields['env_steps_per_second']} env steps/s, resumed: {fields['resume_points']}"
        )
        return 0
    if not os.path.isfile(os.path.join(args.repo_root, "README.md")):
        raise ConfigError(f"--repo_root={args.repo_root} has no README.md: run from the repository's root")
    problems = tables.update(args.repo_root, write=not args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(
            f"{len(problems)} problem(s)" + ("" if args.check else "; the tables were written"),
            file=sys.stderr,
        )
        sys.exit(1)
    print("the results tables match results/" if args.check else "wrote the results tables")
    return 0


if __name__ == "__main__":
    main()
