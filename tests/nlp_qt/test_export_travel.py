"""Issue 34, nlp_qt: exports that travel, and one-line refusals.

* ``python -m nlp_qt.export`` writes a quick-thought folder that carries its module's code (``modeling_qt.py``):
  ``SentenceTransformer(path, trust_remote_code=True)`` loads it in a process where nlp_qt (and the rest of the
  suite) cannot be imported, and encodes exactly as nlp_qt does;
* a bag-of-words baseline (``python -m nlp_qt.bow``) exports as standard sentence-transformers modules that load
  with neither ``trust_remote_code`` nor nlp_qt, and encode as nlp_qt.bow does: the tokenizer that does it
  reproduces :func:`nlp_qt.vocab.tokenize`, checked on random strings;
* a damaged checkpoint, an existing export and bad ``encode`` inputs end in one line that says what is wrong.
"""

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch

import nlp_qt
from nlp_qt import modeling_qt
from nlp_qt.export import ExportArgs, bow_tokenizer, main as export_main
from nlp_qt.train import train
from nlp_qt.vocab import tokenize

from .test_train import _cfg, _word_vectors
from tests import warm

SENTENCES = ["The whale swam on.", "It's the story of a cat, don't you think?", "unknownword zzz", "",
             "Call me Ishmael, said he, and went on his way across the wide grey sea of the book.",
             "DON’T stop: it’s we'RE and the cat's book-shelf ; «quoted» — 3.5 kg", "the the the",
             "Book 1 tells part 3", "Привет, мир: кто-то नमस्ते"]
# words of the hand-made bag-of-words folders: clitics, punctuation and capitals included, so that the tokenizer's
# every rule decides which rows a sentence averages
BOW_WORDS = ["the", "The", "cat", "story", "of", "a", "'s", "n't", "do", "It", "it", ",", ".", "?", "Book", "book",
             "book-shelf", "we", "'RE", "N't", "DO", "stop", ":", "3", "«", "tells", "part", "1", "whale", "sea",
             "Привет", "кто-то", "नमस्ते"]

# The child process: nlp_qt and the rest of the suite cannot be imported in it (a meta path finder refuses them,
# ahead of the editable install's finder), and it says so before loading anything.
CHILD = r'''
import importlib.abc, json, sys, warnings
SUITE = ("nlp_qt", "shared_losses", "fewshot", "rl_curl")

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SUITE:
            raise ModuleNotFoundError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Refuse())
try:
    import nlp_qt  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("nlp_qt is importable in the child process")
warnings.simplefilter("ignore")
import numpy as np
from sentence_transformers import SentenceTransformer

job = json.loads(open(sys.argv[1]).read())
out = {}
for name, spec in job["models"].items():
    if spec["trust"]:
        try:
            SentenceTransformer(spec["path"], device="cpu")
        except ValueError as err:
            assert "trust_remote_code" in str(err), err
        else:
            raise SystemExit(f"{name} loaded without trust_remote_code")
    st = SentenceTransformer(spec["path"], device="cpu", trust_remote_code=spec["trust"])
    vectors = st.encode(job["sentences"], convert_to_numpy=True)
    np.save(f"{job['out']}/{name}.npy", vectors)
    if spec.get("resave"):  # sentence-transformers' own save of the loaded model travels too
        st.save(spec["resave"])
        again = SentenceTransformer(spec["resave"], device="cpu", trust_remote_code=True)
        np.save(f"{job['out']}/{name}_resaved.npy", again.encode(job["sentences"], convert_to_numpy=True))
    out[name] = sorted(m.__module__ for m in st)
print(json.dumps({"modules": out, "blocked": [m for m in sys.modules if m.split(".")[0] in SUITE]}))
'''


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _run_child(job: dict, tmp: Path, hub_url: str | None = None) -> dict:
    """The child's run of ``job``; with ``hub_url``, online against that hub (``HF_ENDPOINT``)."""
    (tmp / "child.py").write_text(CHILD)
    (tmp / "job.json").write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp / "hf"),
               HF_MODULES_CACHE=str(tmp / "hf_modules"), TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    if hub_url is not None:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.pop(name)
        env["HF_ENDPOINT"] = hub_url
    res = warm.run([sys.executable, "-I", str(tmp / "child.py"), str(tmp / "job.json")], cwd=tmp, env=env,
                   capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def travelled(tmp_path_factory):
    """Tiny trained runs (GRU and bag-of-words encoders) and two bag-of-words baselines, exported; their vectors
    from nlp_qt in this process and from sentence-transformers in a process without nlp_qt."""
    tmp = tmp_path_factory.mktemp("travel")
    folders, models = {}, {}
    for encoder in ("gru", "bow", "cpc"):  # cpc: CPC's model (its conv encoder; the training heads stay behind)
        kw = dict(encoder="conv", objective="cpc", cpc_length=4) if encoder == "cpc" else dict(encoder=encoder)
        train(_cfg(tmp, encoder, max_steps=4, progress=False, **kw))
        folders[encoder] = Path(export_main(ExportArgs(run_dir=str(tmp / encoder)))["model"])
        models[encoder] = {"path": str(folders[encoder]), "trust": True}
    models["gru"]["resave"] = str(tmp / "gru_resaved")
    for name, lowercase in (("w2v", False), ("w2v_lower", True)):
        _word_vectors(tmp / name, BOW_WORDS if not lowercase else sorted({w.lower() for w in BOW_WORDS}), dim=6,
                      lowercase=lowercase, seed=len(name))
        folders[name] = Path(export_main(ExportArgs(run_dir=str(tmp / name)))["model"])
        models[name] = {"path": str(folders[name]), "trust": False}
    (tmp / "vectors").mkdir()
    child = _run_child({"models": models, "sentences": SENTENCES, "out": str(tmp / "vectors")}, tmp)
    theirs = {p.stem: torch.from_numpy(np.load(p)) for p in (tmp / "vectors").glob("*.npy")}
    ours = {name: torch.from_numpy(nlp_qt.load_encoder(tmp / name if name.startswith("w2v") else folders[name])
                                   .encode(SENTENCES)) for name in models}
    return {"tmp": tmp, "folders": folders, "child": child, "theirs": theirs, "ours": ours}


@pytest.mark.parametrize("encoder", ["gru", "bow", "cpc"])
def test_exported_run_loads_without_nlp_qt_and_encodes_as_nlp_qt(travelled, encoder):
    folder = travelled["folders"][encoder]
    assert (folder / "modeling_qt.py").read_bytes() == Path(modeling_qt.__file__).read_bytes()
    assert json.loads((folder / "modules.json").read_text())[0]["type"] == "modeling_qt.QuickThoughtModule"
    assert travelled["child"]["blocked"] == []
    [module] = travelled["child"]["modules"][encoder]  # the folder's copy, imported by transformers
    assert module.startswith("transformers_modules.") and module.endswith(".modeling_qt")
    ours, theirs = travelled["ours"][encoder], travelled["theirs"][encoder]
    dim = 8 if encoder == "cpc" else 16  # CPC's vector is its one encoder's; QT's is [f; g]
    assert ours.shape == (len(SENTENCES), dim) and torch.allclose(theirs, ours, rtol=0, atol=1e-6)
    # the finished run's own model/ (training's end: the same weights) gives the same vectors in nlp_qt
    finished = torch.from_numpy(nlp_qt.load_encoder(travelled["tmp"] / encoder).encode(SENTENCES))
    assert torch.allclose(finished, ours, rtol=0, atol=1e-6)


def test_sentence_transformers_save_of_a_travelled_model_travels_too(travelled):
    resaved = travelled["tmp"] / "gru_resaved"
    assert json.loads((resaved / "modules.json").read_text())[0] == {"idx": 0, "name": "0", "path": "",
                                                                    "type": "modeling_qt.QuickThoughtModule"}
    assert (resaved / "modeling_qt.py").read_bytes() == Path(modeling_qt.__file__).read_bytes()
    assert torch.allclose(travelled["theirs"]["gru_resaved"], travelled["ours"]["gru"], rtol=0, atol=1e-6)


@pytest.mark.slow  # a fresh interpreter
def test_exports_pushed_to_the_hub_load_by_their_id_without_nlp_qt(travelled, tmp_path):
    """What a user shares: the export's folder as a hub repository, loaded by id (SentenceTransformer("owner/name",
    trust_remote_code=True); the quick-thought module's code fetched from the repository) in a process without
    nlp_qt, against a hub on this machine (tests/fake_hub.py)."""
    from tests.fake_hub import FakeHub

    hub = FakeHub()
    ids = {"gru": "someone/qt-gru", "w2v": "someone/qt-w2v"}
    for name, repo in ids.items():
        folder = travelled["folders"][name]
        hub.add("model", repo, {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()})
    (tmp_path / "vectors").mkdir()
    models = {name: {"path": repo, "trust": name == "gru"} for name, repo in ids.items()}
    # where nlp_qt is installed, its own code loads the export by id: no trust_remote_code, no Python fetched
    code = ("import json, sys, nlp_qt\nenc = nlp_qt.load_encoder(sys.argv[1])\n"
            "print(json.dumps(enc.encode(json.loads(sys.argv[2])).tolist()))")
    with hub.serving() as url:
        child = _run_child({"models": models, "sentences": SENTENCES, "out": str(tmp_path / "vectors")}, tmp_path,
                           hub_url=url)
        before = len(hub.requests)
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                                 "HF_DATASETS_OFFLINE")}
        ours = subprocess.run([sys.executable, "-c", code, ids["gru"], json.dumps(SENTENCES)], capture_output=True,
                              text=True, timeout=300, cwd=os.getcwd(),
                              env={**env, "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf_nlp_qt")})
    assert ours.returncode == 0, ours.stderr[-3000:]
    asked = hub.requests[before:]
    assert any(r.endswith("/model.safetensors") for r in asked) and not any(r.endswith(".py") for r in asked)
    by_id = torch.tensor(json.loads(ours.stdout.strip().splitlines()[-1]))
    assert torch.allclose(by_id, travelled["ours"]["gru"], rtol=0, atol=1e-6)
    assert child["blocked"] == []
    assert child["modules"]["gru"][0].startswith("transformers_modules.")  # the repository's modeling_qt.py
    assert any(r.startswith("GET /someone/qt-gru/resolve/") and r.endswith("/modeling_qt.py") for r in hub.requests)
    for name in ids:
        theirs = torch.from_numpy(np.load(tmp_path / "vectors" / f"{name}.npy"))
        assert torch.allclose(theirs, travelled["ours"][name], rtol=0, atol=1e-6), name


@pytest.mark.parametrize("name", ["w2v", "w2v_lower"])
def test_bag_of_words_exports_as_standard_modules_that_encode_as_nlp_qt_bow(travelled, name):
    folder = travelled["folders"][name]
    types = [m["type"] for m in json.loads((folder / "modules.json").read_text())]
    assert [t.rsplit(".", 1)[1] for t in types] == ["WordEmbeddings", "WordWeights", "Pooling"]
    assert all(t.startswith("sentence_transformers.") for t in types) and not list(folder.rglob("*.py"))
    assert travelled["child"]["modules"][name] == sorted(
        f"sentence_transformers.sentence_transformer.modules.{m}" for m in ("word_embeddings", "word_weights",
                                                                              "pooling"))
    ours, theirs = travelled["ours"][name], travelled["theirs"][name]
    assert torch.allclose(theirs, ours, rtol=0, atol=1e-6)
    assert not ours[3].any() and not ours[2].any()  # "" and a sentence of unknown words: zeros in both
    assert ours[0].any() and ours[5].any()
    # words of other scripts are found whole: the mean of the rows of Привет (привет), кто-то, नमस्ते and the marks
    words = json.loads((travelled["tmp"] / name / "words.json").read_text())
    vectors = np.load(travelled["tmp"] / name / "word_vectors.npy")
    known = [t for t in tokenize(SENTENCES[8], name == "w2v_lower") if t in words]
    assert {"кто-то", "नमस्ते", ",", ":"} < set(known) and len(known) == 5
    assert np.abs(ours[8].numpy() - vectors[[words.index(w) for w in known]].mean(axis=0)).max() < 1e-6


def test_bag_of_words_vectors_are_the_mean_of_the_known_words(travelled):
    """The exported sentence vector, by hand: the mean of the rows of the words nlp_qt.vocab.tokenize finds."""
    tmp = travelled["tmp"]
    words = json.loads((tmp / "w2v" / "words.json").read_text())
    vectors = np.load(tmp / "w2v" / "word_vectors.npy").astype(np.float64)
    sentence = SENTENCES[5]
    known = [t for t in tokenize(sentence) if t in words]
    assert {"DO", "N't", "'s", "we", "'RE", "book-shelf", "«", "3"} <= set(known)  # every rule was needed
    want = vectors[[words.index(t) for t in known]].mean(axis=0)
    assert np.abs(travelled["theirs"]["w2v"][5].numpy() - want).max() < 1e-6


def _random_texts(seed: int, n: int) -> list[str]:
    """Random strings over the characters the tokenizer's rules turn on (apostrophes, clitic letters, Python's
    case-insensitive extras İ ı ſ K, exotic whitespace, case-ignorable marks, Σ, letters, marks and digits of other
    scripts and the Latin-range characters that are no letters of it: ª µ º × ²), plus any assigned character."""
    rng = random.Random(seed)
    tricky = list("aAnNtTsSdDmMrReEvVlL0 '’-.,:_ʹ") + ["\t", "\x1c", "\u00a0", "\u2028", "é", "À", "ɐ", "Σ", "σ",
                                                     "İ", "ı", "ſ", "K", "²", "ँ", "‿", "ß", "\u0301"]
    tricky += list("жЖйΩωάक्षিاً٣日本ªµº×Ɗ½Ⅳ")
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(0, 14)):
            if rng.random() < 0.8:
                chars.append(rng.choice(tricky))
            else:
                c = chr(rng.randint(0x20, 0x2FFFF))
                while unicodedata.category(c) in ("Cn", "Cs"):
                    c = chr(rng.randint(0x20, 0x2FFFF))
                chars.append(c)
        out.append("".join(chars))
    return out


# A clitic glued to the next clitic (it’s’s): Python's substitution has consumed the letter before the second one,
# a lookbehind has not. The one documented difference besides letters newer than the exporting Python's Unicode.
_CHAIN = re.compile(r"(?i)['’](?:s|re|ve|ll|d|m)['’]")


@pytest.mark.parametrize("lowercase", [False, True])
def test_bag_of_words_tokenizer_splits_as_nlp_qt_vocab_tokenize(lowercase):
    tok = bow_tokenizer(["a"], lowercase)
    texts = _random_texts(int(lowercase), 20000) + SENTENCES
    texts += ["Don't you DON'T it’s I’dn’t rock’n’roll, the cat's. 3'S  x\x1cy", "ΑΣ. ΑΣ'Α A'Σ ΣΑ", "n't 's"]
    texts += ["Привет, мир! Кто-то сказал «нет».", "नमस्ते दुनिया। क्षत्रिय", "مرحبا بالعالم؟ ١٢٣", "日本語です。",
              "Ελληνικά ΟΔΟΣ.", "e\u0301te 5µg x² Ɗaka"]
    differ = [t for t in texts
              if [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(t))]
              != tokenize(t, lowercase)]
    assert all(_CHAIN.search(t) for t in differ), differ[:5]
    assert len(differ) < 20


def test_modeling_qt_tokenizer_is_nlp_qt_vocab_tokenizer():
    from nlp_qt import vocab

    for name in ("_TOKEN", "_NOT", "_CLITIC"):
        assert getattr(modeling_qt, name).pattern == getattr(vocab, name).pattern
    assert (modeling_qt.TOKENIZER_VERSION, modeling_qt.PAD, modeling_qt.UNK) == (vocab.TOKENIZER_VERSION, vocab.PAD,
                                                                                 vocab.UNK)
    for text in _random_texts(7, 3000):
        for version in (1, 2, 3):
            assert modeling_qt.tokenize(text, True, version) == tokenize(text, True, version)
            assert modeling_qt.tokenize(text, False, version) == tokenize(text, False, version)


def test_modeling_qt_imports_nothing_of_the_suite():
    import ast

    tree = ast.parse(Path(modeling_qt.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]  # no relative import
    allowed = {"__future__", "bisect", "functools", "json", "os", "re", "shutil", "sys", "unicodedata", "pathlib",
               "warnings",
               "torch", "torch.nn", "torch.nn.functional", "torch.nn.utils.rnn", "safetensors.torch",
               "sentence_transformers.util"}
    assert names <= allowed, names - allowed


# --- refusals ---------------------------------------------------------------------------------------------------

def _cli(*args, cwd=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    return warm.run([sys.executable, "-m", "nlp_qt.export", *args], capture_output=True, text=True, env=env,
                    cwd=cwd, timeout=300)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture
def small_run(tmp_path):
    train(_cfg(tmp_path, "run", max_steps=2, progress=False))
    return tmp_path / "run"


@pytest.mark.parametrize("damaged", ["model.safetensors", "extra.pt"])
def test_export_of_a_truncated_checkpoint_is_one_line_naming_the_file(small_run, damaged):
    _truncate(small_run / "checkpoint" / damaged)
    before = _tree(small_run)
    res = _cli("--run-dir", str(small_run))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(small_run / "checkpoint") in errors[0] and damaged in errors[0]
    assert re.search(r"damaged|corrupt", errors[0])
    assert _tree(small_run) == before and not list(small_run.glob("*model_step*"))


def test_export_of_a_damaged_bag_of_words_is_one_line(tmp_path):
    _word_vectors(tmp_path / "w2v", BOW_WORDS, dim=4)
    _truncate(tmp_path / "w2v" / "word_vectors.npy")
    res = _cli("--run-dir", str(tmp_path / "w2v"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert [line for line in res.stderr.splitlines() if line.startswith("error: ")] == [
        f"error: word vectors {tmp_path / 'w2v'}: unreadable ("
        + res.stderr.split("unreadable (", 1)[1].split("\n")[0]]
    assert not (tmp_path / "w2v" / "model").exists()


def test_export_never_replaces_an_export_without_overwrite(small_run, tmp_path):
    first = Path(export_main(ExportArgs(run_dir=str(small_run)))["model"])
    before = _tree(first)
    with pytest.raises(FileExistsError, match="already holds an export of .*pass --overwrite"):
        export_main(ExportArgs(run_dir=str(small_run)))
    res = _cli("--run-dir", str(small_run))
    assert res.returncode == 2 and "pass --overwrite" in res.stderr and "Traceback" not in res.stderr
    assert _tree(first) == before
    # a file of the user's in an old export: --overwrite replaced the folder and deleted it; now kept, and said
    (first / "notes.txt").write_text("mine")
    (first / "onnx").mkdir()
    (first / "onnx" / "model.onnx").write_bytes(b"x")
    res = _cli("--run-dir", str(small_run), "--overwrite")
    assert res.returncode == 0, res.stderr
    assert f"kept what you added to {first} (not files of the export): notes.txt, onnx" in res.stderr
    assert (first / "notes.txt").read_text() == "mine" and (first / "onnx" / "model.onnx").read_bytes() == b"x"
    shutil.rmtree(first / "onnx")
    (first / "notes.txt").unlink()
    assert _tree(first) == before
    # --overwrite never replaces what is not an export of this run
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "modules.json").write_text("[]")
    with pytest.raises(FileExistsError, match="not an export of"):
        export_main(ExportArgs(run_dir=str(small_run), output=str(foreign), overwrite=True))
    assert _tree(foreign) == {"modules.json": hashlib.sha256(b"[]").hexdigest()}
    # the same for a bag of words
    _word_vectors(tmp_path / "w2v", BOW_WORDS, dim=4)
    bow_model = Path(export_main(ExportArgs(run_dir=str(tmp_path / "w2v")))["model"])
    bow_before = _tree(bow_model)
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        export_main(ExportArgs(run_dir=str(tmp_path / "w2v")))
    assert _tree(bow_model) == bow_before
    export_main(ExportArgs(run_dir=str(tmp_path / "w2v"), overwrite=True))
    assert _tree(bow_model) == bow_before


def test_a_moved_run_replaces_its_own_export_and_the_export_names_no_path(small_run, tmp_path):
    """The export recorded its run by absolute path: once the run folder was moved, --overwrite refused the run's
    own export as "not an export of" it, and every export carried a path of the trainer's machine."""
    from shared_losses.training.runtime import run_id

    shared = tmp_path / "shared"
    export_main(ExportArgs(run_dir=str(small_run), output=str(shared)))
    config = json.loads((shared / "config.json").read_text())
    assert (config["run_id"], config["run_name"]) == (run_id(small_run), "run") and "exported_from" not in config
    moved = small_run.rename(tmp_path / "moved run")
    export_main(ExportArgs(run_dir=str(moved), output=str(shared), overwrite=True))
    assert json.loads((shared / "config.json").read_text())["run_name"] == "moved run"
    # a run from before runs had ids: recorded by its path, as before; continued, it is given an id
    record = json.loads((moved / "run.json").read_text())
    (moved / "run.json").write_text(json.dumps({k: v for k, v in record.items() if k != "id"}))
    old = tmp_path / "old"
    export_main(ExportArgs(run_dir=str(moved), output=str(old)))
    assert json.loads((old / "config.json").read_text())["exported_from"] == str(moved.resolve())
    export_main(ExportArgs(run_dir=str(moved), output=str(old), overwrite=True))
    train(_cfg(tmp_path, "moved run", max_steps=3, progress=False))
    assert run_id(moved) is not None and run_id(moved) != record["id"]
    # another run's export is still refused, id against id
    train(_cfg(tmp_path, "other", max_steps=2, progress=False))
    with pytest.raises(FileExistsError, match="not an export of"):
        export_main(ExportArgs(run_dir=str(tmp_path / "other"), output=str(shared), overwrite=True))


def _overwrite_weights_with_ff(weights: Path) -> None:
    """A safetensors file's tensor bytes overwritten with 0xff, its header and size kept: every float reads NaN."""
    data = bytearray(weights.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")
    data[start:] = b"\xff" * (len(data) - start)
    weights.write_bytes(bytes(data))


def test_weights_overwritten_with_nan_are_refused_by_export_and_resume(small_run, tmp_path):
    """Such a checkpoint exported (and resumed) without a word, giving an encoder of NaN."""
    from shared_losses.training.runtime import CheckpointError

    _overwrite_weights_with_ff(small_run / "checkpoint" / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"model.safetensors: .* holds \d+ NaN or infinite value\(s\) of \d+; "
                                              r"the file is damaged"):
        export_main(ExportArgs(run_dir=str(small_run), output=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()
    with pytest.raises(CheckpointError, match=r"checkpoint .* holds \d+ NaN or infinite value\(s\)"):
        train(_cfg(tmp_path, "run", max_steps=4, progress=False))


# --- encode's inputs --------------------------------------------------------------------------------------------

def test_check_texts_names_the_bad_item():
    with pytest.raises(TypeError, match=r"expects a list of sentences \(strings\): item 0 is NoneType \(None\)"):
        modeling_qt.check_texts([None, 3])
    with pytest.raises(TypeError, match=r"item 2 is int \(3\)"):
        modeling_qt.check_texts(["a", "b", 3])
    with pytest.raises(TypeError, match="item 1 is bytes .*decode bytes to str"):
        modeling_qt.check_texts(["a", b"b"])
    with pytest.raises(TypeError, match="got a single string; wrap it in a list"):
        modeling_qt.check_texts("one sentence")
    for bad in (None, 5, b"bytes", {"a": 1}):
        with pytest.raises(TypeError, match=f"got {type(bad).__name__}"):
            modeling_qt.check_texts(bad)
    assert modeling_qt.check_texts([]) == [] and modeling_qt.check_texts(s for s in ("a", "b")) == ["a", "b"]
    assert modeling_qt.check_texts(("a",)) == ["a"] and modeling_qt.check_texts(np.array(["a", "b"])) == ["a", "b"]


def test_sentence_transformers_encode_of_a_non_text_says_what_it_expects(small_run):
    import warnings

    from sentence_transformers import SentenceTransformer

    folder = export_main(ExportArgs(run_dir=str(small_run)))["model"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(folder, device="cpu", trust_remote_code=True)
    with pytest.raises(TypeError, match=r"QuickThoughtModule encodes texts \(str\), got NoneType \(None\)"):
        st.encode(["a", None])
    assert st.encode([]).size == 0 and st.encode("one sentence").shape == (16,)
    assert np.abs(st.encode([["the", "cat"]]) - st.encode(["the cat"])).max() == 0  # a text given as its words


def test_load_encoder_encode_of_empty_and_iterable_inputs(small_run):
    enc = nlp_qt.load_encoder(small_run)
    assert enc.encode([]).shape == (0, 16)
    assert np.array_equal(enc.encode(s for s in ["a b", "c"]), enc.encode(["a b", "c"]))
    with pytest.raises(TypeError, match="list of sentences"):
        enc.encode("one sentence")


def test_load_encoder_encode_names_the_bad_item(small_run):
    enc = nlp_qt.load_encoder(small_run)
    with pytest.raises(TypeError, match=r"item 0 is NoneType \(None\)"):
        enc.encode([None, 3])


def test_an_export_fine_tuned_and_saved_in_sentence_transformers_is_not_replaced_by_overwrite(small_run, tmp_path):
    """A user loaded an export in sentence-transformers, trained it further and saved it into the export's folder
    (its config.json keeps the export's entries): `nlp_qt.export --overwrite` took it for the export and replaced
    the fine-tuned weights."""
    st = pytest.importorskip("sentence_transformers")
    out = Path(export_main(ExportArgs(run_dir=str(small_run), output=str(tmp_path / "enc")))["model"])
    model = st.SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    model.save(str(out))  # saved as it is: still the export, --overwrite replaces it
    export_main(ExportArgs(run_dir=str(small_run), output=str(out), overwrite=True))
    model = st.SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)  # stands for a few steps of training
    model.save(str(out))
    tuned = _tree(out)
    with pytest.raises(FileExistsError, match="whose weights have changed since it was written .*not replaced, "
                                              "even with --overwrite"):
        export_main(ExportArgs(run_dir=str(small_run), output=str(out), overwrite=True))
    assert _tree(out) == tuned
    # a bag-of-words export saved over in place likewise
    _word_vectors(tmp_path / "w2v", BOW_WORDS, dim=4)
    bow = Path(export_main(ExportArgs(run_dir=str(tmp_path / "w2v")))["model"])
    model = st.SentenceTransformer(str(bow), device="cpu")
    with torch.no_grad():
        next(model.parameters()).add_(0.01)
    model.save(str(bow))
    with pytest.raises(FileExistsError, match="whose weights have changed"):
        export_main(ExportArgs(run_dir=str(tmp_path / "w2v"), overwrite=True))


def test_a_checkpoint_of_another_run_is_refused_with_the_shapes_that_differ(small_run, tmp_path):
    """The refusal kept only torch's header line ("Error(s) in loading state_dict for QuickThought:"), in the export
    and in the exported folder's own loader."""
    import shutil

    from shared_losses.training.runtime import CheckpointError

    vocab = json.loads((small_run / "vocab.json").read_text())
    out = Path(export_main(ExportArgs(run_dir=str(small_run), output=str(tmp_path / "enc")))["model"])
    vocab["itos"] += ["extra1", "extra2"]  # another run's vocabulary: two more rows of word vectors
    other = tmp_path / "other"
    shutil.copytree(small_run, other)
    (other / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(CheckpointError, match=r"does not match .*\(size mismatch for \S*embed\S*: copying a param "
                                              r"with shape torch.Size\(\[\d+, \d+\]\)"):
        export_main(ExportArgs(run_dir=str(other), output=str(tmp_path / "enc2")))
    assert not (tmp_path / "enc2").exists() and not (tmp_path / ".enc2.export").exists()
    config = json.loads((out / "config.json").read_text())
    config["model"]["vocab_size"] += 2
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"model.safetensors does not match .*\(size mismatch for \S*embed"):
        modeling_qt.load_folder(out)


def test_export_to_the_folder_one_is_in_and_a_stopped_export_leaves_nothing_beside_its_target(small_run, tmp_path,
                                                                                              monkeypatch):
    import nlp_qt.export as export

    target = tmp_path / "here"
    target.mkdir()
    before = {p.name for p in tmp_path.iterdir()}
    monkeypatch.chdir(target)
    # the folder one is in is refused: replaced whole (renamed into place), it left the shell in a folder that was
    # gone, whose next command could not load its libraries
    with pytest.raises(ValueError, match=r"^--output \. is \(or holds\) the working folder"):
        export_main(ExportArgs(run_dir=str(small_run), output="."))
    assert not any(target.iterdir())
    monkeypatch.chdir(tmp_path)
    assert export_main(ExportArgs(run_dir=str(small_run), output="here"))["model"] == "here"
    assert (target / "modules.json").is_file()

    def cut(*args):
        raise KeyboardInterrupt  # Ctrl-C once the staged copy is whole, before its rename

    monkeypatch.setattr(export, "_record_weights", cut)
    with pytest.raises(KeyboardInterrupt):
        export_main(ExportArgs(run_dir=str(small_run), output=str(tmp_path / "enc")))
    assert {p.name for p in tmp_path.iterdir()} == before


def test_a_sigterm_during_an_export_says_nothing_was_exported_and_leaves_no_staging_folder(small_run, tmp_path):
    """Ctrl-C printed a training run's line ("work since the last checkpoint is lost; ... with --resume"), and
    SIGTERM (kill, a scheduler) ended the export without removing its staging folder."""
    import subprocess

    child = (
        "import os, runpy, signal, sys, time\n"
        "import nlp_qt.model as model\n"
        "real = model.save_model\n"
        "def save(*args, **kwargs):\n"
        "    real(*args, **kwargs)\n"  # the staged copy is whole; then the signal comes
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "model.save_model = save\n"
        f"sys.argv = ['nlp_qt.export', '--run-dir', {str(small_run)!r}, '--output', {str(tmp_path / 'enc')!r}]\n"
        "runpy.run_module('nlp_qt.export', run_name='__main__', alter_sys=True)\n")
    before = {p.name for p in tmp_path.iterdir()}
    res = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CONTRASTIVE_SUITE_TRACEBACK": ""})
    assert res.returncode == 130, res.stderr
    assert res.stderr.strip().splitlines()[-1] == ("stopped (Ctrl-C or SIGTERM): nothing was exported; --output is "
                                                   "as it was")
    assert {p.name for p in tmp_path.iterdir()} == before  # no enc, no .enc.export


def test_a_model_folder_given_for_a_run_and_a_checkpoint_given_for_a_model_are_named(small_run):
    """`--run-dir RUN/model` said "checkpoint not found ... (nothing to resume from)"; `--model RUN/checkpoint` that it
    was neither kind of model; after exporting as advised, the evaluation repeated the same advice."""
    import shutil

    from nlp_qt.senteval.encoders import load_encoder

    with pytest.raises(FileNotFoundError, match=r"--run-dir .*model is a model folder already .*--run-dir takes the "
                                                r"run folder that holds checkpoint/"):
        export_main(ExportArgs(run_dir=str(small_run / "model")))
    with pytest.raises(FileNotFoundError, match=r"checkpoint is an nlp_qt run's training checkpoint, not a model: pass "
                                                rf"the run folder, --model {re.escape(str(small_run))} "):
        load_encoder(str(small_run / "checkpoint"), "cpu", 8, None)
    shutil.rmtree(small_run / "model")  # a run stopped before its end
    with pytest.raises(FileNotFoundError, match="write its checkpoint's model with python -m nlp_qt.export"):
        load_encoder(str(small_run), "cpu", 8, None)
    exported = export_main(ExportArgs(run_dir=str(small_run)))["model"]
    with pytest.raises(FileNotFoundError, match=rf"model_step2 is an export of its checkpoint: pass --model "
                                                rf"{re.escape(exported)}$"):
        load_encoder(str(small_run), "cpu", 8, None)
    load_encoder(exported, "cpu", 8, None)
