"""Published runs under results/: export from a run folder, the plot reading them, and the tables.

The run folder here is hand-made (config.txt and results.csv as a run writes them, TensorBoard events
written with the SummaryWriter the zoo uses), so every number in the exported files is known in advance.
"""

import csv
import os

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from deep_rl_zoo import plot
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.results import __main__ as results_main
from deep_rl_zoo.results import export, folders, tables

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND = "python -m deep_rl_zoo.dqn.run_classic --environment_name=CartPole-v1 --seed=3"
NAME = "DQN_CartPole-v1_s3"

RESULTS_CSV = (
    "iteration,train_env_steps,train_mean_episode_return,train_num_episodes,train_steps_per_second,"
    "eval_mean_episode_return,eval_num_episodes,eval_min_episode_return,eval_max_episode_return,"
    "eval_std_episode_return,learner_loss\n"
    # 30 env steps at 10/s: 3 s; then 30 more at 30/s: 1 s. Run: 60 env steps in 4 s = 15 env steps/s.
    "0,30,13.3,3,10.0,20.0,2,10.0,30.0,10.0,0.5\n"
    "1,60,22.5,2,30.0,101.5,4,98.0,105.0,2.5,0.25\n"
)


def _write_session(run_dir, file_time, start_wall_time, episodes, seconds, learner_losses=()):
    """One process's event file: its episodes (env step, return, length), `learner/loss` points (env step,
    value), and an evaluation `seconds` later."""
    writer = SummaryWriter(log_dir=run_dir)
    for step, value, length in episodes:
        writer.add_scalar("train/episode_return", value, step, walltime=start_wall_time)
        writer.add_scalar("train/episode_length", length, step, walltime=start_wall_time)
    for step, value in learner_losses:
        writer.add_scalar("learner/loss", value, step, walltime=start_wall_time)
    last_step = episodes[-1][0]
    writer.add_scalar("eval/mean_episode_return", 1.0, last_step, walltime=start_wall_time + seconds)
    writer.close()
    (written,) = [n for n in os.listdir(run_dir) if n.startswith("events.out.tfevents.") and "host" not in n]
    os.rename(
        os.path.join(run_dir, written), os.path.join(run_dir, f"events.out.tfevents.{file_time}.host.1.0")
    )


@pytest.fixture
def run_dir(tmp_path):
    """A DQN run resumed once: the first session logged episodes up to step 40, crashed after iteration 0's
    checkpoint (step 30), and the resumed one logged from step 35 on, so its episodes at 32 and 40 are
    gone with the crash."""
    run = tmp_path / "runs" / "DQN_CartPole-v1"
    run.mkdir(parents=True)
    config = "agent_name=DQN\nenvironment_name=CartPole-v1\nseed=3\ntag=\nruns_dir=/tmp/x/runs\ncheckpoint_dir=/home/u/ck\n"
    (run / "config.txt").write_text(config + config.replace("tag=\n", "tag=\nresume=True\n"))
    (run / "results.csv").write_text(RESULTS_CSV)
    _write_session(
        str(run), 1000, 100.0, [(10, 10.0, 10), (25, 15.0, 15), (32, 7.0, 7), (40, 8.0, 8)], seconds=1800
    )
    _write_session(str(run), 2000, 9000.0, [(35, 20.0, 20), (60, 25.0, 25)], seconds=1800)
    return str(run)


def _export(run_dir, repo, **kwargs):
    dest = os.path.join(repo, "results", "classic", "CartPole-v1", NAME)
    export.export_run(run_dir, dest, COMMAND, cpu_model="Test CPU", **kwargs)
    return dest


def test_export_writes_the_four_files_from_the_run(run_dir, tmp_path):
    dest = _export(run_dir, str(tmp_path / "repo"))
    assert sorted(os.listdir(dest)) == ["command.txt", "config.txt", "episodes.csv", "results.csv"]
    with open(os.path.join(dest, "episodes.csv")) as f:
        # The resumed session began at iteration 0's checkpoint (step 30): the episodes at 32 and 40 were lost.
        assert (
            f.read()
            == "train_env_steps,episode_return,episode_length\n10,10,10\n25,15,15\n35,20,20\n60,25,25\n"
        )
    assert folders.read_name_values(os.path.join(dest, "command.txt")) == {
        "command": COMMAND,
        "resume_points": "in iteration 1",  # iteration 0 (step 30) was done when the resumed run began
        "zoo_version": export.zoo_version(),
        "cpu_model": "Test CPU",
        "cpu_native_bfloat16": "unknown",  # another machine's CPU: its flags are not known here
        "env_steps": "60",
        "env_steps_per_second": "15",  # 60 env steps in 3 + 1 s of training
        "wall_time_hours": "1",  # two sessions of 1,800 s each
    }
    config = folders.read_name_values(os.path.join(dest, "config.txt"))
    assert (config["runs_dir"], config["checkpoint_dir"]) == ("runs", "ck")  # no path of this machine
    with open(os.path.join(dest, "results.csv")) as f:
        assert f.read() == RESULTS_CSV
    assert folders.folder_problems(dest) == []


def test_export_refuses_bad_input_before_writing(run_dir, tmp_path):
    repo = str(tmp_path / "repo")
    dest = os.path.join(repo, "results", "classic", "CartPole-v1", NAME)
    with pytest.raises(ConfigError, match="DQN_CartPole-v1_s3"):
        export.export_run(run_dir, dest + "x", COMMAND)
    with pytest.raises(ConfigError, match="path of this machine"):
        export.export_run(run_dir, dest, COMMAND + " --runs_dir=/tmp/abc/runs")
    with pytest.raises(ConfigError, match="--seed=2 but the run's config.txt has seed=3"):
        export.export_run(run_dir, dest, COMMAND.replace("--seed=3", "--seed=2"))
    for name in os.listdir(run_dir):
        if name.startswith("events"):
            os.remove(os.path.join(run_dir, name))
    with pytest.raises(ConfigError, match="nouse_tensorboard"):
        export.export_run(run_dir, dest, COMMAND)
    assert not os.path.exists(repo)


def test_cpu_description_reads_the_model_and_bfloat16_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f avx512_bf16\n" * 2)
    assert export.cpu_description(str(cpuinfo)) == ("Some Xeon, AVX-512", "yes: avx512_bf16")
    cpuinfo.write_text("model name\t: Some EPYC\nflags\t\t: fpu avx2\n")
    assert export.cpu_description(str(cpuinfo)) == ("Some EPYC, AVX2", "no")
    # Sapphire Rapids as a virtual machine names it: the trade marks go, AMX's tiles are named.
    cpuinfo.write_text(
        "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    )
    assert export.cpu_description(str(cpuinfo)) == (
        "Intel Xeon Processor, AVX-512, AMX",
        "yes: amx_bf16 avx512_bf16",
    )


def test_plot_reads_a_published_folder_without_event_files(run_dir, tmp_path):
    dest = _export(run_dir, str(tmp_path / "repo"))
    game_dir = os.path.dirname(dest)
    with open(os.path.join(game_dir, "references.txt"), "w") as f:
        f.write("random play=22.5  # a test's number\n")
    (found,) = plot.expand_run_folders([os.path.join(str(tmp_path), "repo", "results")])
    run = plot.read_run(found)
    assert run.agent_name == "DQN" and run.name == NAME
    episodes = run.metrics["train/episode_return"]
    assert episodes.steps.tolist() == [10, 25, 35, 60] and episodes.values.tolist() == [10, 15, 20, 25]
    assert run.metrics["train/episode_length"].values.tolist() == [10, 15, 20, 25]
    assert run.metrics["eval/mean_episode_return"].values.tolist() == [20.0, 101.5]
    assert plot.folder_references([run]) == [("random play", 22.5)]
    # A --reference with the same label replaces the file's; another one adds a line.
    given = [("random play", -1.0), ("human", 9.0)]
    assert plot.folder_references([run], given) == given
    (panel,) = plot.build_panels([run], ["train/episode_return"], smooth=2)
    assert panel.curves[0].mean.tolist() == [10, 12.5, 17.5, 22.5]  # (10 + 15) / 2, (15 + 20) / 2, ...


def _repo(tmp_path, run_dir, marker="classic"):
    repo = tmp_path / "repo"
    _export(run_dir, str(repo))
    (repo / "README.md").write_text(
        f"# Zoo\n\n<!-- results:{marker} -->\nold\n<!-- /results:{marker} -->\n\nend\n"
    )
    return str(repo)


def test_table_has_one_row_per_folder_with_its_last_evaluation(run_dir, tmp_path):
    repo = _repo(tmp_path, run_dir)
    with open(os.path.join(repo, "results", "classic", "CartPole-v1", "references.txt"), "w") as f:
        f.write("random play=22.5\n")
    assert tables.update(repo, write=True) == []
    with open(os.path.join(repo, "README.md")) as f:
        text = f.read()
    row = (
        f"| DQN | CartPole-v1 | 3 | 60 | 101.5 ± 2.5 [98, 105], 4 episodes | 1 | 22.5 | 15 | 1.0 h | Test CPU "
        f"| [{NAME}](results/classic/CartPole-v1/{NAME}) |\n"
    )
    assert (
        text == f"# Zoo\n\n<!-- results:classic -->\n{tables.HEADER}{row}<!-- /results:classic -->\n\nend\n"
    )
    assert tables.update(repo, write=False) == []


def test_check_fails_when_a_number_in_a_table_differs_from_its_folder(run_dir, tmp_path):
    repo = _repo(tmp_path, run_dir)
    tables.update(repo, write=True)
    readme = os.path.join(repo, "README.md")
    with open(readme) as f:
        text = f.read()
    with open(readme, "w") as f:
        f.write(text.replace("101.5 ± 2.5", "110.5 ± 2.5"))
    (problem,) = tables.update(repo, write=False)
    assert "results:classic" in problem and "-| DQN | CartPole-v1 | 3 | 60 | 110.5" in problem
    assert "+| DQN | CartPole-v1 | 3 | 60 | 101.5" in problem
    with pytest.raises(SystemExit) as exit_info:
        results_main.main(["table", "--check", f"--repo_root={repo}"])
    assert exit_info.value.code == 1


def test_check_fails_for_a_folder_in_no_table_or_with_a_machine_path(run_dir, tmp_path):
    repo = _repo(tmp_path, run_dir, marker="atari")
    tables.update(repo, write=True)
    (problem,) = tables.update(repo, write=False)
    assert problem.startswith(f"results/classic/CartPole-v1/{NAME} is in no table")
    with open(os.path.join(repo, "README.md"), "a") as f:
        f.write("<!-- results:classic -->\n<!-- /results:classic -->\n")
    tables.update(repo, write=True)
    assert tables.update(repo, write=False) == []
    command_txt = os.path.join(repo, "results", "classic", "CartPole-v1", NAME, "command.txt")
    with open(command_txt, "a") as f:
        f.write("note=trained in /home/someone/runs\n")
    (problem,) = tables.update(repo, write=False)
    assert "a path of some machine ('/home/')" in problem


def test_a_marker_without_its_partner_is_reported(tmp_path):
    (tmp_path / "README.md").write_text("<!-- results:atari -->\n| old |\n")
    assert "without its partner" in tables.update(str(tmp_path), write=False)[0]


def test_an_indented_marker_is_an_example_not_a_table(tmp_path):
    text = "    <!-- results:atari -->\n    <!-- /results:atari -->\n"
    (tmp_path / "README.md").write_text(text)
    assert tables.update(str(tmp_path), write=True) == []
    assert (tmp_path / "README.md").read_text() == text


def test_the_repository_tables_match_its_results_folders():
    """README.md and docs/*.md against results/: run `python -m deep_rl_zoo.results table` after publishing."""
    assert tables.update(REPO_ROOT, write=False) == []


def test_every_published_atari_run_is_linked_from_its_agent_in_the_readme_agents_table():
    """The agents table says which agents have an Atari run: a new results folder must be linked there."""
    readme = open(os.path.join(REPO_ROOT, "README.md")).read()
    agents_table = readme.split("## Agents", 1)[1].split("\n## ", 1)[0]
    atari = os.path.join(REPO_ROOT, "results", "atari")
    published = [
        f"results/atari/{game}/{name}"
        for game in sorted(os.listdir(atari))
        for name in sorted(os.listdir(os.path.join(atari, game)))
        if os.path.isdir(os.path.join(atari, game, name))
    ]
    assert published, "no published Atari run found"
    assert [path for path in published if f"]({path})" not in agents_table] == []


def test_machine_paths_are_found_and_names_with_slashes_are_not():
    assert folders.machine_paths("runs_dir=/tmp/x/runs") == ["/tmp/"]
    assert folders.machine_paths("command=python --dir=~/runs") == ["~/"]
    assert folders.machine_paths("environment_name=ALE/Pong-v5\nrandom play=-20.7") == []
    assert (
        folders.strip_machine_path("/tmp/x/runs") == "runs"
        and folders.strip_machine_path("./runs") == "./runs"
    )


def test_episodes_round_trip(tmp_path):
    episodes = folders.Episodes(np.array([5, 9]), np.array([-21.0, 1.5]), np.array([800, 1200]))
    path = tmp_path / "episodes.csv"
    path.write_text(folders.episodes_text(episodes))
    read = folders.read_episodes(str(path))
    assert (
        read.steps.tolist() == [5, 9]
        and read.returns.tolist() == [-21.0, 1.5]
        and read.lengths.tolist() == [800, 1200]
    )


def test_a_session_resumed_from_an_interrupted_checkpoint_keeps_the_episodes_before_it(tmp_path):
    """Ctrl-C at step 45 saved the iteration part-way; the resumed session goes on from there."""
    run = str(tmp_path / "run")
    os.makedirs(run)
    _write_session(run, 1000, 0.0, [(10, 10.0, 10), (40, 30.0, 30)], seconds=60)
    _write_session(run, 2000, 500.0, [(50, 10.0, 10)], seconds=30)
    events = export.read_run_events(run, iteration_steps=[30])
    assert events.episodes.steps.tolist() == [10, 40, 50]
    assert events.sessions == [export.Session(10, 60.0), export.Session(50, 30.0)]
    assert export.resume_points(events.sessions, [{"train_env_steps": "30"}]) == "in iteration 1"


@pytest.mark.smoke
def test_export_of_a_real_run_has_every_training_episode(tmp_path):
    from deep_rl_zoo.dqn import train as dqn_train

    config = dqn_train.DqnConfig(
        environment_name="CartPole-v1",
        seed=2,
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        show_progress=False,
        stop_when_solved=False,
    )
    run_dir = dqn_train.main(config).run_dir
    dest = str(tmp_path / "results" / "classic" / "CartPole-v1" / "DQN_CartPole-v1_s2")
    command = "python -m deep_rl_zoo.dqn.run_classic --seed=2 --num_iterations=2 --num_train_steps=300"
    fields = export.export_run(run_dir, dest, command)
    with open(os.path.join(dest, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    episodes = folders.read_episodes(os.path.join(dest, "episodes.csv"))
    assert len(episodes.steps) == sum(int(r["train_num_episodes"]) for r in rows)
    assert episodes.lengths.sum() <= 600 and episodes.steps.max() <= 600  # two iterations of 300 env steps
    assert fields["env_steps"] == "600" and fields["resume_points"] == "none"
    assert folders.folder_problems(dest) == []


def test_episodes_round_trip_with_rooms(tmp_path):
    episodes = folders.Episodes(
        np.array([5, 9]), np.array([0.0, 100.0]), np.array([800, 1200]), np.array([1, 3])
    )
    path = tmp_path / "episodes.csv"
    path.write_text(folders.episodes_text(episodes))
    assert path.read_text().splitlines()[:2] == [
        "train_env_steps,episode_return,episode_length,episode_rooms",
        "5,0,800,1",
    ]
    assert folders.read_episodes(str(path)).rooms.tolist() == [1, 3]


@pytest.mark.smoke
def test_a_montezuma_runs_rooms_reach_its_published_episodes_and_the_plot(tmp_path):
    """PPO with 2 envs per actor on Montezuma's Revenge (gymnasium envs, whose RAM is read) logs each
    training game's rooms; export writes them beside the returns; the plot draws them."""
    from deep_rl_zoo.ppo import run_atari
    from deep_rl_zoo.ppo import train as ppo_train

    config = ppo_train.PpoConfig(
        **{
            **run_atari.DEFAULTS,
            "environment_name": "MontezumaRevenge",
            "seed": 4,
            "num_envs": 2,
            "num_actors": 1,
            "unroll_length": 16,
            "minibatch_size": 16,
            "num_iterations": 1,
            "num_train_steps": 96,
            "num_eval_steps": 20,
            "max_episode_steps": 20,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "show_progress": False,
        }
    )
    run_dir = ppo_train.main(config).run_dir
    dest = str(tmp_path / "results" / "atari" / "MontezumaRevenge" / "PPO_MontezumaRevenge_s4")
    export.export_run(
        run_dir, dest, "python -m deep_rl_zoo.ppo.run_atari --environment_name=MontezumaRevenge"
    )
    episodes = folders.read_episodes(os.path.join(dest, "episodes.csv"))
    # Games of 20 agent steps: too short to leave the first room, each reported with its one room.
    assert len(episodes.steps) >= 4 and episodes.rooms.tolist() == [1] * len(episodes.steps)
    run = plot.read_run(dest)
    assert run.metrics["train/episode_rooms"].values.tolist() == [1.0] * len(episodes.steps)


def test_learner_text_averages_each_statistic_over_equal_spans_of_env_steps():
    learner = {
        "learner/loss": (np.array([1, 2, 3, 4, 10]), np.array([1.0, 3.0, 5.0, 7.0, 9.0])),
        "learner/entropy": (np.array([2, 10]), np.array([0.5, 1.5])),
    }
    # 10 steps in 5 spans of 2: (0, 2], (2, 4], (4, 6] and (6, 8] empty (no row), (8, 10].
    assert folders.learner_text(learner, rows=5) == (
        "train_env_steps,learner_entropy,learner_loss\n2,0.5,2\n4,,6\n10,1.5,9\n"
    )
    # Spans that do not divide the run: 10 steps in 3 rows of 4 steps, the last ending at the run's end.
    assert folders.learner_text(learner, rows=3).splitlines()[1:] == ["4,0.5,4", "10,1.5,9"]


def test_export_writes_the_learners_statistics_without_a_crashed_sessions_lost_part(tmp_path):
    """The first session logged the loss up to step 40 and crashed after iteration 0's checkpoint (step
    30); the resumed one logged from 35 on: the loss at 40 went with the crash, like its episodes."""
    run = tmp_path / "runs" / "DQN_CartPole-v1"
    run.mkdir(parents=True)
    (run / "config.txt").write_text("agent_name=DQN\nenvironment_name=CartPole-v1\nseed=3\ntag=\n")
    (run / "results.csv").write_text(RESULTS_CSV)
    losses = [(10, 1.0), (20, 2.0), (30, 3.0), (40, 40.0)]
    _write_session(str(run), 1000, 100.0, [(25, 15.0, 15), (40, 8.0, 8)], 60, learner_losses=losses)
    _write_session(str(run), 2000, 900.0, [(35, 20.0, 20), (60, 25.0, 25)], 60, [(35, 5.0), (60, 6.0)])
    events = export.read_run_events(str(run), iteration_steps=[30, 60])
    steps, values = events.learner["learner/loss"]
    assert steps.tolist() == [10, 20, 30, 35, 60] and values.tolist() == [1.0, 2.0, 3.0, 5.0, 6.0]

    dest = _export(str(run), str(tmp_path / "repo"))
    assert sorted(os.listdir(dest)) == sorted(folders.FILES + (folders.LEARNER_CSV,))
    assert folders.folder_problems(dest) == []
    # The plot draws the loss from learner.csv (200 spans of 1 env step here: every point), not from
    # results.csv's one value per iteration (0.5 and 0.25).
    loss = plot.read_run(dest).metrics["learner/loss"]
    assert loss.steps.tolist() == [10, 20, 30, 35, 60] and loss.values.tolist() == [1.0, 2.0, 3.0, 5.0, 6.0]
