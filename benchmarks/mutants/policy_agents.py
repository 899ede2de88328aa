"""One-line bugs in the policy-gradient and distributed agents' learners (see `mutation_check.py`).

Each is a mistake an engineer could plausibly make while writing or refactoring the agent; the
quick suite should fail on every one. Names start with the agent (`reinforce/`, `baseline/`, `ac/`,
`a2c/`, `a2c-grad/`, `sac/`, `ppo/`, `impala/`) so `--only` can pick them.
"""

from mutation_check import Mutant

REINFORCE = "deep_rl_zoo/reinforce/agent.py"
BASELINE = "deep_rl_zoo/reinforce_baseline/agent.py"
AC = "deep_rl_zoo/actor_critic/agent.py"
A2C = "deep_rl_zoo/a2c/agent.py"
SAC = "deep_rl_zoo/sac/agent.py"
PPO = "deep_rl_zoo/ppo/agent.py"
UNROLLS = "deep_rl_zoo/unrolls.py"
IMPALA = "deep_rl_zoo/impala/agent.py"

MUTANTS = [
    # ---- REINFORCE
    Mutant(
        "reinforce/return-sign-flipped",
        REINFORCE,
        "weights = normalize(returns) if self._normalize_returns else returns",
        "weights = normalize(returns) if self._normalize_returns else -returns",
        "gradient ascent on the negative return: the agent learns to fail",
    ),
    Mutant(
        "reinforce/normalisation-flag-ignored",
        REINFORCE,
        "weights = normalize(returns) if self._normalize_returns else returns",
        "weights = returns",
        "--normalize_returns silently does nothing",
    ),
    Mutant(
        "reinforce/undiscounted-returns",
        REINFORCE,
        "discount_t = torch.full_like(r_t, self._discount)",
        "discount_t = torch.ones_like(r_t)",
        "the discount flag is ignored",
    ),
    Mutant(
        "reinforce/chunk-mean-instead-of-episode-mean",
        REINFORCE,
        "loss = (pg.loss.sum() + self._entropy_coef * entropy.loss.sum()) / num_steps",
        "loss = pg.loss.mean() + self._entropy_coef * entropy.loss.mean()",
        "long (Atari) episodes are weighted by chunk count, not length",
    ),
    Mutant(
        "reinforce/entropy-bonus-sign-flipped",
        REINFORCE,
        "loss = (pg.loss.sum() + self._entropy_coef * entropy.loss.sum()) / num_steps",
        "loss = (pg.loss.sum() - self._entropy_coef * entropy.loss.sum()) / num_steps",
        "the entropy term collapses the policy instead of keeping it exploring",
    ),
    Mutant(
        "reinforce/gradient-clip-skipped",
        REINFORCE,
        "        if self._max_grad_norm > 0:\n            nn.utils.clip_grad_norm_(self._network.parameters(), self._max_grad_norm)",
        "        if self._max_grad_norm < 0:\n            nn.utils.clip_grad_norm_(self._network.parameters(), self._max_grad_norm)",
        "--max_grad_norm silently does nothing",
    ),
    # ---- REINFORCE with baseline
    Mutant(
        "baseline/advantage-sign-flipped",
        BASELINE,
        "advantages = returns - values",
        "advantages = values - returns",
        "the policy follows V - G: it learns away from better-than-expected actions",
    ),
    Mutant(
        "baseline/baseline-not-subtracted",
        BASELINE,
        "advantages = returns - values",
        "advantages = returns",
        "plain REINFORCE: the critic is trained but never used",
    ),
    Mutant(
        "baseline/critic-regresses-on-advantages",
        BASELINE,
        "value = policy_gradient.value_loss(self._value_network(x).value, returns[chunk])",
        "value = policy_gradient.value_loss(self._value_network(x).value, advantages[chunk])",
        "the critic chases G - V instead of G",
    ),
    Mutant(
        "baseline/normalisation-flag-inverted",
        BASELINE,
        "if self._normalize_advantages and num_steps > 1:",
        "if not self._normalize_advantages and num_steps > 1:",
        "--normalize_advantages does the opposite of what it says",
    ),
    Mutant(
        "baseline/entropy-bonus-sign-flipped",
        BASELINE,
        "loss = (pg.loss.sum() + value.loss.sum() + self._entropy_coef * entropy.loss.sum()) / num_steps",
        "loss = (pg.loss.sum() + value.loss.sum() - self._entropy_coef * entropy.loss.sum()) / num_steps",
        "the entropy term collapses the policy",
    ),
    # ---- Actor-critic
    Mutant(
        "ac/truncation-treated-as-termination",
        AC,
        "self._discounts.append(0.0 if timestep.terminated else self._discount)",
        "self._discounts.append(0.0 if timestep.last else self._discount)",
        "time limits look like deaths: values near the limit are learnt as 0",
    ),
    Mutant(
        "ac/termination-ignored",
        AC,
        "self._discounts.append(0.0 if timestep.terminated else self._discount)",
        "self._discounts.append(self._discount)",
        "bootstraps from the value of a terminal state",
    ),
    Mutant(
        "ac/gae-lambda-ignored",
        AC,
        "r_t, discount_t, self._gae_lambda, values.detach().unsqueeze(1)",
        "r_t, discount_t, 1.0, values.detach().unsqueeze(1)",
        "--gae_lambda silently does nothing",
    ),
    Mutant(
        "ac/critic-target-off-by-one",
        AC,
        "returns = advantages + values[:-1].detach()",
        "returns = advantages + values[1:].detach()",
        "the critic's targets add the next state's value instead of this one's",
    ),
    Mutant(
        "ac/policy-read-off-by-one",
        AC,
        "dist = output._replace(pi_logits=output.pi_logits[:-1]).distribution()",
        "dist = output._replace(pi_logits=output.pi_logits[1:]).distribution()",
        "log pi(a_t | s_{t+1}): each action is credited to the wrong state",
    ),
    Mutant(
        "ac/entropy-bonus-sign-flipped",
        AC,
        "+ self._entropy_coef * entropy.loss.mean()",
        "- self._entropy_coef * entropy.loss.mean()",
        "the entropy term collapses the policy",
    ),
    # ---- A2C and A2C-grad
    Mutant(
        "a2c/log-prob-off-by-one",
        A2C,
        "log_prob = distribution.log_prob(padded_action).reshape(num_steps + 1, num_unrolls)[:-1]",
        "log_prob = distribution.log_prob(padded_action).reshape(num_steps + 1, num_unrolls)[1:]",
        "log pi(a_t | s_{t+1}): each action is credited to the wrong state",
    ),
    Mutant(
        "a2c/advantages-and-targets-swapped",
        A2C,
        "advantages, targets = unrolls.advantages_and_returns(batch, values.detach(), discount, 1.0)",
        "targets, advantages = unrolls.advantages_and_returns(batch, values.detach(), discount, 1.0)",
        "the policy follows the return, the critic chases the advantage",
    ),
    Mutant(
        "a2c/reset-pair-not-masked-in-critic",
        A2C,
        "critic = policy_gradient.value_loss(values[:-1].flatten()[valid], targets.flatten()[valid])",
        "critic = policy_gradient.value_loss(values[:-1].flatten(), targets.flatten())",
        "the critic learns from the pair linking an episode's end to the next episode's start",
    ),
    Mutant(
        "a2c/value-coef-ignored",
        A2C,
        "loss = policy.loss.mean() + value_coef * critic.loss.mean()",
        "loss = policy.loss.mean() + critic.loss.mean()",
        "--value_coef silently does nothing",
    ),
    Mutant(
        "a2c/entropy-bonus-sign-flipped",
        A2C,
        "+ entropy_coef * entropy_term.loss.mean()",
        "- entropy_coef * entropy_term.loss.mean()",
        "the entropy term collapses the policy",
    ),
    Mutant(
        "a2c-grad/sum-of-gradients",
        A2C,
        "mean_gradient = torch.as_tensor(np.mean([p.gradient for p in payloads], axis=0), device=self._device)",
        "mean_gradient = torch.as_tensor(np.sum([p.gradient for p in payloads], axis=0), device=self._device)",
        "the step grows with the number of actors (the issue's mean -> sum)",
    ),
    Mutant(
        "a2c-grad/gradients-accumulate-in-the-actor",
        A2C,
        "self._network.zero_grad(set_to_none=False)",
        "pass  # gradients of earlier unrolls are not cleared",
        "each actor sends the sum of all its gradients so far",
    ),
    Mutant(
        "a2c-grad/first-actor-only",
        A2C,
        "mean_gradient = torch.as_tensor(np.mean([p.gradient for p in payloads], axis=0), device=self._device)",
        "mean_gradient = torch.as_tensor(payloads[0].gradient, device=self._device)",
        "only one actor's data is learnt from",
    ),
    # ---- SAC (discrete)
    Mutant(
        "sac/polyak-skipped-hard-copy",
        SAC,
        "p_target.lerp_(p, self._tau)",
        "p_target.copy_(p)",
        "targets copied every step: no target network at all",
    ),
    Mutant(
        "sac/polyak-weights-swapped",
        SAC,
        "p_target.lerp_(p, self._tau)",
        "p_target.lerp_(p, 1 - self._tau)",
        "tau read as the weight of the old target",
    ),
    Mutant(
        "sac/bootstrap-from-online-critic",
        SAC,
        "target_q1_t = networks.target_q1(s_t).q_values",
        "target_q1_t = networks.q1(s_t).q_values",
        "one of the twin targets is the online network",
    ),
    Mutant(
        "sac/soft-value-with-policy-at-s_tm1",
        SAC,
        "log_pi_t = torch.log_softmax(networks.policy(s_t).pi_logits, dim=-1)",
        "log_pi_t = torch.log_softmax(networks.policy(s_tm1).pi_logits, dim=-1)",
        "the soft value of s_t averages over the policy of the previous state",
    ),
    Mutant(
        "sac/log-softmax-over-the-batch",
        SAC,
        "log_pi_t = torch.log_softmax(networks.policy(s_t).pi_logits, dim=-1)",
        "log_pi_t = torch.log_softmax(networks.policy(s_t).pi_logits, dim=0)",
        "wrong axis: probabilities normalised over the batch, not the actions",
    ),
    Mutant(
        "sac/alpha-is-log-alpha",
        SAC,
        "alpha = networks.log_alpha.exp().item()",
        "alpha = networks.log_alpha.item()",
        "the temperature can go negative and reward determinism",
    ),
    Mutant(
        "sac/truncation-treated-as-termination",
        SAC,
        "discount = 0.0 if chunk.terminated[t] else self._discount",
        "discount = 0.0 if chunk.terminated[t] or chunk.truncated[t] else self._discount",
        "time limits look like deaths",
    ),
    Mutant(
        "sac/policy-against-target-critics",
        SAC,
        "policy = losses.soft_policy_loss(log_pi_tm1, q1_tm1.detach(), q2_tm1.detach(), alpha)",
        "policy = losses.soft_policy_loss(log_pi_tm1, target_q1_t, target_q2_t, alpha)",
        "the policy improves against the next state's target values",
    ),
    Mutant(
        "sac/temperature-loss-sign-flipped",
        SAC,
        "temperature = losses.temperature_loss(networks.log_alpha, policy.extra.entropy, self._target_entropy)",
        "temperature = losses.temperature_loss(-networks.log_alpha, policy.extra.entropy, self._target_entropy)",
        "alpha grows while the entropy is above its target",
    ),
    # ---- PPO
    Mutant(
        "ppo/normalised-advantage-sign-flipped",
        PPO,
        "advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)",
        "advantage = (advantage.mean() - advantage) / (advantage.std() + 1e-8)",
        "the issue's example: PPO learns away from better-than-average actions",
    ),
    Mutant(
        "ppo/current-log-prob-as-behaviour",
        PPO,
        "log_prob, old_log_prob, advantage, self._clip_epsilon",
        "log_prob, log_prob.detach(), advantage, self._clip_epsilon",
        "ratio always 1: nothing is ever clipped, every epoch takes a full step",
    ),
    Mutant(
        "ppo/advantages-not-normalised",
        PPO,
        "advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)",
        "advantage = advantage",
        "the step size follows the reward scale",
    ),
    Mutant(
        "ppo/one-epoch-only",
        PPO,
        "for _ in range(self._num_epochs):",
        "for _ in range(1):",
        "--num_epochs silently does nothing",
    ),
    Mutant(
        "ppo/last-minibatch-dropped",
        PPO,
        "for start in range(0, num_transitions, self._minibatch_size):",
        "for start in range(0, num_transitions - self._minibatch_size, self._minibatch_size):",
        "the last minibatch of every epoch is never learnt from",
    ),
    Mutant(
        "ppo/gae-lambda-ignored",
        PPO,
        "advantages, targets = unrolls.advantages_and_returns(batch, values, self._discount, self._gae_lambda)",
        "advantages, targets = unrolls.advantages_and_returns(batch, values, self._discount, 1.0)",
        "--gae_lambda silently does nothing",
    ),
    Mutant(
        "ppo/reset-pair-not-masked",
        PPO,
        "valid = batch.valid.flatten()",
        "valid = torch.ones_like(batch.valid.flatten())",
        "learns from the pair linking an episode's end to the next episode's start",
    ),
    Mutant(
        "ppo/observation-normaliser-counts-the-bootstrap-state",
        PPO,
        "self._observation_normalizer.update(batch.observation[:-1].flatten(0, 1))",
        "self._observation_normalizer.update(batch.observation.flatten(0, 1))",
        "every unroll's last state is counted twice in the statistics",
    ),
    Mutant(
        "ppo/reward-scaler-unused",
        PPO,
        "batch = unrolls.stack_unrolls(payloads, rewards, self._device)",
        "batch = unrolls.stack_unrolls(payloads, [u.reward for u in payloads], self._device)",
        "--normalize_rewards updates statistics but learns from raw rewards",
    ),
    Mutant(
        "ppo/entropy-bonus-sign-flipped",
        PPO,
        "+ self._entropy_coef * entropy_term.loss.mean()",
        "- self._entropy_coef * entropy_term.loss.mean()",
        "the entropy term collapses the policy",
    ),
    Mutant(
        "ppo/gae-truncation-not-bootstrapped",
        UNROLLS,
        "r_t = batch.reward + bootstrap_at_truncation",
        "r_t = batch.reward",
        "time limits look like deaths (A2C and PPO)",
    ),
    Mutant(
        "ppo/gae-termination-mask-dropped",
        UNROLLS,
        "discount_t = discount * (~ended).float()",
        "discount_t = discount * (~batch.truncated).float()",
        "bootstraps past a terminal state into the next episode (A2C and PPO)",
    ),
    Mutant(
        "ppo/continuous-actor-stores-clipped-action",
        UNROLLS,
        "        self._actions.append(action)\n        if self._continuous:",
        "        self._actions.append(np.clip(action, self._action_low, self._action_high) if self._continuous"
        " else action)\n        if self._continuous:",
        "pi_old is the log-probability of an action the Gaussian did not sample",
    ),
    # ---- IMPALA
    Mutant(
        "impala/termination-mask-dropped",
        IMPALA,
        "discount_t = self._discount * (~ended).float()",
        'discount_t = self._discount * (~batch["truncated"]).float()',
        "the issue's example: V-trace bootstraps past terminal states",
    ),
    Mutant(
        "impala/log-rho-upside-down",
        IMPALA,
        "log_rho = torch.where(valid, log_prob.detach() - behaviour_log_prob, torch.zeros_like(log_prob))",
        "log_rho = torch.where(valid, behaviour_log_prob - log_prob.detach(), torch.zeros_like(log_prob))",
        "importance weights mu / pi instead of pi / mu",
    ),
    Mutant(
        "impala/truncation-not-bootstrapped",
        IMPALA,
        'r_t = batch["reward"] + truncated_only * self._discount * values[1:]',
        'r_t = batch["reward"]',
        "time limits look like deaths",
    ),
    Mutant(
        "impala/policy-weighted-by-value-targets",
        IMPALA,
        "policy = policy_gradient.policy_gradient_loss(log_prob[valid], targets.pg_advantages[valid])",
        "policy = policy_gradient.policy_gradient_loss(log_prob[valid], targets.vs[valid])",
        "v_s instead of the V-trace advantage: no baseline",
    ),
    Mutant(
        "impala/critic-off-by-one",
        IMPALA,
        "critic = policy_gradient.value_loss(output.value[:-1][valid], targets.vs[valid])",
        "critic = policy_gradient.value_loss(output.value[1:][valid], targets.vs[valid])",
        "V(s_{t+1}) regresses on v_t",
    ),
    Mutant(
        "impala/log-softmax-over-time",
        IMPALA,
        "log_pi = torch.log_softmax(output.pi_logits[:-1], dim=-1)",
        "log_pi = torch.log_softmax(output.pi_logits[:-1], dim=0)",
        "wrong axis: probabilities normalised over time, not actions",
    ),
    Mutant(
        "impala/behaviour-logits-used-as-log-probs",
        IMPALA,
        'log_mu = torch.log_softmax(batch["behaviour_logits"], dim=-1)',
        'log_mu = batch["behaviour_logits"]',
        "unnormalised logits in the importance weights",
    ),
    Mutant(
        "impala/entropy-sign-flipped",
        IMPALA,
        "entropy = -(log_pi.exp() * log_pi).sum(-1)",
        "entropy = (log_pi.exp() * log_pi).sum(-1)",
        "the entropy bonus becomes a penalty",
    ),
]
