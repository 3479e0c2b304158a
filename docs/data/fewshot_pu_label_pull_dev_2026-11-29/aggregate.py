"""Summarise the text PU label-pull development runs of this folder (RULE.txt): per-seed accuracies (the nnPU probe
on the trained encoder, and on the frozen encoder of the same run), means, and the paired difference lambda 0.1 -
lambda 1 with its 95 % t-interval. Run from the repository's root:

    python docs/data/fewshot_pu_label_pull_dev_2026-11-29/aggregate.py      # writes summary.md beside this file
"""

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from shared_losses.training.stats import paired_stats  # noqa: E402


def main() -> None:
    acc, frozen = {}, {}
    for m in sorted(HERE.glob("pull*/seed*/metrics.json")):
        data = json.loads(m.read_text())
        pull, seed = data["label_pull"], str(data["seed"])
        acc.setdefault(pull, {})[seed] = data["eval_accuracy"]
        frozen.setdefault(pull, {})[seed] = data["probes"]["pretrained_encoder"]["nnpu"]
    lines = ["# Text PU, label pull 0.1 against 1 (rotten_tomatoes, development split, n_P = 20, n_U = 500)", "",
             "| lambda | seeds | per seed (nnPU probe, trained encoder) | mean ± std | frozen encoder's nnPU probe |",
             "|---|---|---|---|---|"]
    for pull in sorted(acc, reverse=True):
        seeds = sorted(acc[pull])
        vals = [acc[pull][s] for s in seeds]
        lines.append(f"| {pull:g} | {' '.join(seeds)} | {', '.join(f'{v:.2f}' for v in vals)} | "
                     f"{statistics.mean(vals):.2f} ± {statistics.stdev(vals):.2f} | "
                     f"{statistics.mean(frozen[pull][s] for s in seeds):.2f} |")
    p = paired_stats(acc[0.1], acc[1.0])
    lo, hi = p["t_ci"]
    lines += ["", "| difference | per seed | mean ± std | 95 % t-interval | wins / losses |", "|---|---|---|---|---|",
              f"| 0.1 − 1 | {', '.join(f'{d:+.2f}' for d in p['diffs'])} | {p['mean']:+.2f} ± {p['std']:.2f} | "
              f"[{lo:+.2f}, {hi:+.2f}] | {p['wins']}/{p['losses']} |"]
    verdict = ("above 0 with an interval that excludes 0: the text PU default becomes 0.1"
               if p["mean"] > 0 and lo > 0 else "not above 0 with an interval excluding 0: the text PU default stays 1")
    lines += ["", f"By RULE.txt: {verdict}.", ""]
    (HERE / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
