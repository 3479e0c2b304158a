"""SetFit (Tunstall et al. 2022) as a baseline on the same encoder and few-shot sample: contrastive
fine-tuning of the sentence-transformers body on pairs of the N labeled examples, then a logistic
regression head; SetFit's own defaults (`setfit.TrainingArguments()`), seeded with --seed.

Optional: needs ``pip install -e ".[setfit]"`` (setfit 1.2). The encoder must be a
sentence-transformers folder or hub name (its own pooling and normalisation are used; --pooling is
not read). Unlabeled examples are not used (SetFit has no use for them).
"""

from __future__ import annotations

import tempfile
import time
import warnings

import numpy as np

from .scores import percent_agree


def run_setfit(cfg, run) -> tuple[float, float]:
    """(evaluation accuracy in %, training seconds) of SetFit trained on ``run.sample.labeled``."""
    try:
        from datasets import Dataset
        from setfit import SetFitModel, Trainer, TrainingArguments
    except ImportError as err:
        raise ValueError("--objective setfit needs the optional package setfit: pip install -e \".[setfit]\"") from err
    from .model import resolve_encoder

    lab = run.sample.labeled
    train_ds = Dataset.from_dict({"text": [run.train_x[i] for i in lab], "label": run.train_y[lab].tolist()})
    t0 = time.monotonic()
    model = SetFitModel.from_pretrained(resolve_encoder(cfg.encoder), device=str(run.acc.device))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():  # SetFit's checkpoints are not kept
        # SetFit's trainer asks its data loaders for pinned memory (sentence-transformers' default), which torch
        # answers on a machine without an accelerator with a UserWarning per loader; pinning is then skipped, so the
        # warning says nothing about the run. SetFit 1.2 has no argument that turns the pinning off.
        warnings.filterwarnings("ignore", message=r".*'pin_memory' argument is set as true but no accelerator",
                                category=UserWarning)
        args = TrainingArguments(output_dir=tmp, seed=cfg.seed, max_length=cfg.max_length, show_progress_bar=False,
                                 report_to="none")
        Trainer(model=model, args=args, train_dataset=train_ds).train()
    seconds = time.monotonic() - t0
    pred = np.asarray(model.predict(list(run.eval_x), batch_size=64, show_progress_bar=False))
    return percent_agree(pred.astype(int), run.eval_y), seconds
