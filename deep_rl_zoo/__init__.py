"""Deep RL Zoo: PyTorch RL agents, one package per algorithm (`ls deep_rl_zoo`)."""

from deep_rl_zoo.original_zoo import install_missing_agent_finder

# `python -m deep_rl_zoo.r2d2.run_classic` (an agent of the original zoo not built here) gets one line.
install_missing_agent_finder()
