r"""Exploration bonuses and the policy-family meta-controller of NGU and Agent57, as pure functions.

Papers: Badia et al. 2020, "Never Give Up: Learning Directed Exploration Strategies"
(https://arxiv.org/abs/2002.06038) and Badia et al. 2020, "Agent57: Outperforming the Atari Human
Benchmark" (https://arxiv.org/abs/2003.13350).

NGU's intrinsic reward of a step multiplies two factors:

    r_int = r_episodic * min(max(alpha, 1), L)

- r_episodic (`episodic_intrinsic_reward`): how unlike this episode's earlier states the controllable
  embedding of the current state is, from its k nearest neighbours in the episodic memory;
- alpha (`lifelong_novelty_factor`): how surprising the state is over the whole of training, from a
  normalised RND prediction error (`networks/curiosity.py` holds the RND networks).

The constants are the papers' (NGU table of hyper-parameters): k = 10 neighbours, kernel epsilon 1e-4,
cluster distance 0.008, pseudo-count constant c = 0.001, maximum similarity 8, L = 5; 32 policies with
beta = 0.3, gamma from 0.99 to 0.997; Agent57's bandit: window 160 episodes, beta 1, epsilon 0.5.
"""

import math
from collections.abc import Sequence

import numpy as np
import torch

from deep_rl_zoo import base


@torch.no_grad()
def episodic_intrinsic_reward(
    squared_distances: torch.Tensor,
    mean_squared_distance: torch.Tensor | float,
    kernel_epsilon: float = 1e-4,
    cluster_distance: float = 0.008,
    c: float = 1e-3,
    max_similarity: float = 8.0,
) -> torch.Tensor:
    r"""NGU's episodic novelty from the k nearest neighbours of an embedding in the episodic memory.

    With d_i^2 the squared Euclidean distances to the k neighbours and d_m^2 a running mean of such
    squared distances (so the reward does not depend on the embedding's scale):

        d_i = max(d_i^2 / d_m^2 - cluster_distance, 0)          (close neighbours count as the same state)
        K_i = kernel_epsilon / (d_i + kernel_epsilon)             (inverse kernel, 1 when identical)
        s   = sqrt(sum_i K_i) + c                                 (a soft visit count)
        r   = 1 / s, or 0 when s > max_similarity                 (too familiar: no bonus at all)

    Args:
      squared_distances: to the k nearest neighbours, [B, k] (k >= 1), >= 0.
      mean_squared_distance: the running mean d_m^2, scalar or [B]; 0 (no history yet) leaves the
        distances unnormalised.
      kernel_epsilon, cluster_distance, c, max_similarity: the paper's constants.

    Returns:
      r_episodic, [B].
    """
    base.assert_rank_and_dtype(squared_distances, 2, None, "squared_distances")
    if squared_distances.shape[1] < 1:
        raise ValueError("need at least one neighbour")
    mean = torch.as_tensor(mean_squared_distance, dtype=squared_distances.dtype)
    if mean.dim() == 1:
        mean = mean[:, None]
    normalised = squared_distances / torch.where(mean > 0, mean, torch.ones_like(mean))
    normalised = torch.clamp(normalised - cluster_distance, min=0.0)
    kernel = kernel_epsilon / (normalised + kernel_epsilon)
    similarity = torch.sqrt(kernel.sum(dim=1)) + c
    return torch.where(similarity > max_similarity, torch.zeros_like(similarity), 1.0 / similarity)


@torch.no_grad()
def lifelong_novelty_factor(
    prediction_error: torch.Tensor, error_mean: float, error_std: float, max_scale: float = 5.0
) -> torch.Tensor:
    r"""NGU's life-long multiplier of the episodic reward, from RND's prediction error.

        alpha = 1 + (err - mean(err)) / std(err);    factor = min(max(alpha, 1), L)

    mean and std are running statistics of the error over training. A state no more surprising than
    usual gets factor 1 (the episodic reward unchanged); the factor never exceeds L = max_scale.

    Args:
      prediction_error: RND's error per state, any shape.
      error_mean, error_std: running statistics of that error (std > 0).
      max_scale: L, >= 1.
    """
    if not error_std > 0:
        raise ValueError(f"error_std must be > 0, got {error_std}")
    if max_scale < 1:
        raise ValueError(f"max_scale must be >= 1, got {max_scale}")
    alpha = 1.0 + (prediction_error - error_mean) / error_std
    return torch.clamp(alpha, min=1.0, max=max_scale)


def policy_family(
    num_policies: int, beta: float = 0.3, gamma_max: float = 0.997, gamma_min: float = 0.99
) -> tuple[list[float], list[float]]:
    r"""The (beta_j, gamma_j) of NGU's family of N policies, j = 0 ... N-1.

    Policy 0 is purely exploitative (beta 0, the longest horizon gamma_max); the last explores most
    (beta, gamma_min). In between, beta follows a sigmoid and 1 - gamma is log-linear:

        beta_j  = 0 (j = 0);  beta (j = N-1);  beta * sigmoid(10 (2j - (N-2)) / (N-2)) otherwise
        gamma_j = 1 - exp(((N-1-j) log(1-gamma_max) + j log(1-gamma_min)) / (N-1))

    Returns:
      (betas, gammas), two lists of length N.
    """
    if num_policies < 1:
        raise ValueError(f"num_policies must be >= 1, got {num_policies}")
    if not 0.0 < gamma_min <= gamma_max < 1.0:
        raise ValueError(f"need 0 < gamma_min <= gamma_max < 1, got {gamma_min}, {gamma_max}")
    n = num_policies
    if n == 1:
        return [0.0], [gamma_max]
    betas = []
    for j in range(n):
        if j == 0:
            betas.append(0.0)
        elif j == n - 1:
            betas.append(beta)
        else:
            x = 10.0 * (2 * j - (n - 2)) / (n - 2)
            betas.append(beta / (1.0 + math.exp(-x)))
    gammas = [
        1.0 - math.exp(((n - 1 - j) * math.log(1.0 - gamma_max) + j * math.log(1.0 - gamma_min)) / (n - 1))
        for j in range(n)
    ]
    return betas, gammas


def agent57_policy_family(
    num_policies: int,
    beta: float = 0.3,
    gamma_exploit: float = 0.9999,
    gamma_max: float = 0.997,
    gamma_min: float = 0.99,
) -> tuple[list[float], list[float]]:
    r"""The (beta_j, gamma_j) of Agent57's family (Badia et al. 2020, "Agent57", https://arxiv.org/abs/2003.13350,
    appendix on the policy family): NGU's betas (`policy_family`), and discounts that give the
    exploitative end a much longer horizon, for long-horizon games:

        gamma_0 = gamma_exploit                                                    (0.9999)
        gamma_j = gamma_max + (gamma_exploit - gamma_max) sigmoid(10 (2j - 6) / 6),  j = 1 .. 6
        gamma_7 = gamma_max                                                        (0.997)
        gamma_j = 1 - exp(((N-1-j) log(1-gamma_max) + (j-8) log(1-gamma_min)) / (N-9)),  j = 8 .. N-1

    (the last line log-linear from gamma_max at j = 8 to gamma_min at j = N - 1, as NGU's family). The
    layout is written for the paper's N = 32 and needs N >= 10.
    """
    if num_policies < 10:
        raise ValueError(f"Agent57's discount family needs num_policies >= 10, got {num_policies}")
    if not 0.0 < gamma_min <= gamma_max <= gamma_exploit < 1.0:
        raise ValueError(
            f"need 0 < gamma_min <= gamma_max <= gamma_exploit < 1, got {gamma_min}, {gamma_max}, {gamma_exploit}"
        )
    n = num_policies
    betas, _ = policy_family(n, beta, gamma_max, gamma_min)
    gammas = [gamma_exploit]
    for j in range(1, 7):
        gammas.append(gamma_max + (gamma_exploit - gamma_max) / (1.0 + math.exp(-10.0 * (2 * j - 6) / 6)))
    gammas.append(gamma_max)
    for j in range(8, n):
        log_gap = ((n - 1 - j) * math.log(1.0 - gamma_max) + (j - 8) * math.log(1.0 - gamma_min)) / (n - 9)
        gammas.append(1.0 - math.exp(log_gap))
    return betas, gammas


def sliding_window_ucb_choice(
    arms: Sequence[int],
    returns: Sequence[float],
    num_arms: int,
    rng: np.random.Generator,
    window: int = 160,
    beta: float = 1.0,
    epsilon: float = 0.5,
) -> int:
    r"""Agent57's meta-controller: which policy of the family an actor plays next episode.

    A sliding-window UCB bandit with epsilon-greedy exploration over the last `window` episodes
    (Agent57, section 4 and appendix; Garivier & Moulines 2008, https://arxiv.org/abs/0805.3415):

    1. an arm not played within the window is played (the first N episodes try every arm in order);
    2. otherwise, with probability epsilon, a uniformly random arm;
    3. otherwise argmax_a  mean_a + beta * sqrt(1 / N_a), with mean_a and N_a the mean episode
       return and the count of arm a within the window (ties go to the lowest index).

    Args:
      arms: arm played in each past episode, oldest first.
      returns: that episode's return (extrinsic + beta_j intrinsic, as the actor defines it).
      num_arms: N.
      rng: the actor's generator (only used for the epsilon draw and the random arm).
      window, beta, epsilon: the paper's constants.
    """
    if len(arms) != len(returns):
        raise ValueError(f"arms ({len(arms)}) and returns ({len(returns)}) differ in length")
    if num_arms < 1 or window < 1:
        raise ValueError(f"num_arms and window must be >= 1, got {num_arms}, {window}")
    recent_arms = np.asarray(arms[-window:], dtype=np.int64)
    recent_returns = np.asarray(returns[-window:], dtype=np.float64)
    if recent_arms.size and (recent_arms.min() < 0 or recent_arms.max() >= num_arms):
        raise ValueError(f"arms must lie in [0, {num_arms})")
    counts = np.bincount(recent_arms, minlength=num_arms)
    unplayed = np.flatnonzero(counts == 0)
    if unplayed.size:
        return int(unplayed[0])
    if rng.random() < epsilon:
        return int(rng.integers(num_arms))
    means = np.bincount(recent_arms, weights=recent_returns, minlength=num_arms) / counts
    return int(np.argmax(means + beta * np.sqrt(1.0 / counts)))


def apex_actor_epsilon(actor_index: int, num_actors: int, epsilon: float = 0.4, alpha: float = 7.0) -> float:
    r"""The fixed exploration epsilon of actor i of N in Ape-X, R2D2 and NGU.

    Paper: Horgan et al. 2018, "Distributed Prioritized Experience Replay" (https://arxiv.org/abs/1803.00933),
    section 4.1, used unchanged by R2D2 (Kapturowski et al. 2019):

        eps_i = epsilon ** (1 + alpha * i / (N - 1))      (epsilon = 0.4, alpha = 7)

    so actor 0 explores most (0.4) and actor N-1 least (0.4^8 ~ 0.00066); one actor gets epsilon itself.
    """
    if not 0 <= actor_index < num_actors:
        raise ValueError(f"actor_index must be in [0, {num_actors}), got {actor_index}")
    if num_actors == 1:
        return float(epsilon)
    return float(epsilon ** (1.0 + alpha * actor_index / (num_actors - 1)))
