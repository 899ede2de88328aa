"""The example notebooks run end to end (examples/*.ipynb), each with a budget of seconds."""

import os

import pytest

from unit_tests.deadlines import under_load

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.smoke
def test_dqn_lunarlander_notebook_trains_plots_evaluates_and_shows_a_video(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = os.path.join(REPO_ROOT, "examples", "dqn_lunarlander.ipynb")
    notebook = nbformat.read(path, as_version=4)
    assert all(
        not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"
    )  # committed clean

    monkeypatch.setenv("DQN_NOTEBOOK_ENV_STEPS", "2000")  # the parameters cell reads it
    monkeypatch.setenv("PYTHONPATH", REPO_ROOT)  # the kernel imports this checkout's deep_rl_zoo
    client = nbclient.NotebookClient(
        notebook,
        timeout=int(under_load(120)),
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert images, "no plot was drawn"
    text = "".join(output.get("text", "") for output in outputs)
    assert "trained 2,000 env steps" in text
    assert "mean return over 3 episodes" in text
    assert any("<video" in output.get("data", {}).get("text/html", "") for output in outputs)
    assert os.path.isdir(tmp_path / "runs" / "DQN_LunarLander-v3_notebook")
