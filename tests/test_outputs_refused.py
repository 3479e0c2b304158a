"""A write the file system refuses after a run's last step (its trained model, its summary: a full disk, a quota, a
read-only mount) ends the run in one line saying how to go on, and ``--resume`` then writes the outputs that are
missing: the same model and summary as a run the disk never refused. Each application's own writer is made to fail
part-way, as a full disk makes it fail."""

import errno
import json

import numpy as np
import pytest

from shared_losses.training.runtime import RunStopped

#: fields of a summary that measure this process's time, not the run
TIMES = {"train_seconds", "time_seconds", "env_steps_per_second", "run_seconds", "probe_seconds", "train_from_env_step",
         "wall_seconds", "seconds", "thread_cpu_seconds"}


def _full_disk(monkeypatch, module, name, path_of):
    """``module.name`` (a writer the export calls) made to write part of its file, then fail as a full disk does."""
    def writer(*args, **kwargs):
        path = path_of(*args, **kwargs)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"part of it")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    monkeypatch.setattr(module, name, writer)


def _full_disk_for(monkeypatch, suffix):
    """torch.save made to fail as a full disk does part-way through a file whose name ends with ``suffix``."""
    import torch

    real = torch.save

    def save(obj, f, *args, **kwargs):
        real(obj, f, *args, **kwargs)
        if str(f).endswith(suffix):
            with open(f, "r+b") as fh:
                fh.truncate(10)
            raise OSError(errno.ENOSPC, "No space left on device", str(f))
    monkeypatch.setattr(torch, "save", save)


def _no_temporaries(folder):
    """Nothing a failed writer left behind: no ``.NAME.tmp`` file or folder anywhere in the run folder."""
    left = [str(p) for p in folder.rglob(".*.tmp")]
    assert not left, left


def _same(a: dict, b: dict) -> None:
    assert {k: v for k, v in a.items() if k not in TIMES} == {k: v for k, v in b.items() if k not in TIMES}


def _check_stopped(info, out, where):
    msg = str(info.value)
    assert msg.startswith(f"could not write to {out} (No space left on device: {out}/"), msg
    assert msg.endswith(f"the run trained to {where} and stopped before its outputs were all written: continue from "
                        f"its last checkpoint ({out / 'checkpoint'}) with --resume"), msg
    assert "the disk is full, or a quota or file-size limit was reached; make room" in msg


def test_nlp_qt(tmp_path, monkeypatch):
    import torch

    import nlp_qt.train as qt

    from .nlp_qt.test_train import _cfg

    full = qt.train(_cfg(tmp_path, "full", max_steps=4))
    import nlp_qt.st_module as st_module

    # the weights are written; the sentence-transformers files after them meet the full disk
    _full_disk(monkeypatch, st_module, "write_sentence_transformers_files", lambda folder: folder / "modules.json")
    with pytest.raises(RunStopped) as info:
        qt.train(_cfg(tmp_path, "cut", max_steps=4))
    _check_stopped(info, tmp_path / "cut", "step 4")
    assert not (tmp_path / "cut" / "summary.json").exists() and not (tmp_path / "cut" / "model").exists()
    _no_temporaries(tmp_path / "cut")
    monkeypatch.undo()
    _same(qt.train(_cfg(tmp_path, "cut", max_steps=4)), full)
    for name in ("model.safetensors", "pytorch_model.bin"):
        a, b = tmp_path / "full" / "model" / name, tmp_path / "cut" / "model" / name
        if a.exists():
            from safetensors.torch import load_file

            load = load_file if name.endswith(".safetensors") else torch.load
            wa, wb = load(str(a)), load(str(b))
            assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
            break
    else:
        raise AssertionError(f"no weights file in {tmp_path / 'full' / 'model'}")


@pytest.mark.slow  # an rl_curl run end to end, then its resume (about 20 s); nlp_qt's and the images' stay fast
def test_rl_curl(tmp_path, monkeypatch):
    import dataclasses

    import torch

    import rl_curl.policy as policy
    from rl_curl.train import run

    from .rl_curl.conftest import tiny_config

    def cfg(name):
        return tiny_config(env_steps=400, action_repeat=8, eval_every=200, checkpoint_every=200,
                           output_dir=str(tmp_path / name))

    full = run(cfg("full"))
    _full_disk_for(monkeypatch, ".policy.pt.tmp")
    with pytest.raises(RunStopped) as info:
        run(cfg("cut"))
    _check_stopped(info, tmp_path / "cut", "environment step 400")
    assert not (tmp_path / "cut" / policy.POLICY_FILE).exists()
    _no_temporaries(tmp_path / "cut")
    monkeypatch.undo()
    _same(run(dataclasses.replace(cfg("cut"), resume=True)), full)
    a, b = (torch.load(tmp_path / name / policy.POLICY_FILE, weights_only=False) for name in ("full", "cut"))
    wa, wb = a["actor"] if "actor" in a else a, b["actor"] if "actor" in b else b
    flat = [(k, v) for k, v in wa.items() if isinstance(v, torch.Tensor)]
    assert flat and all(torch.equal(v, wb[k]) for k, v in flat)
    assert (tmp_path / "cut" / "eval.csv").read_text() == (tmp_path / "full" / "eval.csv").read_text()


def test_fewshot_images(tmp_path, monkeypatch):
    from fewshot.config import ImageConfig
    from fewshot.train import train

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.integers(0, 256, (80, 8, 8), dtype=np.uint8), y=np.arange(80) % 4)

    def cfg(name):
        return ImageConfig(dataset=str(tmp_path / "d.npz"), encoder="mlp", setting="pu", contrastive="punce",
                           n_labeled=8, positive_classes=(1,), hidden=16, max_steps=4, passes=None, batch_size=16,
                           progress=False, output_dir=str(tmp_path / name), resume=True, checkpoint_every=2)

    full = train(cfg("full"))
    _full_disk_for(monkeypatch, ".image_classifier.pt.tmp")
    with pytest.raises(RunStopped) as info:
        train(cfg("cut"))
    _check_stopped(info, tmp_path / "cut", "step 4")
    _no_temporaries(tmp_path / "cut")
    assert not (tmp_path / "cut" / "metrics.json").exists()
    monkeypatch.undo()
    again = train(cfg("cut"))
    _same({**again, "model": None}, {**full, "model": None})
    assert json.loads((tmp_path / "cut" / "metrics.json").read_text())["eval_accuracy"] == full["eval_accuracy"]
    assert sorted(p.name for p in (tmp_path / "cut" / "model").iterdir()) == \
        sorted(p.name for p in (tmp_path / "full" / "model").iterdir())
