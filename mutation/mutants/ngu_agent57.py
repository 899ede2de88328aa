"""One-line bugs in NGU and Agent57, for `mutation/check.py --only=ngu,agent57
--tests unit_tests/test_ngu.py unit_tests/test_agent57.py`.

Each runs without an error and would still learn something (most of them: explore worse, or learn the
wrong policy's values), so only a test that knows what the agent must compute catches it.
"""

from check import Mutant

NGU = "deep_rl_zoo/ngu/agent.py"
NGU_TRAIN = "deep_rl_zoo/ngu/train.py"
AGENT57 = "deep_rl_zoo/agent57/agent.py"

MUTANTS = [
    Mutant(
        "ngu/beta-ignored",
        NGU,
        "return r_e + betas[policy_index] * r_i, gammas[policy_index]",
        "return r_e + r_i, gammas[policy_index]",
        "every policy learns the full intrinsic reward: the exploitative policy j = 0 chases novelty too",
    ),
    Mutant(
        "ngu/gamma-of-policy-0",
        NGU,
        "gammas[policy_index] * (~terminated)",
        "gammas[0] * (~terminated)",
        "every policy discounts with gamma_0: the family's horizons collapse into one",
    ),
    Mutant(
        "ngu/termination-ignored",
        NGU,
        "gammas[policy_index] * (~terminated).to(r_e.dtype)",
        "gammas[policy_index] * torch.ones_like(r_e)",
        "bootstraps through true terminal states",
    ),
    Mutant(
        "ngu/lifelong-factor-dropped",
        NGU,
        "intrinsic = episodic * float(factor[0])",
        "intrinsic = episodic",
        "RND's life-long novelty never scales the episodic reward",
    ),
    Mutant(
        "ngu/memory-kept-across-episodes",
        NGU,
        "self._memory.reset()\n",
        "\n",
        "the episodic memory is never emptied: states of earlier episodes make this one look familiar",
    ),
    Mutant(
        "ngu/farthest-neighbours",
        NGU,
        "torch.topk(distances, k, largest=False)",
        "torch.topk(distances, k, largest=True)",
        "the kernel reads the k farthest embeddings, not the nearest",
    ),
    Mutant(
        "ngu/previous-action-is-current",
        NGU,
        "                    self._policy_index,\n                    self._previous_action,",
        "                    self._policy_index,\n                    action,",
        "the learner feeds a_t where the actor fed a_{t-1}: replayed inputs differ from acting",
    ),
    Mutant(
        "ngu/rnd-statistics-frozen",
        NGU,
        "self._networks.rnd.update_statistics(x)",
        "pass",
        "RND's inputs are never normalised: its error (and the life-long factor) tracks raw scales",
    ),
    Mutant(
        "ngu/actor-rows-not-kept",
        NGU,
        "self._networks.actor_memory.write(message.block.actor_index, message.actor_state)",
        "pass",
        "running distance means and bandits are lost on resume or actor restart",
    ),
    Mutant(
        "ngu/resume-shapes-unchecked",
        NGU,
        'check_resumable(self._networks.state_dict(), state["networks"])',
        "pass",
        "resuming with another --num_actors ends in a raw state_dict shape error, not a one-line one",
    ),
    Mutant(
        "ngu/every-actor-plays-policy-0",
        NGU_TRAIN,
        "FixedPolicy(link.actor_index % config.num_policies)",
        "FixedPolicy(0)",
        "no actor explores with the intrinsic reward: NGU becomes R2D2",
    ),
    Mutant(
        "ngu/inverse-model-unmasked",
        NGU,
        "inverse_loss = (cross_entropy * mask).sum() / mask.sum().clamp(min=1.0)",
        "inverse_loss = cross_entropy.mean()",
        "the embedding learns to predict the 'action' between an episode's end and the next start",
    ),
    Mutant(
        "agent57/streams-mixed",
        AGENT57,
        "for stream, r_t in ((0, r_e), (1, r_i)):",
        "for stream, r_t in ((0, r_e + beta[1:] * r_i), (1, r_i)):",
        "the extrinsic network learns the mixed reward, as the original zoo did",
    ),
    Mutant(
        "agent57/bootstrap-from-extrinsic-greedy",
        AGENT57,
        "selected = combined.argmax(-1)",
        "selected = q_online[:, :, 0].detach().argmax(-1)",
        "targets evaluate the extrinsic greedy policy, not the combined policy j acts with",
    ),
    Mutant(
        "agent57/combined-in-rescaled-space",
        AGENT57,
        "value_learning.signed_parabolic(q_extrinsic, eps)\n        + beta * value_learning.signed_parabolic(q_intrinsic, eps),",
        "q_extrinsic + beta * q_intrinsic,",
        "h(h^-1(q_e) + beta h^-1(q_i)) becomes h(q_e + beta q_i): a different policy from the paper's",
    ),
    Mutant(
        "agent57/bandit-forgets-on-restart",
        NGU,
        'self._policy.load(row["bandit_arms"], row["bandit_returns"])',
        "pass",
        "a resumed or restarted actor's meta-controller starts from scratch",
    ),
    Mutant(
        "agent57/bandit-beta-epsilon-swapped",
        AGENT57,
        "self._arms, self._returns, self._num_arms, self._rng, self._window, self._beta, self._epsilon",
        "self._arms, self._returns, self._num_arms, self._rng, self._window, self._epsilon, self._beta",
        "the UCB bonus weight and the random-arm probability trade places (beta 1, epsilon 0.5 in the paper)",
    ),
]
