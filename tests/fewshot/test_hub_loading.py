"""The loading paths of a user with internet access, run against a Hugging Face hub on this machine
(tests/fake_hub.py, ``HF_ENDPOINT``): the paper's few-shot setting with its defaults (``--encoder roberta-base
--dataset glue/sst2``, both names the hub has moved under their owners) and nlp_qt's ``hf:bookcorpus`` (a bare name
whose repository holds only a loading script; its rows in the hub's Parquet export). The libraries are the installed
ones, unpatched, in fresh interpreters (huggingface_hub and datasets read HF_ENDPOINT when imported): with
datasets 5.2 and huggingface_hub 2.4, ``load_dataset("glue", "sst2")`` follows the hub's redirect and then fails
(``HfUriError: Repository id must be 'namespace/name'``), which these runs did before shared_losses.data's
load_hub_dataset."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm
from tests.fake_hub import FakeHub
from tests.fewshot.conftest import make_texts

pytestmark = pytest.mark.slow  # fresh interpreters, a training run

OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def _parquet(columns: dict) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()


def _sst2_rows(n: int, seed: int) -> dict:
    rows = make_texts(n, seed)
    return {"sentence": [t for t, _ in rows], "label": [y for _, y in rows], "idx": list(range(n))}


GLUE_CARD = b"""---
configs:
- config_name: sst2
  data_files:
  - split: train
    path: sst2/train-*
  - split: validation
    path: sst2/validation-*
---
# GLUE
"""


WIKITEXT_CARD = b"""---
configs:
- config_name: wikitext-103-raw-v1
  data_files:
  - split: train
    path: wikitext-103-raw-v1/train-*
- config_name: wikitext-2-raw-v1
  data_files:
  - split: train
    path: wikitext-2-raw-v1/train-*
---
"""


def _online_env(tmp_path: Path, url: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE}
    return {**env, "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf_home"), **extra}


@pytest.fixture
def hub(tiny_encoder):
    hub = FakeHub()
    hub.add("model", "FacebookAI/roberta-base", {p.name: p.read_bytes() for p in Path(tiny_encoder).iterdir()})
    hub.move("model", "roberta-base", "FacebookAI/roberta-base")  # as the hub does since 2024
    hub.add("dataset", "nyu-mll/glue", {
        "README.md": GLUE_CARD,
        "sst2/train-00000-of-00001.parquet": _parquet(_sst2_rows(120, 0)),
        "sst2/validation-00000-of-00001.parquet": _parquet(_sst2_rows(30, 1)),
    })
    hub.move("dataset", "glue", "nyu-mll/glue")
    return hub


def test_the_paper_setting_trains_from_the_hub_and_again_offline_from_its_cache(hub, tmp_path):
    args = [sys.executable, "-m", "fewshot.train", "--n-labeled", "8", "--n-unlabeled", "16", "--max-steps", "2",
            "--batch-labeled", "4", "--batch-unlabeled", "4", "--max-length", "16", "--no-progress"]
    with hub.serving() as url:
        res = warm.run(args + ["--output-dir", str(tmp_path / "online")], capture_output=True, text=True,
                       timeout=600, env=_online_env(tmp_path, url), cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
    metrics = json.loads((tmp_path / "online" / "metrics.json").read_text())
    assert (metrics["encoder"], metrics["dataset"]) == ("roberta-base", "glue/sst2")
    assert metrics["n_eval"] == 30 and metrics["eval_split"].startswith("labeled validation split")
    asked = hub.requests
    assert any("/FacebookAI/roberta-base/resolve/" in r for r in asked)  # the model through the hub's redirect
    assert any(r.startswith("GET /datasets/nyu-mll/glue/resolve/") and "sst2/validation" in r for r in asked)
    assert not any("/datasets/glue/" in r for r in asked), "the bare GLUE name was sent"

    # the same command offline (the hub unreachable, HF_HUB_OFFLINE=1) trains from the cache the first run filled
    offline = {**_online_env(tmp_path, "http://127.0.0.1:9"), **{k: "1" for k in OFFLINE}}
    res = warm.run(args + ["--output-dir", str(tmp_path / "offline")], capture_output=True, text=True, timeout=600,
                   env=offline, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    again = json.loads((tmp_path / "offline" / "metrics.json").read_text())
    assert again["eval_accuracy"] == metrics["eval_accuracy"]
    # roberta-base is no sentence-transformers model: the first token online, and offline from the cache's record of
    # the hub's answer, without a warning
    assert metrics["pooling"] == again["pooling"] == "cls" and "could not be told" not in res.stderr
    assert "roberta-base on the hub is not a sentence-transformers model" in again["pooling_source"]
    # the commit of the model's files the run loaded, online and offline alike
    assert metrics["encoder_revision"] == again["encoder_revision"] == hub.commit("model", "FacebookAI/roberta-base",
                                                                                 "main")

    # what the run exported, shared as a hub repository, classifies by its id in transformers' pipeline (the
    # model's code fetched from the repository) as the folder does here
    folder = Path(metrics["model"])
    hub.add("model", "someone/sst2-fewshot", {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()})
    texts = ["a good and fine film", "awful , grim and dire", "the plot"]
    code = ("import json, sys\nfrom transformers import pipeline\n"
            "clf = pipeline('text-classification', model=sys.argv[1], trust_remote_code=True, truncation=True, "
            "device='cpu')\nprint(json.dumps(clf(json.loads(sys.argv[2]), top_k=None)))")
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    predict = [sys.executable, "-m", "fewshot.predict", "--input", str(tmp_path / "texts.txt"), "--no-progress"]
    with hub.serving() as url:
        res = subprocess.run([sys.executable, "-c", code, "someone/sst2-fewshot", json.dumps(texts)],
                             capture_output=True, text=True, timeout=300, env=_online_env(tmp_path, url),
                             cwd=tmp_path)
        # fewshot.predict takes the hub id too (without fetching the folder's Python: it runs its own model code)
        before = len(hub.requests)
        own_cache = _online_env(tmp_path, url, HF_HOME=str(tmp_path / "hf_predict"))
        shared = warm.run(predict + ["--model", "someone/sst2-fewshot", "--output", str(tmp_path / "hub.jsonl")],
                          capture_output=True, text=True, timeout=300, env=own_cache, cwd=tmp_path)
        asked = hub.requests[before:]
        missing = warm.run(predict + ["--model", "someone/no-such-model", "--output", str(tmp_path / "no.jsonl")],
                           capture_output=True, text=True, timeout=300, env=_online_env(tmp_path, url), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert shared.returncode == 0, shared.stderr[-3000:]
    assert any(r.startswith("GET /someone/sst2-fewshot/resolve/") and r.endswith("/model.safetensors") for r in asked)
    assert not any(r.endswith(".py") for r in asked)
    local = warm.run(predict + ["--model", str(folder), "--output", str(tmp_path / "local.jsonl")],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    rows = lambda name: [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
    assert [(r["label"], r["probabilities"]) for r in rows("hub.jsonl")] == [
        (r["label"], r["probabilities"]) for r in rows("local.jsonl")]
    assert missing.returncode != 0 and "no model of that name on the Hugging Face hub" in missing.stderr
    by_id = json.loads(res.stdout.strip().splitlines()[-1])
    assert any(r.startswith("GET /someone/sst2-fewshot/resolve/") and r.endswith("/modeling_fewshot.py")
               for r in hub.requests)
    from transformers import pipeline

    here = pipeline("text-classification", model=str(folder), trust_remote_code=True, truncation=True,
                    device="cpu")(texts, top_k=None)
    scores = lambda out: [{d["label"]: d["score"] for d in o} for o in out]
    for theirs, ours in zip(scores(by_id), scores(here)):
        assert theirs.keys() == ours.keys() and all(abs(theirs[k] - ours[k]) < 1e-6 for k in ours)


def test_a_hub_corpus_with_a_bare_name_and_only_a_loading_script_streams_from_the_parquet_export(tmp_path):
    hub = FakeHub()
    hub.add("dataset", "bookcorpus/bookcorpus", {"README.md": b"---\npretty_name: BookCorpus\n---\n",
                                                 "bookcorpus.py": b"# a loading script\n"})
    hub.add("dataset", "bookcorpus/bookcorpus",
            {"plain_text/train/0000.parquet": _parquet({"text": ["the first sentence .", "the second one ."]})},
            revision="refs/convert/parquet")
    hub.move("dataset", "bookcorpus", "bookcorpus/bookcorpus")
    hub.add("dataset", "Salesforce/wikitext", {  # a dataset of several configurations
        "README.md": WIKITEXT_CARD,
        "wikitext-103-raw-v1/train-00000-of-00001.parquet": _parquet({"text": ["A long article ."]}),
        "wikitext-2-raw-v1/train-00000-of-00001.parquet": _parquet({"text": ["A short one ."]})})
    hub.move("dataset", "wikitext", "Salesforce/wikitext")
    hub.add("dataset", "someone/huge-books", {"README.md": b"---\npretty_name: huge\n---\n", "huge-books.py": b"#\n"})
    hub.add("dataset", "someone/huge-books",  # too large for the hub to convert whole: the first part of train
            {"default/partial-train/0000.parquet": _parquet({"text": ["only the first part ."]})},
            revision="refs/convert/parquet")
    # a command, as nlp_qt.train is: run_cli ends it without the interpreter's finalisation, in which pyarrow's
    # Parquet reader could abort a process that had done its work (seen once here)
    code = ("import json, sys\nfrom nlp_qt.corpus import CorpusError, iter_corpus\n"
            "from shared_losses.training.cli import run_cli\n"
            "def main():\n"
            "    for bad in ('hf:someone/no-such-corpus', 'hf:wikitext'):\n"
            "        try:\n            list(iter_corpus(bad))\n"
            "        except CorpusError as err:\n            print(err, file=sys.stderr)\n"
            "    print(json.dumps([s for _, s in iter_corpus('hf:wikitext:wikitext-2-raw-v1')]))\n"
            "    print(json.dumps([s for _, s in iter_corpus('hf:bookcorpus')]))\n"
            "    print(json.dumps([s for _, s in iter_corpus('hf:someone/huge-books')]))\n"
            "run_cli(main)")
    with hub.serving() as url:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=_online_env(tmp_path, url), cwd=os.getcwd())
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-2]) == ["the first sentence .", "the second one ."]
    assert "holds a loading script" in res.stderr and "refs/convert/parquet" in res.stderr
    # an export of part of a dataset is read (as datasets reads it: the train split), and said to be a part
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["only the first part ."]
    assert res.stderr.count("is partial") == 1
    assert ("the hub's Parquet export of someone/huge-books is partial (default/partial-train: the hub converts only "
            "the first part of a large dataset)") in res.stderr
    assert "hub has no dataset of that name" in res.stderr and "Offline" not in res.stderr  # the unknown name
    assert ("the hub dataset wikitext has several configurations: name one as hf:wikitext:CONFIG, CONFIG one of "
            "['wikitext-103-raw-v1', 'wikitext-2-raw-v1']") in res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-3]) == ["A short one ."]
    assert "GET /api/datasets/bookcorpus" in hub.requests  # the bare name asked of the hub once, for its id
    assert not any(r.startswith(("HEAD /datasets/bookcorpus/resolve", "GET /datasets/bookcorpus/resolve"))
                   for r in hub.requests)


def test_a_gated_or_unknown_hub_model_is_named_as_such(tiny_encoder, tmp_path):
    """A gated encoder was reported as "no model of that name on the hub", and nlp_qt.senteval's hint for any hub
    refusal was "offline?": each now says what the hub answered (gated: ask for access and log in; missing: check
    the name, a private one needs a token)."""
    hub = FakeHub()
    files = {p.name: p.read_bytes() for p in Path(tiny_encoder).iterdir() if p.is_file()}
    hub.add("model", "big-lab/gated-encoder", files)
    hub.gate("model", "big-lab/gated-encoder")
    code = r'''
import json
from fewshot.model import load_tokenizer
from nlp_qt.senteval.encoders import load_encoder
said = {}
for name in ("big-lab/gated-encoder", "big-lab/no-such-encoder"):
    for what, load in (("fewshot", load_tokenizer), ("senteval", load_encoder)):
        try:
            load(name)
        except Exception as err:
            said[f"{what} {name}"] = str(err)
print(json.dumps(said))
'''
    with hub.serving() as url:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             env=_online_env(tmp_path, url), cwd=os.getcwd())
    assert res.returncode == 0, res.stderr[-3000:]
    said = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(said) == 4
    for what in ("fewshot", "senteval"):
        gated, missing = said[f"{what} big-lab/gated-encoder"], said[f"{what} big-lab/no-such-encoder"]
        assert "gated model" in gated and "hf auth login" in gated and "no model of that name" not in gated
        assert "no model of that name" in missing and "private one needs a token" in missing
        assert "offline" not in (gated + missing).lower()


def test_pooling_auto_reads_a_hub_models_sentence_transformers_layout_online_and_from_the_cache(tiny_encoder, tmp_path):
    """--pooling auto for a hub id: a sentence-transformers model pools as its Pooling module says (it took the
    first token before, whatever the model was trained with); a plain model takes the first token, and the hub's
    "no modules.json" is remembered by the cache, so the same answer comes offline without a warning; where nothing
    can tell (offline, never fetched) the first token comes with a warning naming --pooling."""
    hub = FakeHub()
    files = {p.name: p.read_bytes() for p in Path(tiny_encoder).iterdir() if p.is_file()}
    pooling = lambda mode: json.dumps({f"pooling_mode_{m}": m == mode
                                       for m in ("cls_token", "mean_tokens", "max_tokens")}).encode()
    modules = lambda path: json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": path, "type": "sentence_transformers.models.Pooling"}]).encode()
    hub.add("model", "someone/st-mean", {**files, "modules.json": modules("1_Pooling"),
                                         "1_Pooling/config.json": pooling("mean_tokens")})
    hub.add("model", "someone/st-max", {**files, "modules.json": modules("pool"),  # the module named there wins
                                        "pool/config.json": pooling("max_tokens"),
                                        "1_Pooling/config.json": pooling("mean_tokens")})
    hub.add("model", "someone/plain", files)
    hub.add("model", "someone/st-seen-by-transformers", {**files, "modules.json": modules("1_Pooling"),
                                                          "1_Pooling/config.json": pooling("mean_tokens")})
    code = ("import json, sys, warnings\nfrom fewshot.model import resolve_pooling\n"
            "from huggingface_hub import hf_hub_download\nwarnings.simplefilter('always')\n"
            "names, fetch = sys.argv[1].split(), sys.argv[2].split()\n"
            "[hf_hub_download(n, 'config.json') for n in fetch]\n"  # a model's files fetched by another tool
            "print(json.dumps({n: resolve_pooling('auto', n) for n in names}))")
    names = "someone/st-mean someone/st-max someone/plain"
    with hub.serving() as url:
        online = subprocess.run([sys.executable, "-c", code, names, "someone/st-seen-by-transformers"],
                                capture_output=True, text=True, timeout=300, env=_online_env(tmp_path, url),
                                cwd=os.getcwd())
    assert online.returncode == 0, online.stderr[-3000:]
    offline_env = {**_online_env(tmp_path, "http://127.0.0.1:9"), **{k: "1" for k in OFFLINE}}
    unknown = "someone/st-seen-by-transformers someone/never-fetched"
    offline = subprocess.run([sys.executable, "-c", code, f"{names} {unknown}", ""], capture_output=True,
                             text=True, timeout=300, env=offline_env, cwd=os.getcwd())
    assert offline.returncode == 0, offline.stderr[-3000:]
    for res in (online, offline):
        got = json.loads(res.stdout.strip().splitlines()[-1])
        assert [got[n][0] for n in names.split()] == ["mean", "max", "cls"]
        assert got["someone/st-max"][1].endswith("pool/config.json")
        assert "someone/plain on the hub is not a sentence-transformers model" in got["someone/plain"][1]
    assert "could not be told" not in online.stderr
    # offline, a model whose files came from elsewhere (modules.json never asked for): the first token, said once;
    # a model not in the cache at all: no warning (loading it fails and says why)
    got = json.loads(offline.stdout.strip().splitlines()[-1])
    assert got["someone/st-seen-by-transformers"][0] == got["someone/never-fetched"][0] == "cls"
    assert offline.stderr.count("could not be told") == 1
    assert "whether someone/st-seen-by-transformers is a sentence-transformers model" in offline.stderr
    assert "Pass --pooling mean" in offline.stderr


def test_a_hub_dataset_by_name_trains_and_is_scored_on_its_own_labeled_split(tiny_encoder, tmp_path):
    """--dataset hf:NAME[:CONFIG]: the train split is the pool; the evaluation is the dataset's validation split,
    else its test split, where their labels are not hidden (GLUE's test holds -1), else a held-out part of train."""
    hub = FakeHub()
    hub.add("model", "someone/tiny-encoder", {p.name: p.read_bytes() for p in Path(tiny_encoder).iterdir()
                                               if p.is_file()})
    reviews = {split: {"text": [t for t, _ in make_texts(n, seed)], "label": [y for _, y in make_texts(n, seed)]}
               for split, n, seed in (("train", 100, 0), ("test", 24, 1))}
    hub.add("dataset", "stanfordnlp/imdb", {"README.md": b"---\npretty_name: IMDB\n---\n",
                                            "plain_text/train-00000-of-00001.parquet": _parquet(reviews["train"]),
                                            "plain_text/test-00000-of-00001.parquet": _parquet(reviews["test"])})
    glue = {"sst2/train-00000-of-00001.parquet": _parquet(_sst2_rows(60, 0)),
            "sst2/validation-00000-of-00001.parquet": _parquet(_sst2_rows(20, 1)),
            "sst2/test-00000-of-00001.parquet": _parquet({**_sst2_rows(12, 2), "label": [-1] * 12})}
    hub.add("dataset", "nyu-mll/glue", {"README.md": GLUE_CARD.replace(b"---\n# GLUE", b"  - split: test\n    path: "
                                                                       b"sst2/test-*\n---\n# GLUE"), **glue})
    args = [sys.executable, "-m", "fewshot.train", "--encoder", "someone/tiny-encoder", "--dataset",
            "hf:stanfordnlp/imdb", "--text-column", "text", "--n-labeled", "8", "--n-unlabeled", "16", "--max-steps",
            "2", "--batch-labeled", "4", "--batch-unlabeled", "4", "--max-length", "16", "--no-progress",
            "--output-dir", str(tmp_path / "imdb")]
    code = r'''
import json, sys
from fewshot.config import FewShotConfig
from fewshot.data import load_splits
said = {}
x, y, ex, ey = load_splits(FewShotConfig(dataset="hf:nyu-mll/glue:sst2"))
said["glue"] = [len(y), len(ey), sorted(set(ey))]
for name, kw in (("eval_file", dict(dataset="hf:stanfordnlp/imdb", eval_file="hf:nyu-mll/glue:sst2")),
                 ("column", dict(dataset="hf:stanfordnlp/imdb")),
                 ("config", dict(dataset="hf:nyu-mll/glue:cola"))):
    try:
        load_splits(FewShotConfig(text_column="text", **kw) if name != "column" else FewShotConfig(**kw))
    except Exception as err:
        said[name] = f"{type(err).__name__}: {err}"
print(json.dumps(said))
'''
    with hub.serving() as url:
        res = warm.run(args, capture_output=True, text=True, timeout=600, env=_online_env(tmp_path, url), cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                               env=_online_env(tmp_path, url), cwd=os.getcwd())
    assert child.returncode == 0, child.stderr[-3000:]
    metrics = json.loads((tmp_path / "imdb" / "metrics.json").read_text())
    assert metrics["n_eval"] == 24 and metrics["eval_split"] == "the hub dataset's test split"
    assert metrics["dataset"] == "hf:stanfordnlp/imdb"
    assert "training pool from its train split (100 examples), evaluation on its test split (24)" in res.stdout
    # offline, from the cache the run filled: the same split found, the same score
    offline = {**_online_env(tmp_path, "http://127.0.0.1:9"), **{k: "1" for k in OFFLINE}}
    again = warm.run(args[:-1] + [str(tmp_path / "imdb_offline")], capture_output=True, text=True, timeout=600,
                     env=offline, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    cached = json.loads((tmp_path / "imdb_offline" / "metrics.json").read_text())
    assert (cached["eval_split"], cached["eval_accuracy"]) == (metrics["eval_split"], metrics["eval_accuracy"])
    said = json.loads(child.stdout.strip().splitlines()[-1])
    assert said["glue"] == [60, 20, [0, 1]]  # validation, not the test split of hidden labels
    assert "--eval-file takes a local file" in said["eval_file"]
    assert "column(s) ['sentence'] not found; available columns: ['text', 'label']" in said["column"]
    assert said["config"] == ("DataError: --dataset: the hub dataset nyu-mll/glue has no configuration 'cola'; it "
                              "has ['sst2']")
