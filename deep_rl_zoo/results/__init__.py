"""Published runs: the folders under the repository's `results/`, and the two commands that keep them.

    results/<suite>/<Game or task>/references.txt               optional: `random play=-20.7  # source`
    results/<suite>/<Game or task>/<AGENT>_<env>[_<tag>]_s<seed>/
        config.txt     the run's flags, as the run wrote them (absolute paths cut to their last part)
        results.csv    one row per iteration, as the run wrote it (greedy evaluation, speeds, losses)
        episodes.csv   every training episode: train_env_steps,episode_return,episode_length[,episode_rooms]
        command.txt    name=value lines: the command, resume points, zoo version, CPU, env steps/s

    python -m deep_rl_zoo.results export --run_dir=runs/DQN_CartPole-v1 \
        --dest=results/classic/CartPole-v1/DQN_CartPole-v1_s1 --command="python -m ..."
    python -m deep_rl_zoo.results table [--check]    # the tables in README.md and docs/*.md

`folders` reads and writes one folder, `export` makes one from a run folder, `tables` writes the
markdown tables; `python -m deep_rl_zoo.plot results/...` draws them. See docs/results.md.
"""
