#!/usr/bin/env bash
# The GPU checks of the distributed loop, as one script for a machine with CUDA GPUs.
#
#   bash benchmarks/gpu_checks.sh [OUT_DIR]      (223 s on 16 cores and an H200, with MEASURE_S=15)
#
# 1. Where things run: the learner's device with --device=auto, and each actor's device with and without
#    --actors_on_gpu (distributed.actor_devices, the function the run scripts use).
# 2. Atari data collection with 1, 2, 4 and 8 actor processes feeding a learner that only consumes
#    (benchmarks/distributed_scaling.py), actors on the CPU, then 8 actors with their networks on the GPU.
# 3. PPO on Pong for $STEPS (default 20,000) env steps with 8 actors: learner on CUDA, then on the CPU, from the
#    real command line; training env steps/s read from each run's CSV.
# 4. Only when RND_STEPS is set (it does not fit the 6 minutes): PPO-RND's long Montezuma's Revenge run, e.g.
#    RND_STEPS=4000000 bash benchmarks/gpu_checks.sh "$OUT" (an estimated hour on 16 cores; never measured).
#    Size RND_STEPS to the machine's loan (a device command may run 10 minutes at most).
# 5. The acting loop with --num_envs=16 and the forward on CUDA against the vector env alone.
# 6. Only when R2D2_STEPS is set: R2D2's long Pong run, e.g. R2D2_STEPS=2000000 (hours, never measured).
# 7. Only when NGU_STEPS is set: NGU on MontezumaRevenge and Agent57 on Pitfall, e.g. NGU_STEPS=2000000.
# 8. Only when PONG_STEPS is set: the headline PPO Pong run, learner and actors on CUDA, e.g. PONG_STEPS=2000000.
#
# A machine that cannot reach a package registry (this project's lent GPU machines) needs gymnasium and
# ale-py carried as wheels: on a machine with pip access, in the repository root,
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl gymnasium==1.4.0 ale-py==0.12.1 farama-notifications==0.0.6
# This script installs whatever lies in .whl/ into /tmp/site before it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-/tmp/gpu_checks}}"
STEPS="${STEPS:-20000}"  # PPO Pong env steps per run (check 3); LEARNER_DEVICES="cpu" for a dry run
MEASURE_S="${MEASURE_S:-20}"  # seconds of collection per actor count (check 2)
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-python3}"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "nvidia-smi: not available"
nproc

echo "== 1. placement"
"$PYTHON" - <<'EOF'
import torch
from deep_rl_zoo import distributed, process_setup
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), "gpus:", torch.cuda.device_count())
print("learner with --device=auto:", process_setup.resolve_device("auto"))
print("8 actors, --actors_on_gpu:  ", [str(d) for d in distributed.actor_devices(8, True)])
print("8 actors, --noactors_on_gpu:", [str(d) for d in distributed.actor_devices(8, False)])
EOF

echo "== 2. Atari collection, actors on the CPU then on the GPU"
"$PYTHON" benchmarks/distributed_scaling.py --num_actors=1,2,4,8 --seconds="$MEASURE_S" || true
"$PYTHON" benchmarks/distributed_scaling.py --num_actors=8 --seconds="$MEASURE_S" --actors_on_gpu || true

echo "== 3. PPO Pong, 8 actors, learner on CUDA vs CPU"
for device in ${LEARNER_DEVICES:-cuda cpu}; do
  csv="$OUT_DIR/ppo_pong_learner_$device.csv"
  rm -f "$csv"
  start=$(date +%s)
  "$PYTHON" -m deep_rl_zoo.ppo.run_atari --environment_name=Pong --num_actors=8 --device="$device" \
    --num_iterations=1 --num_train_steps="$STEPS" --num_eval_steps=1000 --stop_when_solved=false \
    --checkpoint_dir="$OUT_DIR/checkpoints_$device" --runs_dir="$OUT_DIR/runs" \
    --results_csv_path="$csv" --noshow_progress
  echo "learner on $device: $(( $(date +%s) - start )) s wall;" \
    "train env steps/s $("$PYTHON" -c "import csv,sys; print(list(csv.DictReader(open(sys.argv[1])))[-1]['train_steps_per_second'])" "$csv")"
done

# 5 (runs before 4). The acting loop with --num_envs on the GPU: 16 envs on ale-py's C++ vector
#    env (16 threads), DQN's network on CUDA; target: vector loop >= 80% of the vector env alone.
echo "== 5. Atari acting loop, 16 vector envs, forward on CUDA"
"$PYTHON" benchmarks/atari_acting_speed.py --num_envs=16 --env_threads=16 --device=cuda --num_steps=2000 \
  --blocks=3 || true

# 4. PPO-RND on Montezuma's Revenge: the long run, with run_atari's defaults (Burda et al.'s
#    setting: 4 minibatches per epoch) and as many actors as the machine has cores, networks on the GPU.
#    RND_STEPS (e.g. 4,000,000 env steps = 16M frames, an estimated hour on 16 cores) sets the budget;
#    unset or 0 skips it, so that checks 1-3 fit one short device loan. Screenshots of every 50th game per
#    actor show the rooms reached; the CSV has the extrinsic return per iteration and the learner's
#    intrinsic-reward statistics.
RND_STEPS="${RND_STEPS:-0}"
if [ "$RND_STEPS" -gt 0 ]; then
  echo "== 4. PPO-RND MontezumaRevenge, $RND_STEPS env steps"
  csv="$OUT_DIR/ppo_rnd_montezuma.csv"
  rm -f "$csv"
  ( cd "$OUT_DIR" && "$PYTHON" -m deep_rl_zoo.ppo_rnd.run_atari --environment_name=MontezumaRevenge \
      --num_actors="$(nproc)" --minibatch_size=$(( $(nproc) * 128 / 4 )) --observation_warmup_steps=$(( $(nproc) * 128 * 50 )) --actors_on_gpu --num_iterations=8 --num_train_steps=$(( RND_STEPS / 8 )) \
      --num_eval_steps=4500 --debug_screenshots_interval=50 --checkpoint_dir="$OUT_DIR/checkpoints_rnd" \
      --runs_dir="$OUT_DIR/runs" --results_csv_path="$csv" --noshow_progress )
  "$PYTHON" - "$csv" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(row["train_env_steps"], "train return", row["train_mean_episode_return"], "eval", row["eval_mean_episode_return"],
          "intrinsic reward", row.get("learner_intrinsic_reward_mean"), "raw", row.get("learner_intrinsic_reward_raw_mean"))
PY
  echo "screenshots: $OUT_DIR/runs/PPO-RND_MontezumaRevenge*/screenshots (the last screen of every 50th game of each actor)"
fi

# 6. R2D2 on Pong: the long run, run_atari's defaults (Kapturowski et al.'s sequences of 80 with
#    burn-in 40, Nature CNN + LSTM 512, 5-step transformed double-Q targets, a 1M-step replay = 7.2 GB of RAM,
#    a gradient step every 200 env steps) with one actor per core, networks on the GPU.
#    Only when R2D2_STEPS is set (e.g. 2,000,000 env steps = 8M frames; unset or 0 skips it, as check 4).
#    The CSV has the greedy evaluation return per iteration (Pong: -21 at random, +21 at best); the CPU-budget
#    run of the same agent (2 actors, a 200k replay) is in benchmarks/README.md.
R2D2_STEPS="${R2D2_STEPS:-0}"
if [ "$R2D2_STEPS" -gt 0 ]; then
  echo "== 6. R2D2 Pong, $R2D2_STEPS env steps"
  csv="$OUT_DIR/r2d2_pong.csv"
  rm -f "$csv"
  ( cd "$OUT_DIR" && "$PYTHON" -m deep_rl_zoo.r2d2.run_atari --environment_name=Pong --seed=1 \
      --num_actors="$(nproc)" --actors_on_gpu --num_iterations=8 --num_train_steps=$(( R2D2_STEPS / 8 )) \
      --num_eval_steps=30000 --checkpoint_dir="$OUT_DIR/checkpoints_r2d2" --runs_dir="$OUT_DIR/runs" \
      --results_csv_path="$csv" --noshow_progress )
  "$PYTHON" - "$csv" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(row["train_env_steps"], "train return", row["train_mean_episode_return"], "eval", row["eval_mean_episode_return"],
          "learner steps", row.get("learner_learner_steps"), "loss", row.get("learner_loss"))
PY
fi

# 7. NGU and Agent57: the long runs, with run_atari's defaults (R2D2's Atari settings, 32 policies)
#    and as many actors as the machine has cores, learner and actors on the GPU. NGU plays MontezumaRevenge,
#    Agent57 Pitfall (the games their papers single out). Only when NGU_STEPS is set (e.g. 2,000,000 env
#    steps each = 8M frames; never measured): unset or 0 skips them, as check 4. Per-actor policy index, epsilon and mean intrinsic
#    reward are in TensorBoard (actor_0/ .. actor_7/); the CSV has the extrinsic return per iteration.
NGU_STEPS="${NGU_STEPS:-0}"
if [ "$NGU_STEPS" -gt 0 ]; then
  for pair in ngu:MontezumaRevenge agent57:Pitfall; do
    agent="${pair%%:*}"; game="${pair##*:}"
    echo "== 7. $agent $game, $NGU_STEPS env steps"
    csv="$OUT_DIR/${agent}_${game}.csv"
    rm -f "$csv"
    ( cd "$OUT_DIR" && "$PYTHON" -m "deep_rl_zoo.$agent.run_atari" --environment_name="$game" \
        --num_actors="$(nproc)" --actors_on_gpu --num_iterations=8 --num_train_steps=$(( NGU_STEPS / 8 )) \
        --num_eval_steps=27000 --checkpoint_dir="$OUT_DIR/checkpoints_$agent" --runs_dir="$OUT_DIR/runs" \
        --results_csv_path="$csv" --noshow_progress )
    "$PYTHON" -c "import csv,sys; [print(r['train_env_steps'], 'train', r['train_mean_episode_return'], 'eval', r['eval_mean_episode_return']) for r in csv.DictReader(open(sys.argv[1]))]" "$csv"
  done
fi

# 8. The headline Atari run: PPO on Pong with the learner on the GPU and the actors' networks
#    there too, the paper's hyper-parameters (8 envs x 128 steps, 4 epochs of 4 minibatches of 256), the
#    8 envs in 8 actor processes so acting spreads over the cores. Aim: a greedy mean >= 18 inside the run
#    (CPU run of the same settings: +2.7 at 749k env steps, README "Atari: PPO on Pong"). Only when PONG_STEPS
#    is set (e.g. PONG_STEPS=2000000, sized to the loan: a device command may run 10 minutes at most; never
#    measured); unset or 0 skips it. PONG_ACTORS changes the actor count (each actor one env, so the
#    batch per update grows with it; --minibatch_size follows to keep 4 minibatches). Prints the greedy
#    evaluation (mean, spread) and the training env steps/s of every iteration.
#    PONG_FLAGS adds run_atari flags, e.g. PONG_FLAGS=--bfloat16 (bfloat16 torso on the H200; never measured).
PONG_STEPS="${PONG_STEPS:-0}"
PONG_FLAGS="${PONG_FLAGS:-}"
if [ "$PONG_STEPS" -gt 0 ]; then
  actors="${PONG_ACTORS:-8}"
  echo "== 8. PPO Pong headline, $actors actors, $PONG_STEPS env steps, learner and actors on CUDA"
  csv="$OUT_DIR/ppo_pong_headline.csv"
  rm -f "$csv"
  ( cd "$OUT_DIR" && "$PYTHON" -m deep_rl_zoo.ppo.run_atari --environment_name=Pong --seed=1 \
      --num_actors="$actors" --minibatch_size=$(( actors * 128 / 4 )) --device=cuda --actors_on_gpu \
      --num_iterations=5 --num_train_steps=$(( PONG_STEPS / 5 )) --num_eval_steps=10000 \
      --checkpoint_dir="$OUT_DIR/checkpoints_ppo_pong" --runs_dir="$OUT_DIR/runs" \
      --results_csv_path="$csv" --noshow_progress $PONG_FLAGS )
  "$PYTHON" - "$csv" <<'PY'
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(row["train_env_steps"], "train env steps/s", row["train_steps_per_second"], "train return",
          row["train_mean_episode_return"], "greedy eval", row["eval_mean_episode_return"],
          "min", row.get("eval_min_episode_return"), "max", row.get("eval_max_episode_return"),
          "over", row["eval_num_episodes"], "games")
PY
fi
