"""DRQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.config import field
from deep_rl_zoo.drqn import agent
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks.value import DrqnNetwork
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class DrqnConfig(replay_q_agents.EpsilonGreedyConfig):
    """DRQN hyper-parameters: the flags of every epsilon-greedy replay Q agent (`replay_q_agents`), with
    the replay counted in env steps and batches in sequences, and those of the recurrent network. Atari
    defaults (run_atari) follow Hausknecht & Stone 2015 where the paper gives them; the classic-control
    defaults below were tuned here on CartPole-v1.

    Classic control: 32 sequences of 8 burn-in + 8 learned steps every 4 env steps, Adam lr 1e-3, a
    target copy every 125 gradient steps (500 env steps), 5-step double-Q targets, one ReLU layer of
    128 between the LSTM and the Q head. They reach a greedy mean of 475 on CartPole-v1 within
    35,000 env steps on each of seeds 1-5 (25k, 30k, 35k, 25k, 30k; benchmarks/dqn_cartpole.py, see
    README's results table).

    What was wrong before (one-step targets, linear head on the LSTM, 64 sequences, lr 3e-4, target
    every 250 gradient steps): one-step targets can only add one step of horizon per target copy,
    so Q stayed below (1 - 0.99^k) / 0.01 after k copies: about 19 at 20,000 env steps and 41 at
    55,000, too short a horizon to see the cart drift past x = 2.4, which ended every greedy episode.
    5-step targets lift that cap five times faster (R2D2 uses n = 5) and the copies come twice as
    often (one-step targets with a copy every 62 gradient steps reached 468 at 10,000 env steps, then
    fell to 71 at 15,000; 5-step ones with the old copy period climbed to 409 at 15,000 and fell to
    159 at 40,000); lr 1e-3 was what turned a slow climb (lr 3e-4: 235 at 30,000) into a solve on seed 1
    (500 at 25,000). The ReLU layer lets the head read Q-values of tens from LSTM outputs bounded by
    1 (58% of them were beyond |0.95|). Carrying the LSTM state through an evaluation episode or
    re-warming it from zero over the last 9 steps gave the same returns, so zero-state sequences with
    a burn-in are enough here; the stored states of R2D2 were not needed.
    """

    unroll_length: int = field(8, "Transitions learned from per sequence (after the burn-in).")
    burn_in: int = field(8, "Leading steps of each sequence that only warm up the LSTM state.")
    lstm_size: int = field(128, "Units of the LSTM layer.")
    head_hidden_sizes: tuple[int, ...] = field(
        (128,), "ReLU layers between the LSTM and the linear Q head (empty: the paper's linear head)."
    )
    double_q: bool = field(True, "The online network picks the bootstrap action (double Q-learning).")
    replay_capacity: int = field(50_000, "Env steps the sequence replay holds.")
    min_replay_size: int = field(1000, "Env steps collected before learning starts.")
    batch_size: int = field(32, "Sequences per gradient step.")
    learning_rate: float = field(1e-3, "Adam learning rate.")
    n_step: int = field(5, "Steps of the bootstrapped return (1 is the paper's one-step target).")
    hidden_sizes: tuple[int, ...] = field((128,), "Hidden layer sizes of the MLP before the LSTM (classic).")
    obscure_probability: float = field(
        0.0, "Blank each new screen with this probability (0.5 on Atari = the paper's flickering games)."
    )

    def __post_init__(self):
        super().__post_init__()
        require(
            not self.overlap_learning,
            "--overlap_learning is for the feed-forward replay Q agents; DRQN acts and learns in turn",
        )
        require(
            0.0 <= self.obscure_probability <= 1.0,
            f"--obscure_probability must be in [0, 1], got {self.obscure_probability}",
        )
        for name in ("unroll_length", "lstm_size"):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.burn_in >= 0, f"--burn_in must be >= 0, got {self.burn_in}")
        require(
            not self.checkpoint_replay, "--checkpoint_replay is not available for DRQN's sequence replay yet"
        )
        require(
            self.sequence_length <= self.replay_capacity,
            f"--burn_in + --unroll_length + 1 = {self.sequence_length} is larger than "
            f"--replay_capacity={self.replay_capacity}",
        )

    @property
    def sequence_length(self) -> int:
        """Steps per sampled sequence: burn-in, then unroll_length transitions need one step more."""
        return self.burn_in + self.unroll_length + 1


def build_network(config: DrqnConfig, observation_shape: tuple[int, ...], num_actions: int) -> DrqnNetwork:
    """The network a config describes; `eval_agent` rebuilds it from a checkpoint's config."""
    return DrqnNetwork(
        observation_shape, num_actions, config.hidden_sizes, config.lstm_size, config.head_hidden_sizes
    )


# Checkpoints saved before `head_hidden_sizes` existed had the paper's linear head.
OLD_CHECKPOINT_DEFAULTS = {"head_hidden_sizes": ()}


def build_agents(config: DrqnConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and a recurrent evaluation actor sharing its online network."""
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_network(config, observation_shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    train_agent = agent.Drqn(
        **replay_q_agents.learner_arguments(config, network, device),
        **replay_q_agents.sequence_storage(config, config.sequence_length, observation_shape, rng),
        exploration_epsilon=replay_q_agents.epsilon_schedule(config),
        num_actions=num_actions,
        discount=config.discount,
        burn_in=config.burn_in,
        rng=rng,
        double_q=config.double_q,
        n_step=config.n_step,
    )
    eval_agent = agent.RecurrentEpsilonGreedyActor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
        agent.Drqn.agent_name,
    )
    return training.Agents(train_agent, eval_agent)


def main(config: DrqnConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.Drqn.agent_name,
        lambda env, device: build_agents(config, env, device),
        wrap_env=obscuring_wrapper(config.obscure_probability),
        on_log=on_log,
    )
