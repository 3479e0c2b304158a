"""Runs on image arrays: puNCE's PU and PNU experiments on digits (puNCE Tables 1, 2 and 4).

A run has two stages:

1. **Encoder.** ``--contrastive punce | infonce | dcl | scl`` trains the MLP / CNN with that loss on two
   augmented views of each image of a batch (labeled and unlabeled images together); ``--contrastive cpc``
   trains CPC's patch encoder on one augmented view, predicting the patch grid's lower rows from the rows
   above (labels unused). ``--contrastive none``
   skips this: the encoder and a linear head are trained end to end on raw pixels instead (PU: one model
   per risk, PN / uPU / nnPU, on the same batches; PNU: cross-entropy on the labeled images).
2. **Classifier.** On the frozen encoder, PU: linear probes fitted with the PN, uPU and nnPU risks
   (:mod:`fewshot.pu`); PNU: a logistic regression on the labeled images' features. The nnPU probe (PU) or
   the logistic regression (PNU) gives ``eval_accuracy``.

The two priors (exact from the labels unless ``--prior`` / ``--estimate-prior``): puNCE's
``pi = p(y=+1 | unlabeled)`` over the unlabeled images (the training pool minus the labeled ones); the PU
risks' ``pi_p = p(y=+1)`` of the whole training pool, whose images all serve as the risks' unlabeled set
(Kiryo et al.'s case-control set-up: the labeled positives are a uniform draw from the positives, the pool
is a draw from the data). Each is computed from the other with the counts:
``pi_p = (n_P + n_U pi) / (n_P + n_U)``.

Data: the seed draws a stratified test split (20 %; none when ``--eval-file`` is given), then
``--dev-fraction`` of the rest as the development split (scored instead of the test split with
``--eval-split dev``); the training pool is the remainder either way, so a setting chosen on the development
split is trained on the same images when scored on the test split. PU images from files (``--positive-file``,
``--unlabeled-file``): every image of both is the pool, the positives labeled, nothing held out; the labeled
``--eval-file``, when given, is scored.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from shared_losses.data import DataError, load_images
from shared_losses.training.harness import RunHarness
from shared_losses.training.runtime import DivergenceWatch, bar_interval, write_json_atomic, written_whole

from .data import check_pu_overlap, warn_overlap
from .config import ImageConfig
from .images import Augment, ImageModel, as_images, binary_labels, features, stratified_split
from .objectives import ENCODER_LOSSES, encoder_loss
from .prior import ESTIMATE_HINTS, elkan_noto_prior, warn_given_prior
from .pu import RISKS, pu_risk, train_probe
from .scores import binary_scores, majority_percent, percent_agree
from .run import NO_EVAL_NOTE, Batches, FewShotRunApp, check_steps, make_accelerator, read_json

#: share of each class held out as the test split when no --eval-file is given
TEST_FRACTION = 0.2


@dataclass
class ImageData:
    """A run's images: the training pool (``x``, binary labels ``y``), the evaluation split and the labeled /
    unlabeled indices into the pool."""

    x: np.ndarray
    y: np.ndarray
    eval_x: np.ndarray
    eval_y: np.ndarray
    labeled: np.ndarray
    unlabeled: np.ndarray
    eval_name: str
    n_dev: int
    n_test: int
    raw_shape: tuple = ()  # one example as the --dataset arrays held it, and whether its pixels were integers 0-255
    raw_integer: bool = False


def image_fingerprint(data: ImageData) -> str:
    """SHA-256 of what an image run learns and is scored on: the labeled and unlabeled images of the pool with their
    labels, and the evaluation split (pixels as the run reads them). sample.json records it, so that a resume, or a
    grid counting a finished run, refuses data that changed since (the same indices would name other images)."""
    import hashlib

    h = hashlib.sha256()
    for part in (data.x[data.labeled], data.y[data.labeled], data.x[data.unlabeled], data.y[data.unlabeled],
                 data.eval_x, data.eval_y):
        arr = np.ascontiguousarray(part)
        h.update(f"{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def refuse_changed_images(folder, data: ImageData, what: str) -> None:
    """Refuse, in one line, images that differ from those the run in ``folder`` recorded in its sample.json (its
    draw and ``data_sha256``; a run from before the fingerprint is compared by its draw only)."""
    from types import SimpleNamespace

    from .data import check_same_data

    path = Path(folder) / "sample.json"
    if path.is_file():
        check_same_data(read_json(path), SimpleNamespace(labeled=np.asarray(data.labeled),
                                                         unlabeled=np.asarray(data.unlabeled)),
                        image_fingerprint(data), folder, what)


def pixel_digest(image: np.ndarray) -> bytes:
    """What two images are compared by when the evaluation split is checked against the training pool: a digest of
    their pixels (the same pixels, the same digest)."""
    import hashlib

    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).digest()


def labeled_eval_file(cfg: ImageConfig, shape: tuple):
    """The labeled --eval-file as (its ImageSet, labels 0 / 1): its examples of the training data's ``shape``, its
    labels 0 / 1 or class ids with --positive-classes."""
    ev = load_images(cfg.eval_file, "--eval-file")
    if ev.shape != shape:
        raise DataError(f"--eval-file {cfg.eval_file}: its examples have shape {ev.shape}, the training data's "
                        f"{shape}; they must match")
    positive = cfg.positive_classes if cfg.positive_classes is not None else (1,)
    if cfg.positive_classes is None and not set(np.unique(ev.y).tolist()) <= {0, 1}:
        raise DataError(f"--eval-file {cfg.eval_file}: labels must be 0 / 1 like the training data's")
    return ev, np.isin(ev.y, list(positive)).astype(np.int64)


def need_both_classes(labels: np.ndarray, part: str, source: str) -> None:
    if len(labels) == 0 or labels.all() or not labels.any():
        raise DataError(f"{source}: the {part} has {int(labels.sum())} positive and "
                        f"{int(len(labels) - labels.sum())} negative images; both classes are needed "
                        "(more images, or other --positive-classes)")


def image_files_data(cfg: ImageConfig) -> ImageData:
    """PU images as users have them (--positive-file, --unlabeled-file): every image used, the positives labeled
    (y = 1) and the unlabeled ones of unknown class (y = -1, never read as a class); the evaluation split is the
    labeled --eval-file, or empty. No development or test split is held out (there are no labels to hold one out
    by)."""
    from .pu import MIN_UNLABELED

    pos_path, unl_path = Path(cfg.positive_file), Path(cfg.unlabeled_file)
    if pos_path.is_file() and unl_path.is_file() and pos_path.samefile(unl_path):
        raise DataError(f"--positive-file and --unlabeled-file are the same file ({cfg.unlabeled_file}): the unlabeled "
                        "images must be other images than the labeled positives (a sample of the data, positives and "
                        "negatives, without labels)")
    pos = load_images(cfg.positive_file, "--positive-file", labels=False)
    unl = load_images(cfg.unlabeled_file, "--unlabeled-file", labels=False)
    if unl.shape != pos.shape:
        raise DataError(f"--unlabeled-file {cfg.unlabeled_file}: its images have shape {unl.shape}, those of "
                        f"--positive-file {cfg.positive_file} {pos.shape}; they must match")
    if len(unl.x) < MIN_UNLABELED:
        raise DataError(f"--unlabeled-file {cfg.unlabeled_file} holds {len(unl.x)} image; the PU probes standardise "
                        f"the features with the unlabeled images' spread and the prior estimate needs them too: give "
                        f"at least {MIN_UNLABELED}")
    check_pu_overlap(pos.x, unl.x, cfg.positive_file, cfg.unlabeled_file, kind="images", key=pixel_digest,
                     compared=", pixel for pixel")
    x = np.concatenate([pos.x, unl.x])
    y = np.concatenate([np.ones(len(pos.x), dtype=np.int64), np.full(len(unl.x), -1, dtype=np.int64)])
    eval_x, eval_y, name = x[:0], np.zeros(0, dtype=np.int64), "none (no --eval-file)"
    if cfg.eval_file is not None:
        ev, eval_y = labeled_eval_file(cfg, pos.shape)
        eval_x, name = ev.x, f"--eval-file ({len(eval_y)} images)"
        need_both_classes(eval_y, "evaluation split", ev.source)
        warn_overlap(x, eval_x, f"--positive-file {cfg.positive_file} and --unlabeled-file {cfg.unlabeled_file}",
                     f"--eval-file {cfg.eval_file}", kind="images", key=pixel_digest, compared=", pixel for pixel")
    if cfg.encoder != "mlp":  # the CNN and the patch grid read images: flat square vectors become (1, s, s)
        x, eval_x = as_images(x, cfg.encoder), as_images(eval_x, cfg.encoder)
    return ImageData(x, y, eval_x, eval_y, np.arange(len(pos.x)), np.arange(len(pos.x), len(x)), name, 0, 0,
                     pos.raw_shape, pos.raw_integer)


def image_data(cfg: ImageConfig) -> ImageData:
    """Load, split and sample the images of a run (deterministic given the configuration)."""
    if cfg.pu_files:
        return image_files_data(cfg)
    full = load_images(cfg.dataset, "--dataset")
    yb = binary_labels(full.y, cfg.positive_classes, full.source)
    ev = None
    if cfg.eval_file is not None:
        ev, ev_y = labeled_eval_file(cfg, full.shape)
        test, rest = np.array([], dtype=np.int64), np.arange(len(full.y))
    else:
        test, rest = stratified_split(full.y, (TEST_FRACTION,), cfg.seed)
    dev_rel, pool_rel = stratified_split(full.y[rest], (cfg.dev_fraction,), cfg.seed + 1)
    dev, pool = rest[dev_rel], rest[pool_rel]
    if cfg.eval_split == "dev":
        eval_x, eval_y, name = (full.x[dev], yb[dev],
                                f"development split ({len(dev)} images held out of the training data)")
    elif ev is not None:
        eval_x, eval_y, name = ev.x, ev_y, f"--eval-file ({len(ev_y)} images)"
    else:
        eval_x, eval_y, name = full.x[test], yb[test], f"test split ({len(test)} images, {TEST_FRACTION:.0%} per class)"
    x, y = full.x[pool], yb[pool]
    if ev is not None and cfg.eval_split != "dev":
        warn_overlap(x, eval_x, f"--dataset {cfg.dataset}", f"--eval-file {cfg.eval_file}", kind="images",
                     key=pixel_digest, compared=", pixel for pixel")
    eval_source = ev.source if ev is not None and cfg.eval_split != "dev" else full.source  # where the split came from
    for part, labels, source in (("training pool", y, full.source), ("evaluation split", eval_y, eval_source)):
        need_both_classes(labels, part, source)
    labeled = sample_labeled(y, cfg.setting, cfg.n_labeled if cfg.setting == "pu" else cfg.labeled_percent, cfg.seed)
    unlabeled = np.setdiff1d(np.arange(len(y)), labeled)
    if cfg.encoder != "mlp":  # the CNN and the patch grid read images: flat square vectors become (1, s, s)
        x, eval_x = as_images(x, cfg.encoder), as_images(eval_x, cfg.encoder)
    return ImageData(x, y, eval_x, eval_y, labeled, unlabeled, name, len(dev), len(test), full.raw_shape,
                     full.raw_integer)


def sample_labeled(y: np.ndarray, setting: str, n_labeled: float, seed: int) -> np.ndarray:
    """PU: ``n_labeled`` positives drawn uniformly from the pool's positives (--n-labeled). PNU: ``n_labeled``
    percent of the pool, drawn per class (both classes in proportion, at least one image each; --labeled-percent)."""
    rng = np.random.default_rng(seed + 2)
    if setting == "pu":
        pos = np.flatnonzero(y == 1)
        if n_labeled >= len(pos) + (len(y) == len(pos)):
            raise DataError(f"--n-labeled {n_labeled}: the training pool has {len(pos)} positive images; label fewer "
                            "so that some stay unlabeled")
        return np.sort(rng.choice(pos, size=n_labeled, replace=False))
    out = []
    for c in (0, 1):
        idx = np.flatnonzero(y == c)
        out.append(rng.choice(idx, size=max(1, int(round(n_labeled / 100 * len(idx)))), replace=False))
    return np.sort(np.concatenate(out))


@dataclass
class Selection:
    """``--select``'s held-out images (indices into the pool): ``positives``, labeled positives whose labels
    the encoder does not see, and ``unlabeled``, unlabeled images set aside with them; ``encoder_data``: the run's
    data as the encoder trains on it (the held-out positives among its unlabeled images)."""

    positives: np.ndarray
    unlabeled: np.ndarray
    encoder_data: ImageData

    @property
    def fitted(self) -> np.ndarray:
        """The pool images the selection's probe is fitted on as U: all but the held-out ones."""
        return np.setdiff1d(np.arange(len(self.encoder_data.x)), np.concatenate([self.positives, self.unlabeled]))


def selection_split(cfg: ImageConfig, data: ImageData) -> Selection | None:
    """The held-out images of ``--select`` (None without it): ``--select-fraction`` of the labeled positives
    (at least one, at most all but one) and of the unlabeled images, drawn with the seed."""
    if cfg.select == "none":
        return None
    n_p = int(round(cfg.select_fraction * len(data.labeled)))
    if len(data.labeled) < 2:
        raise DataError(f"--select {cfg.select} holds out labeled positives to score the encoder by and keeps the "
                        f"rest: it needs --n-labeled 2 or more, got {len(data.labeled)}")
    n_p = min(max(1, n_p), len(data.labeled) - 1)
    rng = np.random.default_rng(cfg.seed + 3)
    positives = np.sort(rng.choice(data.labeled, size=n_p, replace=False))
    n_u = min(max(1, int(round(cfg.select_fraction * len(data.unlabeled)))), len(data.unlabeled))
    unlabeled = np.sort(rng.choice(data.unlabeled, size=n_u, replace=False))
    encoder_data = dataclasses.replace(data, labeled=np.setdiff1d(data.labeled, positives),
                                       unlabeled=np.union1d(data.unlabeled, positives))
    return Selection(positives, unlabeled, encoder_data)


def selection_scores(f_pool: torch.Tensor, sel: Selection, pi_u: float, seed: int) -> dict[str, float]:
    """How well an nnPU probe fitted on the pool's standardised features ``f_pool`` (all but the held-out images)
    tells ``--select``'s held-out positives from its held-out unlabeled images; no negative label is read.

    * ``select_risk``: the nnPU risk with the sigmoid loss (Kiryo et al.), ``pi E_P[s(-g)] + max(0, E_U[s(g)] -
      pi E_P[s(g)])``, an estimate of the probe's sigmoid loss on the unlabeled images' distribution;
    * ``select_risk01``: the same with the zero-one loss (its error rate);
    * ``select_auc``: the AUC of held-out positives against held-out unlabeled images, ``pi / 2 + (1 - pi) AUC_PN``:
      it ranks encoders as the AUC of positives against negatives does.

    ``pi_u``: p(y=+1) among the run's unlabeled images, of which the held-out unlabeled images are a draw. The probe's
    P: the labeled positives not held out (``sel.encoder_data.labeled``), whether or not the encoder read their labels
    (``--label-share``)."""
    enc = sel.encoder_data
    fitted = sel.fitted  # the labeled positives the encoder saw, and the unlabeled images not held out
    n_fit_unl = len(fitted) - len(enc.labeled)
    pi_fit = (len(enc.labeled) + pi_u * n_fit_unl) / len(fitted)
    probe = train_probe(f_pool[torch.from_numpy(enc.labeled)], f_pool[torch.from_numpy(fitted)], pi_fit, "nnpu",
                        seed=seed)
    with torch.no_grad():
        sp = probe(f_pool[torch.from_numpy(sel.positives)]).squeeze(1).double()
        su = probe(f_pool[torch.from_numpy(sel.unlabeled)]).squeeze(1).double()
    return held_out_scores(sp, su, pi_u)


def held_out_scores(sp: torch.Tensor, su: torch.Tensor, pi: float) -> dict[str, float]:
    """:func:`selection_scores`'s three numbers from a probe's scores of held-out positives ``sp`` and unlabeled images
    ``su`` (float64) whose prior is ``pi``."""
    from sklearn.metrics import roc_auc_score

    sigmoid = float(pu_risk(sp, su, pi, "nnpu")[1])
    zero_one = pi * float((sp <= 0).double().mean()) + max(0.0, float((su > 0).double().mean())
                                                           - pi * float((sp > 0).double().mean()))
    auc = float(roc_auc_score(np.r_[np.ones(len(sp)), np.zeros(len(su))], torch.cat([sp, su]).numpy()))
    return {"select_risk": sigmoid, "select_risk01": zero_one, "select_auc": auc}


#: ``--select``'s criteria: the score each reads and whether lower is better
SELECT_CRITERIA = {"pu-risk": ("select_risk", True), "pu-auc": ("select_auc", False)}


def share_labels(cfg: ImageConfig, data: ImageData) -> ImageData:
    """``--label-share q`` (or its default, :attr:`ImageConfig.encoder_label_share`): the data as the encoder's loss
    reads it, with a seeded draw of round(q x n_P) of the labeled positives (at least one) keeping their labels and the
    others among the unlabeled images; unchanged at q = 1."""
    share = cfg.encoder_label_share
    if share >= 1 or cfg.contrastive == "none":
        return data
    rng = np.random.default_rng(cfg.seed + 4)
    n = min(len(data.labeled), max(1, int(round(share * len(data.labeled)))))
    kept = np.sort(rng.choice(data.labeled, size=n, replace=False))
    return dataclasses.replace(data, labeled=kept,
                               unlabeled=np.union1d(data.unlabeled, np.setdiff1d(data.labeled, kept)))


def select_steps(cfg: ImageConfig) -> list[int]:
    """The steps ``--select`` scores: ``--select-points`` evenly spaced up to --max-steps (none without it)."""
    if cfg.select == "none" or cfg.max_steps < 1:
        return []
    if cfg.select_points >= cfg.max_steps:  # points closer than a step apart score every step (a huge count hung)
        return list(range(1, cfg.max_steps + 1))
    return sorted({max(1, int(round(k * cfg.max_steps / cfg.select_points))) for k in range(1, cfg.select_points + 1)})


def exact_image_prior(data: ImageData) -> float | None:
    """The exact prior of the run's unlabeled images: their positive share (their labels are known; None for
    unlabeled images from a file, whose labels are not)."""
    if len(data.unlabeled) and (data.y[data.unlabeled] < 0).any():
        return None
    return float(data.y[data.unlabeled].mean()) if len(data.unlabeled) else 0.0


def priors(cfg: ImageConfig, data: ImageData) -> tuple[float, float, str]:
    """(pi = p(y=+1 | unlabeled), pi_p = p(y=+1) of the pool, where pi comes from). A given --prior far off the exact
    one is warned about; with ``--setting pu`` a pool prior the PU risks cannot use (1: an estimate of pi that came out
    as 1; a given --prior 1 is refused by :meth:`ImageConfig.validate`) is refused in one line, before anything is
    written."""
    n_l, n_u = len(data.labeled), len(data.unlabeled)
    if cfg.prior is not None:
        pi, source = float(cfg.prior), "given"
        if n_u and not cfg.pu_files:  # images from files: no labels to compare it with
            warn_given_prior(pi, exact_image_prior(data), "unlabeled images")
    elif (cfg.estimate_prior or cfg.pu_files) and cfg.setting == "pu":  # unlabeled images from a file: estimated
        flat = data.x.reshape(len(data.x), -1)
        if cfg.progress:  # 5 folds x 11 strengths of logistic regression on the pixels: seconds to minutes, silent
            print(f"prior: estimating it (Elkan-Noto, cross-fitted) from the pixels of {n_l} labeled positives and "
                  f"{n_u} unlabeled images ...", file=sys.stderr, flush=True)
        pi, source = (elkan_noto_prior(flat[data.labeled], flat[data.unlabeled], seed=cfg.seed,
                                       hint=ESTIMATE_HINTS["image files" if cfg.pu_files else "images"]),
                      "elkan-noto (pixels)")
        # a number the user did not give, said in words (as the text pipelines do)
        print(f"prior: {pi:.4g}, the Elkan-Noto estimate of the positive share of the {n_u} unlabeled images (from "
              f"{n_l} labeled positives, on the pixels; about {pi * n_u:.0f} positives among them); pass --prior P if "
              "you know better: on pixels it can be far off (docs/results/fewshot.md) (config.json: prior_used, "
              "prior_source)", file=sys.stderr, flush=True)
        if pi <= 0.0:  # as the text pipeline refuses it: puNCE would weigh no unlabeled image as a positive
            raise ValueError(f"the Elkan-Noto estimate of the prior came out as {pi:g}: it found no positives among "
                             "the unlabeled images; the PU learners need a prior strictly between 0 and 1: pass "
                             "--prior P (your estimate of the positive share of the unlabeled images)")
    else:
        pi, source = exact_image_prior(data), "exact (labels of the unlabeled images)"
    lab_pos = float(data.y[data.labeled].sum()) if cfg.setting == "pnu" else float(n_l)
    pi_p = (lab_pos + n_u * pi) / (n_l + n_u)
    if cfg.setting == "pu" and not 0.0 < pi_p < 1.0:
        raise ValueError(f"the prior of the unlabeled images ({source}) came out as {pi:g}, which makes the PU risks' "
                         f"pool prior pi_p {pi_p:g}; they need it strictly between 0 and 1: pass --prior P (your "
                         "estimate of the positive share of the unlabeled images, below 1) or drop --estimate-prior")
    return pi, pi_p, source


def batch_sizes(cfg: ImageConfig, data: ImageData) -> tuple[int, int]:
    """Labeled and unlabeled images per step. ``--batch-size B`` (the preset's way): a draw of B images from
    the pool with the labeled ones in their share of it (at least one), as a uniform draw has them on
    average, the paper's sampling; otherwise ``--batch-labeled`` and ``--batch-unlabeled``. Each capped at
    what there is."""
    if cfg.batch_size is not None:
        n_lab = max(1, int(round(cfg.batch_size * len(data.labeled) / len(data.x))))
        n_unl = cfg.batch_size - n_lab
    else:
        n_lab, n_unl = cfg.batch_labeled, cfg.batch_unlabeled
    return min(n_lab, len(data.labeled)), min(n_unl, len(data.unlabeled))


def steps_from_passes(cfg: ImageConfig, data: ImageData) -> ImageConfig:
    """``--passes P``: the configuration with ``steps = round(P x pool / images per step)`` (at least 1), so
    that pools of any size are trained for as many passes; unchanged without --passes."""
    if cfg.passes is None:
        return cfg
    n_lab, n_unl = batch_sizes(cfg, data)
    return dataclasses.replace(cfg, max_steps=max(1, int(round(cfg.passes * len(data.x) / (n_lab + n_unl)))))


def learner_names(cfg: ImageConfig) -> tuple[str, ...]:
    if cfg.contrastive != "none":
        return ("encoder",)
    return RISKS if cfg.setting == "pu" else ("ce",)


def batch_prior(cfg: ImageConfig, pi: float, pi_p: float, n_lab: int, n_unl: int) -> float:
    """The positive share the PU risks of the end-to-end learners give their U, the whole batch: ``pi_p``, the pool's,
    where the batch is a draw from the pool (``--batch-size B``: its labeled images in their pool share); with
    ``--batch-labeled`` / ``--batch-unlabeled`` the batch's own, ``(n_lab + n_unl pi) / (n_lab + n_unl)`` (16 labeled
    beside 32 unlabeled are a third of the batch, 20 in 3,500 of the pool: weighting such a batch by the pool's prior
    biased the risk, 0.2333 against 0.1023 in a probe)."""
    if cfg.batch_size is not None or n_lab + n_unl == 0:
        return pi_p
    return (n_lab + n_unl * pi) / (n_lab + n_unl)


def end_to_end_loss(name: str, logits: torch.Tensor, y: torch.Tensor, n_lab: int, pi_p: float) -> torch.Tensor:
    """The loss of an end-to-end model (``--contrastive none``) on the head's logits of a batch whose first
    ``n_lab`` rows are the labeled images: cross-entropy on those, or a PU risk with them as P and the whole
    batch as U, of the positive share ``pi_p`` (:func:`batch_prior`: the pool's prior for a draw from the pool, the
    case-control set-up)."""
    if name == "ce":
        return F.binary_cross_entropy_with_logits(logits[:n_lab], y[:n_lab].float())
    return pu_risk(logits[:n_lab], logits, pi_p, name, check=False)[0]  # NaN logits: the divergence watch's


class ImageApp(FewShotRunApp):
    """The image runs' parts of the shared loop (:func:`shared_losses.training.loop.run`): per step one batch of
    labeled + unlabeled images, two augmented views through the encoder (``--contrastive``) or each end-to-end learner
    (``none``); at the end the classifiers of :func:`classify`."""

    def __init__(self, cfg: ImageConfig, harness: RunHarness):
        t_start, data = time.monotonic(), image_data(cfg)
        if cfg.pu_files:  # n_P is the positive file's image count (--label-pull's default reads it)
            cfg = dataclasses.replace(cfg, n_labeled=len(data.labeled))
        self.selection = selection_split(cfg, data)
        # the images as the encoder trains on them (--select and --label-share: some labeled positives are unlabeled)
        self.enc_data = share_labels(cfg, data if self.selection is None else self.selection.encoder_data)
        super().__init__(steps_from_passes(cfg, self.enc_data), harness)
        self.t_start, self.data = t_start, data
        self.select_at = select_steps(self.cfg)
        self.candidates: list[dict] = []  # each scored step: its risks (and development accuracy, --eval-split dev)
        self.best: dict | None = None  # the lowest-risk step's encoder weights, on the CPU
        self.names = learner_names(self.cfg)
        self.contrastive = self.cfg.contrastive != "none"
        self.loss = ENCODER_LOSSES[self.cfg.contrastive]

    def check_resume(self, saved):
        cfg, out = self.cfg, self.harness.out
        if saved is None:
            return None
        check_steps(cfg, saved["step"], out)  # no fewer steps (the loop compared the options)
        refuse_changed_images(out, self.data, "resuming would go on training and scoring on other images")
        trained_for = saved["config"].get("max_steps")
        if cfg.select != "none" and trained_for != cfg.max_steps:
            raise ValueError(f"--select {cfg.select} scores steps spaced over the whole run, and the run in {out} was "
                             f"started for {trained_for} steps: resume it with the same --max-steps / --passes (this "
                             f"command asks for {cfg.max_steps} steps), or start a new run")
        if saved["step"] == cfg.max_steps and (out / "metrics.json").exists():
            print(f"{out} already holds this run, finished; nothing to do (pass a larger --max-steps or --passes to "
                  "train on)")
            return read_json(out / "metrics.json")
        return None

    def build(self, saved):
        cfg, data, names = self.cfg, self.enc_data, self.names
        self.pi, self.pi_p, self.prior_source = priors(cfg, self.data)  # the run's unlabeled images, and the pool
        # puNCE's pi over the images the encoder reads as unlabeled: the run's, and the labeled positives it does not
        # read as labeled (--label-share, --select), by the counts
        moved, n_u = len(self.data.labeled) - len(data.labeled), len(self.data.unlabeled)
        self.pi_enc = (self.pi * n_u + moved) / (n_u + moved)
        acc = make_accelerator(cfg, one_process="image runs are one process: run python -m fewshot.train images "
                                                "without accelerate launch / torchrun")
        self.accelerator, device = acc, acc.device
        models, opts = {}, {}
        from accelerate.utils import set_seed

        for name in names:
            set_seed(cfg.seed)  # the same initial weights for every learner (and Python's, numpy's generators)
            models[name] = ImageModel(cfg.encoder, data.x.shape[1:], hidden=cfg.hidden,
                                      cpc_steps=cfg.cpc_steps if self.loss.inputs == "grid" else None,
                                      temperature=cfg.temperature, patch_pool=cfg.patch_pool).to(device)
            opts[name] = torch.optim.AdamW(models[name].parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        prepared = acc.prepare(*[o for n in names for o in (models[n], opts[n])])
        self.models = {name: prepared[2 * k] for k, name in enumerate(names)}
        self.opts = {name: prepared[2 * k + 1] for k, name in enumerate(names)}
        self.watch = DivergenceWatch([p for m in self.models.values() for p in m.parameters()], cfg.lr)
        self.worst_loss = None  # the step's loss furthest from finite, for the divergence check
        self.harness.open(acc)
        self.harness.write_config(self.recorded_options | {"prior_used": self.pi, "pool_prior": self.pi_p,
                                                              "prior_source": self.prior_source})
        sample = {"labeled": self.data.labeled.tolist(), "unlabeled": self.data.unlabeled.tolist()}
        if len(self.enc_data.labeled) != len(self.data.labeled):  # --label-share / --select: what the encoder reads
            sample["encoder_labeled"] = self.enc_data.labeled.tolist()
        if self.selection is not None:  # the labels the encoder did not see, and the unlabeled images set aside
            sample |= {"select_positives": self.selection.positives.tolist(),
                       "select_unlabeled": self.selection.unlabeled.tolist()}
        write_json_atomic(self.harness.out / "sample.json", sample | {"data_sha256": image_fingerprint(self.data)})
        n_lab, n_unl = batch_sizes(cfg, data)
        self.lab_batches = Batches(data.labeled, n_lab, cfg.seed)
        # cross-entropy on the labeled images (pnu, no encoder stage) draws no unlabeled ones
        self.unl_batches = Batches(data.unlabeled, n_unl if (self.contrastive or cfg.setting == "pu") else 0,
                                   cfg.seed + 1)
        self.pi_batch = batch_prior(cfg, self.pi, self.pi_p, self.lab_batches.batch_size, self.unl_batches.batch_size)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.augment = Augment(strength=cfg.augment)
        self.x_all = torch.from_numpy(data.x)
        self.y_all = torch.from_numpy(np.where(data.y == 1, 1, -1) if cfg.setting == "pnu" else data.y)

    def state(self):
        self.watch.check(self.step, self.worst_loss)  # never a checkpoint of a diverged model
        self.watch.checkpointed = self.step
        return {"step": self.step, "config": self.recorded_options,
                "labeled_batches": self.lab_batches.state_dict(), "unlabeled_batches": self.unl_batches.state_dict(),
                "augment_rng": self.gen.get_state(), "select_candidates": self.candidates, "select_best": self.best}

    def load_state(self, state):
        self.step = state["step"]
        self.lab_batches.load_state_dict(state["labeled_batches"])
        self.unl_batches.load_state_dict(state["unlabeled_batches"])
        self.gen.set_state(state["augment_rng"])
        self.candidates, self.best = state["select_candidates"], state["select_best"]
        self.watch.resumed(self.step)
        self.say_resumed()

    def progress(self):
        cfg = self.cfg
        for m in self.models.values():
            m.train()
        self.t0 = time.monotonic()
        desc = f"{cfg.contrastive} {cfg.setting} " + (f"n_P={cfg.n_labeled}" if cfg.setting == "pu"
                                                           else f"{cfg.labeled_percent:g}% labeled")
        return tqdm(total=cfg.max_steps, initial=self.step, desc=desc, unit="step", disable=not cfg.progress,
                    mininterval=bar_interval())

    def train_step(self):
        cfg, data, device, names = self.cfg, self.data, self.accelerator.device, self.names
        li, ui = self.lab_batches.next(), self.unl_batches.next()
        xb = self.x_all[torch.from_numpy(np.concatenate([li, ui]))]
        row = {"step": self.step + 1}
        if self.loss.inputs == "grid":  # CPC: one view, the patch grid predicts itself
            model = self.models["encoder"]
            z = model.encoder.grid_latents(self.augment(xb, self.gen).to(device))
            losses = {"encoder": self.loss.loss(z=z.float(), heads=model.cpc, group=cfg.cpc_group)}
        elif self.contrastive:
            roles = torch.cat([self.y_all[torch.from_numpy(li)], torch.zeros(len(ui), dtype=torch.long)])
            views = torch.cat([self.augment(xb, self.gen), self.augment(xb, self.gen)]).to(device)
            _, z, _ = self.models["encoder"](views)
            loss = encoder_loss(cfg.contrastive, z.float(), roles.repeat(2).to(device), self.pi_enc, cfg.temperature,
                                cfg.tau_plus, cfg.encoder_label_pull)
            losses = {"encoder": loss}
        else:
            yb = torch.from_numpy((data.y[np.concatenate([li, ui])] == 1).astype(np.int64)).to(device)
            losses = {n: end_to_end_loss(n, self.models[n](xb.to(device))[2].float(), yb, len(li), self.pi_batch)
                      for n in names}
        for n in names:
            self.opts[n].zero_grad(set_to_none=True)
            self.accelerator.backward(losses[n])
            self.opts[n].step()
            row[f"loss_{n}" if len(names) > 1 else f"loss_{cfg.contrastive}"] = losses[n].item()
        self.step += 1
        values = [v for k, v in row.items() if k != "step"]
        self.worst_loss = next((v for v in values if not math.isfinite(v)), max(values, default=0.0))
        if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
            self.watch.check(self.step, self.worst_loss)
        return row

    def eval_due(self):
        return self.step in self.select_at

    def evaluate(self):
        """``--select``: the encoder scored by :func:`selection_scores`; the best step's weights are kept (ties: the
        earlier step). With ``--eval-split dev`` the development accuracy of the final probe on this step's
        encoder is recorded beside it (the fully labeled choice, to compare; the selection does not read it)."""
        cfg, model = self.cfg, self.models["encoder"]
        f_pool = features(model, self.enc_data.x)
        mean, std = pool_scaling(f_pool)  # as classify() standardises
        f_pool = (f_pool - mean) / std
        row = {"step": self.step, **selection_scores(f_pool, self.selection, self.pi, cfg.seed)}
        if cfg.eval_split == "dev":
            row["dev_accuracy"] = classify(cfg, self.data, self.models, self.pi_p, ("nnpu",))[0]["nnpu"]
        self.candidates.append(row)
        key, lower = SELECT_CRITERIA[cfg.select]
        if self.best is None or (row[key] < self.best[key] if lower else row[key] > self.best[key]):
            self.best = {"step": self.step, key: row[key],
                         "weights": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}}
        return row

    def log(self, row):
        if self.step % self.cfg.log_every == 0 or self.step == self.cfg.max_steps or "select_risk" in row:
            self.harness.log_row(row)

    def finish(self):
        cfg, data = self.cfg, self.data
        self.watch.check(self.step, self.worst_loss)  # the probes would read the features of a diverged encoder
        if self.step == 0:  # --max-steps 0: the loop wrote no checkpoint; a finished run keeps one (resume: done)
            self.harness.checkpoint(self.state())
        train_seconds = time.monotonic() - self.t0
        if self.best is not None:  # --select: the encoder of the best step
            self.models["encoder"].load_state_dict(self.best["weights"])
        t1 = time.monotonic()
        accuracies, self.head, scores = classify(cfg, data, self.models, self.pi_p)
        probe_seconds = time.monotonic() - t1
        main_key = "nnpu" if cfg.setting == "pu" else ("logreg" if self.contrastive else "ce")
        scored = len(data.eval_y) > 0  # PU images from files without --eval-file: no labels to score on
        self.metrics = {
            "eval_accuracy": accuracies[main_key] if scored else None,
            "eval_scores": scores[main_key] if scored else None, "probes": accuracies,
            "setting": cfg.setting,
            "contrastive": cfg.contrastive, "encoder": cfg.encoder,
            "dataset": None if cfg.pu_files else cfg.dataset, "eval_file": cfg.eval_file,
            "positive_classes": list(cfg.positive_classes) if cfg.positive_classes is not None else [1],
            "n_labeled": len(data.labeled), "n_unlabeled": len(data.unlabeled),
            **({"labeled_percent": cfg.labeled_percent} if cfg.setting == "pnu" else {}),
            "n_pool": len(data.x), "n_dev": data.n_dev, "n_test": data.n_test, "n_eval": len(data.eval_y),
            "eval_split": data.eval_name, "seed": cfg.seed, "steps": cfg.max_steps, "temperature": cfg.temperature,
            "prior": self.pi, "pool_prior": self.pi_p, "prior_source": self.prior_source,
            "exact_prior": exact_image_prior(data), "batch_labeled_used": self.lab_batches.batch_size,
            "batch_unlabeled_used": self.unl_batches.batch_size,
            "train_seconds": train_seconds, "probe_seconds": probe_seconds,
            "run_seconds": time.monotonic() - self.t_start,
            "majority_accuracy": majority_percent(data.eval_y) if scored else None,
        }
        if cfg.pu_files:
            self.metrics |= {"positive_file": cfg.positive_file, "unlabeled_file": cfg.unlabeled_file}
        if not scored:
            self.metrics["note"] = NO_EVAL_NOTE
        if self.contrastive and cfg.setting == "pu":
            self.metrics |= {"label_share": cfg.encoder_label_share, "n_encoder_labeled": len(self.enc_data.labeled),
                             "encoder_prior": self.pi_enc}
        if cfg.contrastive == "punce":
            self.metrics["label_pull"] = cfg.encoder_label_pull
        if self.selection is not None:
            self.metrics |= {"selected_step": self.best["step"] if self.best else self.step,
                             "select_candidates": self.candidates,
                             "n_select_positives": len(self.selection.positives),
                             "n_select_unlabeled": len(self.selection.unlabeled)}

    def export(self):
        if self.cfg.export:
            export_images(self.cfg, self.models, self.head, self.data, self.metrics, self.harness.out)
            self.metrics["model"] = str(self.harness.out / "model")

    def summary(self):
        return self.metrics


def pool_scaling(f_pool: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) of the pool's features, which the probes' features are standardised with (std at least 1e-6)."""
    return f_pool.mean(0), f_pool.std(0).clamp(min=1e-6)


def classify(cfg: ImageConfig, data: ImageData, models: dict, pi_p: float,
             risks: tuple[str, ...] = RISKS) -> tuple[dict, dict, dict]:
    """Accuracy (%) on the evaluation split of each classifier of the run, the head to export (the nnPU /
    logistic-regression / end-to-end one that gives ``eval_accuracy``), and each classifier's
    :func:`fewshot.scores.binary_scores`. ``risks``: the PU probes fitted (PU setting, contrastive encoder)."""
    ev_y = data.eval_y
    scored = len(ev_y) > 0  # PU images from files without --eval-file: only the nnPU head, to export
    scores = {}
    if cfg.contrastive == "none":
        out, head = {}, None
        for name, model in models.items():
            if scored:
                with torch.no_grad():  # the head on the encoder's features (on the CPU, where features() returns them)
                    logits = F.linear(features(model, data.eval_x), model.head.weight.cpu(),
                                      model.head.bias.cpu()).squeeze(1)
                out[name] = percent_agree((logits > 0).long().numpy(), ev_y)
                scores[name] = binary_scores(ev_y, logits.numpy())
            if name in ("nnpu", "ce"):
                head = {"learner": name, "weight": model.head.weight.detach().cpu().clone(),
                        "bias": model.head.bias.detach().cpu().clone(), "mean": None, "std": None}
        return out, head, scores
    model = models["encoder"]
    f_pool, f_eval = features(model, data.x), features(model, data.eval_x)
    mean, std = pool_scaling(f_pool)
    f_pool, f_eval = (f_pool - mean) / std, (f_eval - mean) / std
    f_lab = f_pool[torch.from_numpy(data.labeled)]
    if cfg.setting == "pu":
        out, head = {}, None
        for risk in risks if scored else ("nnpu",):
            probe = train_probe(f_lab, f_pool, pi_p, risk, seed=cfg.seed,
                                progress=f"PU probes: the {risk} probe" if cfg.progress else None)
            if scored:
                with torch.no_grad():
                    logits = probe(f_eval).squeeze(1)
                out[risk] = percent_agree((logits > 0).long().numpy(), ev_y)
                scores[risk] = binary_scores(ev_y, logits.numpy())
            if risk == "nnpu":
                head = {"learner": "nnpu probe", "weight": probe.weight.detach().clone(),
                        "bias": probe.bias.detach().clone(), "mean": mean, "std": std}
        return out, head, scores
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=cfg.probe_c, max_iter=5000).fit(f_lab.numpy(), data.y[data.labeled])
    decision = clf.decision_function(f_eval.numpy())  # classes [0, 1]: predict() is decision > 0
    acc_ = percent_agree((decision > 0).astype(int), ev_y)
    head = {"learner": "logistic regression", "weight": torch.from_numpy(clf.coef_).float(),
            "bias": torch.from_numpy(clf.intercept_).float(), "mean": mean, "std": std}
    return {"logreg": acc_}, head, {"logreg": binary_scores(ev_y, decision)}


def export_images(cfg: ImageConfig, models: dict, head: dict, data: ImageData, metrics: dict, out) -> None:
    """OUT/model/image_classifier.pt: encoder weights, input shape, positive classes and the linear head;
    :func:`load_image_classifier` turns it back into a predictor of arrays."""
    model = models["encoder"] if "encoder" in models else models[head["learner"]]
    folder = out / "model"
    folder.mkdir(exist_ok=True)
    # CPC's context and prediction maps (cpc.*) trained the encoder; the classifier does not use them
    payload = {"kind": cfg.encoder, "in_shape": list(data.x.shape[1:]), "hidden": cfg.hidden,
               "patch_pool": cfg.patch_pool,
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items() if not k.startswith("cpc.")},
               "head": head,
               "positive_classes": metrics["positive_classes"], "eval_accuracy": metrics["eval_accuracy"],
               "contrastive": cfg.contrastive, "setting": cfg.setting, "raw_shape": list(data.raw_shape),
               "raw_integer": data.raw_integer}
    with written_whole(folder / "image_classifier.pt") as tmp:
        torch.save(payload, tmp)
    from .image_export import write_portable

    written, notes = write_portable(folder, payload, run=out)
    metrics["exports"] = {"files": written, **({"notes": notes} if notes else {})}


def read_classifier_blob(p) -> dict:
    """The payload of an image_classifier.pt (tensors, numbers, strings and lists: loaded without running code); a
    damaged file is one ValueError naming it."""
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch's reader raises several kinds for a cut or garbled file
        raise ValueError(f"{p} could not be read ({type(err).__name__}: {str(err).splitlines()[0][:200]}): the file "
                         "is damaged; restore it, or train the run again") from None


def load_image_classifier(path):
    """A finished image run's classifier: ``predict(images)`` -> 1 (positive class) / 0 for images shaped
    like the training data's (uint8 0-255 or float in [0, 1]); ``predict.scores(images)`` gives the logits.
    ``path``: the run folder, its model/ folder, or the image_classifier.pt file."""
    from pathlib import Path

    from shared_losses.data import check_arrays

    p = Path(path)
    p = p / "model" if (p / "model").is_dir() else p
    p = p / "image_classifier.pt" if p.is_dir() else p
    if not p.exists():
        raise FileNotFoundError(f"no image classifier at {path} (expected RUN/model/image_classifier.pt)")
    blob = read_classifier_blob(p)
    from .image_export import rebuild

    model = rebuild(blob)
    head = blob["head"]

    def scores(images) -> np.ndarray:
        arr = np.asarray(images)
        try:
            return _scores(arr)
        except (DataError, ValueError) as err:
            if arr.ndim >= 2:
                try:
                    _scores(arr[None])
                except (DataError, ValueError):
                    raise err from None
                raise type(err)(f"{err} (one image? pass a batch of one: images[None])") from None
            raise

    def _scores(arr) -> np.ndarray:
        x = check_arrays(arr, np.zeros(len(arr), dtype=np.int64), "images").x
        in_shape = tuple(blob["in_shape"])
        if blob["kind"] != "mlp":
            x = as_images(x, blob["kind"])
        elif tuple(x.shape[1:]) != in_shape and int(np.prod(x.shape[1:])) == int(np.prod(in_shape)) and \
                (x.ndim == 2 or len(in_shape) == 1):
            # the MLP flattens its input: flat vectors of an image-trained MLP, or images of a flat-trained one, as the
            # CNN and the patch grid take flat square vectors
            x = x.reshape(len(x), *in_shape)
        if tuple(x.shape[1:]) != in_shape:
            given = tuple(np.shape(arr))  # what was passed (x may be reshaped): its first axis counts the images
            raise ValueError(f"an array of shape {given} is {given[0]} images of shape {tuple(x.shape[1:])}; this "
                             f"classifier takes images of shape {in_shape} (or flat vectors of "
                             f"{int(np.prod(in_shape))} values)")
        f = features(model, x)
        if head["mean"] is not None:
            f = (f - head["mean"]) / head["std"]
        return (f @ head["weight"].T + head["bias"]).squeeze(1).numpy()

    def predict(images) -> np.ndarray:
        return (scores(images) > 0).astype(np.int64)

    predict.scores = scores
    predict.positive_classes = blob["positive_classes"]
    return predict
