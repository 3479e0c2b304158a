#!/usr/bin/env bash
# The suite's main job on embedded defaults, CPU only, offline. Sets everything up first.
#   bash scripts/demo.sh            # everything (sampling-bias experiment + each application's demo + images)
#   bash scripts/demo.sh losses     # only the sampling-bias experiment
#   bash scripts/demo.sh rl_curl nlp_qt fewshot   # only these applications' demos
#   bash scripts/demo.sh images     # only the image part: PU learning on real digits (puNCE Table 2, one seed)
# Outputs go to runs/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MUJOCO_GL="${MUJOCO_GL:-egl}"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(losses rl_curl nlp_qt fewshot images)
for part in "${parts[@]}"; do
  case "$part" in
    losses)
      echo "== shared_losses: sampling-bias experiment (DCL Figure 2, synthetic data) =="
      .venv/bin/python scripts/sampling_bias.py --out runs/demo/sampling_bias ;;
    images)
      echo "== fewshot on image arrays: PU learning on real digits (puNCE Table 2, one seed) =="
      bash scripts/demo_images.sh ;;
    rl_curl|nlp_qt|fewshot)
      if [ -f "scripts/demo_${part}.sh" ]; then
        echo "== ${part} demo =="
        bash "scripts/demo_${part}.sh"
      else
        echo "== ${part}: no demo yet =="
      fi ;;
    *) echo "unknown part '$part' (choose from: losses rl_curl nlp_qt fewshot images)" >&2; exit 2 ;;
  esac
done
