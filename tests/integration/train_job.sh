#!/bin/bash
# A small training-like batch job for the loopback Slurm tests: it "trains" STEPS steps of
# STEP_S seconds, prints PyTorch-style progress lines, and checkpoints its step after each
# one so that a requeued (preempted) run resumes where it stopped, as real training does.
# Usage: sbatch ... train_job.sh CKPT_DIR STEPS [STEP_S]
set -u
ckpt="$1/$SLURM_JOB_NAME.ckpt"
steps=$2
step_s=${3:-0.5}
i=$(cat "$ckpt" 2>/dev/null || echo 0)
echo "run start job=$SLURM_JOB_ID restart=${SLURM_RESTART_COUNT:-0} from_step=$i gpus=${CUDA_VISIBLE_DEVICES:-none} node=${SLURMD_NODENAME:-?}"
trap 'echo "caught USR1: checkpoint at step $i"' USR1
# progress lines in the PyTorch ImageNet example's format, which gpufair's profiler reads
while (( i < steps )); do
  t0=$EPOCHREALTIME
  sleep "$step_s" & wait $!
  i=$((i + 1))
  echo "$i" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
  dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  loss=$(awk -v i="$i" 'BEGIN { printf "%.4f", 7 / (1 + i) }')
  printf 'Epoch: [0][%3d/%d]\tTime %6s (%6s)\tLoss %s (%s)\n' $((i - 1)) "$steps" "$dt" "$dt" \
    "$loss" "$loss"
done
echo "run done job=$SLURM_JOB_ID"
