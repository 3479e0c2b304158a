#!/usr/bin/env bash
# nlp_qt demo, offline on CPU (about 3 minutes on an idle 2-core machine, up to ~10 on a busy one).
#  1. Pretrain a small quick-thought encoder (64-d words, 256-d GRUs, batches of 100 consecutive
#     sentences, 2 epochs) with the QT objective and with the debiased objective (tau+ = 0.01) on
#     an embedded corpus of REAL English text: the docstrings of 107 Python standard-library modules
#     (about 4.7k sentences, one document per module; nlp_qt/data/build_demo_corpus.py). That is
#     tiny next to BookCorpus (45.8M sentences): expect small, noisy effects.
#  2. Evaluate both, and an untrained encoder of the same shape, with the SentEval protocol (5-fold
#     outer / 3-fold inner for speed) on embedded SentEval-FORMAT stand-in tasks: real sentences from
#     the docstrings of OTHER standard-library modules, WITH LABELS MADE BY US from the module topic
#     (nlp_qt/data/senteval_demo/README.md) -- not the SentEval data.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT=${OUT:-runs/demo/nlp_qt}
rm -rf "$OUT"  # a fresh demo each time (nlp_qt.train refuses a folder that already holds a run)
DATA=nlp_qt/data/senteval_demo
common=(--corpus nlp_qt/data/corpus_docstrings --batch-size 100 --word-dim 64 --encoder-dim 256
        --vocab-size 20000 --lr 2e-3 --log-every 10 --checkpoint-every 50 --seed 0)
echo "NOTE: the evaluation tasks are stand-ins in SentEval's file format (real docstring sentences, labels generated from the module topic)."
.venv/bin/python -m nlp_qt.train "${common[@]}" --epochs 2 --objective qt --output-dir "$OUT/qt"
.venv/bin/python -m nlp_qt.train "${common[@]}" --epochs 2 --objective debiased --tau-plus 0.01 --output-dir "$OUT/debiased_0.01"
.venv/bin/python -m nlp_qt.train "${common[@]}" --max-steps 0 --objective qt --output-dir "$OUT/untrained"
for run in untrained qt debiased_0.01; do
  .venv/bin/python -m nlp_qt.senteval --model "$OUT/$run" --data "$DATA" --tasks MR CR MRPC \
    --kfold 5 --inner-kfold 3 --json --output "$OUT/$run/senteval.json" > /dev/null
done
.venv/bin/python - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print("\nnlp_qt demo: quick-thought, 64/256-d GRUs, 2 epochs over 4.7k real docstring sentences, seed 0")
print("evaluation: SentEval protocol (5-fold outer, 3-fold inner) on stand-in tasks (generated topic labels)")
print(f"{'encoder':<16}{'final loss':>11}{'MR*':>8}{'CR*':>8}{'MRPC* acc':>11}{'F1':>8}")
for run in ("untrained", "qt", "debiased_0.01"):
    r = json.loads((out / run / "senteval.json").read_text())["results"]
    s = json.loads((out / run / "summary.json").read_text())
    loss = "-" if s["step"] == 0 else f"{s['final_loss']:.3f}"
    print(f"{run:<16}{loss:>11}{r['MR']['acc']:>8.2f}{r['CR']['acc']:>8.2f}{r['MRPC']['acc']:>11.2f}{r['MRPC']['f1']:>8.2f}")
print("* stand-ins, chance 50 %: MR = numbers/time vs OS/files sentences, CR = text formats vs networking,")
print("  MRPC = (sentence, next sentence) vs (sentence, other-topic sentence) pairs.")
print("  (debiased loss values are not comparable with qt's: different objective.)")
PY
