"""The exports as other ecosystems load them: the image TorchScript module reads pixels by their dtype as
load_image_classifier does, the text classifier loads in bf16, the run's exported classifier folder is taken as an
encoder."""

import numpy as np
import pytest
import torch

from fewshot.image_export import TORCHSCRIPT_FILE, write_portable
from fewshot.image_run import load_image_classifier
from fewshot.images import ImageModel

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_image_blob(raw_integer: bool) -> dict:
    """The payload of an image_classifier.pt without a run: an untrained MLP on 10x10 grey images, a random head."""
    torch.manual_seed(0)
    model = ImageModel("mlp", (1, 10, 10), hidden=16).eval()
    feat = model.encoder.feat_dim
    head = {"learner": "logistic regression", "weight": torch.randn(1, feat), "bias": torch.randn(1),
            "mean": torch.randn(feat) * 0.1, "std": torch.rand(feat) + 0.5}
    return {"kind": "mlp", "in_shape": [1, 10, 10], "hidden": 16, "patch_pool": 3, "state_dict": model.state_dict(),
            "head": head, "positive_classes": [1], "eval_accuracy": None, "contrastive": "punce", "setting": "pu",
            "raw_shape": [10, 10], "raw_integer": raw_integer}


@pytest.mark.parametrize("raw_integer", [True, False], ids=["trained_on_uint8", "trained_on_float"])
def test_the_image_torchscript_reads_pixels_by_their_dtype_as_the_python_loader_does(tmp_path, raw_integer):
    """uint8 0-255 and float in [0, 1] give the same scores as load_image_classifier whatever the training pixels
    were; float pixels outside [0, 1] raise instead of scoring wrongly."""
    blob = tiny_image_blob(raw_integer)
    torch.save(blob, tmp_path / "image_classifier.pt")
    write_portable(tmp_path, blob)
    ts = torch.jit.load(str(tmp_path / TORCHSCRIPT_FILE))
    pixels = np.random.default_rng(1).integers(0, 256, size=(5, 10, 10)).astype(np.uint8)
    as_float = pixels.astype(np.float32) / 255.0
    ref = load_image_classifier(tmp_path).scores(pixels)
    np.testing.assert_allclose(load_image_classifier(tmp_path).scores(as_float), ref, rtol=1e-5, atol=1e-5)
    for x in (pixels, as_float, as_float.astype(np.float64)):
        np.testing.assert_allclose(ts(torch.from_numpy(x)).numpy(), ref, rtol=1e-5, atol=1e-5, err_msg=str(x.dtype))
    with pytest.raises(Exception, match=r"float pixels must lie in \[0, 1\]"):
        ts(torch.from_numpy(pixels.astype(np.float32)))


def test_the_image_onnx_takes_the_training_dtype_and_refuses_the_other(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    blob = tiny_image_blob(True)
    torch.save(blob, tmp_path / "image_classifier.pt")
    written, _ = write_portable(tmp_path, blob)
    if "image_classifier.onnx" not in written:
        pytest.skip("this torch / onnxscript pair writes no ONNX file")
    session = ort.InferenceSession(str(tmp_path / "image_classifier.onnx"), providers=["CPUExecutionProvider"])
    pixels = np.random.default_rng(1).integers(0, 256, size=(3, 10, 10)).astype(np.uint8)
    np.testing.assert_allclose(session.run(None, {"images": pixels})[0], load_image_classifier(tmp_path).scores(pixels),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match="(?i)type"):
        session.run(None, {"images": pixels.astype(np.float32) / 255.0})


# ---------------------------------------------------------------------------------------------- text classifier


@pytest.fixture(scope="module")
def text_run(tiny_encoder, tmp_path_factory):
    """A tiny text run (2 steps) and its exported classifier folder, RUN/model."""
    from fewshot.train import train

    from .test_export import _cfg

    root = tmp_path_factory.mktemp("text_export")
    train(_cfg(tiny_encoder, root, "run", objective="ce", max_steps=2, eval_every=2, checkpoint_every=2))
    return root, root / "run" / "model"


def test_the_text_classifier_loads_in_bf16_and_scores_as_in_float32(text_run):
    """Issue: the saved encoder_config's "dtype": "float32" built the encoder in float32 under
    from_pretrained(dtype=torch.bfloat16) while the head was bf16 ("mat1 and mat2 must have the same dtype")."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = text_run[1]
    tok = AutoTokenizer.from_pretrained(str(folder))
    batch = tok(["the movie was good", "the plot was bad and dull"], return_tensors="pt", padding=True)
    probs = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForSequenceClassification.from_pretrained(str(folder), trust_remote_code=True,
                                                                   dtype=dtype).eval()
        assert {p.dtype for p in model.parameters()} == {dtype}
        with torch.no_grad():
            logits = model(**batch).logits
        assert logits.dtype == dtype and torch.isfinite(logits).all()
        probs[dtype] = logits.float().softmax(-1)
    torch.testing.assert_close(probs[torch.bfloat16], probs[torch.float32], atol=0.03, rtol=0)


def test_an_exported_classifier_folder_as_encoder_trains_from_its_encoder_without_a_prompt(text_run, monkeypatch,
                                                                                            capsys, tiny_encoder):
    """Issue: --encoder RUN/model asked "Do you wish to run the custom code? [y/N]"; the exported folder now means
    its sentence-transformers/ encoder (said in one line), and a folder whose model needs its own code is one
    error line, never a prompt."""
    import builtins
    import shutil

    from fewshot.train import train

    from .test_export import _cfg

    root, folder = text_run

    def no_prompt(*args, **kwargs):
        raise AssertionError(f"an interactive prompt: {args}")

    monkeypatch.setattr(builtins, "input", no_prompt)
    train(_cfg(tiny_encoder, root, "chained", encoder=str(folder), objective="ce", max_steps=1, eval_every=1,
               checkpoint_every=1, pooling="auto"))
    said = capsys.readouterr().out
    assert f"using its trained encoder, {folder / 'sentence-transformers'}" in said
    assert said.count("is a fewshot classifier folder") == 1
    other = root / "custom_code_model"
    shutil.copytree(folder, other, ignore=shutil.ignore_patterns("fewshot_export.json", "sentence-transformers"))
    with pytest.raises(ValueError, match="holds a model that needs its own code") as err:
        train(_cfg(tiny_encoder, root, "refused", encoder=str(other), objective="ce", max_steps=1))
    assert "\n" not in str(err.value)
    assert not (root / "refused").exists()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_max_pooling_in_half_precision_ignores_padding_without_overflow(dtype):
    """Padding was filled with -1e9, which float16 cannot hold: a max-pooled export loaded with dtype=torch.float16
    failed ("value cannot be converted to type c10::Half without overflow"), as would the training's own pooling."""
    from fewshot.model import FewShotModel
    from fewshot.modeling_fewshot import pool

    hidden = torch.randn(2, 5, 4) - 3.0  # all negative: a padded 0 would win a max if padding took part
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    want = torch.stack([hidden[0, :3].amax(0), hidden[1].amax(0)])
    got = pool(hidden.to(dtype), mask, "max")
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), want.to(dtype).float())

    class Encoder(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return type("Out", (), {"last_hidden_state": hidden.to(dtype)})()

    model = FewShotModel.__new__(FewShotModel)
    torch.nn.Module.__init__(model)
    model.encoder, model.pooling = Encoder(), "max"
    torch.testing.assert_close(model.embed(None, mask), got)
