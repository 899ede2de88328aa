"""The run layout chosen from the CPU cores when the user does not set it (--num_actors, --num_envs,
--num_threads = 0: auto): it keeps each agent's batch, gives the learner the cores it can use, and a
resumed run whose machine resolves it differently still loads its checkpoint."""

import importlib

import pytest
import torch

from deep_rl_zoo import config, distributed, environments, schedules
from deep_rl_zoo.errors import ConfigError


def test_auto_layout_spreads_the_envs_over_at_most_one_actor_per_core_on_atari():
    layout = distributed.actor_layout
    # 8 envs: the largest divisor of 8 that is at most the core count is the number of actors.
    assert [layout(8, 0, 0, cores, atari=True) for cores in (1, 2, 3, 4, 8, 16)] == [
        (1, 8),
        (2, 4),  # 3 cores: 3 does not divide 8, so 2 x 4 as on 2
        (2, 4),
        (4, 2),
        (8, 1),
        (8, 1),
    ]
    assert layout(16, 0, 0, 2, atari=True) == (2, 8)  # A2C's 16 envs on 2 cores
    assert layout(4, 0, 0, 2, atari=False) == (4, 1)  # classic tasks: one env per actor, as before


def test_a_layout_flag_set_by_the_user_is_kept():
    layout = distributed.actor_layout
    assert layout(8, 2, 4, 16, atari=True) == (2, 4)  # both set: exactly that
    assert layout(8, 16, 0, 2, atari=True) == (16, 1)  # --num_actors alone: one env each, as before
    assert layout(8, 0, 4, 16, atari=True) == (2, 4)  # --num_envs alone: the actors that make 8 envs
    with pytest.raises(ConfigError, match="--num_envs=3 does not divide --num_parallel_envs=8"):
        layout(8, 0, 3, 2, atari=True)


def _with_cores(monkeypatch, cores: int) -> None:
    monkeypatch.setattr(config, "available_cpu_cores", lambda: cores)
    monkeypatch.setattr(distributed, "available_cpu_cores", lambda: cores)


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 8, 16, 64])
def test_the_default_atari_layout_keeps_the_papers_batch_on_any_machine(monkeypatch, cores):
    from deep_rl_zoo.a2c import run_atari as a2c_atari
    from deep_rl_zoo.a2c import run_atari_grad as a2c_grad_atari
    from deep_rl_zoo.a2c import train as a2c_train
    from deep_rl_zoo.ppo import run_atari as ppo_atari
    from deep_rl_zoo.ppo import train as ppo_train
    from deep_rl_zoo.ppo_icm import run_atari as icm_atari
    from deep_rl_zoo.ppo_icm import train as icm_train
    from deep_rl_zoo.ppo_rnd import run_atari as rnd_atari
    from deep_rl_zoo.ppo_rnd import train as rnd_train

    _with_cores(monkeypatch, cores)
    ppo = ppo_train.PpoConfig(**ppo_atari.DEFAULTS)
    # PPO (Schulman et al. 2017, table 5): 8 actors x 128 steps = 1,024 transitions per update
    assert ppo.num_actors * ppo.num_envs * ppo.unroll_length == 8 * 128
    assert ppo.num_actors <= max(cores, 1) and ppo.num_threads == cores  # its actors wait while it learns
    for defaults in (a2c_atari.DEFAULTS, a2c_grad_atari.DEFAULTS):
        a2c = a2c_train.A2cConfig(**defaults)
        assert a2c.num_actors * a2c.num_envs * a2c.unroll_length == 16 * 5  # Mnih et al. 2016: 16 x 5
    # PPO-RND and PPO-ICM: PPO's 8 envs x 128 steps, one actor process per core at most
    for curious in (
        rnd_train.PpoRndConfig(**rnd_atari.DEFAULTS),
        icm_train.PpoIcmConfig(**icm_atari.DEFAULTS),
    ):
        assert curious.num_actors * curious.num_envs * curious.unroll_length == 8 * 128
        assert curious.num_actors <= max(cores, 1) and curious.num_threads == cores


def _distributed_configs(package: str) -> list[type]:
    """The DistributedConfig subclasses `deep_rl_zoo.<package>.train` defines (not those it imports)."""
    train = importlib.import_module(f"deep_rl_zoo.{package}.train")
    return [
        c
        for c in vars(train).values()
        if isinstance(c, type)
        and issubclass(c, distributed.DistributedConfig)
        and c.__module__ == train.__name__
    ]


def test_auto_learner_threads(monkeypatch):
    from deep_rl_zoo.dqn import run_atari as dqn_atari
    from deep_rl_zoo.dqn import run_classic as dqn_classic
    from deep_rl_zoo.dqn import train as dqn_train
    from deep_rl_zoo.impala import run_atari as impala_atari
    from deep_rl_zoo.impala import train as impala_train

    _with_cores(monkeypatch, 32)
    assert dqn_train.DqnConfig(**dqn_atari.DEFAULTS).num_threads == 32  # acts and learns in turn
    assert dqn_train.DqnConfig(**dqn_classic.DEFAULTS).num_threads == 1  # a small MLP: one thread
    impala = impala_train.ImpalaConfig(**impala_atari.DEFAULTS)
    assert impala.num_threads == 32 - impala.num_actors  # asynchronous: each actor keeps its core
    _with_cores(monkeypatch, 20)
    assert impala_train.ImpalaConfig(**impala_atari.DEFAULTS).num_threads == 4  # the cores left over
    _with_cores(monkeypatch, 16)
    assert impala_train.ImpalaConfig(**impala_atari.DEFAULTS).num_threads == 1  # none left: one
    # Fewer cores than actors: all share every core, and the learner's every core was measured faster
    # (1.22x the env steps/s of one thread, 16 actors on 2 cores).
    _with_cores(monkeypatch, 2)
    assert impala_train.ImpalaConfig(**impala_atari.DEFAULTS).num_threads == 2
    # A replay ratio makes the learner set the pace (its actors wait while it owes gradient steps): every
    # core, as for a synchronous learner, beside the actors the paper's setting asks for.
    for package in ("sac", "r2d2", "ngu", "agent57"):
        (config_cls,) = _distributed_configs(package)
        paced = config_cls(**importlib.import_module(f"deep_rl_zoo.{package}.run_atari").DEFAULTS)
        assert paced.num_actors > 2 and paced.num_threads == 2, package
    assert dqn_train.DqnConfig(**{**dqn_atari.DEFAULTS, "num_threads": 3}).num_threads == 3  # as set


@pytest.mark.parametrize(
    "package", ["ppo", "ppo_rnd", "ppo_icm", "a2c", "impala", "r2d2", "ngu", "agent57", "sac"]
)
def test_every_distributed_config_knows_whether_its_learner_waits_for_the_actors(package):
    """`learner_waits_for_actors` (which sets the learner's auto threads) is the learner's `on_policy`."""
    configs = _distributed_configs(package)
    assert len(configs) == 1
    learner_packages = {"ngu": "r2d2", "agent57": "r2d2"}  # they learn with R2D2's learner
    agent = importlib.import_module(f"deep_rl_zoo.{learner_packages.get(package, package)}.agent")
    learners = {c.on_policy for c in vars(agent).values() if isinstance(c, type) and hasattr(c, "on_policy")}
    assert learners == {configs[0].learner_waits_for_actors}


def test_a_ppo_checkpoint_loads_where_auto_resolves_another_layout(monkeypatch):
    """--resume on a machine with other cores resolves another layout (2 actors x 4 envs there, 8 x 1
    here); the batch is the same, hence the learner's state and its learning-rate schedule. Shown on
    CartPole's small network with the two layouts set explicitly."""
    from deep_rl_zoo.ppo import train

    env = environments.make_environment(train.PpoConfig(), 0, train=False)
    learners, decay_steps = [], []
    for num_actors, num_envs in ((2, 4), (8, 1)):
        layout_config = train.PpoConfig(num_actors=num_actors, num_envs=num_envs)
        learners.append(train.build_learner(layout_config, env, torch.device("cpu")).learner)
        decay_steps.append(schedules.learning_rate_schedule(layout_config).decay_steps)
    assert decay_steps[0] == decay_steps[1]  # the annealed learning rate reaches 0 at the same env step
    state = learners[0].state_dict()
    learners[1].load_state_dict(state)
    for name, tensor in state["network"].items():
        assert torch.equal(tensor, learners[1].state_dict()["network"][name]), name
    env.close()


def test_describe_layout_names_the_layout_and_the_flags_that_choose_it(monkeypatch):
    from deep_rl_zoo import process_setup
    from deep_rl_zoo.ppo import run_atari, train

    _with_cores(monkeypatch, 2)
    monkeypatch.setattr(process_setup, "available_cpu_cores", lambda: 2)
    line = process_setup.describe_layout(train.PpoConfig(**run_atari.DEFAULTS), num_actors=2)
    assert line == (
        "layout: 2 actor processes x 4 envs, learner on 2 threads (2 CPU cores; "
        "set --num_actors/--num_envs/--num_threads to choose)"
    )
    bfloat16 = train.PpoConfig(**{**run_atari.DEFAULTS, "bfloat16": True})  # as a CPU with it decides
    assert process_setup.describe_layout(bfloat16, num_actors=2) == (
        "layout: 2 actor processes x 4 envs, learner on 2 threads with a bfloat16 torso (2 CPU cores; "
        "set --num_actors/--num_envs/--num_threads/--nobfloat16 to choose)"
    )
