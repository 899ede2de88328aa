"""Trains PPO-RND on an Atari game:
`python -m deep_rl_zoo.ppo_rnd.run_atari --environment_name=MontezumaRevenge --num_actors=32 --actors_on_gpu`.

Defaults follow Burda et al. 2018 (arXiv:1810.12894), appendix A.4, except the number of parallel
environments (the paper's 128 or more; 8 here, spread over actor processes to suit the cores, 2 x 4 on
2 cores: raise --num_parallel_envs on a big machine) and the policy network (the Nature CNN torso, see
`networks.curiosity`): rollouts of 128 steps, 4 epochs of 4 minibatches, Adam 1e-4 (not annealed), clip
0.1, entropy 0.001, gamma_E 0.999, gamma_I 0.99, lambda 0.95, advantage coefficients 2 (extrinsic) and 1
(intrinsic), 25% of each batch for the predictor, extrinsic rewards clipped to [-1, 1], sticky actions
with probability 0.25, no life-loss terminal, episodes cut at 18,000 frames (4,500 env steps), and
observation statistics initialised over 50 rollouts of the initial (near-uniform) policy before the
first update.

On Pong these defaults are slow: -17.6 over 15 games at 2M env steps (seed 1, results/atari/Pong/
PPO-RND_Pong_s1), where PPO with its own defaults was past 0 by 1.5M. configs/ppo_rnd_pong.flags runs
PPO's settings with RND's bonus instead: +18.1 over 26 games at 2M, past 0 at 1.5M (results/atari/Pong/
PPO-RND_Pong_ppo_settings_s1), as PPO does; the bonus did not slow Pong, the Montezuma setting did.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ppo_rnd.train import PpoRndConfig, main

DEFAULTS = {
    "environment_name": "MontezumaRevenge",
    "num_iterations": 50,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 20_000,
    "max_episode_steps": 4_500,  # 18,000 frames
    "sticky_action_probability": 0.25,
    "terminal_on_life_loss": False,
    "clip_reward": True,
    "num_parallel_envs": 8,  # spread over actor processes to suit the cores (2 x 4 on 2 cores)
    "unroll_length": 128,
    "num_epochs": 4,
    "minibatch_size": 256,  # 4 minibatches of 8 x 128
    "learning_rate": 1e-4,
    "clip_epsilon": 0.1,
    "extrinsic_discount": 0.999,
    "normalize_extrinsic_rewards": False,  # the paper clips them instead
    "observation_warmup_steps": 50 * 128 * 8,
}

if __name__ == "__main__":
    run_script(
        PpoRndConfig,
        DEFAULTS,
        main,
        exclude=frozenset({"hidden_sizes", "rnd_feature_size", "normalize_observations"}),
    )
