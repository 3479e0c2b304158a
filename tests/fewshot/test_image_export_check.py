"""fewshot.image_export.check_onnx, and write_portable's use of it: an ONNX file that does not load, or does not score
as the classifier does, is not kept as the run's export; the note says why, without terminal colour codes. (Some
torch / onnxscript pairs write such files: torch 2.6 with onnxscript 0.2 wrote "Duplicate definition of name" models
for the CNN, which onnxruntime refuses.)"""

import sys

import numpy as np
import pytest
import torch

from fewshot import image_export
from fewshot.image_export import CONFIG_FILE, ONNX_FILE, TORCHSCRIPT_FILE, WEIGHTS_FILE, write_portable
from fewshot.train import train

from .test_images import image_cfg, make_images

pytest.importorskip("onnx")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tiny_linear(path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 1), torch.nn.Flatten(0)).eval()
    example = torch.rand(2, 6)
    with torch.no_grad():
        torch.onnx.export(module, (example,), str(path), input_names=["images"], output_names=["scores"],
                          dynamo=False)
        return example, module(example)


def test_a_good_file_passes_and_a_damaged_or_wrong_one_is_named(tmp_path):
    pytest.importorskip("onnxruntime")
    example, want = _tiny_linear(tmp_path / "good.onnx")
    assert image_export.check_onnx(tmp_path / "good.onnx", example, want) == ""
    wrong = image_export.check_onnx(tmp_path / "good.onnx", example, want + 1.0)
    assert wrong.startswith("onnxruntime scores the example") and "where the classifier scores" in wrong
    (tmp_path / "junk.onnx").write_bytes(b"not an onnx model")
    assert image_export.check_onnx(tmp_path / "junk.onnx", example, want).startswith("onnxruntime: ")


def test_without_onnxruntime_onnxs_checker_decides(tmp_path, monkeypatch):
    example, want = _tiny_linear(tmp_path / "good.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    assert image_export.check_onnx(tmp_path / "good.onnx", example, want + 1.0) == ""  # scores are not checked
    (tmp_path / "junk.onnx").write_bytes(b"not an onnx model")
    assert image_export.check_onnx(tmp_path / "junk.onnx", example, want).startswith("onnx's checker: ")


@pytest.fixture(scope="module")
def blob(tmp_path_factory):
    """The payload of a tiny image run's image_classifier.pt (MLP, 2 steps)."""
    root = tmp_path_factory.mktemp("portable")
    x, y = make_images()
    np.savez(root / "digits.npz", x=x, y=y)
    train(image_cfg(root / "digits.npz", root / "run", max_steps=2))
    return torch.load(root / "run" / "model" / "image_classifier.pt", map_location="cpu", weights_only=False)


@pytest.mark.parametrize("fault", ["junk", "wrong_scores", "exporter_raises"])
def test_an_onnx_file_that_fails_its_check_is_not_kept_and_the_note_says_why(blob, tmp_path, monkeypatch, fault):
    pytest.importorskip("onnxruntime")
    plain_export = image_export.export_onnx

    def export(module, example, path, legacy=False):
        if fault == "junk":
            path.write_bytes(b"\x08\x07garbage")
        elif fault == "wrong_scores":  # a valid model of another classifier
            other = torch.nn.Sequential(torch.nn.Flatten(1), torch.nn.LazyLinear(1), torch.nn.Flatten(0))
            other(example.float())
            plain_export(_AsFloat(other), example, path, legacy=True)
        else:  # torch's exporter colours its messages
            raise RuntimeError("Failed to convert the exported program. \x1b[96mThis is step 2/2\x1b[0m of exporting")

    monkeypatch.setattr(image_export, "export_onnx", export)
    written, notes = write_portable(tmp_path, blob)
    assert written == [TORCHSCRIPT_FILE, WEIGHTS_FILE, CONFIG_FILE]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(written)  # no ONNX file, no temporary left
    assert len(notes) == 1 and notes[0].startswith(f"{ONNX_FILE} not written: ") and "\x1b" not in notes[0]
    if fault == "exporter_raises":
        assert notes[0].endswith("(RuntimeError: Failed to convert the exported program. This is step 2/2 of "
                                 "exporting)")
    else:
        assert "the file torch's ONNX exporter wrote failed its check (onnxruntime" in notes[0]
    monkeypatch.setattr(image_export, "export_onnx", plain_export)
    (tmp_path / "again").mkdir()
    assert write_portable(tmp_path / "again", blob) == ([TORCHSCRIPT_FILE, ONNX_FILE, WEIGHTS_FILE, CONFIG_FILE], [])


class _AsFloat(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.float())
