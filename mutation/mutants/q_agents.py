"""One-line bugs in the eight replay-based Q agents (and the replay path they share), for
`mutation/check.py --only=dqn,double_dqn,prioritized_dqn,drqn,c51,rainbow,qr_dqn,iqn,q_replay`.

Each is a slip that runs without an error and still learns something, so only a test that knows what
the agent must compute catches it (most are caught by unit_tests/test_q_agents_wiring.py).
"""

from check import Mutant

DQN = "deep_rl_zoo/dqn/agent.py"
DOUBLE = "deep_rl_zoo/double_dqn/agent.py"
PER = "deep_rl_zoo/prioritized_dqn/agent.py"
DRQN = "deep_rl_zoo/drqn/agent.py"
C51 = "deep_rl_zoo/c51_dqn/agent.py"
RAINBOW = "deep_rl_zoo/rainbow/agent.py"
QR = "deep_rl_zoo/qr_dqn/agent.py"
IQN = "deep_rl_zoo/iqn/agent.py"
REPLAY = "deep_rl_zoo/replay.py"
Q_REPLAY = "deep_rl_zoo/replay_q_agents.py"

_TARGET_COPY = "self._target_network.load_state_dict(self._network.state_dict())"
_TARGET_PERIOD = "if self._learner_steps % self._target_network_update_period == 0:"
_EPSILON = "return self._exploration_epsilon(self._env_steps)"
_ENV_STEP = "if not timestep.first:\n            self._env_steps += 1"


def _shared(prefix: str, path: str, counts_own_env_steps: bool = False) -> list[Mutant]:
    """The slips a DQN loop can make in its target refreshes (and, for DRQN, which counts its own env
    steps, in its env-step clock). DRQN has its own loop; the seven others share
    `replay_q_agents.ReplayQAgent` and `act_and_store`, mutated once, under q_replay."""
    mutants = [
        Mutant(
            f"{prefix}/target-copied-backwards",
            path,
            _TARGET_COPY,
            "self._network.load_state_dict(self._target_network.state_dict())",
            "the online network is reset to the target every period: learning never accumulates",
        ),
        Mutant(
            f"{prefix}/target-copied-every-step",
            path,
            _TARGET_PERIOD,
            "if self._learner_steps % 1 == 0:",
            "the target network follows the online one: no fixed target",
        ),
        Mutant(
            f"{prefix}/target-period-off-by-one",
            path,
            _TARGET_PERIOD,
            "if (self._learner_steps + 1) % self._target_network_update_period == 0:",
            "the target is copied one gradient step early, every period",
        ),
    ]
    if counts_own_env_steps:
        mutants.append(
            Mutant(
                f"{prefix}/first-timestep-counted-as-env-step",
                path,
                _ENV_STEP,
                "if True:\n            self._env_steps += 1",
                "env steps (and with them epsilon, beta and the learning cadence) run ahead at every episode",
            )
        )
    return mutants


def _batch_sum(prefix: str, path: str, old: str = "loss = output.loss.mean()") -> list[Mutant]:
    return [
        Mutant(
            f"{prefix}/batch-loss-summed",
            path,
            old,
            old.replace(".mean()", ".sum()"),
            "the batch's losses are summed: the step size grows with the batch size",
        )
    ]


def _epsilon(prefix: str, path: str) -> list[Mutant]:
    return [
        Mutant(
            f"{prefix}/epsilon-on-learner-steps",
            path,
            _EPSILON,
            "return self._exploration_epsilon(self._learner_steps)",
            "epsilon decays with gradient steps, not env steps: exploration lasts learn_interval times longer",
        )
    ]


MUTANTS = [
    # ---------------------------------------------------------------- DQN
    Mutant(
        "dqn/online-network-bootstraps",
        DQN,
        "q_t = self._target_network(batch.s_t).q_values",
        "q_t = self._network(batch.s_t).q_values",
        "the target is the online network's max: no target network at all",
    ),
    Mutant(
        "dqn/reward-and-discount-swapped",
        DQN,
        "q_tm1, batch.a_tm1, batch.r_t, batch.discount_t, q_t, huber_delta",
        "q_tm1, batch.a_tm1, batch.discount_t, batch.r_t, q_t, huber_delta",
        "arguments in the wrong order: r_t is used as the discount",
    ),
    Mutant(
        "dqn/predicts-at-s_t",
        DQN,
        "q_tm1 = self._network(batch.s_tm1).q_values",
        "q_tm1 = self._network(batch.s_t).q_values",
        "regresses Q(s_t, a_tm1) on its own target",
    ),
    Mutant(
        "dqn/huber-flag-ignored",
        DQN,
        "q_t, huber_delta=self._huber_delta",
        "q_t",
        "--huber_delta is ignored: always the Huber loss of delta 1",
    ),
    Mutant(
        "dqn/wasted-online-forward",
        DQN,
        "q_t = self._target_network(batch.s_t).q_values",
        "q_t = self._target_network(batch.s_t).q_values + 0 * self._network(batch.s_t).q_values",
        "a leftover Double-DQN forward that changes nothing but costs a third more arithmetic per step",
    ),
    *_batch_sum("dqn", DQN, "self._apply_gradient(output.loss.mean())"),
    # ---------------------------------------------------------------- Double DQN
    Mutant(
        "double_dqn/roles-swapped-in-call",
        DOUBLE,
        "            q_t_value,\n            q_t_selector,",
        "            q_t_selector,\n            q_t_value,",
        "the target network selects and the online network evaluates (a swap a test must catch)",
    ),
    Mutant(
        "double_dqn/target-network-selects",
        DOUBLE,
        "q_t_selector = self._network(batch.s_t).q_values",
        "q_t_selector = self._target_network(batch.s_t).q_values",
        "plain DQN's max: the over-estimation Double DQN exists to remove",
    ),
    Mutant(
        "double_dqn/online-network-evaluates",
        DOUBLE,
        "q_t_value = self._target_network(batch.s_t).q_values",
        "q_t_value = self._network(batch.s_t).q_values",
        "the online network selects and evaluates: no target network",
    ),
    Mutant(
        "double_dqn/predicts-with-target-network",
        DOUBLE,
        "q_tm1 = self._network(batch.s_tm1).q_values",
        "q_tm1 = self._target_network(batch.s_tm1).q_values",
        "the prediction comes from the frozen network: no gradient reaches the online one",
    ),
    *_batch_sum("double_dqn", DOUBLE),
    # ---------------------------------------------------------------- Prioritized DQN
    Mutant(
        "prioritized_dqn/weights-ignored",
        PER,
        "loss = (torch.as_tensor(sample.weights, device=self._device) * output.loss).mean()",
        "loss = output.loss.mean()",
        "prioritized sampling's bias is never corrected",
    ),
    Mutant(
        "prioritized_dqn/priority-without-epsilon",
        PER,
        "priorities = output.extra.td_error.abs().cpu().numpy() + self._priority_epsilon",
        "priorities = output.extra.td_error.abs().cpu().numpy()",
        "a transition with td 0 is never replayed again",
    ),
    Mutant(
        "prioritized_dqn/priority-is-the-loss",
        PER,
        "priorities = output.extra.td_error.abs().cpu().numpy() + self._priority_epsilon",
        "priorities = output.loss.detach().cpu().numpy() + self._priority_epsilon",
        "priorities from the (Huber/squared) loss instead of |td|",
    ),
    Mutant(
        "prioritized_dqn/priorities-not-updated",
        PER,
        "self._replay.update_priorities(sample.indices, priorities)",
        "pass",
        "every transition keeps its first priority: uniform replay in disguise",
    ),
    Mutant(
        "prioritized_dqn/beta-on-learner-steps",
        PER,
        "sample(self._batch_size, self._importance_sampling_exponent(self._env_steps))",
        "sample(self._batch_size, self._importance_sampling_exponent(self._learner_steps))",
        "beta anneals on gradient steps: it reaches 1 learn_interval times too late",
    ),
    Mutant(
        "prioritized_dqn/target-network-selects",
        PER,
        "q_t_selector = self._network(batch.s_t).q_values",
        "q_t_selector = self._target_network(batch.s_t).q_values",
        "DQN's max instead of the paper's Double DQN target",
    ),
    *_batch_sum("prioritized_dqn", PER, "* output.loss).mean()"),
    # ---------------------------------------------------------------- DRQN
    Mutant(
        "drqn/burn-in-state-discarded",
        DRQN,
        "state = split(self._network, observation[:b], zeros, first[:b]).hidden_state",
        "split(self._network, observation[:b], zeros, first[:b]).hidden_state",
        "the burn-in is computed and thrown away: the loss sees the zero state",
    ),
    Mutant(
        "drqn/burn-in-steps-in-the-loss",
        DRQN,
        "b = self._burn_in",
        "b = 0",
        "the burn-in steps are learned from, with the zero state R2D2 warns about",
    ),
    Mutant(
        "drqn/termination-of-the-wrong-step",
        DRQN,
        "(1.0 - to(batch.terminated[b + 1 :], torch.float32))",
        "(1.0 - to(batch.terminated[b:-1], torch.float32))",
        "the discount of o_j -> o_{j+1} is cut by o_j's termination: off by one",
    ),
    Mutant(
        "drqn/episode-mask-dropped",
        DRQN,
        "loss = (output.loss * mask).sum() / mask.sum().clamp(min=1)",
        "loss = output.loss.mean()",
        "transitions from an episode's last step into the next episode's first are learned",
    ),
    Mutant(
        "drqn/truncation-stored-as-termination",
        DRQN,
        "terminated=timestep.terminated,",
        "terminated=timestep.last,",
        "a time limit is learned as a terminal state",
    ),
    Mutant(
        "drqn/online-network-evaluates",
        DRQN,
        "q_t = flat(at_bootstrap(q_target))",
        "q_t = flat(at_bootstrap(q_online.detach()))",
        "the online network evaluates its own choice: no target network",
    ),
    Mutant(
        "drqn/target-unrolled-without-burn-in",
        DRQN,
        "q_target = split(self._target_network, observation, zeros, first).q_values[b:]",
        "q_target = split(self._target_network, observation[b:], zeros, first[b:]).q_values",
        "the target network starts from the zero state after the burn-in",
    ),
    Mutant(
        "drqn/actions-one-step-late",
        DRQN,
        "a_tm1 = flat(to(batch.action[b:-1], torch.int64))",
        "a_tm1 = flat(to(batch.action[b + 1 :], torch.int64))",
        "each transition is credited to the next step's action",
    ),
    *_shared("drqn", DRQN, counts_own_env_steps=True),
    Mutant(
        "drqn/batch-loss-summed",
        DRQN,
        "loss = (output.loss * mask).sum() / mask.sum().clamp(min=1)",
        "loss = (output.loss * mask).sum()",
        "the batch's losses are summed: the step size grows with the batch size",
    ),
    Mutant(
        "drqn/clip-skipped",
        DRQN,
        "loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1",
        "loss, self._optimizer, self._network.parameters(), 0.0, self._learner_steps + 1",
        "--max_grad_norm is ignored: gradients are never clipped",
    ),
    *_epsilon("drqn", DRQN),
    # ---------------------------------------------------------------- C51
    Mutant(
        "c51/online-distribution-projected",
        C51,
        "logits_q_t = self._target_network(batch.s_t).q_logits",
        "logits_q_t = self._network(batch.s_t).q_logits",
        "the projected target is the online network's: no target network",
    ),
    Mutant(
        "c51/predicts-at-s_t",
        C51,
        "logits_q_tm1 = self._network(batch.s_tm1).q_logits",
        "logits_q_tm1 = self._network(batch.s_t).q_logits",
        "the predicted distribution is that of s_t",
    ),
    Mutant(
        "c51/reward-and-discount-swapped",
        C51,
        "            batch.r_t,\n            batch.discount_t,\n            self._target_network.atoms,",
        "            batch.discount_t,\n            batch.r_t,\n            self._target_network.atoms,",
        "arguments in the wrong order: r_t is used as the discount",
    ),
    *_batch_sum("c51", C51),
    # ---------------------------------------------------------------- Rainbow
    Mutant(
        "rainbow/target-network-selects",
        RAINBOW,
        "q_t_selector = self._network(batch.s_t).q_values",
        "q_t_selector = self._target_network(batch.s_t).q_values",
        "no double selection: C51's target inside Rainbow",
    ),
    Mutant(
        "rainbow/online-distribution-projected",
        RAINBOW,
        "logits_q_t = self._target_network(batch.s_t).q_logits",
        "logits_q_t = self._network(batch.s_t).q_logits",
        "the projected target is the online network's",
    ),
    Mutant(
        "rainbow/weights-ignored",
        RAINBOW,
        "loss = (torch.as_tensor(sample.weights, device=self._device) * output.loss).mean()",
        "loss = output.loss.mean()",
        "prioritized sampling's bias is never corrected",
    ),
    Mutant(
        "rainbow/priority-is-cross-entropy",
        RAINBOW,
        "priorities = output.extra.kl.clamp(min=0.0).cpu().numpy() + self._priority_epsilon",
        "priorities = output.loss.detach().cpu().numpy() + self._priority_epsilon",
        "priorities from the cross-entropy (KL + the target's entropy), not the paper's KL",
    ),
    Mutant(
        "rainbow/priorities-not-updated",
        RAINBOW,
        "self._replay.update_priorities(sample.indices, priorities)",
        "pass",
        "every transition keeps its first priority",
    ),
    Mutant(
        "rainbow/beta-on-learner-steps",
        RAINBOW,
        "sample(self._batch_size, self._importance_sampling_exponent(self._env_steps))",
        "sample(self._batch_size, self._importance_sampling_exponent(self._learner_steps))",
        "beta anneals on gradient steps",
    ),
    *_batch_sum("rainbow", RAINBOW, "* output.loss).mean()"),
    # ---------------------------------------------------------------- QR-DQN
    Mutant(
        "qr_dqn/online-network-quantiles",
        QR,
        "dist_q_t = self._target_network(batch.s_t).q_dist",
        "dist_q_t = self._network(batch.s_t).q_dist",
        "the target quantiles are the online network's",
    ),
    Mutant(
        "qr_dqn/fractions-reversed",
        QR,
        "self._taus.expand(dist_q_tm1.shape[0], -1)",
        "self._taus.flip(0).expand(dist_q_tm1.shape[0], -1)",
        "quantile i is trained towards fraction 1 - tau_i: the quantiles come out in reverse order",
    ),
    Mutant(
        "qr_dqn/fractions-evenly-spaced-from-0",
        QR,
        "self._taus = value_learning.quantile_midpoints(num_quantiles, self._device)  # [N]",
        "self._taus = torch.linspace(0.0, 1.0, num_quantiles, device=self._device)  # [N]",
        "fractions 0 .. 1 instead of the midpoints (2i + 1) / 2N",
    ),
    Mutant(
        "qr_dqn/reward-and-discount-swapped",
        QR,
        "            batch.r_t,\n            batch.discount_t,\n            dist_q_t,",
        "            batch.discount_t,\n            batch.r_t,\n            dist_q_t,",
        "arguments in the wrong order: r_t is used as the discount",
    ),
    *_batch_sum("qr_dqn", QR),
    # ---------------------------------------------------------------- IQN
    Mutant(
        "iqn/online-network-quantiles",
        IQN,
        "dist_q_t = self._target_network(s_t, taus_t).q_dist",
        "dist_q_t = self._network(s_t, taus_t).q_dist",
        "the target quantiles are the online network's",
    ),
    Mutant(
        "iqn/online-network-selects",
        IQN,
        "dist_q_t_selector = self._target_network(s_t, taus_select).q_dist",
        "dist_q_t_selector = self._network(s_t, taus_select).q_dist",
        "a* chosen by the online network (not what this agent documents)",
    ),
    Mutant(
        "iqn/selector-at-target-fractions",
        IQN,
        "dist_q_t_selector = self._target_network(s_t, taus_select).q_dist",
        "dist_q_t_selector = self._target_network(s_t, taus_t).q_dist",
        "a* chosen from N' fractions instead of K",
    ),
    Mutant(
        "iqn/target-samples-at-selector-fractions",
        IQN,
        "dist_q_t = self._target_network(s_t, taus_t).q_dist",
        "dist_q_t = self._target_network(s_t, taus_select).q_dist",
        "the target samples reuse the K selection fractions instead of N' fresh ones",
    ),
    Mutant(
        "iqn/online-count-for-target",
        IQN,
        "taus_t = sample_taus(size, self._num_target_taus, self._tau_generator, self._device)",
        "taus_t = sample_taus(size, self._num_online_taus, self._tau_generator, self._device)",
        "N' is ignored: N target samples",
    ),
    *_batch_sum("iqn", IQN),
    # ---------------------------------------------------------------- what they share
    # (all but DRQN: replay_q_agents.ReplayQAgent's gradient step, target copies and epsilon clock)
    *_shared("q_replay", Q_REPLAY),
    Mutant(
        "q_replay/clip-flag-ignored",
        Q_REPLAY,
        "loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1",
        "loss, self._optimizer, self._network.parameters(), 0.0, self._learner_steps + 1",
        "--max_grad_norm is ignored: gradients are never clipped",
    ),
    *_epsilon("q_replay", Q_REPLAY),
    Mutant(
        "q_replay/evaluation-plays-a-copy",
        Q_REPLAY,
        "    eval_agent = EpsilonGreedyActor(\n        network,",
        "    eval_agent = EpsilonGreedyActor(\n        copy.deepcopy(network),",
        "evaluation plays a frozen copy of the initial network, not the one the learner trains or resumes",
    ),
    Mutant(
        "q_replay/eval-agent-plays-untrained-weights",
        Q_REPLAY,
        "network = load_network(build_network, train_config, checkpoint, env, device)",
        "network = load_network(build_network, train_config, None, env, device)",
        "eval_agent rebuilds the checkpoint's network shape but plays fresh weights",
    ),
    Mutant(
        "q_replay/evaluation-epsilon-ignored",
        Q_REPLAY,
        "        config.eval_exploration_epsilon,\n",
        "        config.exploration_epsilon_end_value,\n",
        "--eval_exploration_epsilon is ignored: evaluation explores with the training epsilon",
    ),
    Mutant(
        "q_replay/truncation-as-termination",
        REPLAY,
        "step_discount = 0.0 if timestep.terminated else self._discount",
        "step_discount = 0.0 if timestep.last else self._discount",
        "a time limit stops the bootstrap",
    ),
    Mutant(
        "q_replay/termination-ignored",
        REPLAY,
        "step_discount = 0.0 if timestep.terminated else self._discount",
        "step_discount = self._discount",
        "terminal states are bootstrapped from",
    ),
    Mutant(
        "q_replay/n-step-reward-undiscounted",
        REPLAY,
        "window.r_t += window.discount_t * reward",
        "window.r_t += reward",
        "n-step rewards summed without discount",
    ),
    Mutant(
        "q_replay/writer-drops-discount",
        REPLAY,
        "discount_t=torch.as_tensor(batch.discount_t, device=device, dtype=torch.float32),",
        "discount_t=torch.full_like(torch.as_tensor(batch.r_t, dtype=torch.float32), 0.99),",
        "the sampled batch's discounts are replaced by a constant gamma",
    ),
    Mutant(
        "q_replay/first-timestep-counted-as-env-step",
        Q_REPLAY,
        "return sum(not timestep.first for timestep in timesteps)",
        "return len(timesteps)",
        "env steps (and with them epsilon, beta and the learning cadence) run ahead at every episode",
    ),
    Mutant(
        "q_replay/one-gradient-step-per-round",
        Q_REPLAY,
        "return env_steps // learn_interval - env_steps_before // learn_interval",
        "return int(env_steps // learn_interval > env_steps_before // learn_interval)",
        "with --num_envs=8 and learn_interval 4, one gradient step per 8 env steps instead of two",
    ),
    Mutant(
        "q_replay/learns-before-warm-up",
        Q_REPLAY,
        "if replay_size < min_replay_size:",
        "if replay_size < 1:",
        "gradient steps start on a nearly empty replay, ignoring min_replay_size",
    ),
]
