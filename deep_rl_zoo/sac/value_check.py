"""Checks a SAC checkpoint's critics against the returns that actually followed:
`python -m deep_rl_zoo.sac.value_check --environment_name=Pong --load_checkpoint_file=best --num_episodes=3`.

It plays the checkpoint's policy, sampling its actions (the soft Q-values are those of the sampling
policy, so a greedy policy would be the wrong one to check them against), and records at every visited
state s_t the critics' estimate min(Q1, Q2)(s_t, a_t) of the action taken, the policy's entropy and
the reward that followed. After each episode it computes, backwards, the return the critics are
trained towards:

    soft G_t = r_{t+1} + gamma * (alpha * H(pi(.|s_{t+1})) + soft G_{t+1})     (0 after a terminal)
    G_t      = r_{t+1} + gamma * G_{t+1}                                          (plain, for reference)

with the rewards, terminals and discount the critics learned with (the sign of the reward and a lost
life as a terminal on Atari when the run trained so). Averaged over the visited states, estimate minus
soft return is the critics' bias, as in the overestimation figures of van Hasselt et al. 2016 and
Fujimoto et al. 2018. An episode cut by a time limit has no tail: its last states' returns are short,
and the printout says when that happened.

It also checks that the actor sees its input: on a sample of the visited states (every 8th, up to 512),
the fraction of each ReLU layer's units that fire for at least one of them, and how much the policy's
logits vary from state to state. A layer with no live unit, or logits that do not vary, mean the actor
plays one action distribution on every screen (docs/agents/sac.md found SAC's Pong actors so).
"""

from typing import NamedTuple

import numpy as np
import torch

from deep_rl_zoo import evaluation, gym_env, multistep
from deep_rl_zoo.config import PolicyEvalConfig, run_script, trained_config
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.common import LiveUnits
from deep_rl_zoo.sac.agent import Sac
from deep_rl_zoo.sac.train import SacConfig, build_policy_network, build_q_network, load_trained_part
from deep_rl_zoo.types_ import TimeStep


class EpisodeValues(NamedTuple):
    """One episode's record: per step t (a state where an action was taken), the critics' estimate of
    the action taken and the soft and plain returns that followed; `raw_return` is the game's score."""

    estimates: np.ndarray
    soft_returns: np.ndarray
    returns: np.ndarray
    raw_return: float
    truncated: bool


def returns_after(
    rewards: np.ndarray, entropies: np.ndarray, ends: np.ndarray, discount: float, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The soft and plain discounted returns after each action of one episode.

    Args:
      rewards: r_{t+1}, the reward after the action at step t, [T].
      entropies: H(pi(.|s_{t+1})) of the state the action led to, [T] (unused where `ends` is set).
      ends: whether s_{t+1} was terminal for learning (no bootstrap from it), bool [T].
      discount: gamma.
      alpha: the entropy temperature of the checkpoint.
    """
    discounts = np.where(ends, 0.0, discount)  # float64, as the rewards: no rounding to float32
    # The soft return's reward at t carries the discounted entropy bonus of the state reached.
    soft_rewards = rewards + discounts * alpha * entropies
    rows = [torch.as_tensor(np.asarray(x, np.float64))[:, None] for x in (soft_rewards, rewards, discounts)]
    zero = torch.zeros(1, dtype=torch.float64)
    soft = multistep.discounted_returns(rows[0], rows[2], zero)[:, 0].numpy()
    plain = multistep.discounted_returns(rows[1], rows[2], zero)[:, 0].numpy()
    return soft, plain


STATE_SAMPLE_PERIOD = 8  # visited states between two kept for the actor's check
MAX_SAMPLED_STATES = 512


class ActorSight(NamedTuple):
    """What the actor makes of a batch of states: each ReLU layer's fraction of units that fire for at
    least one of them, and the logits' spread across the states (std over states, mean over actions)."""

    live_units: dict[str, float]
    logit_spread: float

    def describe(self, num_states: int) -> str:
        layers = ", ".join(f"{name} {fraction:.1%}" for name, fraction in self.live_units.items())
        text = f"actor on {num_states} visited states: logits vary by {self.logit_spread:.3g} across them"
        if layers:
            text += f"; live ReLU units per layer: {layers}"
        if self.live_units and min(self.live_units.values()) == 0.0:
            text += " (a layer with no live unit: the actor plays the same distribution on every state)"
        return text


def actor_sight(policy: torch.nn.Module, observations: torch.Tensor) -> ActorSight:
    """Runs `policy` once on `observations` [N, ...] (N >= 2) and measures what `ActorSight` holds."""
    live = LiveUnits(policy, with_grad_only=False)
    with torch.no_grad():
        logits = policy(observations).pi_logits.float()
    live.remove()
    return ActorSight(live.fractions(), logits.std(0).mean().item())


class ValueRecorder(PolicyGreedyActor):
    """An evaluation actor that samples the policy and records what `EpisodeValues` holds."""

    def __init__(
        self,
        policy: torch.nn.Module,
        q1: torch.nn.Module,
        q2: torch.nn.Module,
        alpha: float,
        discount: float,
        clip_reward: bool,
        life_loss_ends: bool,
        device: torch.device,
    ):
        super().__init__(policy, device, Sac.agent_name, sample_actions=True)
        self._q1, self._q2 = q1, q2
        self.alpha, self.discount = alpha, discount
        self._clip_reward, self._life_loss_ends = clip_reward, life_loss_ends
        self.episodes: list[EpisodeValues] = []
        self._estimates: list[float] = []
        self._entropies: list[float] = []  # H(pi(.|s_t)) of every state, s_0 included
        self._rewards: list[float] = []
        self._ends: list[bool] = []
        self._raw_return = 0.0
        self._lives = None
        self.sampled_states: list[np.ndarray] = []  # every STATE_SAMPLE_PERIOD-th visited state
        self._num_visited = 0

    def reset(self) -> None:
        self._estimates, self._entropies, self._rewards, self._ends = [], [], [], []
        self._raw_return, self._lives = 0.0, None

    def step(self, timestep: TimeStep) -> int:
        lives = timestep.info.get("lives")
        if not timestep.first:
            self._raw_return += timestep.reward
            self._rewards.append(float(np.sign(timestep.reward)) if self._clip_reward else timestep.reward)
            lost_life = (
                self._life_loss_ends and self._lives is not None and lives is not None and lives < self._lives
            )
            self._ends.append(timestep.terminated or lost_life)
        self._lives = lives
        if timestep.last:
            self._finish(timestep.truncated)
            return 0
        if self._num_visited % STATE_SAMPLE_PERIOD == 0 and len(self.sampled_states) < MAX_SAMPLED_STATES:
            self.sampled_states.append(np.array(timestep.observation))
        self._num_visited += 1
        with torch.inference_mode():
            observation = torch.as_tensor(timestep.observation, device=self._device).unsqueeze(0)
            log_pi = torch.log_softmax(self._network(observation).pi_logits[0].float(), dim=-1)
            q = torch.minimum(self._q1(observation).q_values[0], self._q2(observation).q_values[0])
            action = int(torch.distributions.Categorical(logits=log_pi).sample())
        self._estimates.append(float(q[action]))
        self._entropies.append(float(-(log_pi.exp() * log_pi).sum()))
        return action

    def actor_sight(self) -> ActorSight:
        """`actor_sight` of the policy on the sampled visited states."""
        return actor_sight(self._network, torch.as_tensor(np.stack(self.sampled_states), device=self._device))

    def _finish(self, truncated: bool) -> None:
        rewards, ends = np.asarray(self._rewards), np.asarray(self._ends, dtype=bool)
        # The entropy of the state each action led to; the last state's is never needed (it ends the
        # episode: terminal, or truncated with no tail to bootstrap from here).
        next_entropies = np.append(np.asarray(self._entropies[1:]), 0.0)
        soft, plain = returns_after(rewards, next_entropies, ends, self.discount, self.alpha)
        self.episodes.append(
            EpisodeValues(np.asarray(self._estimates), soft, plain, self._raw_return, truncated)
        )


def main(config: PolicyEvalConfig) -> list[EpisodeValues]:
    if not config.load_checkpoint_file:
        raise ConfigError(
            "--load_checkpoint_file is required: the check compares a trained checkpoint's critics"
        )
    recorders = []

    def build_actor(env, device, checkpoint):
        trained = trained_config(SacConfig, checkpoint)
        modules = {
            "policy": build_policy_network(trained, env),
            "q1": build_q_network(trained, env),
            "q2": build_q_network(trained, env),
        }
        for name, module in modules.items():
            load_trained_part(module, checkpoint, name)
            module.to(device).eval()
        atari = gym_env.is_atari(config.environment_name)
        recorder = ValueRecorder(
            **modules,
            alpha=float(checkpoint["agent"]["networks"]["log_alpha"].exp()),
            discount=trained.discount,
            clip_reward=atari and trained.clip_reward,
            life_loss_ends=atari and trained.terminal_on_life_loss,
            device=device,
        )
        recorders.append(recorder)
        return recorder

    evaluation.evaluate(config, Sac.agent_name, build_actor)
    recorder = recorders[0]
    episodes = recorder.episodes
    print(f"alpha {recorder.alpha:.4g}, discount {recorder.discount}")
    for index, e in enumerate(episodes):
        cut = " (cut by the time limit: the last states' returns lack their tail)" if e.truncated else ""
        print(
            f"episode {index}: score {e.raw_return:.1f}, {len(e.estimates)} steps; mean over its states: "
            f"estimate {e.estimates.mean():.3f}, soft return {e.soft_returns.mean():.3f}, "
            f"plain return {e.returns.mean():.3f}{cut}"
        )
    if not episodes:
        print("no episode finished: nothing to compare")
    else:
        estimates = np.concatenate([e.estimates for e in episodes])
        soft = np.concatenate([e.soft_returns for e in episodes])
        print(
            f"all {len(estimates)} states: estimate {estimates.mean():.3f}, soft return {soft.mean():.3f}, "
            f"bias {estimates.mean() - soft.mean():+.3f}, correlation {np.corrcoef(estimates, soft)[0, 1]:.2f}"
        )
    if len(recorder.sampled_states) >= 2:
        print(recorder.actor_sight().describe(len(recorder.sampled_states)))
    return episodes


if __name__ == "__main__":
    run_script(
        PolicyEvalConfig, {"recording_video_dir": ""}, main, exclude=frozenset({"eval_sample_actions"})
    )
