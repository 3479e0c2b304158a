#!/usr/bin/env bash
# nlp_qt demo, offline on CPU (about 5 minutes on a 2-core machine): the short version of the CPU protocol
# of scripts/qt_table2.py (--preset demo; the full one is --preset cpu, 3 seeds, about 7-8 minutes per run).
#  1. Pretrain a small quick-thought encoder (128-d words, a 2000-word vocabulary, 512-d bidirectional GRUs,
#     batches of 100 consecutive sentences, lr 2e-3) with the QT objective and with the debiased objective
#     (tau+ = 0.01, M = 2 neighbours), two epochs over the first 10,000 sentences of the shipped books corpus
#     (Austen, Melville, the KJV New Testament: nlp_qt/data/books), the two side by side; every 20th batch is
#     held out and its loss printed after each epoch (--dev-every 20).
#  2. Baselines in the same run: an untrained encoder of the same shape and seed, a bag of words (mean of
#     word2vec vectors trained on the same 10,000 sentences), the pretrained MiniLM (an upper reference
#     trained on about a billion sentence pairs), and the majority class.
#  3. Evaluate all with the SentEval protocol (5-fold outer / 3-fold inner) on two human-labeled tasks
#     built from shipped data (DRUG: drug reviews, positive vs negative; REUTERS: acq vs crude sentences).
# Runs stay in runs/demo/nlp_qt/<objective>/seed0 (the untrained baseline in untrained/seed0), each loadable
# by `python -m nlp_qt.senteval --model`. One seed: the differences it prints are not evidence either way
# (docs/results/nlp_qt.md has the 3-seed comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# bash scripts/demo_nlp_qt.sh [FOLDER]: the demo's folder (default runs/demo/nlp_qt).
DEFAULT_OUT=runs/demo/nlp_qt
OUT="${1:-$DEFAULT_OUT}"
# A fresh demo each time, deleting only the demo's own folder.
. scripts/demo_folder.sh
OUT=$(not_an_option "$OUT")
fresh_demo_folder "$OUT" "$DEFAULT_OUT" .nlp_qt_demo demo_nlp_qt.sh
mkdir -p "$OUT" && touch "$OUT/.nlp_qt_demo"
.venv/bin/python scripts/qt_table2.py --preset demo --out "$OUT"
