"""NGU's configuration, its learner and actor builders, and the `main` every run script shares
(Agent57's builders reuse `build_novelty_modules`, `novelty_config` and `family_of`)."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import distributed, exploration
from deep_rl_zoo.config import field
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks import common
from deep_rl_zoo.networks.curiosity import IntrinsicCuriosityModule, RandomNetworkDistillation
from deep_rl_zoo.ngu.agent import (
    ActorMemory,
    EpisodicNoveltyConfig,
    FixedPolicy,
    Ngu,
    NguActor,
    NguNetworks,
    NguQNetwork,
    RetraceSettings,
)
from deep_rl_zoo.r2d2.train import R2d2Config
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class NguConfig(R2d2Config):
    """NGU hyper-parameters: R2D2's (sequences, replay, targets, Ape-X epsilons; `--discount` is
    replaced by each policy's gamma_j) plus the novelty and policy-family ones, the paper's (Badia et al.
    2020, table of hyper-parameters) unless said. Classic-control defaults are for MountainCar-v0 on a CPU:
    2 policies for 4 actors (the paper: 32 policies over 256 actors), an MLP embedding of 32 units, and a
    gradient step on 32 sequences every 16 env steps received (each learner step also trains the embedding
    and RND, and NGU's actors cost about 4 network calls per env step).

    Why 2 policies for 4 actors, not 4: as in the paper, actor i plays j = i mod N and has the Ape-X
    epsilon of its index over all actors, 0.4^(1 + 7 i / (A - 1)), and each replayed sequence is learned
    under its own j only, so the greedy policy j = 0 (beta 0, the one evaluated) learns from its own
    actors' sequences alone (the others help it only through the shared weights). With the paper's 256
    actors and 32 policies, j = 0 has 8 actors spread over the whole epsilon range (0.4 down to ~0.0014).
    With 4 actors and N = 4, j = 0 has actor 0 alone, epsilon 0.4: the policy evaluated greedily is learned
    only from the noisiest actor's behaviour, and the near-greedy actor (epsilon 0.4^8) is the most
    exploratory policy. N = 2 keeps the paper's rule and gives each policy one noisy and one near-greedy
    actor: j = 0 (beta 0, gamma 0.997) actors 0 and 2, epsilons 0.4 and 0.4^(17/3) ~ 0.0056; j = 1
    (beta 0.3, gamma 0.99) actors 1 and 3, epsilons 0.4^(10/3) ~ 0.047 and 0.4^8 ~ 0.00066."""

    environment_name: str = field(
        "MountainCar-v0",
        "Gymnasium id, a short Atari name such as Pong, or module:id for an env of your own (the module's "
        "import registers it), e.g. mypkg.envs:Maze-v0.",
    )
    updates_per_env_step: float = field(
        0.0625, "Gradient steps per env step received (R2D2's classic 0.25 is 4x the CPU per env step)."
    )
    num_policies: int = field(
        2, "N, policies of the family (beta_j, gamma_j); actor i plays j = i mod N (keep N < --num_actors)."
    )
    intrinsic_beta: float = field(0.3, "beta of the most exploratory policy (j = N - 1).")
    gamma_max: float = field(0.997, "gamma_0, of the exploitative policy j = 0.")
    gamma_min: float = field(0.99, "gamma_{N-1}, of the most exploratory policy.")
    episodic_memory_capacity: int = field(30_000, "Embeddings an actor's episodic memory holds.")
    num_neighbours: int = field(10, "k of the k-nearest-neighbour episodic reward.")
    kernel_epsilon: float = field(1e-4, "Episodic kernel's epsilon.")
    cluster_distance: float = field(0.008, "Normalised squared distances below this count as the same state.")
    pseudo_count_constant: float = field(1e-3, "c added to the soft visit count.")
    max_similarity: float = field(8.0, "A soft visit count above this gives no episodic reward.")
    max_lifelong_scale: float = field(5.0, "L: the life-long factor is clipped to [1, L].")
    embedding_hidden_sizes: tuple[int, ...] = field((32,), "Embedding MLP (classic); its last size is f's.")
    rnd_hidden_sizes: tuple[int, ...] = field((64, 64), "RND MLP sizes (classic).")
    rnd_feature_size: int = field(64, "RND output size (classic; Atari: 512).")
    auxiliary_learning_rate: float = field(5e-4, "Adam learning rate of the embedding and RND.")
    auxiliary_steps: int = field(
        0,
        "The embedding (inverse model) and RND's predictor learn the last this many transitions of each "
        "replayed sequence (the paper: 5, run_atari's default); 0: every learned transition (classic).",
    )
    q_target: str = field(
        "n_step",
        "'retrace': transformed Retrace(lambda) targets (the papers', run_atari's default); 'n_step': "
        "R2D2's transformed --n_step double-Q targets (the classic-control default, tuned here).",
    )
    retrace_lambda: float = field(0.95, "Retrace's trace decay lambda (--q_target=retrace).")
    retrace_target_epsilon: float = field(
        0.01, "Epsilon of Retrace's target policy, epsilon-greedy in the online Q (--q_target=retrace)."
    )

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "num_policies",
            "episodic_memory_capacity",
            "num_neighbours",
            "kernel_epsilon",
            "max_similarity",
            "rnd_feature_size",
            "auxiliary_learning_rate",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(
            self.q_target in ("retrace", "n_step"),
            f"--q_target must be retrace or n_step, got {self.q_target!r}",
        )
        for name in ("retrace_lambda", "retrace_target_epsilon"):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f"--{name} must be in [0, 1], got {value}")
        require(self.intrinsic_beta >= 0, f"--intrinsic_beta must be >= 0, got {self.intrinsic_beta}")
        require(
            0.0 < self.gamma_min <= self.gamma_max < 1.0,
            f"need 0 < --gamma_min <= --gamma_max < 1, got {self.gamma_min}, {self.gamma_max}",
        )
        require(self.cluster_distance >= 0, f"--cluster_distance must be >= 0, got {self.cluster_distance}")
        require(
            self.pseudo_count_constant >= 0,
            f"--pseudo_count_constant must be >= 0, got {self.pseudo_count_constant}",
        )
        require(
            self.max_lifelong_scale >= 1, f"--max_lifelong_scale must be >= 1, got {self.max_lifelong_scale}"
        )
        require(
            0 <= self.auxiliary_steps <= self.trace_length,
            f"--auxiliary_steps must be in [0, --trace_length={self.trace_length}], got {self.auxiliary_steps}",
        )
        for name in ("embedding_hidden_sizes", "rnd_hidden_sizes"):
            sizes = getattr(self, name)
            require(len(sizes) > 0 and min(sizes) > 0, f"--{name} must be positive sizes, got {sizes}")


def family_of(config_values: dict) -> tuple[list[float], list[float]]:
    """(betas, gammas) of a config (a dict, as saved in a checkpoint): NGU's family, or Agent57's
    (`exploration.agent57_policy_family`) when its --discount_family says so."""
    if config_values.get("discount_family", "ngu") == "agent57":
        return exploration.agent57_policy_family(
            config_values["num_policies"],
            config_values["intrinsic_beta"],
            config_values["gamma_exploit"],
            config_values["gamma_max"],
            config_values["gamma_min"],
        )
    return exploration.policy_family(
        config_values.get("num_policies", NguConfig.num_policies),
        config_values.get("intrinsic_beta", NguConfig.intrinsic_beta),
        config_values.get("gamma_max", NguConfig.gamma_max),
        config_values.get("gamma_min", NguConfig.gamma_min),
    )


def novelty_config(config: NguConfig) -> EpisodicNoveltyConfig:
    return EpisodicNoveltyConfig(
        memory_capacity=config.episodic_memory_capacity,
        num_neighbours=config.num_neighbours,
        kernel_epsilon=config.kernel_epsilon,
        cluster_distance=config.cluster_distance,
        pseudo_count_constant=config.pseudo_count_constant,
        max_similarity=config.max_similarity,
        max_lifelong_scale=config.max_lifelong_scale,
    )


def q_network(config_values: dict, observation_shape, num_actions: int) -> NguQNetwork:
    return NguQNetwork(
        observation_shape,
        num_actions,
        config_values.get("num_policies", NguConfig.num_policies),
        tuple(config_values.get("hidden_sizes", NguConfig.hidden_sizes)),
        config_values.get("lstm_size", NguConfig.lstm_size),
        tuple(config_values.get("head_hidden_sizes", NguConfig.head_hidden_sizes)),
    )


def build_novelty_modules(
    config_values: dict, q: torch.nn.Module, observation_shape, num_actions: int, window: int = 1
) -> NguNetworks:
    """The published module around a Q-network `q` (NGU's one or Agent57's pair); shared with eval."""
    return NguNetworks(
        q,
        IntrinsicCuriosityModule(
            observation_shape,
            num_actions,
            tuple(config_values.get("embedding_hidden_sizes", NguConfig.embedding_hidden_sizes)),
        ),
        RandomNetworkDistillation(
            observation_shape,
            tuple(config_values.get("rnd_hidden_sizes", NguConfig.rnd_hidden_sizes)),
            config_values.get("rnd_feature_size", NguConfig.rnd_feature_size),
        ),
        ActorMemory(config_values.get("num_actors", NguConfig.num_actors), window),
    )


def build_networks(config_values: dict, observation_shape, num_actions: int) -> NguNetworks:
    return build_novelty_modules(
        config_values,
        q_network(config_values, observation_shape, num_actions),
        observation_shape,
        num_actions,
    )


def optimizer_for(config: NguConfig, networks: NguNetworks) -> torch.optim.Optimizer:
    """One Adam with two groups: the Q-network(s) at --learning_rate, embedding and RND predictor at
    --auxiliary_learning_rate (the forward model of the ICM module is not trained by NGU)."""
    groups = networks.trained_parameter_groups()
    auxiliary = groups["embedding"] + groups["rnd"]
    return torch.optim.Adam(
        [
            {"params": list(networks.q.parameters()), "lr": config.learning_rate},
            {"params": auxiliary, "lr": config.auxiliary_learning_rate},
        ],
        eps=config.adam_eps,
    )


def replay_for(config: NguConfig, shape, rng: np.random.Generator) -> PrioritizedSequenceReplay:
    stack = int(shape[0]) if common.is_image_observation(shape) else 1
    return PrioritizedSequenceReplay(
        config.replay_capacity,
        config.sequence_length,
        config.priority_exponent,
        np.random.default_rng(rng.integers(2**63)),
        stack_size=stack,
        period=config.replay_period,
    )


def learner_arguments(config: NguConfig, device: torch.device) -> dict:
    """The constructor arguments NGU's and Agent57's learners share (besides networks, optimizer, replay)."""
    betas, gammas = family_of(dataclasses.asdict(config))
    retrace = None
    if config.q_target == "retrace":
        retrace = RetraceSettings(config.retrace_lambda, config.retrace_target_epsilon)
    return dict(
        betas=betas,
        gammas=gammas,
        retrace=retrace,
        auxiliary_steps=config.auxiliary_steps,
        burn_in=config.burn_in,
        batch_size=config.batch_size,
        min_replay_size=config.min_replay_size,
        updates_per_env_step=config.updates_per_env_step,
        n_step=config.n_step,
        target_network_update_period=config.target_network_update_period,
        importance_sampling_exponent=config.importance_sampling_exponent,
        priority_eta=config.priority_eta,
        rescaling_eps=config.value_rescaling_eps,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )


def evaluation_actor(
    config_values: dict,
    networks: NguNetworks,
    num_actions: int,
    epsilon: float,
    seed: int,
    device,
    agent_name: str,
) -> NguActor:
    """Greedy (but for `epsilon`) in the exploitative policy j = 0, with its own episodic memory for
    the intrinsic reward the network reads; used by the training run's evaluation and by eval_agent."""
    betas, _ = family_of(config_values)
    defaults = {f.name: f.default for f in dataclasses.fields(NguConfig)}
    values = {**defaults, **config_values}
    novelty = EpisodicNoveltyConfig(
        values["episodic_memory_capacity"],
        values["num_neighbours"],
        values["kernel_epsilon"],
        values["cluster_distance"],
        values["pseudo_count_constant"],
        values["max_similarity"],
        values["max_lifelong_scale"],
    )
    return NguActor(
        networks=networks,
        link=None,
        policy=FixedPolicy(0),
        betas=betas,
        num_actions=num_actions,
        epsilon=epsilon,
        period=1,
        sequence_length=1,
        image_observations=False,
        novelty=novelty,
        memory_row=networks.actor_memory.distance_mean.shape[0] - 1,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=agent_name,
    )


def build_learner(config: NguConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    networks = build_networks(dataclasses.asdict(config), shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    learner = Ngu(
        networks=networks,
        optimizer=optimizer_for(config, networks),
        replay=replay_for(config, shape, rng),
        **learner_arguments(config, device),
    )
    eval_actor = evaluation_actor(
        dataclasses.asdict(config),
        networks,
        num_actions,
        config.eval_exploration_epsilon,
        int(rng.integers(2**31)),
        device,
        Ngu.agent_name,
    )
    return distributed.DistributedAgents(learner, eval_actor)


def actor_for(config: NguConfig, env: gym.Env, device, link: LearnerLink, seed: int, networks, policy, name):
    """An actor process's NguActor around its copy of the networks, with its Ape-X epsilon."""
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    betas, _ = family_of(dataclasses.asdict(config))
    return NguActor(
        networks=networks,
        link=link,
        policy=policy,
        betas=betas,
        num_actions=num_actions,
        epsilon=exploration.apex_actor_epsilon(
            link.actor_index, config.num_actors, config.actor_epsilon, config.actor_epsilon_alpha
        ),
        period=config.replay_period,
        sequence_length=config.sequence_length,
        image_observations=common.is_image_observation(shape),
        novelty=novelty_config(config),
        memory_row=link.actor_index,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=name,
    )


def build_actor(config: NguConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int):
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    networks = build_networks(dataclasses.asdict(config), shape, num_actions).to(device).requires_grad_(False)
    policy = FixedPolicy(link.actor_index % config.num_policies)
    return actor_for(config, env, device, link, seed, networks, policy, Ngu.agent_name), networks


def main(config: NguConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        Ngu.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        wrap_env=obscuring_wrapper(config.obscure_probability),
        on_log=on_log,
    )
