import csv
import dataclasses
import json
import shutil

import pytest
import torch

from rl_curl.train import run
from shared_losses.training.runtime import CheckpointError

from .conftest import tiny_config
from tests import warm

# action_repeat 50 makes a cartpole episode 20 agent steps long (1000 / 50).
BASE = dict(task="cartpole-swingup", action_repeat=50, seed_steps=5, eval_every=10_000, log_every=100)


def cfg(tmp_path, name, **kw):
    return tiny_config(output_dir=str(tmp_path / name), **{**BASE, **kw})


def agent_state(out):
    return torch.load(out / "checkpoint" / "custom_checkpoint_0.pkl", weights_only=False)


def test_short_run_writes_csv_checkpoint_plot(tmp_path, monkeypatch):
    import rl_curl.curve

    titles = []
    real = rl_curl.curve.plot_curve
    monkeypatch.setattr(rl_curl.curve, "plot_curve", lambda *a, **k: titles.append(k["title"]) or real(*a, **k))
    summary = run(cfg(tmp_path, "a", env_steps=1000, eval_every=500, aux="debiased", tau_plus=0.05, save_video=True,
                      eval_episodes=2))
    out = tmp_path / "a"
    # the curve says whose it is and what a point is (a probe: the title named the task and objective only)
    assert titles == ["cartpole-swingup: debiased τ⁺=0.05, M=1, seed 0\neach point: the mean return of 2 evaluation "
                      "episodes"]
    for f in ["config.json", "log.csv", "eval.csv", "curve.png", "summary.json", "eval.mp4", "checkpoint/COMPLETE"]:
        assert (out / f).exists(), f
    rows = list(csv.DictReader(open(out / "eval.csv")))
    assert [int(r["env_step"]) for r in rows] == [500, 1000]
    log = list(csv.DictReader(open(out / "log.csv")))
    assert any(r.get("aux_loss") for r in log) and any(r.get("episode_return") for r in log)
    assert summary["env_steps"] == 1000 and list(out.glob("tb/events*"))
    assert summary["update"] == "official" and summary["train_from_env_step"] == 0 and summary["train_seconds"] > 0


@pytest.mark.parametrize("update", ["official", pytest.param("fused", marks=pytest.mark.slow)])  # fused: full suite
def test_resume_continues_exactly(tmp_path, update):
    # Uninterrupted: 2 episodes (checkpoint after the first). Interrupted: stop after 1, resume. The
    # resumed half keeps its replay frames in a torch tensor (--replay-on-device; the CPU here): the
    # host-ring checkpoint loads into it and the run continues exactly. Both update schedules (issue 19).
    run(cfg(tmp_path, "full", env_steps=2000, checkpoint_every=1000, update=update))
    run(cfg(tmp_path, "part", env_steps=1000, checkpoint_every=1000, update=update))
    run(cfg(tmp_path, "part", env_steps=2000, checkpoint_every=1000, resume=True, replay_on_device=True, update=update))
    with pytest.raises(CheckpointError, match="update"):  # the schedule cannot change on resume
        run(cfg(tmp_path, "part", env_steps=3000, checkpoint_every=1000, resume=True,
                update="official" if update == "fused" else "fused"))
    a, b = agent_state(tmp_path / "full"), agent_state(tmp_path / "part")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    for i in range(1, 6):  # every optimiser state too
        sa = torch.load(tmp_path / "full/checkpoint" / f"custom_checkpoint_{i}.pkl", weights_only=False)
        sb = torch.load(tmp_path / "part/checkpoint" / f"custom_checkpoint_{i}.pkl", weights_only=False)
        for p in sa["state"]:
            for k in sa["state"][p]:
                assert torch.equal(sa["state"][p][k], sb["state"][p][k])
    # the replay too: its entry (all but the frames) and its frame files, one per checkpoint (rl_curl.replay)
    ra, rb = (torch.load(tmp_path / n / "checkpoint/custom_checkpoint_6.pkl", weights_only=False) for n in ("full",
                                                                                                         "part"))
    assert len(ra["frame_files"]) == 2 and ra["frame_files"] == rb["frame_files"] and ra["rng"] == rb["rng"]
    for name in ("actions", "rewards", "not_dones", "next_frame"):
        assert torch.equal(ra[name], rb[name]), name
    for _, _, name, _ in ra["frame_files"]:
        fa, fb = (torch.load(tmp_path / n / "checkpoint/replay_frames" / name) for n in ("full", "part"))
        assert torch.equal(fa, fb), name


def test_an_extension_from_an_episode_boundary_labels_its_evaluations_as_the_uninterrupted_run(tmp_path):
    # the final evaluation of a run that ends with an episode is labelled with that episode, as every other
    # evaluation is: the extension's eval.csv equals the uninterrupted run's row for row
    run(cfg(tmp_path, "full", env_steps=3000, eval_every=1000))
    run(cfg(tmp_path, "part", env_steps=2000, eval_every=1000))
    run(cfg(tmp_path, "part", env_steps=3000, eval_every=1000, resume=True))
    rows = [list(csv.DictReader(open(tmp_path / n / "eval.csv"))) for n in ("full", "part")]
    assert rows[0] == rows[1]
    assert [(r["env_step"], r["episode"]) for r in rows[0]] == [("1000", "0"), ("2000", "1"), ("3000", "2")]


def test_a_resume_below_the_checkpoint_is_refused_and_a_rounded_length_warned_of(tmp_path):
    run(cfg(tmp_path, "a", env_steps=2000, checkpoint_every=1000))
    (tmp_path / "a/summary.json").unlink()  # as a run stopped after its checkpoint at 2000
    before = (tmp_path / "a/config.json").read_text()
    with pytest.raises(CheckpointError, match="at environment step 2000, past --env-steps 1000.*--env-steps 2000"):
        run(cfg(tmp_path, "a", env_steps=1000, checkpoint_every=1000, resume=True))
    assert (tmp_path / "a/config.json").read_text() == before
    with pytest.warns(UserWarning, match="--env-steps 260 is not a whole number .* to environment step 300"):
        summary = run(cfg(tmp_path, "b", env_steps=260, seed_steps=2))
    assert summary["env_steps"] == 300


@pytest.mark.parametrize("kw, words", [
    (dict(init_temperature=0.0), "--init-temperature must be > 0"),
    (dict(init_temperature=-1.0), "--init-temperature must be > 0"),
    (dict(feature_dim=0), "--feature-dim must be >= 1"),
    (dict(hidden_dim=0), "--hidden-dim must be >= 1"),
    (dict(aux="curl", log_floor="none"), "--log-floor none only applies to --aux debiased or hard or cpc"),
    (dict(aux="none", log_floor="none"), "--aux none takes --log-floor min-negative"),
])
def test_options_that_would_train_a_dead_or_unread_setting_are_refused(tmp_path, kw, words):
    with pytest.raises(ValueError, match=words):
        run(cfg(tmp_path, "x", env_steps=100, **kw))
    assert not (tmp_path / "x").exists()


def test_seed_steps_covering_the_whole_run_are_warned_of(tmp_path, recwarn):
    # 250 environment steps at action repeat 50 are 5 agent steps: --seed-steps 5 leaves no step to update at
    with pytest.warns(UserWarning, match="--seed-steps 5 covers every agent step left in this run"):
        run(cfg(tmp_path, "all_seed", env_steps=250, seed_steps=5))
    recwarn.clear()
    run(cfg(tmp_path, "one_update", env_steps=250, seed_steps=4))
    assert not [w for w in recwarn if "--seed-steps" in str(w.message)]


def test_an_update_interval_that_no_update_of_the_run_meets_is_warned_of(tmp_path, recwarn):
    """--actor-update-every (or --aux-update-every) beyond the run's updates trained no actor (no auxiliary loss)
    without a word, where --seed-steps covering the run is warned of."""
    # 500 environment steps at action repeat 50: agent steps 0-9, updates at 5-9 (after 5 seed steps)
    with pytest.warns(UserWarning, match=r"--actor-update-every 20: no update of the actor \(and alpha\) falls in "
                                         r"this run's updates \(agent steps 5 to 9, at the multiples of 20\)"):
        run(cfg(tmp_path, "actor", env_steps=500, actor_update_every=20))
    with pytest.warns(UserWarning, match=r"--aux-update-every 20: no update of --aux curl falls"):
        run(cfg(tmp_path, "aux", env_steps=500, aux="curl", aux_update_every=20))
    recwarn.clear()
    run(cfg(tmp_path, "meets", env_steps=500, aux="curl", actor_update_every=8, aux_update_every=6))
    assert not [w for w in recwarn if "update-every" in str(w.message)]


def episode_rows(out):
    return [(r["env_step"], r["episode"], r["episode_return"]) for r in csv.DictReader(open(out / "log.csv"))
            if r.get("episode_return")]


def test_extending_a_run_that_ended_mid_episode_continues_that_episode_exactly(tmp_path):
    # 1500 environment steps end 10 agent steps into the second 20-step episode; the extension replays those 10
    # steps from the episode's seed with the stored actions and goes on as the uninterrupted run does
    run(cfg(tmp_path, "full", env_steps=2500, eval_every=500))
    run(cfg(tmp_path, "part", env_steps=1500, eval_every=500))
    assert json.loads((tmp_path / "part/summary.json").read_text())["env_steps"] == 1500
    run(cfg(tmp_path, "part", env_steps=2500, eval_every=500, resume=True))
    a, b = agent_state(tmp_path / "full"), agent_state(tmp_path / "part")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert episode_rows(tmp_path / "part") == episode_rows(tmp_path / "full")
    assert [int(s) for s, _, _ in episode_rows(tmp_path / "full")] == [1000, 2000]
    evals = [list(csv.DictReader(open(tmp_path / n / "eval.csv"))) for n in ("full", "part")]
    assert [r["eval_return_mean"] for r in evals[0]] == [r["eval_return_mean"] for r in evals[1]]


def test_an_episode_that_does_not_replay_to_its_stored_observation_starts_again_with_a_warning(tmp_path, monkeypatch):
    import rl_curl.train as train

    run(cfg(tmp_path, "m", env_steps=1500, eval_every=10_000))
    seed = train.episode_seed
    monkeypatch.setattr(train, "episode_seed", lambda c, e: seed(c, e) + 1)  # another initial state
    with pytest.warns(UserWarning, match="episode 1, 10 agent steps in.*starts again from its first step"):
        run(cfg(tmp_path, "m", env_steps=2500, eval_every=10_000, resume=True))
    steps = [int(s) for s, _, _ in episode_rows(tmp_path / "m")]
    assert steps == [1000, 2500]  # the restarted episode: its 20 steps after the checkpoint at 1500


def test_corrupt_or_mismatched_checkpoint_is_refused(tmp_path):
    run(cfg(tmp_path, "c", env_steps=1000))
    out = tmp_path / "c"
    with pytest.raises(CheckpointError, match="different configuration"):
        run(cfg(tmp_path, "c", env_steps=2000, resume=True, num_filters=6))
    with pytest.raises(CheckpointError, match="aux"):
        run(cfg(tmp_path, "c", env_steps=2000, resume=True, aux="debiased", tau_plus=0.1))
    # A checkpoint of another agent layout may load without a shape error, so it is refused by its format, in
    # training and in evaluation.
    extra_path = out / "checkpoint" / "extra.pt"
    good = extra_path.read_bytes()
    extra = torch.load(extra_path, weights_only=False)
    assert extra.pop("format") == 2
    torch.save(extra, extra_path)
    with pytest.raises(CheckpointError, match="another version of rl_curl"):
        run(cfg(tmp_path, "c", env_steps=2000, resume=True))
    from rl_curl.evaluate import load_agent
    with pytest.raises(CheckpointError, match="another version of rl_curl"):
        load_agent(out)
    extra_path.write_bytes(good)
    load_agent(out)
    shutil.copytree(out / "checkpoint", tmp_path / "backup")
    (out / "checkpoint" / "extra.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        run(cfg(tmp_path, "c", env_steps=2000, resume=True))
    (out / "checkpoint" / "COMPLETE").unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        run(cfg(tmp_path, "c", env_steps=2000, resume=True))


def test_evaluate_loads_the_checkpoint(tmp_path):
    from rl_curl.evaluate import EvalArgs, main

    run(cfg(tmp_path, "e", env_steps=1000, eval_every=1000))
    res = main(EvalArgs(run_dir=str(tmp_path / "e"), episodes=1))
    last = list(csv.DictReader(open(tmp_path / "e" / "eval.csv")))[-1]
    assert res["return_mean"] == pytest.approx(float(last["eval_return_mean"]), rel=1e-6)
    with pytest.raises(FileNotFoundError, match="nothing: no such folder"):  # was "config.json not found"
        main(EvalArgs(run_dir=str(tmp_path / "nothing")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        main(EvalArgs(run_dir=str(tmp_path / "empty")))
    shutil.copytree(tmp_path / "e", tmp_path / "early", ignore=shutil.ignore_patterns("checkpoint"))
    with pytest.raises(FileNotFoundError, match="no checkpoint/ yet"):  # a run that has not saved one
        main(EvalArgs(run_dir=str(tmp_path / "early")))


def test_evaluate_reads_one_checkpoint_while_the_run_replaces_it(tmp_path, monkeypatch):
    """A run that checkpoints while it is evaluated (or exported) replaces its checkpoint folder between evaluate's
    read of the step and its read of the weights (about 7 % of loads at one checkpoint a second, seen): the step of
    one checkpoint and the weights of the next. A folder replaced during the reads is now read again."""
    import rl_curl.evaluate as ev
    from shared_losses.training.runtime import replace_directory

    out = tmp_path / "r"
    run(cfg(tmp_path, "r", env_steps=1000, eval_every=1000))
    shutil.copytree(out / "checkpoint", tmp_path / "first")
    run(cfg(tmp_path, "r", env_steps=2000, eval_every=1000, resume=True))
    shutil.copytree(out / "checkpoint", tmp_path / "second")
    newer = torch.load(next((tmp_path / "second").glob("custom_checkpoint_0.pkl")), weights_only=False)
    shutil.rmtree(out / "checkpoint")
    shutil.copytree(tmp_path / "first", out / "checkpoint")  # the run at 1000, about to write its next checkpoint
    real, swapped = torch.load, []

    def load_while_the_run_checkpoints(f, *a, **k):
        if not swapped and str(f).endswith("custom_checkpoint_0.pkl"):  # the agent's weights, after the step
            swapped.append(True)
            replace_directory(tmp_path / "second", out / "checkpoint")  # how a run replaces its checkpoint
        return real(f, *a, **k)

    monkeypatch.setattr(torch, "load", load_while_the_run_checkpoints)
    agent, _, env_step = ev.load_agent(out)
    assert swapped and env_step == 2000  # the step and the weights of the checkpoint now in place
    state = agent.state_dict()
    assert all(torch.equal(state[k], newer[k]) for k in newer)


def test_evaluate_and_export_refuse_a_config_json_that_is_not_the_checkpoints(tmp_path, capsys):
    """config.json edited (or copied from another run) over a checkpoint: evaluate built the agent of config.json's
    task and evaluated cartpole-swingup's policy on cartpole-balance without a word (export wrote that policy file);
    the two are now compared (the fields a resume may change aside), naming the fields."""
    from rl_curl.evaluate import EvalArgs, main
    from rl_curl.export import ExportArgs
    from rl_curl.export import main as export

    run(cfg(tmp_path, "c", env_steps=1000, eval_every=1000))
    path = tmp_path / "c" / "config.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({**saved, "eval_episodes": 1}))  # a field a resume may change: evaluated as before
    res = main(EvalArgs(run_dir=str(tmp_path / "c"), episodes=1))
    assert res["env_step"] == 1000 and json.loads(capsys.readouterr().out.splitlines()[-1])["env_step"] == 1000
    path.write_text(json.dumps({**saved, "task": "cartpole-balance"}))
    words = r"config.json and the checkpoint .* disagree \(task: 'cartpole-swingup' -> 'cartpole-balance', as"
    with pytest.raises(CheckpointError, match=words):
        main(EvalArgs(run_dir=str(tmp_path / "c"), episodes=1))
    with pytest.raises(CheckpointError, match=words):
        export(ExportArgs(run_dir=str(tmp_path / "c"), output=str(tmp_path / "p.pt")))
    assert not (tmp_path / "p.pt").exists()
    with pytest.raises(FileNotFoundError, match=r"--output .*p.pt: the folder .*nodir does not exist"):
        export(ExportArgs(run_dir=str(tmp_path / "c"), output=str(tmp_path / "nodir" / "p.pt")))


def test_evaluate_runs_many_episodes_in_turns_of_the_runs_evaluation_size(tmp_path, monkeypatch, capsys):
    """`rl_curl.evaluate --episodes 60` opened 60 environments at once (5.5 GB, seen); episodes now run as many at a
    time as the run's own evaluations, the first turn being the run's final evaluation, and a line after each turn."""
    import numpy as np

    import rl_curl.train as train_module
    from rl_curl.evaluate import EvalArgs, main

    run(cfg(tmp_path, "m", env_steps=1000, eval_every=1000, eval_episodes=2))
    sizes = []
    real = train_module.EvalEnvs

    class Recorded(real):
        def __init__(self, cfg, episodes, *a, **k):
            sizes.append(episodes)
            super().__init__(cfg, episodes, *a, **k)

    monkeypatch.setattr(train_module, "EvalEnvs", Recorded)
    res = main(EvalArgs(run_dir=str(tmp_path / "m"), episodes=5))
    assert sizes == [2, 1] and len(res["returns"]) == 5
    last = list(csv.DictReader(open(tmp_path / "m" / "eval.csv")))[-1]
    assert float(np.mean(res["returns"][:2])) == float(last["eval_return_mean"])  # the run's final evaluation
    assert "evaluated 4 of 5 episodes (2 at a time" in capsys.readouterr().err


def test_evaluate_acts_with_the_runs_cpu_threads_and_gives_this_process_its_own_back(tmp_path, monkeypatch):
    """A run with --torch-threads 1 (--preset cpu sets it) evaluated by rl_curl.evaluate in a fresh process (torch's
    default threads) ended a few ulps away from its final evaluation (95.03617595870917 against 95.03619474457103,
    seen): the evaluation now uses the run's thread count, and the caller's is put back afterwards."""
    import rl_curl.train as train_module
    from rl_curl.evaluate import EvalArgs, main

    before = torch.get_num_threads()
    run(cfg(tmp_path, "t", env_steps=1000, eval_every=1000, torch_threads=1))
    seen = []
    real = train_module.EvalEnvs.run
    monkeypatch.setattr(train_module.EvalEnvs, "run",
                        lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    torch.set_num_threads(2)  # a fresh process's default on this machine's 2 cores
    try:
        res = main(EvalArgs(run_dir=str(tmp_path / "t"), episodes=1))
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    last = list(csv.DictReader(open(tmp_path / "t" / "eval.csv")))[-1]
    assert res["return_mean"] == float(last["eval_return_mean"])


@pytest.mark.slow  # a bf16 run, then its evaluation
def test_evaluate_replays_a_bf16_runs_final_evaluation(tmp_path):
    """rl_curl.evaluate acts as the run's own evaluations did: under bf16 autocast for a bf16 run (it
    used to act in float32), on the episodes of the evaluation at the checkpoint's step."""
    from accelerate.state import AcceleratorState

    from rl_curl.evaluate import EvalArgs, main

    AcceleratorState._reset_state(True)  # accelerate keeps one precision per process: this test needs bf16
    try:
        run(cfg(tmp_path, "b", env_steps=1000, eval_every=1000, mixed_precision="bf16", device="cpu"))
    finally:
        AcceleratorState._reset_state(True)
    res = main(EvalArgs(run_dir=str(tmp_path / "b"), episodes=1))
    last = list(csv.DictReader(open(tmp_path / "b" / "eval.csv")))[-1]
    assert res["return_mean"] == float(last["eval_return_mean"])


@pytest.mark.slow  # a run, then its resume writing a video
def test_a_resume_with_other_evaluation_episodes_says_eval_csv_will_mix_them(tmp_path):
    """--eval-episodes may change on a resume, and eval.csv has no column for it: its rows then mix means over
    different counts without a word (seen); the resume now warns."""
    run(cfg(tmp_path, "e", env_steps=1000, eval_every=500, eval_episodes=2))
    with pytest.warns(UserWarning, match=r"--eval-episodes 1 differs from the run's 2: eval.csv's rows from here on "
                                         r"are means over 1 episode\(s\), the earlier ones over 2"):
        run(cfg(tmp_path, "e", env_steps=1500, eval_every=500, eval_episodes=1, resume=True))


def test_an_extension_without_a_video_says_the_one_there_is_older(tmp_path, capsys):
    """An extension without --save-video left the earlier part's eval.mp4 beside the new policy.pt and curve.png,
    as if it were the final one (seen); the extension now says so."""
    run(cfg(tmp_path, "v", env_steps=1000, eval_every=1000, save_video=True))
    made = (tmp_path / "v" / "eval.mp4").stat().st_mtime_ns
    capsys.readouterr()
    run(cfg(tmp_path, "v", env_steps=1500, eval_every=1000, resume=True))
    assert (f"note: {tmp_path / 'v' / 'eval.mp4'} is a video of this run from before environment step 1000, where "
            "this part resumed; this part wrote none") in capsys.readouterr().out
    assert (tmp_path / "v" / "eval.mp4").stat().st_mtime_ns == made  # left as it is


def test_resume_of_a_finished_run_adds_nothing(tmp_path, capsys):
    """--resume on a finished run used to evaluate again (a duplicate final row in eval.csv) and rewrite the
    checkpoint; it now only reports the summary (and writes the video if asked for), saying so (it said "resuming
    at environment step 1000")."""
    first = run(cfg(tmp_path, "f", env_steps=1000, eval_every=500))
    out = tmp_path / "f"
    eval_csv, stamp = (out / "eval.csv").read_text(), (out / "checkpoint" / "COMPLETE").read_text()
    capsys.readouterr()
    again = run(cfg(tmp_path, "f", env_steps=1000, eval_every=500, resume=True, save_video=True))
    said = capsys.readouterr().out
    assert "the run finished at environment step 1000 (--env-steps 1000): nothing to train" in said
    assert "resuming at" not in said
    assert (out / "eval.csv").read_text() == eval_csv
    assert (out / "checkpoint" / "COMPLETE").read_text() == stamp
    assert again == first and (out / "eval.mp4").exists()
    # the run's own wall time stays in summary.json (the video pass used to overwrite it with its own)
    assert json.loads((out / "summary.json").read_text()) == first


def test_resume_refusal_names_save_replay(tmp_path):
    """A checkpoint without the replay (--no-save-replay) resumed with it used to fail inside accelerate
    ("Number of custom checkpoints ... does not match"); the differing field is named instead."""
    run(cfg(tmp_path, "r", env_steps=1000, save_replay=False))
    with pytest.raises(CheckpointError, match=r"save_replay: False -> True"):
        run(cfg(tmp_path, "r", env_steps=2000, resume=True))
    with pytest.raises(CheckpointError, match=r"num_filters: 4 -> 6"):
        run(cfg(tmp_path, "r", env_steps=2000, resume=True, save_replay=False, num_filters=6))


def test_resume_finds_a_checkpoint_left_as_old(tmp_path):
    """A save cut off between its two renames leaves only .checkpoint.old (which resolve_checkpoint reads):
    --resume used to start from scratch (deleting the logs, then the old checkpoint) instead of using it."""
    run(cfg(tmp_path, "o", env_steps=1000))
    out = tmp_path / "o"
    (out / "checkpoint").rename(out / ".checkpoint.old")
    with pytest.raises(CheckpointError, match="aux"):  # it is found: a changed objective is refused
        run(cfg(tmp_path, "o", env_steps=2000, resume=True, aux="debiased", tau_plus=0.1))
    summary = run(cfg(tmp_path, "o", env_steps=1000, resume=True))
    assert summary["env_steps"] == 1000 and len(list(csv.DictReader(open(out / "eval.csv")))) == 1


def test_existing_run_is_not_overwritten_without_resume(tmp_path):
    run(cfg(tmp_path, "x", env_steps=1000))
    out = tmp_path / "x"
    before = {p: p.read_bytes() for p in [out / "eval.csv", out / "log.csv", out / "checkpoint" / "extra.pt"]}
    with pytest.raises(FileExistsError, match="--resume"):
        run(cfg(tmp_path, "x", env_steps=2000))
    assert all(p.read_bytes() == b for p, b in before.items())


def test_default_out_dir_names_the_objective_variant():
    from rl_curl.config import Config

    def out(**kw):
        return Config(task="cartpole-swingup", **kw).resolved().output_dir

    assert out() == "runs/rl_curl/cartpole-swingup/curl/seed0"
    assert out(aux="debiased", tau_plus=0.05) == "runs/rl_curl/cartpole-swingup/debiased-tau0.05/seed0"
    assert out(aux="debiased", tau_plus=0.1, positives=2, seed=3) == (
        "runs/rl_curl/cartpole-swingup/debiased-tau0.1-M2/seed3")
    assert out(aux="hard", tau_plus=0.1, beta=0.5) == "runs/rl_curl/cartpole-swingup/hard-tau0.1-beta0.5/seed0"
    assert len({out(aux="debiased", tau_plus=t, positives=m) for t in (0.01, 0.05, 0.1) for m in (1, 2)}) == 6
    assert out(encoder_tanh=False) == "runs/rl_curl/cartpole-swingup/curl-notanh/seed0"


def test_a_resume_compares_every_option_but_the_free_ones(tmp_path):
    """The options a checkpoint records are compared field by field with this command's (the loop's one check,
    tests/shared_losses/test_harness.py); another value, or a field the record lacks, is refused naming the field."""
    import dataclasses

    from rl_curl.config import Config
    from rl_curl.train import CurlApp
    from shared_losses.training.harness import refuse_config_changes

    c = cfg(tmp_path, "s").resolved()
    record = dataclasses.asdict(c)
    app = CurlApp(cfg(tmp_path, "s", encoder_tanh=False).resolved())
    refuse_config_changes(*CurlApp(c).compare_options(record), free=Config.RESUME_FREE)
    with pytest.raises(CheckpointError, match=r"encoder_tanh: True -> False"):
        refuse_config_changes(*app.compare_options(record), free=Config.RESUME_FREE)
    lacking = {k: v for k, v in record.items() if k != "encoder_tanh"}
    with pytest.raises(CheckpointError, match="encoder_tanh"):
        refuse_config_changes(*CurlApp(c).compare_options(lacking), free=Config.RESUME_FREE)
    assert "env_steps" in Config.RESUME_FREE
    refuse_config_changes(*CurlApp(c).compare_options({**record, "env_steps": 1}), free=Config.RESUME_FREE)


@pytest.mark.slow  # three runs: 1000 steps, resumed to 2000, resumed again from the 1000-step checkpoint
def test_tensorboard_drops_events_redone_after_a_resume(tmp_path):
    """A run cut off after logging past its last checkpoint redoes those steps on resume; TensorBoard must
    not show them twice (as log.csv and eval.csv do not)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run(cfg(tmp_path, "p", env_steps=1000, checkpoint_every=1000))
    out = tmp_path / "p"
    shutil.copytree(out / "checkpoint", tmp_path / "ckpt1000")
    run(cfg(tmp_path, "p", env_steps=2000, checkpoint_every=1000, eval_every=500, resume=True))
    shutil.rmtree(out / "checkpoint")  # as if cut off after logging up to 2000 but before its checkpoint
    shutil.copytree(tmp_path / "ckpt1000", out / "checkpoint")
    run(cfg(tmp_path, "p", env_steps=2000, checkpoint_every=1000, eval_every=500, resume=True))
    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    for tag in ("train/episode_return", "eval/return"):
        steps = [e.step for e in acc.Scalars(tag)]
        assert len(steps) == len(set(steps)), (tag, steps)
    assert [e.step for e in acc.Scalars("eval/return")] == [1000, 1500, 2000]
    rows = list(csv.DictReader(open(out / "eval.csv")))
    for tag, column in (("eval/return_std", "eval_return_std"), ("eval/return_min", "eval_return_min"),
                        ("eval/return_max", "eval_return_max")):
        assert [e.step for e in acc.Scalars(tag)] == [int(r["env_step"]) for r in rows], tag
        assert [e.value for e in acc.Scalars(tag)] == pytest.approx([float(r[column]) for r in rows]), tag
    # the wall times (TensorBoard only): each evaluation's, each training episode's (the official eval/eval_time and
    # train/duration), at the steps of their rows, once each after the resumes
    assert [e.step for e in acc.Scalars("eval/seconds")] == [int(r["env_step"]) for r in rows]
    log = list(csv.DictReader(open(out / "log.csv")))
    episodes = [int(r["env_step"]) for r in log if r["episode_return"]]
    assert [e.step for e in acc.Scalars("train/episode_seconds")] == episodes
    assert all(e.value > 0 for tag in ("eval/seconds", "train/episode_seconds") for e in acc.Scalars(tag))
    # the update's mean reward of its batch (the official train/batch_reward) at log.csv's loss rows
    losses = [r for r in log if r["batch_reward"]]
    assert [e.step for e in acc.Scalars("train/batch_reward")] == [int(r["env_step"]) for r in losses]
    assert [e.value for e in acc.Scalars("train/batch_reward")] == pytest.approx([float(r["batch_reward"])
                                                                                 for r in losses])


def test_an_evaluation_row_holds_the_mean_std_lowest_and_highest_return(tmp_path):
    """eval.csv's row of an evaluation and its TensorBoard scalars (eval/return_max is what the official code logs as
    eval/best_episode_reward)."""
    import numpy as np

    from rl_curl.train import CurlApp

    app = CurlApp(cfg(tmp_path, "e").resolved())
    returns = [12.5, 3.0, 40.25, 7.0]
    r = app.eval_row(2000, 1, returns, 4.5)
    assert r.file == "eval.csv"
    assert r.values == {"env_step": 2000, "episode": 1, "eval_return_mean": 15.6875,
                        "eval_return_std": pytest.approx(float(np.std(returns))), "eval_return_min": 3.0,
                        "eval_return_max": 40.25}
    # the evaluation's wall time in TensorBoard only (the official eval/eval_time): eval.csv stays reproducible
    assert r.scalars == {"eval/return": 15.6875, "eval/return_std": r.values["eval_return_std"],
                         "eval/return_min": 3.0, "eval/return_max": 40.25, "eval/seconds": 4.5}
    assert app.last_eval == 15.6875


def test_replay_and_action_generators_draw_independent_streams():
    import numpy as np

    from rl_curl.train import stream_seeds

    for seed in (0, 1, 12345):
        replay, action = (np.random.default_rng(s).bit_generator.random_raw(64) for s in stream_seeds(seed))
        assert not np.intersect1d(replay, action).size
        again = [np.random.default_rng(s).bit_generator.random_raw(64) for s in stream_seeds(seed)]
        np.testing.assert_array_equal(again[0], replay)  # still a function of the seed alone
    assert not np.array_equal(*(np.random.default_rng(stream_seeds(s)[0]).bit_generator.random_raw(8) for s in (0, 1)))


def test_seeds_of_any_run_seed_are_valid_and_distinct():
    """Episode seeds used to be seed * 100003 + episode, which numpy's RandomState refuses from run seed
    42949 on (2**32 / 100003). Derived seeds stay 32-bit for every run seed; evaluations draw fresh
    initial states each time, reproducible from (seed, env step, episode)."""
    import numpy as np

    from rl_curl.config import Config
    from rl_curl.env import make
    from rl_curl.train import episode_seed, eval_episode_seed

    big = Config(seed=2**32 - 1).resolved()
    env = make("cartpole-swingup", seed=big.seed, image_size=8)
    env.reset(seed=episode_seed(big, 12345))  # raised "Seed must be between 0 and 2**32 - 1" before
    with pytest.raises(ValueError, match=r"--seed must be a whole number in \[0, 2\*\*32\)"):
        Config(seed=2**32).resolved()
    c = Config(seed=0)
    train_seeds = {episode_seed(c, e) for e in range(200)}
    eval_seeds = {eval_episode_seed(c, s, e) for s in (1000, 2000) for e in range(10)}
    assert len(train_seeds) == 200 and len(eval_seeds) == 20 and not train_seeds & eval_seeds
    assert eval_episode_seed(c, 1000, 3) == eval_episode_seed(Config(seed=0), 1000, 3)
    assert all(0 <= s < 2**32 for s in train_seeds | eval_seeds)
    # 32-bit for any run seed, the first one the old formula broke (42949) and the largest included
    for run_seed in (0, 42949, 2**32 - 1):
        r = Config(seed=run_seed)
        derived = [episode_seed(r, e) for e in (0, 199, 10**6)] + [eval_episode_seed(r, 10**6, e) for e in (0, 9)]
        assert all(0 <= s < 2**32 for s in derived), (run_seed, derived)
        np.random.RandomState(max(derived))  # numpy's legacy generator takes them


@pytest.mark.slow  # a 2000-step run, and a run resumed after 1000 steps
def test_actor_and_alpha_metrics_are_logged_when_the_log_step_falls_on_a_critic_only_update(tmp_path):
    """The actor and temperature update every 2 agent steps; a log row used to hold only the metrics of the
    update just before it, so when that update was odd (walker, finger, cheetah, reacher, ball_in_cup at
    their defaults) actor_loss, alpha and entropy were never logged. Each row now has the latest value of
    every metric, and a resumed run logs the same rows (the latest values are in the checkpoint)."""
    # action repeat 40: 25-step episodes, so the checkpoint after the first is at an odd step; a log row
    # every agent step.
    kw = dict(action_repeat=40, log_every=40, checkpoint_every=1000)
    run(cfg(tmp_path, "full", env_steps=2000, **kw))
    rows = [r for r in csv.DictReader(open(tmp_path / "full" / "log.csv")) if r.get("critic_loss")]
    # seed_steps 5: the first update (step 5) is odd, so only the first row comes before any actor update
    assert len(rows) > 2 and all(r.get("alpha") and r.get("actor_loss") and r.get("entropy") for r in rows[1:])
    run(cfg(tmp_path, "part", env_steps=1000, **kw))
    run(cfg(tmp_path, "part", env_steps=2000, resume=True, **kw))
    assert (tmp_path / "part" / "log.csv").read_text() == (tmp_path / "full" / "log.csv").read_text()


def test_finished_run_without_its_checkpoint_is_not_overwritten(tmp_path):
    """Checkpoints hold the replay (3.4 GB a run at the defaults), so users delete them once a run is done.
    Such a folder used to be started afresh, with or without --resume (curl_table3.py always passes it),
    deleting its eval.csv and log.csv; it is refused, naming the missing checkpoint under --resume."""
    run(cfg(tmp_path, "d", env_steps=1000))
    out = tmp_path / "d"
    shutil.rmtree(out / "checkpoint")
    before = {p: p.read_bytes() for p in [out / "eval.csv", out / "log.csv", out / "summary.json"]}
    for resume, message in ((False, "already holds a run of rl_curl: pass --resume"), (True, "no checkpoint")):
        with pytest.raises(FileExistsError, match=message):
            run(cfg(tmp_path, "d", env_steps=2000, resume=resume))
    assert all(p.read_bytes() == b for p, b in before.items())


def test_options_of_another_objective_are_refused_up_front():
    """--beta only acts on aux=hard and --positives not on aux=none: both used to be ignored silently (a
    "--aux debiased --beta 0.5" run was plain debiased, in the debiased folder), and a negative beta
    failed only at the first update, after the seed steps."""
    from rl_curl.config import Config

    for kw, msg in [(dict(aux="debiased", tau_plus=0.1, beta=0.5), "--beta 0.5 only applies to --aux hard"),
                    (dict(aux="none", positives=2), "--positives 2 .*--aux none"),
                    (dict(aux="hard", tau_plus=0.1, beta=-1.0), "--beta must be a finite number >= 0"),
                    (dict(aux="hard", tau_plus=0.1, beta=float("inf")), "--beta must be a finite .* got inf")]:
        with pytest.raises(ValueError, match=msg):
            Config(**kw).resolved()
    Config(aux="hard", tau_plus=0.1, beta=0.0, positives=2).resolved()
    Config(aux="curl", positives=2).resolved()


@pytest.mark.parametrize("fields, words", [
    (dict(log_std_min=float("-inf")), r"--log-std-min and --log-std-max must be finite, got -inf and 2.0"),  # NaN acts
    (dict(log_std_max=float("inf")), r"--log-std-min and --log-std-max must be finite"),  # blamed the rates
    (dict(log_std_min=3.0), r"--log-std-min 3.0 must be below --log-std-max 2.0"),
    (dict(checkpoint_every=-5), r"--checkpoint-every must be >= 0 \(0: only at the end\), got -5"),  # ran as 0
    (dict(torch_threads=10**12), r"--torch-threads 1000000000000 is more than torch takes \(at most 2147483647\)"),
    (dict(image_size=600, crop_size=84), r"--image-size 600: DeepMind Control renders at most 480x480"),  # MuJoCo's
])
def test_values_that_failed_later_or_ran_as_another_are_refused_by_name(tmp_path, fields, words):
    with pytest.raises(ValueError, match=rf"^invalid config: {words}"):
        run(cfg(tmp_path, "bad", env_steps=100, **fields))
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("field", ["env_steps", "eval_every", "eval_episodes", "log_every", "seed_steps",
                                   "actor_update_every", "target_update_every", "aux_update_every"])
def test_each_count_below_1_is_named_alone(field):
    """`--eval-episodes 0` said "env_steps, eval_every, eval_episodes must be positive": now the option given, and
    its value."""
    from rl_curl.config import Config

    option = "--" + field.replace("_", "-")
    with pytest.raises(ValueError, match=rf"^invalid config: {option} must be >= 1, got 0$"):
        Config(**{field: 0}).resolved()


def test_torch_threads_below_0_are_refused_and_above_the_cores_warned_of(tmp_path, monkeypatch):
    """--torch-threads -1 ran as 0 (torch's default) with -1 in config.json; 999 on 2 cores ran about 10x slower
    without a word."""
    import os

    from rl_curl.config import Config

    with pytest.raises(ValueError, match=r"^invalid config: --torch-threads must be >= 0 \(0: torch's default\), "
                                         r"got -1$"):
        Config(torch_threads=-1).resolved()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    threads = torch.get_num_threads()
    try:
        with pytest.warns(UserWarning, match="--torch-threads 3 is more than the 2 CPU cores this process may use"):
            run(cfg(tmp_path, "many", env_steps=100, torch_threads=3))
        # the caller's count is given back: a later run at 0 (torch's default) in this process took the run's
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("field, option", [
    ("discount", "--discount"), ("critic_tau", "--critic-tau"), ("encoder_tau", "--encoder-tau")])
@pytest.mark.parametrize("value", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_rates_outside_0_1_are_refused_before_the_run_folder(tmp_path, field, option, value):
    """Issue 34: a discount or a soft-update rate outside (0, 1] (NaN included) used to train on, diverging or
    never updating the targets; refused in one line naming the option, the value and the range, no folder made."""
    with pytest.raises(ValueError, match=rf"^invalid config: {option} must be in \(0, 1\], got {value}$"):
        run(cfg(tmp_path, "bad", env_steps=100, **{field: value}))
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("field", ["discount", "critic_tau", "encoder_tau"])
def test_rate_of_one_is_allowed(field):
    tiny_config(**{field: 1.0}).resolved()


@pytest.mark.slow  # starts four worker processes
def test_evaluation_episodes_side_by_side_in_workers_or_here_give_the_same_returns(tmp_path):
    """EvalEnvs steps one environment per episode side by side (one batched forward per step): in worker processes
    (--eval-parallel), or all in one worker process (--eval-worker), the returns equal those in this process, and each
    episode's return is the one a separate environment gives from its seed when the policy sees the same batch."""
    import numpy as np

    from rl_curl.evaluate import load_agent
    from rl_curl.train import EvalEnvs, eval_episode_seed, evaluate

    run(cfg(tmp_path, "ev", env_steps=1000, eval_every=1000))
    agent, c, step = load_agent(tmp_path / "ev")
    c = dataclasses.replace(c, video_size=64)  # videos rendered again at 64x64
    here = evaluate(agent, c, 3, env_step=step)
    seeds = [eval_episode_seed(c, step, e) for e in range(3)]
    workers = EvalEnvs(c, 3, parallel=True)
    try:
        assert len(workers.vec) == 3 and len({w._proc.pid for w in workers.vec}) == 3  # a process per episode
        first, frames = workers.run(agent, seeds, video=True)
        again, _ = workers.run(agent, seeds)  # the workers are reused: same seeds, same returns
    finally:
        workers.close()
    assert first == here and again == here
    assert len(frames) == 20 and frames[0].shape == (64, 64, 3)  # 1000 / action repeat 50; at --video-size
    assert c.image_size != 64 and len({f.tobytes() for f in frames}) > 1
    here_envs = EvalEnvs(c, 3)  # in this process: the same video
    try:
        assert all(np.array_equal(a, b) for a, b in zip(here_envs.run(agent, seeds, video=True)[1], frames,
                                                        strict=True))
    finally:
        here_envs.close()
    own = EvalEnvs(dataclasses.replace(c, video_size=None), 3)  # None: the observations' own frames
    try:
        small = own.run(agent, seeds, video=True)[1]
        assert len(small) == 20 and small[0].shape == (c.image_size, c.image_size, 3)
        last = own.envs[0].render()  # the first episode's newest observation frame
        assert np.array_equal(small[-1], last)
    finally:
        own.close()
    assert len(set(here)) == 3  # three different initial states
    one = EvalEnvs(c, 3, worker=True)  # --eval-worker: all three in one worker process, stepped there in turn
    try:
        assert one.group is not None and one.vec == []
        got, got_frames = one.run(agent, seeds, video=True)
        assert got == here and one.run(agent, seeds)[0] == here
        assert all(np.array_equal(a, b) for a, b in zip(got_frames, frames, strict=True))
    finally:
        one.close()

    class Logged:  # the agent, recording what the policy was asked
        def __init__(self):
            self.batches = []

        def act(self, obs):
            self.batches.append(np.array(obs))
            return agent.act(obs)

    spy = Logged()
    EvalEnvs(c, 3).run(spy, seeds)
    assert all(b.shape[0] == 3 for b in spy.batches) and len(spy.batches) == 20
    with pytest.raises(ValueError, match="2 seeds for 3"):
        EvalEnvs(c, 3).run(agent, seeds[:2])


def test_summary_reports_where_the_time_went(tmp_path):
    s = run(cfg(tmp_path, "t", env_steps=1000, eval_every=500))
    parts = s["time_seconds"]
    assert set(parts) == {"act", "replay_sample", "update", "env", "replay_add", "eval", "other"}
    assert all(v >= 0 for k, v in parts.items() if k != "other") and parts["update"] > 0 and parts["eval"] > 0
    assert sum(parts.values()) == pytest.approx(s["train_seconds"], abs=0.2)
    assert s["env_steps_per_second"] > 0 and s["time_synced"] is False
    assert s["gpu_peak_allocated_gib"] is None and s["gpu_peak_reserved_gib"] is None  # a CPU run
    # one thread's CPU time over the same span: some of it (the updates ran here), never more than the wall time
    assert 0 < s["thread_cpu_seconds"] <= s["train_seconds"] + 0.1
    assert s["torch_threads"] == torch.get_num_threads() >= 1  # --torch-threads 0 recorded as the count used


def test_gpu_memory_reports_the_processs_peaks_in_gib(monkeypatch):
    from rl_curl.train import gpu_memory

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 3 * 2**30)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: 4.5 * 2**30)
    assert gpu_memory(torch.device("cuda")) == {"gpu_peak_allocated_gib": 3.0, "gpu_peak_reserved_gib": 4.5}
    assert gpu_memory(torch.device("cpu")) == {"gpu_peak_allocated_gib": None, "gpu_peak_reserved_gib": None}


def test_build_imports_torchs_compiler_before_the_environment_loads_egl(tmp_path):
    """Triton (in CUDA builds of torch) imported after Mesa's EGL crashed the process (a segfault; see
    rl_curl.train.import_compiler_first): build() imports torch._dynamo before dm_control's renderer, in a fresh
    process where neither is loaded yet."""
    import sys

    code = """
import sys
seen = []
class Order:
    def find_spec(self, name, path=None, target=None):
        if name in ("torch._dynamo", "dm_control._render") and name not in seen:
            seen.append(name)
        return None
sys.meta_path.insert(0, Order())
from rl_curl.config import Config
from rl_curl.train import build
build(Config(num_filters=4, num_layers=2, hidden_dim=16, feature_dim=8, image_size=20, crop_size=16).resolved(), "cpu")
print(seen)
"""
    res = warm.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "['torch._dynamo', 'dm_control._render']"


def test_a_crop_as_large_as_the_frame_is_warned_of_naming_the_official_flags(tmp_path, recwarn):
    """--crop-size equal to --image-size (e.g. --image-size 84 with the default crop 84, taking --image-size for the
    official --image_size) makes every random crop the whole frame: CURL's two views are then the same image."""
    words = (r"--crop-size 20 equals --image-size 20: every random crop is the whole frame, so --aux curl contrasts "
             r"two identical views .*--image-size is the official --pre_transform_image_size \(100\), --crop-size the "
             r"official --image_size")
    with pytest.warns(UserWarning, match=words):
        run(cfg(tmp_path, "same", env_steps=250, seed_steps=2, crop_size=20))
    recwarn.clear()
    run(cfg(tmp_path, "cropped", env_steps=250, seed_steps=2))  # crop 16 of 20: crops differ
    run(cfg(tmp_path, "none", env_steps=250, seed_steps=2, crop_size=20, aux="none"))  # no contrastive views
    assert not [w for w in recwarn if "--crop-size" in str(w.message)]


def test_the_help_maps_the_size_options_to_the_official_flags(capsys):
    from rl_curl.config import from_cli

    with pytest.raises(SystemExit):
        from_cli(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "official code's --pre_transform_image_size (100)" in text and "official code's --image_size (84)" in text
    assert "the official --encoder_lr" in text and "--detach-encoder" in text


def test_a_resume_says_where_it_resumes_and_what_became_of_the_replay(tmp_path, capsys):
    run(cfg(tmp_path, "r", env_steps=1000))
    assert "resuming" not in capsys.readouterr().out
    run(cfg(tmp_path, "r", env_steps=2000, resume=True))
    out = capsys.readouterr().out
    assert (f"resuming at environment step 1000 from {tmp_path / 'r' / 'checkpoint'} (replay: 20 transitions "
            "restored)\n") in out  # one episode of 20 agent steps
    run(cfg(tmp_path, "n", env_steps=1000, save_replay=False))
    run(cfg(tmp_path, "n", env_steps=2000, resume=True, save_replay=False))
    assert (f"resuming at environment step 1000 from {tmp_path / 'n' / 'checkpoint'} (replay not saved "
            "(--no-save-replay): refilled with --seed-steps 5 random actions, so the run is not the uninterrupted "
            "one)\n") in capsys.readouterr().out


def test_detach_encoder_is_a_recorded_option_that_a_resume_cannot_change(tmp_path):
    """--detach-encoder is recorded like the other options: a resume with another value is refused naming it. A run
    recorded before the option existed (no detach_encoder in its record) trained with it off."""
    import dataclasses

    from rl_curl.config import Config
    from rl_curl.train import CurlApp
    from shared_losses.training.harness import refuse_config_changes

    run(cfg(tmp_path, "d", env_steps=1000, detach_encoder=True))
    assert json.loads((tmp_path / "d/config.json").read_text())["detach_encoder"] is True
    with pytest.raises(CheckpointError, match=r"detach_encoder: True -> False"):
        run(cfg(tmp_path, "d", env_steps=2000, resume=True))
    c = cfg(tmp_path, "s").resolved()
    older = {k: v for k, v in dataclasses.asdict(c).items() if k != "detach_encoder"}
    refuse_config_changes(*CurlApp(c).compare_options(older), free=Config.RESUME_FREE)
    with pytest.raises(CheckpointError, match=r"detach_encoder: False -> True"):
        app = CurlApp(cfg(tmp_path, "s", detach_encoder=True).resolved())
        refuse_config_changes(*app.compare_options(older), free=Config.RESUME_FREE)


@pytest.mark.parametrize("size", [40, 41, 100])
def test_videos_keep_their_frames_size_without_ffmpegs_resize_warning(tmp_path, size, caplog, capfd):
    """imageio's ffmpeg writer resized frames whose sides are not a multiple of 16 (40 -> 48, 100 -> 112) with a
    warning on every video; they are written as they are (an odd side gains one edge row or column)."""
    import imageio.v2 as imageio
    import numpy as np

    from rl_curl.train import write_video

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(4)]
    write_video(tmp_path / "v.mp4", frames)
    write_video(tmp_path / "v.gif", frames)
    assert "macro_block_size" not in caplog.text + capfd.readouterr().err
    with imageio.get_reader(tmp_path / "v.mp4") as reader:
        assert reader.get_meta_data()["size"] == (size + size % 2,) * 2
    assert imageio.mimread(tmp_path / "v.gif")[0].shape[:2] == (size, size)


@pytest.mark.parametrize("eval_async", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_every_evaluation_keeps_its_policy_and_video(tmp_path, eval_async):
    """--keep-policies and --video-every-eval (the official CURL saves a video at every evaluation): each evaluation's
    policy and first episode in the run's folder, named by its environment step; `rl_curl.evaluate --policy` of an
    evaluation's file replays that evaluation's returns (its episodes, its weights), also when the evaluation ran
    beside training (--eval-async takes the weights of the step it was asked at, not of the steps trained since).
    The run beside training also evaluates at step 0 (--eval-at-start): the untrained policy's files too."""
    import imageio.v2 as imageio

    from rl_curl import load_policy
    from rl_curl.evaluate import EvalArgs, main

    run(cfg(tmp_path, "k", env_steps=1500, eval_every=500, eval_episodes=2, keep_policies=True,
            video_every_eval=True, eval_async=eval_async, eval_at_start=eval_async, video_size=48))
    out = tmp_path / "k"
    rows = {int(r["env_step"]): float(r["eval_return_mean"]) for r in csv.DictReader(open(out / "eval.csv"))}
    steps = [0, 500, 1000, 1500] if eval_async else [500, 1000, 1500]
    assert sorted(rows) == steps
    assert sorted(p.name for p in (out / "policies").iterdir()) == sorted(f"env_step_{s}.pt" for s in steps)
    assert sorted(p.name for p in (out / "videos").iterdir()) == sorted(f"env_step_{s}.mp4" for s in steps)
    video = imageio.mimread(out / "videos" / "env_step_500.mp4")
    assert len(video) == 20 and video[0].shape == (48, 48, 3)  # a whole episode (1000 / 50 steps) at --video-size
    assert not (out / "eval.mp4").exists()  # --save-video's file stays --save-video's
    assert load_policy(out / "policies" / "env_step_500.pt").env_step == 500
    assert load_policy(out).env_step == 1500
    for step, mean in rows.items():
        res = main(EvalArgs(policy=str(out / "policies" / f"env_step_{step}.pt"), episodes=2))
        assert res["env_step"] == step and res["return_mean"] == pytest.approx(mean, rel=1e-6), step
    first, last = (load_policy(out / "policies" / f"env_step_{s}.pt").actor.state_dict() for s in (500, 1500))
    assert any(not torch.equal(first[k], last[k]) for k in first)  # trained in between


def test_a_finished_run_asked_for_every_evaluations_files_adds_the_final_ones(tmp_path, capsys):
    """A finished run resumed with --keep-policies / --video-every-eval writes the final evaluation's policy and video
    without training or logging anything (earlier evaluations' are not remade: their weights are gone)."""
    run(cfg(tmp_path, "f", env_steps=1000, eval_every=500))
    out = tmp_path / "f"
    eval_csv = (out / "eval.csv").read_text()
    run(cfg(tmp_path, "f", env_steps=1000, eval_every=500, resume=True, keep_policies=True, video_every_eval=True))
    said = capsys.readouterr().out
    assert "nothing to train" in said and f"wrote the final evaluation's {out / 'videos' / 'env_step_1000.mp4'}, " \
        f"{out / 'policies' / 'env_step_1000.pt'}" in said
    assert [p.name for p in (out / "policies").iterdir()] == ["env_step_1000.pt"]
    assert [p.name for p in (out / "videos").iterdir()] == ["env_step_1000.mp4"]
    assert (out / "eval.csv").read_text() == eval_csv


def test_evaluate_policy_refuses_what_it_cannot_evaluate(tmp_path):
    from rl_curl.evaluate import EvalArgs, main

    run(cfg(tmp_path, "p", env_steps=1000, eval_every=1000))
    policy = tmp_path / "p" / "policy.pt"
    with pytest.raises(ValueError, match="pass --run-dir .* or --policy .* not both"):
        main(EvalArgs(run_dir=str(tmp_path / "p"), policy=str(policy)))
    with pytest.raises(ValueError, match="pass --run-dir .* or --policy"):
        main(EvalArgs())
    with pytest.raises(IsADirectoryError, match="is a folder: pass a policy file"):
        main(EvalArgs(policy=str(tmp_path / "p")))
    with pytest.raises(FileNotFoundError, match="--policy .*gone.pt: no such file"):
        main(EvalArgs(policy=str(tmp_path / "gone.pt")))
    state = torch.load(policy, weights_only=True)
    del state["env_step"]  # as files written before the step was recorded
    torch.save(state, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="does not record the environment step"):
        main(EvalArgs(policy=str(tmp_path / "old.pt")))
    res = main(EvalArgs(policy=str(policy), episodes=1, video=True))
    assert res["env_step"] == 1000 and (tmp_path / "p" / "policy.mp4").exists()


def test_a_configuration_of_numpy_numbers_runs_to_its_end(tmp_path):
    """A sweep over np.arange gives numpy numbers: the type check passed them, and the run failed at its end writing
    policy.pt ("Object of type int64 is not JSON serializable"), with config.json holding "16" as a string (found by a
    probe). They are Python's numbers from the check on."""
    import numpy as np

    summary = run(cfg(tmp_path, "np", env_steps=np.int64(1000), eval_every=np.int64(1000), lr=np.float32(1e-3),
                      save_video=np.bool_(False)))
    out = tmp_path / "np"
    saved = json.loads((out / "config.json").read_text())
    assert saved["env_steps"] == 1000 and isinstance(saved["lr"], float) and summary["env_steps"] == 1000
    assert (out / "policy.pt").is_file()
