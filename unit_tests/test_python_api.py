"""The Python API as docs/python_api.md shows it: the page's code blocks are the test, so they cannot drift."""

import os
import re

import pytest

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of a docs page, in order."""
    with open(os.path.join(DOCS, page)) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.DOTALL)


@pytest.mark.smoke
def test_the_documented_example_runs_and_reports_what_the_page_says(capsys):
    blocks = python_blocks("python_api.md")
    assert len(blocks) == 3  # train/watch/load/act, a registered env class, evaluate with video
    namespace: dict = {}
    for block in blocks:  # in one namespace, as a reader runs them one after the other
        exec(compile(block, "docs/python_api.md", "exec"), namespace)  # noqa: S102 - our own docs page

    state, config = namespace["state"], namespace["config"]
    assert config.environment_name == "MyCorridor-v0"  # the second block's run
    assert state.train_env_steps == 300 and state.run_dir.endswith("DQN_MyCorridor-v0")
    # on_log of the first run: every training episode and the learner's loss, at env steps <= 2,000.
    episode_returns, losses = namespace["episode_returns"], namespace["losses"]
    assert episode_returns and all(
        0 < step <= 2_000 and r >= 8 for step, r in episode_returns
    )  # CartPole: >= 8 steps
    assert [step for step, _ in losses] == [
        1_000,
        1_000,
        2_000,
        2_000,
    ]  # every 1,000 steps, and at each iteration's end
    assert namespace["episode_return"] >= 8.0
    assert len(namespace["returns"]) == 2
    out = capsys.readouterr().out
    assert "greedy episode: return" in out and "video of the first episode" in out
