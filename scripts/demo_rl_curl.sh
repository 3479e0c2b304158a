#!/usr/bin/env bash
# rl_curl demo: a few minutes of CPU training of SAC + debiased CURL on cartpole-swingup with small
# networks (rl_curl.config's `demo` preset: 64x64 renders cropped to 56, 16 filters, hidden 256, batch 64;
# `python -m rl_curl.train --help` lists what it sets), then evaluation, a learning curve (curve.png) and an
# evaluation video (eval.mp4). Offline. Outputs in runs/demo/rl_curl/.
# This is a smoke demo: 4000 environment steps is 4% of the paper's 100k, so expect low returns.
set -euo pipefail
cd "$(dirname "$0")/.."
export MUJOCO_GL="${MUJOCO_GL:-egl}"
DEFAULT_OUT=runs/demo/rl_curl
OUT="${1:-$DEFAULT_OUT}"
# A fresh demo each time (rl_curl.train never overwrites an existing run without --resume), but only a
# folder that is the demo's own (the default, or one marked by an earlier demo) or empty is deleted.
. scripts/demo_folder.sh
OUT=$(not_an_option "$OUT")
fresh_demo_folder "$OUT" "$DEFAULT_OUT" .rl_curl_demo demo_rl_curl.sh
# The marker goes in once the run exists: rl_curl.train starts a new run only in a missing or empty folder.
# RL_DEMO_EXTRA: options appended to the training command (later options win; the tests use a tiny task).
# shellcheck disable=SC2086
.venv/bin/python -m rl_curl.train --preset demo \
  --task cartpole-swingup --aux debiased --tau-plus 0.05 --positives 1 --seed 0 --output-dir "$OUT" \
  ${RL_DEMO_EXTRA:-}
touch "$OUT/.rl_curl_demo"
.venv/bin/python -m rl_curl.evaluate --run-dir "$OUT" --episodes "${RL_DEMO_EVAL_EPISODES:-2}"
echo "rl_curl demo outputs: $OUT/{log.csv,eval.csv,curve.png,eval.mp4,checkpoint/,tb/}"
