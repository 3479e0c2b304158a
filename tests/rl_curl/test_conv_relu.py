"""--cudnn-conv-relu (rl_curl.networks.ConvReLU): a convolution, its bias and its ReLU as one operation. Its backward
is checked against finite differences in float64 and, through the whole conv trunk and the whole update, against
the default computation bit for bit (on a CPU the forward is the default's; on a GPU it is one cuDNN kernel, which
scripts/bench_curl_gpu.py's self-test compares with the default update there)."""

import copy

import pytest
import torch
import torch.nn as nn

from rl_curl.networks import ConvReLU, ConvTrunk, conv_relu, weight_init


def trunk_pair(in_channels=9, size=30, filters=6, layers=3):
    torch.manual_seed(0)
    default = ConvTrunk(in_channels, size, filters, layers)
    default.apply(weight_init)
    for p in default.parameters():  # nonzero biases, so that the bias's gradient and the ReLU's mask both count
        p.data.normal_(0, 0.1)
    default.to(memory_format=torch.channels_last)
    fused = copy.deepcopy(default)
    fused.cudnn_relu = True
    return default, fused


@pytest.mark.parametrize("stride,padding,bias", [(2, 0, True), (1, 1, True), (1, 0, False)])
def test_its_gradients_are_the_finite_differences_of_relu_conv(stride, padding, bias):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 7, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True) if bias else None
    fn = lambda x, w, b: ConvReLU.apply(x, w, b, (stride, stride), (padding, padding), (1, 1), 1)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w, b))
    want = torch.relu(torch.nn.functional.conv2d(x, w, b, stride, padding))
    assert torch.equal(fn(x, w, b), want)


def test_the_trunk_through_it_is_the_default_trunk_bit_for_bit():
    default, fused = trunk_pair()
    obs = torch.randint(0, 256, (5, 9, 30, 30), dtype=torch.uint8)
    outs = []
    for trunk in (default, fused):
        out = trunk(obs)
        (out.sin() * torch.linspace(-1, 1, out.shape[1])).sum().backward()
        outs.append(out.detach())
    assert torch.equal(*outs)
    for (name, a), b in zip(default.named_parameters(), fused.parameters()):
        assert a.grad is not None and torch.equal(a.grad, b.grad), name
    with torch.no_grad():  # the target encoders' passes
        assert torch.equal(default(obs), fused(obs))


def test_under_autocast_it_casts_as_autocast_casts_a_convolution():
    default, fused = trunk_pair()
    obs = torch.randint(0, 256, (4, 9, 30, 30), dtype=torch.uint8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = default(obs), fused(obs)
    assert a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    a.float().sum().backward()
    b.float().sum().backward()
    for (name, p), q in zip(default.named_parameters(), fused.parameters()):
        assert p.grad.dtype == torch.float32 and torch.equal(p.grad, q.grad), name


def test_it_refuses_a_convolution_it_does_not_compute():
    with pytest.raises(ValueError, match="numeric zero padding"):
        conv_relu(nn.Conv2d(3, 4, 3, padding="same"), torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="numeric zero padding"):
        conv_relu(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), torch.zeros(1, 3, 8, 8))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused cuDNN kernel needs a CUDA device")
def test_on_a_gpu_the_fused_kernel_is_the_default_within_float32_rounding():
    default, fused = trunk_pair()
    default, fused = default.cuda(), fused.cuda()
    obs = torch.randint(0, 256, (16, 9, 30, 30), dtype=torch.uint8, device="cuda")
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        a, b = default(obs), fused(obs)
        a.sum().backward()
        b.sum().backward()
    finally:
        torch.backends.cudnn.allow_tf32 = old
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for p, q in zip(default.parameters(), fused.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
