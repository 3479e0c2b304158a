"""The GPU bench's self-test checks of the fused convolution (scripts/bench_curl_gpu.py), run on the CPU at tiny
sizes: there the fused path is the default computation, so these tests break it on purpose and check the verdicts."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_curl_gpu as B  # noqa: E402
from rl_curl import networks  # noqa: E402

CPU = torch.device("cpu")


def args(**kw):
    return B.Args(tiny=True, batch=6, capacity=40, selftest_updates=2, **kw)


def test_the_fused_kernel_check_passes_when_it_is_the_default_computation(monkeypatch):
    poisoned, outputs = [], []
    monkeypatch.setattr(B, "poison_cache", lambda device, sizes: poisoned.append(list(sizes)))
    real = networks.ConvReLU.forward

    def forward(ctx, *a):
        y = real(ctx, *a)
        outputs.append(y.numel() * y.element_size())
        return y
    monkeypatch.setattr(networks.ConvReLU, "forward", staticmethod(forward))
    check = B.check_conv_relu_op(args(), CPU)
    # before each fused pass (float32, then TF32 allowed) the allocator's blocks of the fused outputs' sizes are NaN
    assert len(poisoned) == 2 and poisoned[0] == outputs[:2] == outputs[2:]
    assert check["passed"], check
    assert check["path"] == "conv_relu_op" and not check["fused_kernel"] and "PASS" in check["line"]
    for mode in ("float32", "tf32"):
        errs = check["modes"][mode]["fused_rel_err"]
        assert set(errs) == {"output"} | {f"conv{i} {t}.grad" for i in range(2) for t in ("weight", "bias")}
        assert max(errs.values()) < 1e-5  # float32 against float64


def off_by(delta):
    real = networks.ConvReLU.forward

    def forward(ctx, x, weight, bias, *rest):
        return real(ctx, x, weight, bias, *rest) + delta
    return forward


@pytest.mark.parametrize("delta, why", [(1e-3, "over the bound"), (float("nan"), "over the bound")])
def test_the_fused_kernel_check_fails_a_kernel_that_computes_otherwise(monkeypatch, delta, why):
    # a fused kernel whose output is off by a little (or NaN, as one reading its uninitialised output would give)
    monkeypatch.setattr(networks.ConvReLU, "forward", staticmethod(off_by(delta)))
    check = B.check_conv_relu_op(args(), CPU)
    assert not check["passed"] and why in check["line"] and "FAIL" in check["line"]
    assert "output" in check["modes"]["float32"]["failed"]


def engine_only_with_tf32(monkeypatch):
    """A fused kernel that, like cuDNN possibly, has no engine for plain float32 (TF32 off)."""
    real = networks.ConvReLU.forward

    def forward(ctx, *a):
        if not torch.backends.cudnn.allow_tf32:
            raise RuntimeError("cuDNN error: CUDNN_BACKEND_EXECUTION_PLAN: GET was unable to find an engine")
        return real(ctx, *a)
    monkeypatch.setattr(networks.ConvReLU, "forward", staticmethod(forward))


def test_no_fused_engine_without_tf32_is_checked_as_the_runs_compute(monkeypatch):
    engine_only_with_tf32(monkeypatch)
    check = B.check_conv_relu_op(args(), CPU)
    assert check["passed"], check  # the runs train with TF32 allowed, as torch leaves cuDNN
    assert "error" in check["modes"]["float32"] and "float32: ERROR RuntimeError" in check["line"]
    assert not check["modes"]["tf32"]["failed"]
    # the update's check of the graph falls back the same way, and says so
    report = B.selftest(args(), CPU)
    conv = next(c for c in report["checks"] if c["path"] == "graphs_convrelu")
    assert conv["passed"] and conv["tf32"] and conv["against"] == "default_convrelu"
    assert "graphs_convrelu vs default_convrelu, 2 updates" in report["text"]
    assert "TF32 as in training; without it: RuntimeError" in report["text"] and conv["float32_error"]
    assert report["passed"]


def test_no_fused_engine_at_all_fails_both_checks(monkeypatch):
    monkeypatch.setattr(networks.ConvReLU, "forward", staticmethod(
        lambda ctx, *a: (_ for _ in ()).throw(RuntimeError("unable to find an engine to execute this computation"))))
    check = B.check_conv_relu_op(args(), CPU)
    assert not check["passed"] and "error" in check["modes"]["tf32"]
    report = B.selftest(args(), CPU)
    conv = next(c for c in report["checks"] if c["path"] == "graphs_convrelu")
    assert not conv["passed"] and "engine" in conv["error"]
    assert next(c for c in report["checks"] if c["path"] == "graphs")["passed"]  # the other paths unaffected
