"""scripts/senteval_side_by_side.py's plumbing, with a stand-in for the official SentEval checkout (the suite does
not ship SentEval; the side-by-side run on the real code is in docs/results/nlp_qt.md).

The stand-in package has SentEval's layout and calling convention (``senteval.engine.SE(params, batcher)``,
``.eval(task)``, the classifier looked up as ``senteval.tools.validation.LogisticRegression`` when fitting) and
scores the tasks with our own evaluator on the embeddings its batcher returns, so it agrees with ours unless
the plumbing (the data folder, the batcher, the shared embeddings, the classifier patch) is wrong."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("senteval_side_by_side", ROOT / "scripts" / "senteval_side_by_side.py")
sbs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sbs)

DEMO = ROOT / "nlp_qt" / "data" / "senteval_demo"

# The stand-in's engine: reads task_path/downstream/TASK with our readers, hands the batcher token lists (as
# SentEval's loaders do), and scores with our protocol on what the batcher returned. `shift` moves its accuracy
# (a stand-in that disagrees); the classifier it found is reported, to see the patch.
ENGINE = """
import numpy as np
from pathlib import Path
from senteval.tools import validation
# as SentEval's modules do at their top (its scikit-learn path never calls torch)
import torch
from torch import nn
import torch.nn.functional as F
from torch.autograd import Variable
import torch.optim as optim


class Net(nn.Module):
    pass

SHIFT = {shift}
EXTRA = {extra}


class SE:
    def __init__(self, params, batcher, prepare=None):
        self.params, self.batcher = params, batcher

    def eval(self, name):
        from nlp_qt.senteval.protocols import evaluate

        root = Path(self.params["task_path"]) / "downstream"

        def encode(texts):
            return np.asarray(self.batcher(self.params, [t.split() for t in texts]))

        if EXTRA:  # a text our reader never gives (as an empty line of a file would be for SentEval's reader)
            self.batcher(self.params, [["a", "text", "nobody", "wrote"]])
        res = evaluate(encode, root, [name], kfold=self.params["kfold"], seed=self.params["seed"])[name]
        res["acc"] += SHIFT
        res["classifier"] = validation.LogisticRegression.__name__
        return res
"""


def fake_senteval(root: Path, shift: float = 0.0, extra: bool = False) -> Path:
    (root / "senteval" / "tools").mkdir(parents=True)
    (root / "senteval" / "__init__.py").write_text("")
    (root / "senteval" / "tools" / "__init__.py").write_text("")
    (root / "senteval" / "tools" / "validation.py").write_text(
        "class LogisticRegression:\n    pass\n")
    (root / "senteval" / "engine.py").write_text(textwrap.dedent(ENGINE.format(shift=shift, extra=extra)))
    return root


@pytest.fixture
def clean_senteval_modules():
    """The stand-in package is imported under SentEval's name; each test starts and ends without it."""
    def drop():
        for m in [m for m in sys.modules if m == "senteval" or m.startswith("senteval.")]:
            del sys.modules[m]
    drop()
    yield
    drop()


def hashing_encoder(dim: int = 16):
    """A deterministic encoder that counts its calls: word hashes summed into ``dim`` buckets."""
    calls = []

    def encode(texts):
        calls.append(list(texts))
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % dim] += 1.0
        return out

    return encode, calls


def test_embedding_table_encodes_each_distinct_text_once():
    encode, calls = hashing_encoder()
    table = sbs.EmbeddingTable(encode)
    a = table(["a  b", "c", "a b"])  # "a  b" and "a b" are the same tokens: one text
    b = table(["c", "a b", "d"])
    assert calls == [["a b", "c"], ["d"]]
    assert table.texts_encoded == 3
    np.testing.assert_array_equal(a[0], a[2])
    np.testing.assert_array_equal(a[1], b[0])


def test_texts_collects_every_text_of_a_reader():
    from nlp_qt.senteval.tasks import load_mrpc, load_trec

    trec = load_trec(DEMO)
    assert sbs._texts(trec) == trec["train"][0] + trec["test"][0]
    mrpc = load_mrpc(DEMO)
    assert len(sbs._texts(mrpc)) == 2 * (len(mrpc["train"][2]) + len(mrpc["test"][2]))


def test_official_root_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        sbs.official_root(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="no senteval/engine.py"):
        sbs.official_root(str(tmp_path))
    fake_senteval(tmp_path / "SentEval")
    with pytest.raises(FileNotFoundError, match="pass its parent"):
        sbs.official_root(str(tmp_path / "SentEval" / "senteval"))
    assert sbs.official_root(str(tmp_path / "SentEval")) == tmp_path / "SentEval"


def demo_data(tmp_path: Path) -> Path:
    """MR, TREC and MRPC of the shipped demo tasks (small: the tests score them with 2 folds)."""
    import shutil

    data = tmp_path / "data"
    for t in ("MR", "TREC", "MRPC"):
        shutil.copytree(DEMO / t, data / t, dirs_exist_ok=True)
    return data


def run_main(tmp_path, monkeypatch, senteval: Path, *extra: str) -> tuple[int, dict]:
    import nlp_qt.senteval.encoders as encoders

    encode, _ = hashing_encoder()
    monkeypatch.setattr(encoders, "load_encoder", lambda model, device, batch_size: (encode, "hashing encoder"))
    out = tmp_path / "out"
    rc = sbs.main(["--senteval", str(senteval), "--model", "hashing", "--data", str(demo_data(tmp_path)),
                   "--tasks", "MR", "TREC", "MRPC", "--kfold", "2", "--jobs", "1", "--out", str(out), *extra])
    return rc, json.loads((out / "side_by_side.json").read_text())


def test_agreeing_official_code_exits_0_and_patch_is_undone(tmp_path, monkeypatch, clean_senteval_modules, capsys):
    senteval = fake_senteval(tmp_path / "SentEval")
    rc, res = run_main(tmp_path, monkeypatch, senteval, "--save-embeddings")
    assert rc == 0
    saved = np.load(tmp_path / "out" / "embeddings.npz")
    texts = saved["texts"].tobytes().decode("utf-8").split("\n")
    assert len(texts) == res["texts"] == len(saved["vectors"])
    encode, _ = hashing_encoder()
    np.testing.assert_array_equal(saved["vectors"][:5], encode(texts[:5]))
    assert "ours equals the official code (liblinear) on every metric" in capsys.readouterr().out
    for way in ("liblinear", "installed"):
        for t in ("MR", "TREC", "MRPC"):
            assert res["differences"][way][t]["acc"] == 0.0
            assert res["official"][way][t]["acc"] == res["ours"][t]["acc"]
    assert res["differences"]["liblinear"]["MRPC"]["f1"] == 0.0
    import senteval.tools.validation as validation

    assert validation.LogisticRegression.__name__ == "LogisticRegression"  # the patch is undone
    assert str(senteval) not in sys.path
    md = (tmp_path / "out" / "side_by_side.md").read_text()
    assert "| MRPC | f1 |" in md and "official (liblinear)" in md


def test_liblinear_way_patches_the_classifier_the_official_code_finds(tmp_path, monkeypatch, clean_senteval_modules):
    senteval = fake_senteval(tmp_path / "SentEval")
    seen = {}
    real = sbs.run_official

    def spy(root, way, table, data, tasks, kfold, batch_size):
        with sbs.official_senteval(root, way):
            import senteval.tools.validation as validation

            seen[way] = validation.LogisticRegression
        return real(root, way, table, data, tasks, kfold, batch_size)

    monkeypatch.setattr(sbs, "run_official", spy)
    run_main(tmp_path, monkeypatch, senteval)
    assert seen["liblinear"] is sbs._LiblinearAsInSentEval
    assert seen["installed"].__name__ == "LogisticRegression" and seen["installed"] is not sbs._LiblinearAsInSentEval


def test_disagreeing_official_code_exits_1(tmp_path, monkeypatch, clean_senteval_modules, capsys):
    senteval = fake_senteval(tmp_path / "SentEval", shift=0.5)
    rc, res = run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear")
    assert rc == 1
    assert res["differences"]["liblinear"]["MR"]["acc"] == -0.5
    assert "ours differs from the official code (liblinear) on: MR acc -0.50" in capsys.readouterr().err
    rc, _ = run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear", "--tolerance", "0.5", "--overwrite")
    assert rc == 0


def test_official_code_reading_other_texts_exits_1(tmp_path, monkeypatch, clean_senteval_modules, capsys):
    import nlp_qt.senteval.encoders as encoders

    senteval = fake_senteval(tmp_path / "SentEval", extra=True)
    monkeypatch.setattr(encoders, "load_encoder", lambda model, device, batch_size: (hashing_encoder()[0], "h"))
    rc = sbs.main(["--senteval", str(senteval), "--model", "h", "--data", str(demo_data(tmp_path)), "--tasks", "MR",
                   "--kfold", "2", "--jobs", "1", "--official", "liblinear", "--out", str(tmp_path / "out")])
    assert rc == 1
    assert "asked for 1 text that our readers do not give" in capsys.readouterr().err
    assert not (tmp_path / "out" / "side_by_side.json").exists()


def test_existing_results_are_refused(tmp_path, monkeypatch, clean_senteval_modules):
    senteval = fake_senteval(tmp_path / "SentEval")
    run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear")
    with pytest.raises(FileExistsError, match="side_by_side.json exists; pass --overwrite"):
        run_main(tmp_path, monkeypatch, senteval)


def test_liblinear_classifier_as_sentevals_fits_several_classes_one_against_the_rest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 5))
    y = np.repeat([0, 1, 2], 30)
    X[np.arange(90), y] += 2.0
    clf = sbs._LiblinearAsInSentEval(C=1.0, random_state=1111).fit(X, y)
    assert len(clf.model.estimators_) == 3
    assert clf.score(X, y) == float((clf.predict(X) == y).mean()) > 0.8
    two = sbs._LiblinearAsInSentEval(C=1.0, random_state=1111).fit(X[:60], y[:60])
    assert two.model.solver == "liblinear" and two.model.max_iter == 100


def test_stand_in_data_has_sentevals_six_tasks(tmp_path):
    from nlp_qt.senteval.tasks import ALL_TASKS, TASKS, load_binary

    data = sbs.assemble_stand_in(tmp_path / "data")
    for t in ALL_TASKS:
        for f in TASKS[t].files:
            assert (data / f).is_file() and (data / f).stat().st_size > 0, f
    assert not (data / "_human").exists()
    texts, y = load_binary(data, "MR")  # RT's critic snippets
    assert len(texts) > 10000 and set(np.unique(y)) == {0, 1}
    # what SentEval's loader reads (its binary tasks' files as Latin-1, empty lines dropped by the same strip): the
    # same texts as ours, accented letters included (RT's UTF-8 "cliché" gave ours "cliché" and SentEval "clichÃ©")
    for task in ("MR", "CR", "SUBJ", "MPQA"):
        ours, _ = load_binary(data, task)
        theirs = [line.strip() for f in TASKS[task].files
                  for line in (data / f).read_bytes().decode("latin-1").splitlines() if line.strip()]
        assert ours == theirs, task
        assert any(ord(c) > 127 for t in ours for c in t) or task != "MR"


def test_before_0_22():
    assert sbs._older("0.20.4", "0.22") and sbs._older("0.21.3", "0.22") and sbs._older("0.18", "0.22")
    assert not any(sbs._older(v, "0.22") for v in ("0.22", "0.22.2.post1", "1.4.2", "1.9.1", "2.0rc1"))
    assert sbs._older("0.24.2", "1.0") and not sbs._older("1.0.2", "1.0")


def test_official_python_runs_the_code_in_that_interpreter(tmp_path, monkeypatch, clean_senteval_modules, capsys):
    """Here the interpreter is this one, with torch kept from it (PYTHONPATH to a package that fails to import):
    the runner puts its stand-in under torch's name and the official code's imports go through."""
    import sklearn

    senteval = fake_senteval(tmp_path / "SentEval")
    blocker = tmp_path / "blocker" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no torch in this environment')\n")
    monkeypatch.setenv("PYTHONPATH", str(blocker.parent))
    rc, res = run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear", "--official-python",
                       sys.executable)
    name = f"scikit-learn {sklearn.__version__}, Python {'.'.join(map(str, sys.version_info[:3]))}"
    assert res["official_python"][name]["torch"] is None  # the stand-in was used
    assert res["compared_with"][name] == "ours" and "ours_legacy" not in res
    assert res["official"][name]["MR"]["acc"] == res["ours"]["MR"]["acc"]
    assert not (tmp_path / "out" / "embeddings.npz").exists()  # written for the runner, not asked to keep
    assert rc == 0


def test_a_column_of_scikit_learn_before_0_22_is_compared_with_legacy_folds(tmp_path, monkeypatch,
                                                                              clean_senteval_modules, capsys):
    from nlp_qt.senteval.protocols import evaluate

    senteval = fake_senteval(tmp_path / "SentEval")

    def old_sklearn(folds):
        def run(python, root, embeddings, data, tasks, kfold, batch_size):
            with np.load(embeddings) as saved:
                texts, matrix = saved["texts"].tobytes().decode("utf-8").split("\n"), saved["vectors"]
            lookup = dict(zip(texts, matrix))
            res = evaluate(lambda ts: np.stack([lookup[" ".join(t.split())] for t in ts]), data, tasks, kfold,
                           seed=1111, folds=folds)
            return "scikit-learn 0.20.4, Python 3.7.16", res, {"scikit_learn": "0.20.4"}
        return run

    monkeypatch.setattr(sbs, "run_official_python", old_sklearn("legacy"))
    rc, res = run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear", "--official-python", "py37")
    col = "scikit-learn 0.20.4, Python 3.7.16"
    assert res["compared_with"] == {"liblinear": "ours", col: "ours_legacy"}
    assert all(d == 0.0 for t in res["tasks"] for d in res["differences"][col][t].values())
    assert res["ours_legacy"] != res["ours"]  # the two folds give other numbers on these tasks
    assert rc == 0
    assert "| ours (current folds) | ours (legacy folds) |" in (tmp_path / "out" / "side_by_side.md").read_text()
    # such a column scored with today's folds disagrees: the pairing is what makes it agree
    monkeypatch.setattr(sbs, "run_official_python", old_sklearn("current"))
    rc, _ = run_main(tmp_path, monkeypatch, senteval, "--official", "liblinear", "--official-python", "py37",
                     "--overwrite")
    assert rc == 1
    assert f"ours differs from the official code ({col})" in capsys.readouterr().err


def test_official_python_that_cannot_run_is_one_error(tmp_path, monkeypatch, clean_senteval_modules):
    senteval = fake_senteval(tmp_path / "SentEval")
    with pytest.raises(FileNotFoundError, match="--official-python /no/python: cannot run it"):
        run_main(tmp_path, monkeypatch, senteval, "--official-python", "/no/python")
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named numpy' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(ValueError, match="the official code failed there: ModuleNotFoundError: No module named numpy"):
        run_main(tmp_path, monkeypatch, senteval, "--official-python", str(broken), "--overwrite")
