"""The bad-input battery of issue 34, kept in the suite: each row is a command line (an application's entry point,
run in this process through the same ``run_cli`` the command uses), the exit status it must end with, a fragment
its one ``error:`` line must hold, and the files it must leave alone: every file under the case's folder (the
inputs it was given, runs and results written before) must be byte-identical afterwards, and no new file may
appear. A row fails on a traceback, on a second error line, or on any change in the folder.

Placeholders in a row's arguments: ``{tmp}`` is the case's folder; ``{qt_run}`` a finished tiny nlp_qt run
(copied into the case's folder), ``{image_run}`` a finished tiny fewshot run on images (copied in when a row
names it), ``{corpus}`` the nlp_qt run's corpus, ``{results}`` and ``{predictions}`` earlier
results files.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from .folder_rules import tree_hash
from .shared_losses.test_trackers import mlflow_refuses_file_stores


def _write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for b in range(3):
        text = " ".join(f"Book {b} tells part {i} of the story about the {['cat', 'dog', 'bird'][i % 3]}."
                        for i in range(14))
        (folder / f"book{b}.txt").write_text(text + "\n")
    return folder


@pytest.fixture(scope="module")
def qt_run(tmp_path_factory) -> Path:
    """A finished 2-step nlp_qt run (tiny model), trained once for the module."""
    from nlp_qt.config import Config
    from nlp_qt.train import train

    root = tmp_path_factory.mktemp("battery")
    corpus = _write_corpus(root / "corpus")
    train(Config(corpus=str(corpus), output_dir=str(root / "run"), batch_size=8, word_dim=8, encoder_dim=8,
                 vocab_size=200, max_length=12, log_every=1, checkpoint_every=2, max_steps=2, progress=False))
    return root / "run"


@pytest.fixture(scope="module")
def image_run(tmp_path_factory) -> Path:
    """A finished 2-step fewshot run on image data (a tiny MLP), its export written, trained once for the module."""
    import numpy as np

    from fewshot.config import ImageConfig
    from fewshot.train import train

    root = tmp_path_factory.mktemp("battery_images")
    rng = np.random.default_rng(0)
    y = np.arange(60) % 4
    x = rng.integers(0, 140, size=(60, 8, 8))
    for c in range(4):
        x[y == c, c + 1] += 110
    np.savez(root / "digits.npz", x=x.astype(np.uint8), y=y)
    train(ImageConfig(dataset=str(root / "digits.npz"), encoder="mlp", setting="pu", contrastive="punce",
                        n_labeled=6, positive_classes=(0, 2), hidden=8, max_steps=2, passes=None, batch_size=16,
                        progress=False, output_dir=str(root / "run")))
    return root / "run"


# --- what some rows do to their copy of the run before the command ----------------------------------------------

def _foreign_checkpoint(run: Path) -> None:
    """An rl_curl checkpoint's extra state in place of the nlp_qt one."""
    torch.save({"format": 2, "step": 20, "episode": 1, "signature": {}, "config": {}, "application": "rl_curl"},
               run / "checkpoint" / "extra.pt")


def _truncated_model(run: Path) -> None:
    model = run / "checkpoint" / "model.safetensors"
    model.write_bytes(model.read_bytes()[:100])


def _exported(run: Path) -> None:
    from nlp_qt.export import export_checkpoint

    export_checkpoint(run)


def _no_config_json(run: Path) -> None:
    (run / "config.json").unlink()


def _tiny_corpus(run: Path) -> None:
    (run / "tiny.txt").write_text("Only one sentence here. And a second one.\n")


def _stars(run: Path) -> None:
    """A review file whose label column holds 1 to 5 stars, and a folder that holds no model."""
    words = ["awful", "poor", "fine", "good", "great"]
    rows = [f"review {i} says {words[i % 5]} things\t{i % 5 + 1}" for i in range(40)]
    (run.parent / "stars.tsv").write_text("review\tstars\n" + "\n".join(rows) + "\n")
    (run.parent / "no_model").mkdir()
    (run.parent / "no_model" / "notes.txt").write_text("not a model\n")
    (run.parent / "texts.tsv").write_text("review\nno label column here\n")


def _no_checkpoint(run: Path) -> None:
    shutil.rmtree(run / "checkpoint")


def _six_images(run: Path) -> None:
    """Six 8x8 images of six classes, and an output folder holding an earlier results.json."""
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(run.parent / "six.npz", x=rng.random((6, 8, 8), dtype=np.float32), y=np.arange(6))
    (run.parent / "sb").mkdir()
    (run.parent / "sb" / "results.json").write_text('{"earlier": true}\n')


def _digits(run: Path) -> None:
    """40 8x8 images of four classes."""
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(run.parent / "digits.npz", x=rng.random((40, 8, 8), dtype=np.float32), y=np.arange(40) % 4)


def _not_a_run(folder: Path) -> None:
    for p in list(folder.iterdir()):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    (folder / "config.json").write_text(json.dumps({"learning_rate": 0.1}))


def _pack(folder: Path, throughput, runs=("curl",), archive=None) -> None:
    """A GPU slice's pack in ``folder``: throughput.json (``throughput``: an object, or text as is), slice.txt and,
    unless ``archive`` is given (bytes, or a function of the run folders writing the archive), table3_runs.tar.gz
    of one tiny run folder per objective in ``runs``."""
    import tarfile

    from paper_tables import table3_slices as slices

    folder.mkdir()
    src = folder / "src"
    names = []
    for i, objective in enumerate(runs):
        run = src / f"cartpole-swingup__{objective}__seed{i}__H200__b3b304f__2026-11-27"
        run.mkdir(parents=True)
        info = {"task": "cartpole-swingup", "objective": objective, "seed": i, "env_steps_target": 100_000,
                "env_steps_reached": 20_000, "finished": False, "date": "2026-11-27", "commit": "b3b304f"}
        (run / "slice.json").write_text(json.dumps(info))
        (run / "config.json").write_text(json.dumps({"task": "cartpole-swingup", "seed": i, "action_repeat": 8,
                                                     **slices.spec_config(objective)}))
        (run / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n10000,10,100.0,1.0\n")
        names.append(run)
    tar = folder / "table3_runs.tar.gz"
    if callable(archive):
        archive(tar, names)
    elif archive is not None:
        tar.write_bytes(archive)
    else:
        with tarfile.open(tar, "w:gz") as t:
            for run in names:
                t.add(run, arcname=run.name)
    shutil.rmtree(src)
    text = throughput if isinstance(throughput, str) else json.dumps(throughput)
    (folder / "throughput.json").write_text(text)
    (folder / "slice.txt").write_text("slice\n")


GOOD_META = {"date": "2026-11-27", "gpu_tag": "H200", "commit": "b3b304f3c5f6"}


def _pack_date_is_a_path(run: Path) -> None:
    _pack(run.parent / "pack", {"date": str(run.parent / "victim"), "gpu_tag": "x", "commit": "y"})


def _pack_date_climbs_out(run: Path) -> None:
    _pack(run.parent / "pack", {"date": "../../X", "gpu_tag": "x", "commit": "y"})


def _pack_truncated(run: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for i in range(4):
            data = bytes(range(256)) * 400 * (i + 1)
            info = tarfile.TarInfo(f"run{i}/big.bin")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    _pack(run.parent / "pack", GOOD_META, archive=buf.getvalue()[: len(buf.getvalue()) // 2])


def _pack_throughput_list(run: Path) -> None:
    _pack(run.parent / "pack", "[1, 2, 3]")


def _pack_throughput_not_json(run: Path) -> None:
    _pack(run.parent / "pack", "{not json")


def _pack_run_named_curves(run: Path) -> None:
    import tarfile

    def archive(tar, runs):
        with tarfile.open(tar, "w:gz") as t:
            t.add(runs[0], arcname="curves.png")

    _pack(run.parent / "pack", GOOD_META, archive=archive)


def _pack_run_twice(run: Path) -> None:
    import tarfile

    def archive(tar, runs):
        with tarfile.open(tar, "w:gz") as t:
            t.add(runs[0], arcname=runs[0].name)
            t.add(runs[1] / "slice.json", arcname=f"{runs[0].name}/slice.json")

    _pack(run.parent / "pack", GOOD_META, runs=("curl", "curl"), archive=archive)


IMPORT = ["import", "{tmp}/pack", "--into", "{tmp}/results", "--no-tabulate"]

QT_TRAIN = ["--corpus", "{corpus}", "--output-dir", "{tmp}/new", "--batch-size", "8", "--word-dim", "8",
            "--encoder-dim", "8", "--vocab-size", "200", "--max-length", "12", "--max-steps", "2", "--no-progress"]
QT_RESUME = ["--corpus", "{corpus}", "--output-dir", "{qt_run}", "--batch-size", "8", "--word-dim", "8",
             "--encoder-dim", "8", "--vocab-size", "200", "--max-length", "12", "--max-steps", "4", "--no-progress",
             "--checkpoint-every", "2", "--log-every", "1", "--resume"]

FEWSHOT = ["--dataset", "{tmp}/stars.tsv", "--eval-file", "{tmp}/stars.tsv", "--text-column", "review",
           "--label-column", "stars", "--n-labeled", "4", "--n-unlabeled", "10", "--max-steps", "1", "--output-dir",
           "{tmp}/new", "--device", "cpu", "--no-progress"]

#: (id, module, arguments, exit status, fragment of the error line, what is done to the run copy first[, the
#: environment variables of the command: a value, or None to unset it])
BATTERY = [
    ("rl_curl discount above 1", "rl_curl.train", ["--discount", "1.5", "--output-dir", "{tmp}/new"], 2,
     "--discount", None),
    ("rl_curl critic-tau NaN", "rl_curl.train", ["--critic-tau", "nan", "--output-dir", "{tmp}/new"], 2,
     "--critic-tau", None),
    ("rl_curl encoder-tau 0", "rl_curl.train", ["--encoder-tau", "0", "--output-dir", "{tmp}/new"], 2,
     "--encoder-tau", None),
    ("nlp_qt clip-norm NaN", "nlp_qt.train", [*QT_TRAIN, "--clip-norm", "nan"], 2, "clip", None),
    ("nlp_qt fp16 on the CPU", "nlp_qt.train", [*QT_TRAIN, "--mixed-precision", "fp16", "--device", "cpu"], 2,
     "--mixed-precision fp16 needs a GPU", None),
    ("nlp_qt report-to none and wandb", "nlp_qt.train", [*QT_TRAIN, "--report-to", "none", "wandb"], 2,
     "cannot be combined", None),
    ("nlp_qt tau+ of 1", "nlp_qt.train", [*QT_TRAIN, "--objective", "debiased", "--tau-plus", "1"], 2,
     "tau", None),
    ("nlp_qt resume of another application's checkpoint", "nlp_qt.train", QT_RESUME, 2,
     "is not a checkpoint of nlp_qt: it was written by rl_curl", _foreign_checkpoint),
    ("nlp_qt resume from a truncated model file", "nlp_qt.train", QT_RESUME, 2,
     "model.safetensors (a model's weights) is unreadable", _truncated_model),
    ("nlp_qt resume without config.json, other objective", "nlp_qt.train",
     [*QT_RESUME, "--objective", "debiased", "--tau-plus", "0.01"], 2, "different configuration", _no_config_json),
    ("nlp_qt run folder that is not empty and holds no run", "nlp_qt.train",
     [*QT_TRAIN[:2], "--output-dir", "{qt_run}"], 2, "holds no run", _not_a_run),
    ("nlp_qt new run on a corpus smaller than a batch: no run left", "nlp_qt.train",
     ["--corpus", "{qt_run}/tiny.txt", *QT_TRAIN[2:]], 2, "fewer than one batch", _tiny_corpus),
    ("fewshot encoder folder that holds no model", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--positive-label", "5"], 2, "the folder is not a model", _stars),
    ("fewshot encoder that is neither a folder nor cached", "fewshot.train",
     [*FEWSHOT, "--encoder", "NOT_A_MODEL", "--positive-label", "5"], 2, "is not a model here", _stars),
    ("fewshot five star values without --positive-label or --label-map", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model"], 2, "--label-map", _stars),
    ("fewshot positive label absent from the column", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--positive-label", "6"], 2, "is not among the label values", _stars),
    ("fewshot label map to a value other than 0 or 1", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--label-map", "1=0,2=0,4=1,5=one"], 2, "goes to 'one'", _stars),
    ("nlp_qt.export of a truncated checkpoint", "nlp_qt.export", ["--run-dir", "{qt_run}"], 2,
     "model.safetensors is damaged", _truncated_model),
    ("nlp_qt.export onto an earlier export", "nlp_qt.export", ["--run-dir", "{qt_run}"], 2,
     "--overwrite", _exported),
    ("senteval output exists", "nlp_qt.senteval",
     ["--model", "{tmp}/no_model", "--data", "{tmp}/no_data", "--tasks", "MR", "--output", "{results}"], 2,
     "--overwrite", None),
    ("predict output exists", "fewshot.predict",
     ["--model", "{tmp}/no_model", "--input", "{tmp}/no_input.txt", "--output", "{predictions}"], 2,
     "--overwrite", None),
    ("rl_curl.evaluate on a folder that holds no run", "rl_curl.evaluate", ["--run-dir", "{qt_run}"], 2,
     "holds no run", _not_a_run),
    ("rl_curl.evaluate on an nlp_qt run", "rl_curl.evaluate", ["--run-dir", "{qt_run}"], 2,
     "holds a run of nlp_qt, not of rl_curl", None),
    # issue 46, items 2 and 8: trackers set up as their users set them fail in one line, before the run starts
    ("nlp_qt --report-to wandb without a W&B login", "nlp_qt.train", [*QT_TRAIN, "--report-to", "wandb"], 2,
     "no W&B login", None, {"NETRC": "{tmp}/no_netrc", "WANDB_MODE": None, "WANDB_API_KEY": None}),
    ("rl_curl --report-to wandb without a W&B login", "rl_curl.train",
     ["--output-dir", "{tmp}/new", "--report-to", "wandb", "--device", "cpu"], 2, "no W&B login", None,
     {"NETRC": "{tmp}/no_netrc", "WANDB_MODE": None, "WANDB_API_KEY": None}),
    ("fewshot --report-to mlflow on MLflow 3's file store", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--positive-label", "5", "--report-to", "mlflow"], 2,
     "is a file store", _stars, {"MLFLOW_TRACKING_URI": "file:{tmp}/mlruns", "MLFLOW_ALLOW_FILE_STORE": None}),
    # issue 46, item 9: nothing overwritten without --overwrite
    ("nlp_qt resume of a finished run whose checkpoint is gone", "nlp_qt.train", QT_RESUME, 2,
     "no checkpoint/ to continue it from", _no_checkpoint),
    ("sampling_bias onto an earlier results.json", "scripts/sampling_bias.py",
     ["--data", "{tmp}/six.npz", "--out", "{tmp}/sb", "--seeds", "0"], 2, "already holds results.json", _six_images),
    # issue 46, item 14: a clear message
    ("sampling_bias on six images of six classes", "scripts/sampling_bias.py",
     ["--data", "{tmp}/six.npz", "--out", "{tmp}/new", "--seeds", "0", "--steps", "2"], 2,
     "class 0 has 0 image(s) in the probe set of one seed (1 in all)", _six_images),
    ("fewshot.export onto the run's earlier export", "fewshot.export", ["--run", "{image_run}"], 2,
     "already holds this run's export; pass --overwrite", None),
    ("fewshot --eval-file that does not exist", "fewshot.train",
     [*FEWSHOT[:2], "--eval-file", "{tmp}/no_eval.tsv", *FEWSHOT[4:], "--encoder", "{tmp}/no_model",
      "--positive-label", "5"], 2, "--eval-file: data file not found", _stars),
    ("fewshot --eval-file without the label column", "fewshot.train",
     [*FEWSHOT[:2], "--eval-file", "{tmp}/texts.tsv", *FEWSHOT[4:], "--encoder", "{tmp}/no_model",
      "--positive-label", "5"], 2, "--eval-file: ", _stars),
    # issue 46, item 11: options that would be ignored are refused
    ("fewshot --positive-label on image data", "fewshot.train",
     ["images", "--dataset", "{tmp}/digits.npz", "--positive-label", "3", "--output-dir", "{tmp}/new", "--device",
      "cpu"], 2, "--positive-label is not an option of the images pipeline", _digits),
    ("fewshot image data given to the text pipeline", "fewshot.train",
     ["--dataset", "{tmp}/digits.npz", "--output-dir", "{tmp}/new", "--device", "cpu"], 2,
     "is image data: run `python -m fewshot.train images", _digits),
    ("fewshot --positive-label 1 beside --label-map", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--label-map", "1=0,5=1", "--positive-label", "1"], 2,
     "both say which class is positive", _stars),
    # issue 46, item 10: a grid checks its inputs before it starts any run
    ("pu_images_table with a positive class the data does not have", "scripts/pu_images_table.py",
     ["--dataset", "{tmp}/digits.npz", "--positive-classes", "42", "--tables", "2", "--n-ps", "5", "--seeds", "0",
      "--out", "{tmp}/grid"], 2, "--positive-classes [42] never occur in the labels", _digits),
    ("pu_images_table with 200 percent labeled", "scripts/pu_images_table.py",
     ["--dataset", "{tmp}/digits.npz", "--positive-classes", "1", "--tables", "4", "--percents", "200", "--seeds",
      "0", "--out", "{tmp}/grid"], 2, "--percents 200: --percents are percentages of the pool, 1 to 100", _digits),
    ("nlp_qt --seed -1", "nlp_qt.train", [*QT_TRAIN, "--seed", "-1"], 2,
     "--seed must be a whole number in [0, 2**32)", None),
    ("fewshot --seed beyond 64 bits", "fewshot.train",
     [*FEWSHOT, "--encoder", "{tmp}/no_model", "--positive-label", "5", "--seed", "99999999999999999999"], 2,
     "--seed must be a whole number in [0, 2**32)", _stars),
    ("nlp_qt output folder under a file", "nlp_qt.train", [*QT_TRAIN[:2], "--output-dir", "{tmp}/results.json/run",
                                                           *QT_TRAIN[4:]], 2,
     "results.json is a file, not a folder, so no run folder can be made under it", None),
    ("rl_curl output folder under a file", "rl_curl.train", ["--output-dir", "{tmp}/results.json/run"], 2,
     "results.json is a file, not a folder", None),
    # issue 46, items 6 and 7: a GPU slice's pack is untrusted input; nothing is written unless all of it is sound
    ("slice import: a date that is a path", "scripts/table3_gpu.py", IMPORT, 2, "is not a date", _pack_date_is_a_path),
    ("slice import: a date that climbs out", "scripts/table3_gpu.py", IMPORT, 2, "'../../X' is not a date",
     _pack_date_climbs_out),
    ("slice import: a truncated archive", "scripts/table3_gpu.py", IMPORT, 2, "is truncated or damaged",
     _pack_truncated),
    ("slice import: throughput.json holds a list", "scripts/table3_gpu.py", IMPORT, 2, "not an object",
     _pack_throughput_list),
    ("slice import: throughput.json is not JSON", "scripts/table3_gpu.py", IMPORT, 2,
     "throughput.json is damaged (not valid JSON", _pack_throughput_not_json),
    ("slice import: a run folder named curves.png", "scripts/table3_gpu.py", IMPORT, 2,
     "run folder name 'curves.png' is not allowed", _pack_run_named_curves),
    ("slice import: one run folder twice", "scripts/table3_gpu.py", IMPORT, 2, "appears twice in the archive",
     _pack_run_twice),
]


def run_command(module: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    """(exit status, stderr) of ``python -m module *argv``, run in this process through its ``run_cli``."""
    from shared_losses.training.cli import run_cli

    monkeypatch.setattr(sys, "argv", [module, *argv])
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    if module.endswith(".py"):  # a script of the repository, loaded from its file
        spec = importlib.util.spec_from_file_location(Path(module).stem, Path(__file__).parents[1] / module)
        script = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, script)  # dataclasses look their module up there
        spec.loader.exec_module(script)
        main = script.main
    else:
        main = importlib.import_module(module).main
    try:
        run_cli(main)
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", BATTERY, ids=[row[0] for row in BATTERY])
def test_battery(case, qt_run, image_run, tmp_path, monkeypatch, capsys):
    _, module, argv, status, fragment, prepare, *more = case
    if "MLflow 3" in case[0] and not mlflow_refuses_file_stores():
        pytest.skip("this MLflow takes a file store (MLflow 3 refuses it): nothing to refuse")
    for name, value in (more[0] if more else {}).items():  # the row's environment (None: unset)
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value.format(tmp=tmp_path))
    run = tmp_path / "qt_run"
    shutil.copytree(qt_run, run)
    if any("{image_run}" in a for a in argv):
        shutil.copytree(image_run, tmp_path / "image_run")
    if prepare is not None:
        prepare(run)
    (tmp_path / "results.json").write_bytes(b'{"earlier": "results"}\n')
    (tmp_path / "predictions.jsonl").write_bytes(b'{"earlier": "predictions"}\n')
    places = {"tmp": tmp_path, "qt_run": run, "corpus": qt_run.parent / "corpus", "results": tmp_path / "results.json",
              "predictions": tmp_path / "predictions.jsonl", "image_run": tmp_path / "image_run"}
    argv = [a.format(**places) for a in argv]
    before, entries = tree_hash(tmp_path), sorted(p.name for p in tmp_path.iterdir())
    code, err = run_command(module, argv, monkeypatch, capsys)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == status, err[-3000:]
    assert "Traceback" not in err and len(errors) == 1, err[-3000:]
    assert fragment in errors[0], errors[0]
    assert tree_hash(tmp_path) == before  # nothing changed, nothing added (no new run folder, no result file)
    assert sorted(p.name for p in tmp_path.iterdir()) == entries
