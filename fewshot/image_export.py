"""An image run's classifier in the formats the image ecosystem loads without this suite.

An image run ends with ``model/image_classifier.pt`` (:func:`fewshot.image_run.export_images`), which
:func:`fewshot.image_run.load_image_classifier` reads. Beside it :func:`write_portable` writes

* ``image_classifier.torchscript.pt``: ``torch.jit.load(path)`` with torch alone;
* ``image_classifier.onnx``: ONNX (torch's exporter, any batch size), for onnxruntime and the rest (needs the
  ``onnx`` and ``onnxscript`` packages when written: ``pip install "contrastive-suite[export]"``; without them the
  file is left out and metrics.json's ``exports`` says so);
* ``model.safetensors`` + ``config.json``: the weights and every size and setting, for those who rebuild the
  network themselves (the architecture is in ``config.json``'s ``architecture``).

Both take a batch ``[N, *raw_shape]`` (``(H, W)``, ``(H, W, C)`` or ``(D,)`` per image), the normalisation
inside, and return ``scores`` ``[N]``: the logit of the positive class (``scores > 0``: the positive class, the
classes ``config.json`` names). They compute what :func:`load_image_classifier` computes (tested to 1e-5, in a
process where the suite cannot be imported). They differ in the pixels they take:

* the TorchScript module follows :func:`load_image_classifier`'s rule whatever the training pixels were: integer
  pixels (uint8) 0-255 are divided by 255, float pixels are taken as they are and must lie in [0, 1] (else it
  raises, naming the range found);
* the ONNX graph has one input type, that of the training arrays (``config.json``'s ``input``): uint8 0-255 when
  the training pixels were integers (onnxruntime refuses floats), else float32 in [0, 1] (onnxruntime refuses
  uint8; a graph cannot check the range, so float pixels 0-255 give wrong scores without an error).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn as nn

from shared_losses.training.runtime import export_source

TORCHSCRIPT_FILE = "image_classifier.torchscript.pt"
ONNX_FILE = "image_classifier.onnx"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


class PortableImageClassifier(nn.Module):
    """Raw image arrays -> the positive class's logit: the run's input scaling and layout, its encoder (eval mode),
    the head's standardisation and linear map, in one module that TorchScript and ONNX take."""

    def __init__(self, model, head: dict, raw_shape: tuple, raw_integer: bool, in_shape: tuple):
        super().__init__()
        self.encoder = model.encoder.eval()
        self.scale = 1.0 / 255.0 if raw_integer else 1.0
        self.raw_ndim = len(raw_shape)
        self.in_shape = tuple(int(d) for d in in_shape)
        self.standardise = head.get("mean") is not None
        feat = head["weight"].shape[1]
        self.register_buffer("mean", head["mean"].float() if self.standardise else torch.zeros(feat))
        self.register_buffer("std", head["std"].float() if self.standardise else torch.ones(feat))
        self.register_buffer("weight", head["weight"].float())
        self.register_buffer("bias", head["bias"].float())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() * self.scale
        if self.raw_ndim == 2:  # (N, H, W): one grey channel
            x = x.unsqueeze(1)
        elif self.raw_ndim == 3:  # (N, H, W, C): channels first
            x = x.permute(0, 3, 1, 2)
        x = x.reshape((-1,) + self.in_shape)  # flat vectors read as a square image by the CNN; else unchanged
        f = self.encoder(x)
        if self.standardise:
            f = (f - self.mean) / self.std
        return (f @ self.weight.T + self.bias).squeeze(1)


class AnyPixels(nn.Module):
    """The TorchScript export's front: the pixels :func:`fewshot.image_run.load_image_classifier` takes, whatever the
    training arrays held (integers 0-255 -> divided by 255; floats in [0, 1] as they are, others refused), into
    ``core``, a traced :class:`PortableImageClassifier` that takes float pixels in [0, 1]. Scripted, so that the
    choice by dtype and the range check stay in the saved module (a trace would keep only the example's branch)."""

    def __init__(self, core: nn.Module):
        super().__init__()
        self.core = core

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dtype == torch.bool or images.is_complex():
            raise ValueError("images must hold numbers (uint8 0-255 or float in [0, 1]), got " + str(images.dtype))
        if images.is_floating_point():
            x = images.float()
            if x.numel() > 0:
                if not bool(torch.isfinite(x).all()):
                    raise ValueError("images hold NaN or infinite values")
                lo, hi = float(x.min()), float(x.max())
                if lo < 0.0 or hi > 1.0:
                    raise ValueError("float pixels must lie in [0, 1], found values in [{}, {}] (0-255 floats? "
                                     "divide by 255, or pass uint8)".format(lo, hi))
        else:
            if images.numel() > 0:
                lo, hi = int(images.min()), int(images.max())
                if lo < 0 or hi > 255:
                    raise ValueError("integer pixels must lie in 0-255, found values in [{}, {}]".format(lo, hi))
            x = images.float() / 255.0
        return self.core(x)


def torchscript_module(model, head: dict, raw_shape: tuple, in_shape: tuple) -> torch.jit.ScriptModule:
    """The TorchScript export of a classifier (see :class:`AnyPixels`): the network traced on float pixels, the
    scripted front that reads any pixel dtype before it."""
    core = PortableImageClassifier(model, head, raw_shape, False, in_shape).eval().requires_grad_(False)
    with torch.no_grad():
        traced = torch.jit.trace(core, (torch.rand((2, *raw_shape)),), check_trace=False)
    return torch.jit.script(AnyPixels(traced))


def rebuild(blob: dict):
    """The :class:`fewshot.images.ImageModel` of an ``image_classifier.pt`` payload, its weights loaded (eval)."""
    from .images import ImageModel

    model = ImageModel(blob["kind"], tuple(blob["in_shape"]), hidden=blob["hidden"],
                       patch_pool=blob.get("patch_pool", 3))
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def raw_input(blob: dict) -> tuple[tuple, bool]:
    """(per-image shape, integer pixels?) of the arrays the run trained on; payloads from before these were recorded:
    the images as the classifier reads them ((C, H, W) -> (H, W) for one channel), floats in [0, 1]."""
    if blob.get("raw_shape"):
        return tuple(blob["raw_shape"]), bool(blob.get("raw_integer"))
    shape = tuple(blob["in_shape"])
    return (shape[1:] if len(shape) == 3 and shape[0] == 1 else shape), False


def _atomic(path: Path, write) -> None:
    from shared_losses.training.runtime import readable_as_umask_allows

    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    readable_as_umask_allows(tmp)  # safetensors' files come out 0600
    os.replace(tmp, path)


def export_onnx(module: nn.Module, example: torch.Tensor, path: Path, legacy: bool = False) -> None:
    """``module`` as ONNX with any batch size: with ``legacy`` torch's TorchScript-based exporter (a tenth of a
    second; fine for the MLP, but it cannot place the CNN's adaptive pooling under a free batch size), else its
    torch.export-based one (a few seconds), whose progress lines and notes on operator libraries this model does not
    use are kept out of the run's output."""
    import contextlib
    import io
    import logging

    if legacy:
        torch.onnx.export(module, (example,), str(path), input_names=["images"], output_names=["scores"],
                          dynamic_axes={"images": {0: "n"}, "scores": {0: "n"}}, dynamo=False)
        return
    quiet = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "onnxscript")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(module, (example,), str(path), input_names=["images"], output_names=["scores"],
                              dynamic_shapes={"images": {0: torch.export.Dim("n")}}, dynamo=True,
                              external_data=False)  # the weights inside the one file
    finally:
        for lg, level in zip(quiet, levels):
            lg.setLevel(level)


class _BadOnnx(Exception):
    """The ONNX file the exporter wrote does not load or does not compute what the module computes."""


def _said(err: BaseException) -> str:
    """The first line of ``err``'s message without terminal colour codes (torch's exporter colours its messages;
    they land in metrics.json)."""
    import re

    lines = str(err).splitlines()
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[0] if lines else "")


def check_onnx(path: Path, example: torch.Tensor, expected: torch.Tensor) -> str:
    """What is wrong with the ONNX file at ``path`` ("" when nothing): with onnxruntime installed, the file must load
    and score ``example`` as the module did (``expected``, to 1e-4 after scaling); without it, onnx's checker must
    pass it. Some torch / onnxscript pairs write files that load nowhere (torch 2.6 with onnxscript 0.2: "Duplicate
    definition of name"), and a run must not leave such a file as its export."""
    import numpy as np

    try:
        import onnxruntime
    except ImportError:
        import onnx

        try:
            onnx.checker.check_model(str(path))
        except Exception as err:  # noqa: BLE001 - any refusal of the checker
            return f"onnx's checker: {type(err).__name__}: {_said(err)}"
        return ""
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: example.numpy()})[0]
    except Exception as err:  # noqa: BLE001 - onnxruntime refuses the file or cannot run it
        return f"onnxruntime: {type(err).__name__}: {_said(err)}"
    want = expected.detach().numpy()
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(abs(want).max()))):
        return (f"onnxruntime scores the example {got.ravel()[:2].tolist()} where the classifier scores "
                f"{want.ravel()[:2].tolist()}")
    return ""


def write_portable(folder: str | Path, blob: dict, run=None) -> tuple[list[str], list[str]]:
    """Write the portable files (see the module's docstring) of the classifier ``blob`` (the payload of
    ``image_classifier.pt``) into ``folder``; returns (the files written, notes on those left out). ``run``: the run
    folder, recorded in config.json (an export elsewhere is replaced only by its own run's)."""
    import warnings

    from safetensors.torch import save_file

    folder = Path(folder)
    raw_shape, raw_integer = raw_input(blob)
    model = rebuild(blob)
    module = PortableImageClassifier(model, blob["head"], raw_shape, raw_integer, tuple(blob["in_shape"]))
    module.eval().requires_grad_(False)  # the loaded files predict; their outputs need no gradient
    dtype = torch.uint8 if raw_integer else torch.float32
    example = (torch.randint(0, 256, (2, *raw_shape), dtype=torch.uint8) if raw_integer
               else torch.rand((2, *raw_shape)))
    written, notes = [], []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and exporter warnings about shapes that are in fact fixed
        scripted = torchscript_module(model, blob["head"], raw_shape, tuple(blob["in_shape"]))
        _atomic(folder / TORCHSCRIPT_FILE, lambda p: torch.jit.save(scripted, str(p)))
        written.append(TORCHSCRIPT_FILE)
        try:
            import onnx  # noqa: F401  (torch's exporter needs both)
            import onnxscript  # noqa: F401
        except ImportError:
            notes.append(f"{ONNX_FILE} not written: the onnx and onnxscript packages are not installed (pip install "
                         "'contrastive-suite[export]')")
        else:
            def write_checked(p: Path) -> None:
                export_onnx(module, example, p, legacy=blob["kind"] == "mlp")
                problem = check_onnx(p, example, module(example))
                if problem:
                    raise _BadOnnx(problem)

            try:
                _atomic(folder / ONNX_FILE, write_checked)
                written.append(ONNX_FILE)
            except Exception as err:  # noqa: BLE001 - an operator the exporter lacks: the other files still count
                (folder / f".{ONNX_FILE}.tmp").unlink(missing_ok=True)
                said = _said(err)
                notes.append(f"{ONNX_FILE} not written: the file torch's ONNX exporter wrote failed its check ({said})"
                             if isinstance(err, _BadOnnx) else
                             f"{ONNX_FILE} not written: torch's ONNX exporter failed ({type(err).__name__}: {said})")
    tensors = {f"encoder.{k}": v.contiguous() for k, v in module.encoder.state_dict().items()}
    tensors.update({f"head.{k}": getattr(module, k).contiguous() for k in ("weight", "bias", "mean", "std")})
    _atomic(folder / WEIGHTS_FILE, lambda p: save_file(tensors, str(p)))
    config = {
        "format": "contrastive-suite image classifier, version 1",
        "input": {"name": "images", "shape": ["N", *raw_shape], "dtype": "uint8" if raw_integer else "float32",
                  "values": "pixels 0-255" if raw_integer else "pixels in [0, 1]",
                  "scaling": f"multiplied by {module.scale!r} inside",
                  "onnx": ("uint8 pixels 0-255 only" if raw_integer else "float32 pixels in [0, 1] only"),
                  "torchscript": "uint8 pixels 0-255 (divided by 255 inside) or float pixels in [0, 1] (as they are; "
                                 "others refused)"},
        "output": {"name": "scores", "shape": ["N"], "meaning": "logit of the positive class: > 0 means positive"},
        "positive_classes": blob.get("positive_classes"), "classes": {"1": "positive", "0": "negative"},
        "architecture": {"encoder": blob["kind"], "in_shape": list(blob["in_shape"]), "hidden": blob["hidden"],
                         **({"patch_pool": blob.get("patch_pool", 3)} if blob["kind"] == "patches" else {}),
                         "encoder_module": "fewshot.images." + {"mlp": "MLPEncoder", "cnn": "CNNEncoder",
                                                                 "patches": "PatchEncoder"}[blob["kind"]],
                         "head": "scores = ((features - head.mean) / head.std) @ head.weight.T + head.bias"
                                 + ("" if module.standardise else " (mean 0, std 1: no standardisation)")},
        "weights": WEIGHTS_FILE, "torchscript": TORCHSCRIPT_FILE, "onnx": ONNX_FILE if ONNX_FILE in written else None,
        "head_learner": blob["head"].get("learner"), "contrastive": blob.get("contrastive"),
        "setting": blob.get("setting"), "eval_accuracy": blob.get("eval_accuracy"),
        "input_dtype_torch": str(dtype),
        **(export_source(run, "run") if run is not None else {}),
    }
    _atomic(folder / CONFIG_FILE, lambda p: p.write_text(json.dumps(config, indent=1) + "\n"))
    written += [WEIGHTS_FILE, CONFIG_FILE]
    return written, notes
