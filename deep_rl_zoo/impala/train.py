"""IMPALA's configuration, its network/learner/actor builders, and the `main` every run script shares."""

import dataclasses
import math

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import distributed, optimization, unrolls
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.impala.agent import Impala, ImpalaActingPolicy, ImpalaGreedyActor
from deep_rl_zoo.networks.impala_resnet import IMAGE_TORSOS, ImpalaActorCritic
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class ImpalaConfig(PolicyEvaluation, distributed.DistributedConfig):
    """IMPALA hyper-parameters. The defaults are the classic-control ones, tuned here on CartPole-v1;
    run_atari uses the paper's (Espeholt et al. 2018, table G.1) with Adam in place of RMSProp."""

    num_actors: int = field(4, "Actor processes, each with its own environment and copy of the network.")
    unroll_length: int = field(16, "Env steps per unroll.")
    batch_size: int = field(2, "Unrolls per learner step, in arrival order (from any actors).")
    learning_rate: float = field(1e-3, "Adam learning rate (at the start, if annealed).")
    anneal_learning_rate: bool = field(True, "Decay the learning rate linearly to 0 over the whole run.")
    adam_eps: float = field(1e-5, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    rho_bar: float = field(1.0, "V-trace: clipping threshold of the importance weights in the value targets.")
    c_bar: float = field(1.0, "V-trace: clipping threshold of the trace coefficients c.")
    pg_rho_bar: float = field(1.0, "V-trace: clipping threshold of the importance weights of the advantages.")
    vtrace_lambda: float = field(1.0, "V-trace: lambda, extra cutting of the traces (1: none).")
    value_coef: float = field(0.5, "Weight of the value loss (the paper's baseline cost).")
    entropy_coef: float = field(0.01, "Weight of the entropy bonus.")
    max_grad_norm: float = field(40.0, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field(
        (64, 64), "Hidden layer sizes of the MLP torso (vector observations)."
    )
    lstm_size: int = field(0, "Units of the LSTM core after the torso; 0: feed-forward.")
    image_torso: str = field(
        "deep", "Torso on Atari frames: deep (the paper's 15-layer ResNet) or shallow (its two-conv one)."
    )

    def __post_init__(self):
        super().__post_init__()
        for name in ("batch_size", "learning_rate", "rho_bar", "c_bar", "pg_rho_bar"):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        for name in ("discount", "vtrace_lambda"):
            require(
                0.0 <= getattr(self, name) <= 1.0, f"--{name} must be in [0, 1], got {getattr(self, name)}"
            )
        for name in ("value_coef", "entropy_coef", "max_grad_norm", "lstm_size"):
            require(getattr(self, name) >= 0, f"--{name} must be >= 0, got {getattr(self, name)}")
        require(
            self.image_torso in IMAGE_TORSOS,
            f"--image_torso must be one of {', '.join(IMAGE_TORSOS)}, got {self.image_torso!r}",
        )


def build_network(config: ImpalaConfig, env: gym.Env) -> ImpalaActorCritic:
    """--image_torso on Atari frames, MLP torso on vectors; an LSTM core if --lstm_size > 0."""
    return ImpalaActorCritic(
        env.observation_space.shape,
        int(env.action_space.n),
        config.hidden_sizes,
        config.lstm_size,
        config.image_torso,
    )


def build_learner(config: ImpalaConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner and a greedy evaluation actor sharing its network (in the learner process)."""
    network = build_network(config, env).to(device)
    steps_per_update = config.batch_size * config.unroll_length
    num_updates = config.num_iterations * math.ceil(config.num_train_steps / steps_per_update)
    learning_rate = LinearSchedule(
        begin_value=config.learning_rate,
        end_value=0.0 if config.anneal_learning_rate else config.learning_rate,
        begin_t=0,
        decay_steps=num_updates * steps_per_update,
    )
    learner = Impala(
        network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        batch_size=config.batch_size,
        discount=config.discount,
        rho_bar=config.rho_bar,
        c_bar=config.c_bar,
        pg_rho_bar=config.pg_rho_bar,
        vtrace_lambda=config.vtrace_lambda,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        learning_rate=learning_rate,
        device=device,
    )
    return distributed.DistributedAgents(
        learner, ImpalaGreedyActor(network, device, Impala.agent_name, config.evaluation_samples_actions())
    )


def build_actor(
    config: ImpalaConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, ImpalaActorCritic]:
    """Runs in each actor process: a copy of the network and the actor sampling from it, never waiting
    for the learner."""
    network = build_network(config, env).to(device).requires_grad_(False)
    actor = unrolls.UnrollActor(
        policy=ImpalaActingPolicy(network, device),
        link=link,
        action_space=env.action_space,
        observation_space=env.observation_space,
        unroll_length=config.unroll_length,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=Impala.agent_name,
        wait_for_parameters=False,
        record_behaviour=True,
    )
    return actor, network


def main(config: ImpalaConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        Impala.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        on_log=on_log,
    )
