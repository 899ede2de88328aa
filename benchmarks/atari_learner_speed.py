"""Learner milliseconds per update on Atari-sized batches: PPO's update and DQN's gradient step.

Two parts, each on random 84x84x4 uint8 frames (the speed of a convolution does not depend on the
pixels or the weights):

1. `--part=torso`: ways of running the Nature CNN torso (`networks.common.NatureCnnTorso`), all with the
   same parameters, on the work the learners do:
   - `ppo_step`: a minibatch step of PPO's Atari setting (forward and backward of the actor-critic on 256
     frames, gradient clip, fused Adam);
   - `nograd_1032`: the no-grad forward PPO's learner runs over one batch of unrolls (8 x 129 frames);
   - `dqn_step`: DQN's gradient step on 32 transitions (online forward and backward, target forward);
   - `act_1`: one frame, as an actor acts (inference mode).
   The ways: `plain` (`fc(convs(x.float() / 255))`, NCHW, out-of-place ReLUs: the torso before this
   benchmark), each of the three changes alone (`+channels_last`: frames converted to NHWC while still
   uint8; `+fold_scale`: 1/255 folded into the first convolution's weights; `+inplace_relu`), all three
   (`zoo`: what `NatureCnnTorso` does now), and `zoo+bf16` (the same in bfloat16 autocast, as
   `--bfloat16` runs it; only faster on CPUs with avx512_bf16 or AMX: the script prints which).
2. `--part=learners`: the real learners, as `run_atari` builds them with its defaults: `ppo.agent.Ppo.learn`
   on one batch of 8 unrolls of 128 steps (4 epochs x 4 minibatches of 256 + the no-grad forward), and
   `dqn.agent.Dqn`'s gradient step (replay sample of 32, frame-store gather, online + target network),
   with each of `--num_threads` torch thread counts in turn, in float32 and with `--bfloat16`'s torso.
   `--learners=ppo,dqn,ppo_rnd,ppo_icm` adds PPO-RND's and PPO-ICM's update on the same batch (their own
   run_atari defaults: PPO-RND's predictor on a quarter of each minibatch, PPO-ICM's 3 epochs and ICM).
3. `--part=bound`: the arithmetic a learner cannot avoid, per env step, against what this CPU can do.
   torch's own `FlopCounterMode` counts the floating-point operations of the same real learners (a PPO
   update spread over its 8 x 128 env steps; a DQN gradient step spread over its 4 env steps) and of the
   acting forwards (PPO: one per env step in batches of 8; DQN: one per step where epsilon does not
   answer, 90% at its final 0.1); this CPU's rate is the best of a few float32 2048 x 2048 matrix
   products on all cores (a convolution runs below that rate, never above). Their quotient is an upper
   bound on env steps/s that no loop, thread layout or environment can beat with these
   hyper-parameters in float32: if twice a contender's measured rate is above it, a 2x target is out of
   this machine's reach (the targets against Stable-Baselines3, which does the same arithmetic).

Times are per call, the minimum over `--rounds` rounds in which the contenders take turns (a shared
machine's load then hits all alike); with one thread the process CPU time is shown too, which load
distorts less than wall time.

    python benchmarks/atari_learner_speed.py [--part=torso,learners,bound] [--rounds=3] [--num_threads=1,2] \
        [--learners=ppo,dqn,ppo_rnd,ppo_icm]
"""

import argparse
import contextlib
import functools
import os
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

try:
    from deep_rl_zoo import types_
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import types_
from deep_rl_zoo import unrolls
from deep_rl_zoo.dqn import run_atari as dqn_run_atari
from deep_rl_zoo.dqn import train as dqn_train
from deep_rl_zoo.networks import common, policy
from deep_rl_zoo.ppo import run_atari as ppo_run_atari
from deep_rl_zoo.ppo import train as ppo_train
from deep_rl_zoo.ppo_icm import run_atari as ppo_icm_run_atari
from deep_rl_zoo.ppo_icm import train as ppo_icm_train
from deep_rl_zoo.ppo_rnd import run_atari as ppo_rnd_run_atari
from deep_rl_zoo.ppo_rnd import train as ppo_rnd_train

SHAPE = (4, 84, 84)
NUM_ACTIONS = 6  # Pong


@contextlib.contextmanager
def bfloat16_torsos(enabled: bool):
    """`--bfloat16`'s process-wide torso setting, on for the block when `enabled`."""
    common.set_torso_bfloat16(enabled)
    try:
        yield
    finally:
        common.set_torso_bfloat16(False)


class TorsoWay(torch.nn.Module):
    """The Nature CNN torso's computation with each speed change switched on or off (same parameters)."""

    def __init__(self, torso: common.NatureCnnTorso, channels_last: bool, fold_scale: bool, inplace: bool):
        super().__init__()
        self.torso, self.channels_last, self.fold_scale, self.inplace = (
            torso,
            channels_last,
            fold_scale,
            inplace,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        x = x.float()
        convs = [self.torso.convs[i] for i in (0, 2, 4)]
        if self.fold_scale:
            h = F.conv2d(x, convs[0].weight * (1.0 / 255.0), convs[0].bias, convs[0].stride)
        else:
            h = convs[0](x / 255.0)
        h = F.relu(h, inplace=self.inplace)
        for conv in convs[1:]:
            h = F.relu(conv(h), inplace=self.inplace)
        return F.relu(self.torso.fc[0](h.flatten(1)), inplace=self.inplace)


WAYS = {
    "plain": (False, False, False),
    "+channels_last": (True, False, False),
    "+fold_scale": (False, True, False),
    "+inplace_relu": (False, False, True),
    "zoo": (True, True, True),
}


class Timer:
    """Per-call wall and (one thread) CPU seconds, minimum over rounds."""

    def __init__(self):
        self.wall: dict[tuple[str, str], list[float]] = {}
        self.cpu: dict[tuple[str, str], list[float]] = {}

    def time(self, key: tuple[str, str], fn, calls: int = 1) -> None:
        fn()  # warm-up (oneDNN picks its kernels on the first call of a shape)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        self.wall.setdefault(key, []).append((time.perf_counter() - wall) / calls)
        self.cpu.setdefault(key, []).append((time.process_time() - cpu) / calls)

    def report(self, show_cpu: bool, baseline: str | None = None) -> None:
        tasks = list(dict.fromkeys(task for task, _ in self.wall))
        for task in tasks:
            print(f"\n{task}:")
            base = min(self.wall[(task, baseline)]) if baseline and (task, baseline) in self.wall else None
            for (t, way), walls in self.wall.items():
                if t != task:
                    continue
                line = f"  {way:16s} wall {min(walls) * 1e3:8.1f} ms"
                if show_cpu:
                    line += f"   cpu {min(self.cpu[(t, way)]) * 1e3:8.1f} ms"
                if base:
                    line += f"   wall / {baseline} {min(walls) / base:5.2f}"
                print(line)


def time_torso(rounds: int, timer: Timer) -> None:
    torch.manual_seed(0)
    network = policy.NatureCnnActorCritic(SHAPE, NUM_ACTIONS)
    ways = dict(WAYS)
    autocast_ways = {"zoo+bf16"}
    ways["zoo+bf16"] = WAYS["zoo"]
    frames = {n: torch.randint(0, 256, (n, *SHAPE), dtype=torch.uint8) for n in (1, 32, 256, 1032)}
    actions = torch.randint(0, NUM_ACTIONS, (256,))
    optimizer = torch.optim.Adam(network.parameters(), lr=2.5e-4, eps=1e-5, fused=True)

    def heads(way: torch.nn.Module, x: torch.Tensor) -> policy.ActorCriticOutput:
        features = way(x)
        return policy.ActorCriticOutput(
            network.policy_head(features).float(), network.value_head(features).squeeze(-1).float()
        )

    def tasks(way: TorsoWay):
        def ppo_step():
            output = heads(way, frames[256])
            dist = output.distribution()
            loss = (
                -dist.log_prob(actions).mean() + output.value.square().mean() - 0.01 * dist.entropy().mean()
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), 0.5)
            optimizer.step()

        def nograd_1032():
            with torch.no_grad():
                heads(way, frames[1032])

        def dqn_step():
            q = heads(way, frames[32]).pi_logits
            with torch.no_grad():
                q_target = heads(way, frames[32]).pi_logits.max(-1).values
            loss = F.smooth_l1_loss(q[torch.arange(32), actions[:32]], q_target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), 10.0)
            optimizer.step()

        def act_1():
            with torch.inference_mode():
                for _ in range(20):
                    heads(way, frames[1])

        return {"ppo_step (256)": (ppo_step, 2), "nograd_1032": (nograd_1032, 1), "dqn_step (32)": (dqn_step, 5),
                "act_1 (x20)": (act_1, 1)}  # fmt: skip

    for _ in range(rounds):
        for name, flags in ways.items():
            # `zoo` and `zoo+bf16` time the torso module itself, as the learners run it.
            way = network.torso if name.startswith("zoo") else TorsoWay(network.torso, *flags)
            for task, (fn, calls) in tasks(way).items():
                with bfloat16_torsos(name in autocast_ways):
                    timer.time((task, name), fn, calls)


class _FakeAtariEnv:
    observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(NUM_ACTIONS)


def _random_unroll(index: int, length: int, rng: np.random.Generator) -> unrolls.Unroll:
    return unrolls.Unroll(
        actor_index=index,
        observation=rng.integers(0, 256, (length + 1, *SHAPE), dtype=np.uint8),
        action=rng.integers(0, NUM_ACTIONS, length),
        reward=rng.choice(np.array([-1.0, 0.0, 0.0, 0.0, 1.0], np.float32), length),
        terminated=np.zeros(length, bool),
        truncated=np.zeros(length, bool),
        valid=np.ones(length, bool),
    )


PPO_FAMILY = {  # name: (train module, run_atari module, config class)
    "ppo": (ppo_train, ppo_run_atari, ppo_train.PpoConfig),
    "ppo_rnd": (ppo_rnd_train, ppo_rnd_run_atari, ppo_rnd_train.PpoRndConfig),
    "ppo_icm": (ppo_icm_train, ppo_icm_run_atari, ppo_icm_train.PpoIcmConfig),
}


def build_ppo(rng: np.random.Generator, name: str = "ppo") -> tuple[object, list[unrolls.Unroll]]:
    """The learner of PPO (or PPO-RND, PPO-ICM) as `run_atari` builds it, PPO-RND's past its observation
    warm-up so that `learn` updates, and one batch of random unrolls for it: one per env, 8 x 128 env
    steps however the envs are spread over actor processes."""
    train, run_atari, config_cls = PPO_FAMILY[name]
    config = config_cls(**run_atari.DEFAULTS, seed=1)
    learner = train.build_learner(config, _FakeAtariEnv(), torch.device("cpu")).learner
    learner._optimisation.env_steps = getattr(config, "observation_warmup_steps", 0)
    envs = config.num_actors * config.num_envs
    return learner, [_random_unroll(i, config.unroll_length, rng) for i in range(envs)]


def build_dqn(rng: np.random.Generator, warm_up: int = 1_000) -> tuple[object, dqn_train.DqnConfig]:
    """DQN's training agent as `run_atari` builds it, with its replay past a `warm_up` of random
    frames (filled through the agent's own writer), and its config."""
    dqn_defaults = dict(dqn_run_atari.DEFAULTS, replay_capacity=2 * warm_up, min_replay_size=warm_up)
    dqn_config = dqn_train.DqnConfig(**dqn_defaults, seed=1)
    dqn = dqn_train.build_agents(dqn_config, _FakeAtariEnv(), torch.device("cpu")).train_agent
    stack = rng.integers(0, 256, SHAPE, dtype=np.uint8)
    for t in range(warm_up + 200):
        stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, *SHAPE[1:]), dtype=np.uint8)])
        dqn._writer.add(types_.TimeStep(stack, 0.0, False, False, t == 0, {}), int(rng.integers(NUM_ACTIONS)))
    return dqn, dqn_config


LEARNERS = ("ppo", "dqn", "ppo_rnd", "ppo_icm")  # "dqn" and the PPO_FAMILY


def time_learners(rounds: int, thread_counts: list[int], timer: Timer, learners: list[str]) -> None:
    rng = np.random.default_rng(0)
    tasks = []  # (name, call, calls per timing)
    for name in learners:
        if name == "dqn":
            dqn, _ = build_dqn(rng)
            tasks.append(("dqn gradient step (batch 32)", dqn._learn, 10))
        else:
            learner, batch = build_ppo(rng, name)
            tasks.append(
                (f"{name} learn (one update: 8 x 128 env steps)", functools.partial(learner.learn, batch), 1)
            )
    for _ in range(rounds):
        for threads in thread_counts:
            torch.set_num_threads(threads)
            for bfloat16 in (False, True):
                way = f"{threads} thread(s)" + (" bf16" if bfloat16 else "")
                with bfloat16_torsos(bfloat16):
                    for task, call, calls in tasks:
                        timer.time((task, way), call, calls=calls)


def counted_flops(fn) -> int:
    """Floating-point operations of one call of `fn` (forwards and backwards), by torch's counter."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def matmul_rate(rounds: int, size: int = 2048) -> float:
    """This CPU's float32 FLOP/s: the best of `rounds` x 5 products of two size x size matrices."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(rounds * 5):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def dqn_flops(dqn) -> tuple[int, int]:
    """DQN's floating-point operations: (one gradient step, one one-frame forward to act)."""
    frame = torch.zeros((1, *SHAPE), dtype=torch.uint8)
    network = dqn._network
    return counted_flops(dqn._learn), counted_flops(lambda: network(frame))


def dqn_flops_per_env_step(dqn, config) -> float:
    """DQN's floating-point operations per env step: a gradient step every `learn_interval` env steps,
    and a one-frame forward on the steps epsilon (at its final value) leaves to the network."""
    gradient_step, act = dqn_flops(dqn)
    return gradient_step / config.learn_interval + (1.0 - config.exploration_epsilon_end_value) * act


def ppo_flops_per_env_step(ppo, batch: list[unrolls.Unroll]) -> float:
    """PPO's floating-point operations per env step: one update spread over the batch's env steps, and
    the actors' forward of every step in batches of 8."""
    env_steps = sum(len(unroll.action) for unroll in batch)
    frames = torch.zeros((8, *SHAPE), dtype=torch.uint8)
    network = ppo._network
    return counted_flops(lambda: ppo.learn(batch)) / env_steps + counted_flops(lambda: network(frames)) / 8


def report_bound(rounds: int) -> None:
    """Prints `--part=bound` (module docstring)."""
    rng = np.random.default_rng(0)
    (ppo, batch), (dqn, dqn_config) = build_ppo(rng), build_dqn(rng)
    per_step = {"ppo": ppo_flops_per_env_step(ppo, batch), "dqn": dqn_flops_per_env_step(dqn, dqn_config)}
    rate = matmul_rate(rounds)
    print(
        f"\nthis CPU: {torch.get_num_threads()} torch thread(s), float32 matrix product "
        f"{rate / 1e9:.1f} GFLOP/s (best of {rounds * 5}: the ceiling of every convolution)"
    )
    print("| learner | MFLOP per env step (torch's FlopCounterMode) | env steps/s at that rate: the bound |")
    print("|---|---:|---:|")
    for name, flops in per_step.items():
        print(f"| {name} | {flops / 1e6:.0f} | {rate / flops:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="torso,learners", help="Comma-separated: torso, learners, bound.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds in which the contenders take turns.")
    parser.add_argument(
        "--num_threads",
        default="1",
        help="torch CPU threads; the learners part takes a list (1,2) and alternates.",
    )
    parser.add_argument(
        "--learners",
        default="ppo,dqn",
        help=f"The learners part's learners, comma-separated, of {','.join(LEARNERS)}.",
    )
    args = parser.parse_args()
    parts = set(args.part.split(","))
    try:
        thread_counts = [int(n) for n in args.num_threads.split(",")]
    except ValueError:
        thread_counts = []
    if (
        not parts <= {"torso", "learners", "bound"}
        or args.rounds < 1
        or not thread_counts
        or min(thread_counts) < 1
        or not set(args.learners.split(",")) <= set(LEARNERS)
    ):
        raise SystemExit(
            f"bad arguments {vars(args)}: --part takes torso,learners,bound; --rounds, --num_threads >= 1; "
            f"--learners of {','.join(LEARNERS)}"
        )
    torch.set_num_threads(thread_counts[0])
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(
        f"{args.num_threads} torch thread(s), {args.rounds} rounds, load average {' '.join(load)}, "
        f"CPU bfloat16 support (avx512_bf16/amx): {'yes' if common.native_bfloat16(torch.device('cpu')) else 'no'}"
    )
    timer = Timer()
    if "torso" in parts:
        time_torso(args.rounds, timer)
    if "learners" in parts:
        time_learners(args.rounds, thread_counts, timer, args.learners.split(","))
    timer.report(show_cpu=thread_counts == [1], baseline="plain")
    if "bound" in parts:
        torch.set_num_threads(os.cpu_count() or 1)  # the rate of the whole CPU, whatever --num_threads says
        report_bound(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
