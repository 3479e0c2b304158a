"""Encoder, actor and twin critic of CURL (Srinivas, Laskin & Abbeel 2020; docs/equations.md section 7), with
sizes as arguments so tests can shrink them (the defaults, the CURL paper's sizes, are in ``rl_curl.config``)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def weight_init(m: nn.Module) -> None:
    """Orthogonal linear layers; delta-orthogonal convs (orthogonal centre tap, ReLU gain), zero bias."""
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Conv2d):
        nn.init.zeros_(m.weight)
        nn.init.zeros_(m.bias)
        mid = m.weight.size(2) // 2
        nn.init.orthogonal_(m.weight.data[:, :, mid, mid], gain=nn.init.calculate_gain("relu"))


def conv_output_size(image_size: int, num_layers: int) -> int:
    size = (image_size - 3) // 2 + 1
    for _ in range(num_layers - 1):
        size = size - 2
    if size < 1:
        raise ValueError(f"image of {image_size} pixels (crop_size) is too small for {num_layers} conv layers "
                         f"(it needs at least {4 * num_layers - 1})")
    return size


def scale_pixels(obs: torch.Tensor, dtype: torch.dtype = torch.float32,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Pixels ``[B, C, H, W]`` (uint8, or float in 0..255) as ``dtype`` in [0, 1], channels-last.

    The same values as ``obs.to(dtype) / 255`` bit for bit, with one large allocation instead of three. uint8 to
    float32 is one division that reads the bytes and writes the floats into the channels-last buffer (5 bytes an
    element; a converting copy, then an in-place division, moved 13: about 0.8 GB of an update's 16 at batch
    512). Other pairs keep the copy and the in-place division, whose rounding in a reduced precision is the
    reference's (``obs.to(bfloat16) / 255`` divides bfloat16 values). ``out``: a tensor of ``dtype`` to write into
    (a run's slice of a stacked batch, rl_curl.stacked) instead of a new channels-last one.
    """
    if out is None:
        out = torch.empty(obs.shape, dtype=dtype, device=obs.device, memory_format=torch.channels_last)
    if obs.dtype == torch.uint8 and dtype == torch.float32:
        return torch.div(obs, 255.0, out=out)
    out.copy_(obs)
    return out.div_(255.0)


class ScaledPixels:
    """A batch already passed through :func:`scale_pixels`, so that several conv trunks (online and
    target, before and after an optimiser step) can read one crop without converting it again."""

    __slots__ = ("data",)

    def __init__(self, obs: torch.Tensor, dtype: torch.dtype = torch.float32):
        self.data = scale_pixels(obs, dtype)

    @classmethod
    def of(cls, data: torch.Tensor) -> "ScaledPixels":
        """Pixels already scaled to [0, 1] (e.g. one run's slice of a stacked batch, rl_curl.stacked), as they are."""
        out = cls.__new__(cls)
        out.data = data
        return out


class ConvReLU(torch.autograd.Function):
    """``relu(conv2d(x, w, b))`` as one operation whose backward is autograd's own for the two: the ReLU's by its
    output (``threshold_backward``, as for ``relu_``), then ``convolution_backward`` with the same arguments as
    autograd's convolution node, so the gradients are the default computation's. The forward on a CUDA device is one
    cuDNN kernel (``torch.cudnn_convolution_relu``: convolution, bias and ReLU fused) where PyTorch's convolution
    launches three (the convolution, then the bias added, then the ReLU, each reading and writing the activation);
    elsewhere it is ``relu_(conv2d(...))``, the default computation bit for bit."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        if x.is_cuda:
            y = torch.cudnn_convolution_relu(x, weight, bias, stride, padding, dilation, groups)
        else:
            y = torch.relu_(F.conv2d(x, weight, bias, stride, padding, dilation, groups))
        ctx.save_for_backward(x, weight, y)
        ctx.args = (stride, padding, dilation, groups, bias is not None)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, y = ctx.saved_tensors
        stride, padding, dilation, groups, has_bias = ctx.args
        grad = torch.ops.aten.threshold_backward(grad_y, y, 0)
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], has_bias and ctx.needs_input_grad[2]]
        gx, gw, gb = torch.ops.aten.convolution_backward(
            grad, x, weight, [weight.shape[0]] if has_bias else None, list(stride), list(padding), list(dilation),
            False, [0] * len(stride), groups, mask)
        return gx, gw, gb, None, None, None, None


def conv_relu(conv: nn.Conv2d, h: torch.Tensor) -> torch.Tensor:
    """``relu(conv(h))`` through :class:`ConvReLU`; under autocast its inputs are cast first, as autocast casts a
    convolution's (input, weight and bias to the autocast dtype, the casts recorded for the backward)."""
    if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
        raise ValueError("conv_relu takes convolutions with numeric zero padding")
    w, b = conv.weight, conv.bias
    try:
        cast = torch.is_autocast_enabled(h.device.type)
    except RuntimeError:  # a device type without autocast (meta)
        cast = False
    if cast:
        dtype = torch.get_autocast_dtype(h.device.type)
        h, w, b = h.to(dtype), w.to(dtype), (b.to(dtype) if b is not None else None)
    return ConvReLU.apply(h, w, b, conv.stride, conv.padding, conv.dilation, conv.groups)


class ConvTrunk(nn.Module):
    """4 conv 3x3 layers (stride 2 then 1) with ReLU on uint8 pixels scaled to [0, 1].

    ``cudnn_relu`` (set by the agent from ``--cudnn-conv-relu``; not part of the state): each layer through
    :func:`conv_relu`, one fused cuDNN kernel per convolution on a CUDA device; the default computation elsewhere."""

    cudnn_relu: bool = False

    def __init__(self, in_channels: int, image_size: int, num_filters: int = 32, num_layers: int = 4):
        super().__init__()
        layers = [nn.Conv2d(in_channels, num_filters, 3, stride=2)]
        layers += [nn.Conv2d(num_filters, num_filters, 3, stride=1) for _ in range(num_layers - 1)]
        self.convs = nn.ModuleList(layers)
        self.out_dim = num_filters * conv_output_size(image_size, num_layers) ** 2

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # channels-last activations (and weights, set by the agent): ~20 % faster convs on CPU, and
        # the layout tensor cores want on GPU.
        h = obs.data if isinstance(obs, ScaledPixels) else scale_pixels(obs, self.convs[0].weight.dtype)
        for conv in self.convs:
            if self.cudnn_relu:
                h = conv_relu(conv, h)
            else:
                h = torch.relu_(conv(h))  # in place: a conv's backward does not need its output
        # Features in (row, column, channel) order: a free view of channels-last activations. Flattening
        # in (channel, row, column) order instead copied them, and its gradient came back in the other
        # layout, which made the last ReLU backward about 10x slower (a mixed-layout elementwise kernel).
        return h.permute(0, 2, 3, 1).flatten(1)


class Encoder(nn.Module):
    """Conv trunk -> linear to ``feature_dim`` -> LayerNorm -> tanh; ``detach`` stops gradients at the trunk.

    ``tanh=False`` leaves out the final tanh, as the official CURL code does (its actor and critic
    encoders are built with ``output_logits=True``); the CURL paper's text and ``rl_curl.config``'s default have it.
    """

    def __init__(self, trunk: ConvTrunk, feature_dim: int = 50, tanh: bool = True):
        super().__init__()
        self.trunk = trunk
        self.fc = nn.Linear(trunk.out_dim, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)
        self.feature_dim = feature_dim
        self.tanh = tanh

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Features from the conv trunk's output ``h``: linear, LayerNorm, tanh (if enabled)."""
        z = self.ln(self.fc(h))
        return torch.tanh(z) if self.tanh else z

    def forward(self, obs: torch.Tensor, detach: bool = False) -> torch.Tensor:
        h = self.trunk(obs)
        if detach:
            h = h.detach()
        return self.head(h)


def mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


class Actor(nn.Module):
    """Squashed-Gaussian policy on the encoder's features; log-std squashed into [log_std_min, log_std_max]."""

    def __init__(self, encoder: Encoder, action_dim: int, hidden_dim: int = 1024,
                 log_std_min: float = -10.0, log_std_max: float = 2.0):
        super().__init__()
        self.encoder = encoder
        self.trunk = mlp(encoder.feature_dim, hidden_dim, 2 * action_dim)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, obs: torch.Tensor, detach_encoder: bool = False, sample: bool = True,
                noise: torch.Tensor | None = None):
        """``(mean action, sampled action, log pi, log std)``; actions already squashed to [-1, 1]. ``noise``: the
        standard normal draws of the sample (None: drawn here, ``randn_like`` of the mean)."""
        return self.from_features(self.encoder(obs, detach=detach_encoder), sample, noise)

    def from_features(self, z: torch.Tensor, sample: bool = True, noise: torch.Tensor | None = None):
        """:meth:`forward` from the encoder's features ``z``."""
        mu, log_std = self.trunk(z).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        if not sample:
            return torch.tanh(mu), None, None, log_std
        if noise is None:
            noise = torch.randn_like(mu)
        pi = mu + noise * log_std.exp()
        log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
        mu, pi = torch.tanh(mu), torch.tanh(pi)
        log_pi = log_pi - torch.log(torch.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return mu, pi, log_pi, log_std


class Critic(nn.Module):
    """Twin Q networks on the encoder's features concatenated with the action."""

    def __init__(self, encoder: Encoder, action_dim: int, hidden_dim: int = 1024):
        super().__init__()
        self.encoder = encoder
        self.q1 = mlp(encoder.feature_dim + action_dim, hidden_dim, 1)
        self.q2 = mlp(encoder.feature_dim + action_dim, hidden_dim, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor, detach_encoder: bool = False):
        h = torch.cat([self.encoder(obs, detach=detach_encoder), action], dim=-1)
        return self.q1(h), self.q2(h)
