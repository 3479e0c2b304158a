#!/usr/bin/env python
"""What a finished image run's encoder learned, beyond the accuracy its probe reached (diagnostics that read
every training label, which the PU / PNU learner never sees):

* `all-label probe`: a logistic regression fitted on the frozen features of the whole training pool with
  every label, scored on the run's evaluation split: how linearly separable the classes are in the features.
  When it is high but the run's own probe is low, the probe's training data is what fails, not the features.
* `class gap`: the distance between the two classes' mean (standardised) features over the root-mean-square
  distance of an image to its class mean: how far apart the classes lie.
* `labeled vs unlabeled positives` (PU runs): the 5-fold cross-validated ROC AUC of a logistic regression
  telling the labeled positives from the unlabeled positives. Both are uniform draws of the positive class,
  so an encoder that generalises gives about 0.5; well above 0.5 means the features single out the labeled
  images, which breaks the PU risks' assumption that labeled positives look like the unlabeled ones.

    python scripts/pu_feature_check.py runs/pu_images/pu/punce/n100/seed0 runs/pu_images/pu/infonce/n100/seed0
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

from shared_losses.training.cli import ArgumentParser, HelpFormatter, run_cli


def check(run: Path) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    from fewshot.config import ImageConfig, config_for
    from fewshot.image_run import image_data, read_classifier_blob
    from fewshot.image_export import rebuild
    from fewshot.images import features
    from fewshot.scores import percent_agree
    from shared_losses.training.runtime import read_json_file

    saved = read_json_file(run / "config.json", "run's configuration")
    cfg = config_for(saved, str(run / "config.json"))
    if not isinstance(cfg, ImageConfig):
        raise ValueError(f"{run} is a {cfg.PIPELINE} run; this check reads runs on image data")
    model_file = run / "model" / "image_classifier.pt"
    if not model_file.exists():
        raise FileNotFoundError(f"{model_file}: not found (an image run exports it unless --no-export)")
    blob = read_classifier_blob(model_file)  # without running code; a damaged file named
    model = rebuild(blob)  # any image encoder, with its settings (the patch grid's pooling)
    data = image_data(cfg)
    f_pool, f_eval = features(model, data.x).numpy(), features(model, data.eval_x).numpy()
    mean, std = f_pool.mean(0), f_pool.std(0) + 1e-6
    z, ze = (f_pool - mean) / std, (f_eval - mean) / std
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(max_iter=5000).fit(z, data.y)
    out = {"run": str(run), "setting": cfg.setting, "contrastive": cfg.contrastive, "n_labeled": len(data.labeled),
           "run_accuracy": read_json_file(run / "metrics.json", "run's metrics")["eval_accuracy"],
           "all_label_probe": percent_agree(clf.predict(ze), data.eval_y)}
    centre = np.where(data.y[:, None] == 1, z[data.y == 1].mean(0), z[data.y == 0].mean(0))
    spread = float(np.sqrt(((z - centre) ** 2).sum(1).mean()))
    out["class_gap"] = float(np.linalg.norm(z[data.y == 1].mean(0) - z[data.y == 0].mean(0)) / spread)
    out["labeled_vs_unlabeled_positives_auc"] = None
    unl_pos = data.unlabeled[data.y[data.unlabeled] == 1]
    if cfg.setting == "pu" and min(len(data.labeled), len(unl_pos)) >= 5:
        X = np.concatenate([z[data.labeled], z[unl_pos]])
        s = np.r_[np.ones(len(data.labeled)), np.zeros(len(unl_pos))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["labeled_vs_unlabeled_positives_auc"] = float(cross_val_score(
                LogisticRegression(max_iter=5000, class_weight="balanced"), X, s, cv=5, scoring="roc_auc").mean())
    return out


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("runs", nargs="+", help="finished image runs (folders holding config.json and model/)")
    p.add_argument("--json", action="store_true", help="one JSON line per run instead of the table")
    args = p.parse_args(argv)
    rows = [check(Path(r)) for r in args.runs]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print("| run | its accuracy | all-label probe | class gap | labeled vs unlabeled positives (AUC) |")
    print("|---|---|---|---|---|")
    for r in rows:
        auc = ("—" if r["labeled_vs_unlabeled_positives_auc"] is None
               else f"{r['labeled_vs_unlabeled_positives_auc']:.3f}")
        print(f"| {r['run']} | {r['run_accuracy']:.2f} | {r['all_label_probe']:.2f} | {r['class_gap']:.3f} | {auc} |")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
