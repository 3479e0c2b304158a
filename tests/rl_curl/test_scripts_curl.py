import dataclasses
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def fake_run(root, task, aux, tau, m, seed, returns):
    d = root / task / f"{aux}_{tau}_{m}" / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"task": task, "aux": aux, "tau_plus": tau, "positives": m, "beta": 1.0}))
    rows = "env_step,episode,eval_return_mean,eval_return_std\n" + "".join(
        f"{(i + 1) * 50000},0,{r},0\n" for i, r in enumerate(returns))
    (d / "eval.csv").write_text(rows)


def test_table3_aggregates_mean_std_in_paper_layout(tmp_path):
    import curl_table3

    for s, r in enumerate([800, 850, 900]):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, r])
        fake_run(tmp_path, "cartpole-swingup", "debiased", 0.05, 1, s, [100, r + 30])
    fake_run(tmp_path, "walker-walk", "curl", 0.0, 1, 0, [400])  # not at 100k yet: not counted
    fake_run(tmp_path, "walker-walk", "curl", 0.0, 1, 1, [300, 500, 700])  # unequal lengths: plotted; 1 seed at 100k
    code = curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True))
    md = (tmp_path / "table3.md").read_text()
    assert code == 0
    lines = md.splitlines()
    assert "| objective | cartpole swingup | walker walk |" in lines
    # the sample std over seeds (50; the population std, 41, was shown until 2026-12-06), none for one seed
    assert "| biased (CURL) | 850±50 | 500 (n=1) |" in lines
    assert "| debiased τ⁺=0.05, M=1 | 880±50 | – |" in lines
    assert "sample std" in lines[0]
    assert (tmp_path / "curves.png").exists()


def test_table3_names_the_seeds_of_a_cell_with_fewer_than_the_others(tmp_path):
    """Five CURL seeds against four debiased ones (a run failed): the four-seed cell says so; a reader would
    otherwise compare a mean of 5 with a mean of 4 unawares (the paired table uses the 4 common seeds)."""
    from paper_tables.table3 import table3

    for s, r in enumerate([800, 850, 900, 700, 750]):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, r])
        if s != 2:
            fake_run(tmp_path, "cartpole-swingup", "debiased", 0.05, 1, s, [100, r + 30])
    lines = table3(tmp_path).splitlines()
    assert f"| biased (CURL) | 800±{np.std([800, 850, 900, 700, 750], ddof=1):.0f} |" in lines
    assert f"| debiased τ⁺=0.05, M=1 | 805±{np.std([830, 880, 730, 780], ddof=1):.0f} (n=4) |" in lines


def test_runs_behind_links_are_in_the_table_once(tmp_path):
    """A seed's run folder (or a task's) linked in from elsewhere: curl_table3 counted it finished and the table had
    no row for it (rglob does not follow folder links)."""
    from paper_tables.table3 import table3

    fake_run(tmp_path / "elsewhere", "cartpole-swingup", "curl", 0.0, 1, 0, [100, 800])
    fake_run(tmp_path / "grid", "cartpole-swingup", "curl", 0.0, 1, 1, [100, 900])
    (tmp_path / "grid" / "cartpole-swingup" / "curl_0.0_1" / "seed0").symlink_to(
        tmp_path / "elsewhere" / "cartpole-swingup" / "curl_0.0_1" / "seed0")
    (tmp_path / "grid" / "again").symlink_to(tmp_path / "grid" / "cartpole-swingup")  # the same runs once
    assert f"| biased (CURL) | 850±{np.std([800, 900], ddof=1):.0f} (n=2) |" in table3(tmp_path / "grid").splitlines()


def test_a_dash_where_runs_exist_says_why(tmp_path, capsys):
    """--env-steps before the runs' first evaluation, or past where they got, used to give a table of dashes
    without a word; each such cell is now explained under the table (in table3.md and in what is printed). A cell
    with no run at all stays a bare dash."""
    import curl_table3

    for s in range(2):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, 800])  # evaluations at 50k and 100k
    fake_run(tmp_path, "walker-walk", "debiased", 0.05, 1, 0, [400])  # at 50k only
    assert curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True, env_steps=10_000)) == 0
    md = (tmp_path / "table3.md").read_text()
    assert "| biased (CURL) | – | – |" in md.splitlines()
    assert ("- cartpole-swingup, biased (CURL): – because its 2 runs have no evaluation at or before 10,000 "
            "environment steps (the first is at 50,000)") in md.splitlines()
    assert ("- walker-walk, debiased τ⁺=0.05, M=1: – because its run has no evaluation at or before 10,000 "
            "environment steps (the first is at 50,000)") in md.splitlines()
    assert "walker-walk, biased (CURL)" not in md  # no run there: nothing to explain
    assert "its 2 runs have no evaluation" in capsys.readouterr().out

    assert curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True, env_steps=100_000)) == 0
    lines = (tmp_path / "table3.md").read_text().splitlines()
    assert "| biased (CURL) | 800±0 (n=2) | – |" in lines
    assert ("- walker-walk, debiased τ⁺=0.05, M=1: – because its run got to 50,000 environment steps at most, "
            "short of 100,000") in lines
    assert not any(line.startswith("- cartpole-swingup") for line in lines)


def test_table3_dry_run_and_bad_objective(tmp_path, capsys):
    import curl_table3

    curl_table3.main(curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], seeds=[0],
                                      objectives=["curl", "debiased:0.1:2"], dry_run=True))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "--tau-plus 0.1 --positives 2" in out[1] and "--resume" in out[0]
    with pytest.raises(ValueError, match="objective"):
        curl_table3.main(curl_table3.Args(objectives=["debiased:0.1"], dry_run=True))
    # a dry run printed commands that the real run refuses (--seed -1, --batch-size 1, an unknown --extra option)
    for change, says in ((dict(seeds=[-1]), "--seed must be a whole number"),
                         (dict(batch_size=1), "batch_size must be >= 2")):
        with pytest.raises(ValueError, match=says):
            curl_table3.main(curl_table3.Args(out=str(tmp_path / "dry"), tasks=["cartpole-swingup"], dry_run=True,
                                              **change))
    with pytest.raises(SystemExit):  # tyro's refusal of an option rl_curl.train does not have (a usage error)
        curl_table3.main(curl_table3.Args(out=str(tmp_path / "dry"), extra=["--bogus=1"], dry_run=True))
    assert capsys.readouterr().out == "" and not (tmp_path / "dry").exists()
    with pytest.raises(ValueError, match="no runs under"):  # a mistyped --out is not an empty table
        curl_table3.main(curl_table3.Args(out=str(tmp_path / "typo"), aggregate_only=True))
    assert not (tmp_path / "typo").exists()


@pytest.mark.slow  # runs scripts/bench_curl.py in a subprocess
def test_bench_json_fields():
    res = warm.run([sys.executable, str(ROOT / "scripts/bench_curl.py"), "--json", "--batches", "8",
                          "--updates", "1", "--env-agent-steps", "2", "--threads", "1", "--device", "cpu",
                          "--mixed-precision", "bf16"],
                   capture_output=True, text=True, timeout=300, check=True, cwd=ROOT)
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 1
    for key in ("batch", "update_ms", "replay_bytes_per_transition", "env_steps_per_s"):
        assert key in rows[0]
    assert rows[0]["batch"] == 8 and rows[0]["replay_bytes_per_transition"] <= 2 * 9 * 100 * 100 / 5
    assert rows[0]["mixed_precision"] == "bf16" and rows[0]["update_ms"] > 0 and rows[0]["baseline_update_ms"] > 0
    assert 0 < rows[0]["replay_sample_ms"] < rows[0]["update_ms"]
    assert rows[0]["cudnn_benchmark"] is True
    assert rows[0]["fused_update_ms"] > 0 and rows[0]["fused_over_ours"] > 0  # --update fused timed in the same run
    # a frame from the environment's kept camera against physics.render's, the same frames
    assert rows[0]["render_same_frames"] is True and rows[0]["render_ms_kept_camera"] > 0
    assert rows[0]["render_ms_physics_render"] > 0 and rows[0]["render_speedup"] > 0


def test_bench_sets_cudnn_benchmark_only_inside_a_timing():
    """Ours is timed with cuDNN's algorithm search (rl_curl.train's default), the official code with
    torch's default; the flag is restored afterwards, also after an error."""
    import torch
    from bench_curl import cudnn_benchmark

    before = torch.backends.cudnn.benchmark
    with cudnn_benchmark(not before):
        assert torch.backends.cudnn.benchmark is (not before)
    assert torch.backends.cudnn.benchmark is before
    with pytest.raises(RuntimeError), cudnn_benchmark(not before):
        raise RuntimeError
    assert torch.backends.cudnn.benchmark is before


FAKE_CURL_SAC = '''
import utils  # noqa: F401  (the official module imports utils and encoder too)
from encoder import make_encoder  # noqa: F401
CALLS = []
class CurlSacAgent:
    def __init__(self, **kw):
        CALLS.append(("init", kw))
    def update(self, replay_buffer, L, step):
        replay_buffer.sample_cpc()
        L.log("train/batch_reward", 0.0, step)
        L.log_histogram("train/x", None, step)  # the harness must swallow every logging call
        CALLS.append(("update", step))
'''
FAKE_UTILS = '''
import gym  # noqa: F401
from skimage.util.shape import view_as_windows
import numpy as np
class ReplayBuffer:
    def __init__(self, obs_shape, action_shape, capacity, batch_size, device, image_size=84, transform=None):
        self.obs, self.batch_size, self.image_size = [], batch_size, image_size
    def add(self, obs, action, reward, next_obs, done):
        self.obs.append(obs)
    def sample_cpc(self):
        imgs = np.stack(self.obs[: self.batch_size]).transpose(0, 2, 3, 1)
        w = view_as_windows(imgs, (1, self.image_size, self.image_size, 1))[..., 0, :, :, 0]
        return w[np.arange(len(imgs)), 0, 0]
'''


@pytest.fixture
def restore_modules():
    names = ("curl_sac", "utils", "encoder", "gym", "skimage", "skimage.util", "skimage.util.shape")
    before = {n: sys.modules.get(n) for n in names}
    yield
    for n, m in before.items():
        if m is None:
            sys.modules.pop(n, None)
        else:
            sys.modules[n] = m


def test_bench_official_harness_on_a_stand_in_checkout(tmp_path, restore_modules, monkeypatch):
    """--official drives a MishaLaskin/curl checkout's agent and replay; here a stand-in with the same
    interface (the real code is not in this repository), so the plumbing is tested."""
    import bench_curl

    (tmp_path / "curl_sac.py").write_text(FAKE_CURL_SAC)
    (tmp_path / "utils.py").write_text(FAKE_UTILS)
    (tmp_path / "encoder.py").write_text("def make_encoder(*a, **k):\n    return None\n")
    agent_cls, buffer_cls = bench_curl.load_official(str(tmp_path))
    import numpy as np
    import torch
    from rl_curl.config import Config

    cfg = Config(batch_size=4, image_size=100).resolved()
    agent, buf = bench_curl.make_official(agent_cls, buffer_cls, cfg, torch.device("cpu"), np.random.default_rng(0))
    calls = sys.modules["curl_sac"].CALLS
    # a clock that reads 7 ms per update made so far: the mean over the 3 timed updates, warm-up excluded, in ms
    clock = types.SimpleNamespace(perf_counter=lambda: 7e-3 * sum(c[0] == "update" for c in calls))
    monkeypatch.setattr(bench_curl, "time", clock)
    assert bench_curl.time_official(agent, buf, torch.device("cpu"), 3) == pytest.approx(7.0)
    init = dict(calls[0][1])
    assert init["hidden_dim"] == 1024 and init["num_filters"] == 32 and init["encoder_tau"] == 0.05
    assert init["obs_shape"] == (9, 84, 84) and init["critic_target_update_freq"] == 2
    assert [c[1] for c in calls[1:]] == [0, 1, 0, 1, 2]  # 2 warm-up + 3 timed, same step numbers as ours
    with pytest.raises(SystemExit, match="MishaLaskin/curl"):
        bench_curl.load_official(str(tmp_path / "nowhere"))


def test_mean_curve_keeps_seeds_that_got_further():
    """Seeds of unequal length (one stopped early, one evaluated at other steps): the curve runs to the
    furthest evaluation, each point averages the seeds evaluated there, and n says how many."""
    from paper_tables.table3 import mean_curve

    a = {"steps": np.array([10, 20, 30, 40]), "returns": np.array([1.0, 2.0, 3.0, 5.0])}
    b = {"steps": np.array([10, 20]), "returns": np.array([3.0, 6.0])}
    c = {"steps": np.array([15, 20]), "returns": np.array([7.0, 10.0])}
    steps, mean, std, n = mean_curve([a, b, c])
    assert steps.tolist() == [10, 15, 20, 30, 40]
    assert n.tolist() == [2, 1, 3, 1, 1]
    np.testing.assert_allclose(mean, [2.0, 7.0, 6.0, 3.0, 5.0])
    # the sample std (as the tables'), NaN where one seed has the step
    np.testing.assert_allclose(std, [np.std([1.0, 3.0], ddof=1), np.nan, np.std([2.0, 6.0, 10.0], ddof=1), np.nan,
                                     np.nan])
    assert mean_curve([a, b, c], ddof=0)[2].tolist() == [1.0, 0.0, np.std([2.0, 6.0, 10.0]), 0.0, 0.0]


def test_table3_takes_the_final_evaluation_of_a_run_whose_repeat_overshoots(tmp_path):
    """With action repeat 3 a 100k run ends (and evaluates) at 100002: that is its score at 100k, not the
    evaluation at 90k."""
    from paper_tables.table3 import table3

    d = tmp_path / "walker-walk" / "curl" / "seed0"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"task": "walker-walk", "aux": "curl", "tau_plus": 0.0,
                                               "positives": 1, "beta": 1.0, "action_repeat": 3}))
    (d / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n"
                                "90000,0,100,0\n100002,0,700,0\n")
    assert "| biased (CURL) | 700 (n=1) |" in table3(tmp_path, 100_000).splitlines()


@pytest.mark.slow  # runs scripts/check_official_curl.py in subprocesses
def test_check_official_help_and_missing_checkout(tmp_path):
    """The update-for-update check needs the official code, which is not here: its --help explains,
    and a path that is not a checkout says what to fetch."""
    script = ROOT / "scripts" / "check_official_curl.py"
    res = warm.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and "--official" in res.stdout and "float64" in res.stdout
    res = warm.run([sys.executable, str(script), "--official", str(tmp_path)], capture_output=True, text=True,
                   timeout=120, cwd=ROOT)
    assert res.returncode != 0 and "not a checkout of MishaLaskin/curl" in res.stderr


def test_table3_extra_is_repeatable(tmp_path, capsys):
    """--help says to repeat --extra=... for several training arguments; tyro used to keep only the last
    one (a grid run with --extra=--seed-steps=20 --extra=--image-size=48 trained at image size 100 with
    1000 seed steps)."""
    import curl_table3
    import tyro

    args = tyro.cli(curl_table3.Args, args=["--out", str(tmp_path), "--tasks", "cartpole-swingup", "--seeds", "0",
                                            "--objectives", "curl", "--extra=--seed-steps=20",
                                            "--extra=--image-size=48", "--extra=--crop-size=40", "--dry-run"])
    assert args.extra == ["--seed-steps=20", "--image-size=48", "--crop-size=40"]
    curl_table3.main(args)
    assert capsys.readouterr().out.split()[-3:] == ["--seed-steps=20", "--image-size=48", "--crop-size=40"]


def test_table3_rows_follow_the_papers_order(tmp_path):
    """DCL Table 3 lists biased, then debiased M=1 (tau+ 0.01, 0.05, 0.1), then M=2 (0.01, 0.1); rows used
    to come in folder-name order (debiased 0.01 M=2 before 0.05 M=1)."""
    from paper_tables.table3 import table3

    for aux, tau, m in [("none", 0.0, 1), ("debiased", 0.1, 2), ("debiased", 0.01, 2), ("debiased", 0.1, 1),
                        ("debiased", 0.05, 1), ("debiased", 0.01, 1), ("curl", 0.0, 1)]:
        fake_run(tmp_path, "cartpole-swingup", aux, tau, m, 0, [100, 200])
    rows = [line.split(" | ")[0].lstrip("| ") for line in table3(tmp_path, 100_000).splitlines()[2:]]
    assert rows == ["biased (CURL)", "debiased τ⁺=0.01, M=1", "debiased τ⁺=0.05, M=1", "debiased τ⁺=0.1, M=1",
                    "debiased τ⁺=0.01, M=2", "debiased τ⁺=0.1, M=2", "pixel SAC (no aux)"]


@pytest.mark.slow  # runs scripts/demo_rl_curl.sh
def test_demo_refuses_to_delete_a_folder_it_did_not_make(tmp_path):
    """demo_rl_curl.sh OUT starts by deleting OUT; given a folder of real runs (say runs/rl_curl) it used to
    delete them all. It now deletes only a folder that a previous demo made (or an empty one)."""
    keep = tmp_path / "runs" / "cartpole-swingup" / "curl" / "seed0" / "eval.csv"
    keep.parent.mkdir(parents=True)
    keep.write_text("env_step,eval_return_mean\n100000,850\n")
    try:
        res = warm.run(["bash", str(ROOT / "scripts" / "demo_rl_curl.sh"), str(tmp_path / "runs")],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    except subprocess.TimeoutExpired:  # it went on to train (in a deleted folder)
        res = None
    assert keep.exists()
    assert res is not None and res.returncode != 0 and "not made by this demo" in res.stderr


@pytest.mark.slow  # runs scripts/demo_rl_curl.sh end to end, twice
def test_demo_trains_evaluates_and_runs_again_in_its_own_folder(tmp_path):
    """The main job's rl_curl part, end to end (on the tiny task): it wrote its marker into the folder before
    training, so the folder rules (a new run only in a missing or empty folder) refused every demo."""
    out = tmp_path / "demo"
    env = {**os.environ, "RL_DEMO_EVAL_EPISODES": "1",
           "RL_DEMO_EXTRA": " ".join([f"--task={TINY_ENV}", "--env-steps=20", "--batch-size=8", "--no-save-video",
                                      "--log-every=10", *TINY_EXTRA])}
    for _ in range(2):  # a second demo replaces the first one's folder, which it made
        res = warm.run(["bash", str(ROOT / "scripts" / "demo_rl_curl.sh"), str(out)], capture_output=True,
                       text=True, timeout=240, cwd=ROOT, env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        assert json.loads((out / "summary.json").read_text())["env_steps"] >= 20
        assert (out / ".rl_curl_demo").exists() and (out / "eval.csv").exists()


def test_table3_refuses_bad_objectives_and_tasks_before_launching(tmp_path):
    """A mistyped M, tau+ or task used to launch every run of the grid, each failing in its train.log."""
    import curl_table3

    for obj, msg in [("debiased:0.1:3", r"M \(must be 1 or 2\)"), ("debiased:abc:1", "TAU_PLUS"),
                     ("hard:0.1:1:-1", "BETA"), ("debiased:1.5:1", "TAU_PLUS")]:
        with pytest.raises(ValueError, match=msg):
            curl_table3.parse_objective(obj)
    with pytest.raises(ValueError, match="unknown DeepMind Control task 'cartpole-swingupp'"):
        curl_table3.main(curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingupp"], dry_run=True))
    assert curl_table3.parse_objective("hard:0.1:2:0") == ["--aux", "hard", "--tau-plus", "0.1", "--positives", "2",
                                                            "--beta", "0"]


def test_table3_keeps_curl_m2_and_no_tanh_runs_in_rows_of_their_own(tmp_path):
    """CURL with two positives and runs without the encoder tanh used to share the "biased (CURL)" row,
    so a mixed --out root averaged different configurations into one cell."""
    from paper_tables.table3 import table3, table3_tasks

    fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, 0, [100, 800])
    fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 2, 0, [100, 600])
    fake_run(tmp_path, "walker-walk", "curl", 0.0, 1, 0, [100, 500])
    notanh = tmp_path / "cartpole-swingup" / "curl_0.0_1" / "seed1"
    fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, 1, [100, 400])
    cfg = json.loads((notanh / "config.json").read_text())
    (notanh / "config.json").write_text(json.dumps({**cfg, "encoder_tanh": False}))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table3(tmp_path, 100_000).splitlines()[2:]}
    assert set(rows) == {"biased (CURL)", "biased (CURL), M=2", "biased (CURL), no tanh"}
    assert "| 800 (n=1) |" in rows["biased (CURL)"] and "| 600 (n=1) |" in rows["biased (CURL), M=2"]
    assert "| 400 (n=1) |" in rows["biased (CURL), no tanh"]
    # the curves' panels follow the table's (the paper's) task order, not the alphabet
    from paper_tables.table3 import collect
    assert table3_tasks(collect(tmp_path)) == ["cartpole-swingup", "walker-walk"]


TINY_EXTRA = ["--num-filters=4", "--num-layers=2", "--hidden-dim=16", "--feature-dim=8", "--image-size=20",
              "--crop-size=16", "--replay-capacity=200", "--seed-steps=5", "--eval-every=20", "--eval-episodes=1",
              "--torch-threads=1", "--checkpoint-every=0"]
TINY_ENV = "gym:tests.rl_curl.tiny_pixel_env:TinyDot-v0"


def _without_wall_times(md):
    """table3.md without its table of wall times."""
    out = re.sub(r"Wall time of each run[^\n]*\n\n(?:\|[^\n]*(?:\n|$))+", "", md)
    assert "Wall time" not in out and "| objective |" in out
    return out


def _tree_stamps(root):
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.suffix != ".md"
            and p.name != "curves.png"}


@pytest.mark.slow  # the sweep end to end: training processes
def test_table3_sweep_launches_real_runs_and_skips_them_when_rerun(tmp_path):
    """End to end through rl_curl.train: the grid used to write each run's log inside the run folder
    before starting it, so the folder rules (a new run only in a missing or empty folder) refused every
    run of a fresh grid with exit 2. Tiny gymnasium task, two objectives x two seeds, local pool."""
    import curl_table3

    env = TINY_ENV
    args = curl_table3.Args(out=str(tmp_path), tasks=[env], objectives=["none", "curl"], seeds=[0, 1], env_steps=40,
                            batch_size=8, parallel=2, extra=TINY_EXTRA)
    assert curl_table3.main(args) == 0
    for obj in ("none", "curl"):
        for seed in (0, 1):
            run = tmp_path / env / obj / f"seed{seed}"
            assert json.loads((run / "summary.json").read_text())["env_steps"] >= 40
            assert (run.parent / f"seed{seed}.log").exists() and not (run / "train.log").exists()
    md = (tmp_path / "table3.md").read_text()
    assert "Paired differences against biased (CURL)" in md
    assert "| pixel SAC (no aux) | 0 1 | " in md  # both seeds paired
    stamp = _tree_stamps(tmp_path)
    assert curl_table3.main(args) == 0  # finished runs are skipped, not rerun
    assert _tree_stamps(tmp_path) == stamp
    # A finished run made with other settings is not taken for this grid's: it used to be skipped silently
    # (and tabulated as if it had the grid's settings). Fields a resumed run may change still do not count.
    other = dataclasses.replace(args, extra=[e for e in TINY_EXTRA if not e.startswith("--hidden-dim")]
                                + ["--hidden-dim=12", "--eval-episodes=2"])
    with pytest.raises(ValueError, match=r"curl/seed1 \(hidden_dim: 16 -> 12\).*nothing was started"):
        curl_table3.main(other)
    with pytest.raises(ValueError, match="none/seed0 "):
        curl_table3.main(dataclasses.replace(other, dry_run=True))
    assert _tree_stamps(tmp_path) == stamp
    assert curl_table3.main(dataclasses.replace(args, extra=TINY_EXTRA + ["--eval-episodes=2"])) == 0
    assert _tree_stamps(tmp_path) == stamp


@pytest.mark.timeout(900)  # eight tiny training processes, four through Ray: minutes when other jobs share the cores
@pytest.mark.slow  # Ray, and training processes
def test_table3_sweep_on_ray_gives_the_local_table_and_starts_nothing_when_rerun(tmp_path, ray_local, capsys):
    """Issue 18: the same 2 x 2 grid (two objectives x two seeds) through a local Ray with 2 CPUs ends with
    the table of --backend local, one progress line per finished run; a second launch starts no run."""
    import curl_table3

    tables = {}
    for backend in ("local", "ray"):
        args = curl_table3.Args(out=str(tmp_path / backend), tasks=[TINY_ENV], objectives=["none", "curl"],
                                seeds=[0, 1], env_steps=40, batch_size=8, parallel=2, extra=TINY_EXTRA,
                                backend=backend)
        assert curl_table3.main(args) == 0
        tables[backend] = (tmp_path / backend / "table3.md").read_text()
    out = capsys.readouterr().out
    assert "4 runs to do (0 finished earlier, skipped; on Ray, this machine)" in out
    assert "[4/4] done: " in out and "failed 0)" in out
    # The same table but for the wall times, which are the processes' own (0.0 against 0.2 minutes when other jobs
    # shared the cores).
    assert all("Wall time of each run" in t for t in tables.values())
    assert _without_wall_times(tables["ray"]) == _without_wall_times(tables["local"])
    stamp = _tree_stamps(tmp_path / "ray")
    assert curl_table3.main(args) == 0
    assert "0 runs to do (4 finished earlier, skipped;" in capsys.readouterr().out
    assert _tree_stamps(tmp_path / "ray") == stamp


def test_table3_runs_fused_updates_in_folders_and_rows_of_their_own(tmp_path, capsys):
    """--extra=--update=fused used to reuse the official runs' folders: the grid took the finished official
    runs for the fused ones and started nothing. --updates names the schedules; fused runs get OBJECTIVE-fused
    folders, rows of their own and a paired table against the official schedule."""
    import curl_table3
    from paper_tables.table3 import paired_table, table3

    args = curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], seeds=[0], objectives=["curl"],
                            updates=["official", "fused"], dry_run=True)
    curl_table3.main(args)
    cmds = capsys.readouterr().out.splitlines()
    assert len(cmds) == 2 and "--update" not in cmds[0] and "--update fused" in cmds[1]
    assert f"{tmp_path}/cartpole-swingup/curl/seed0 " in cmds[0] and "/curl-fused/seed0 " in cmds[1]
    for bad in ["--update=fused", "--update", "--seed=3", "--output_dir=x"]:
        with pytest.raises(ValueError, match="the grid sets"):
            curl_table3.main(curl_table3.Args(out=str(tmp_path), extra=[bad], dry_run=True))
    # several options in one --extra reached rl_curl.train as one argument (refused only once the grid ran, while
    # the dry run's line looked right): refused before anything runs
    for bad in ["--image-size 40 --crop-size 32", "--image-size 40", "--image-size=40 --crop-size=32"]:
        with pytest.raises(ValueError, match="one option per --extra"):
            curl_table3.main(curl_table3.Args(out=str(tmp_path), extra=[bad], dry_run=True))

    for s, (off, fus) in enumerate([(800, 780), (850, 870), (900, 860)]):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, off])
        d = tmp_path / "cartpole-swingup" / "curl-fused" / f"seed{s}"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"task": "cartpole-swingup", "aux": "curl", "tau_plus": 0.0,
                                                   "positives": 1, "beta": 1.0, "seed": s, "update": "fused"}))
        (d / "eval.csv").write_text(f"env_step,episode,eval_return_mean,eval_return_std\n"
                                    f"50000,0,100,0\n100000,0,{fus},0\n")
        cfg = json.loads((tmp_path / "cartpole-swingup" / "curl_0.0_1" / f"seed{s}" / "config.json").read_text())
        (tmp_path / "cartpole-swingup" / "curl_0.0_1" / f"seed{s}" / "config.json").write_text(
            json.dumps({**cfg, "seed": s}))
    rows = [line.split(" | ")[0].lstrip("| ") for line in table3(tmp_path, 100_000).splitlines()[2:]]
    assert rows == ["biased (CURL)", "biased (CURL), fused update"]
    (tmp_path / "cartpole-swingup" / "curl-fused" / "seed1" / "summary.json").write_text(
        json.dumps({"train_seconds": 90.0, "train_from_env_step": 0}))
    (tmp_path / "cartpole-swingup" / "curl-fused" / "seed2" / "summary.json").write_text(
        json.dumps({"train_seconds": 30.0, "train_from_env_step": 50000}))
    md = paired_table(tmp_path, 100_000)
    assert "| biased (CURL), fused update | – | 1.5 | 0.5 (from step 50000) |" in md  # wall time per run
    section = md[md.index("Fused update against the official schedule"):]
    assert "| biased (CURL) | 0 1 2 | -20.00, +20.00, -40.00 | -13.33 ± 30.55 |" in section


def test_table3_cpc_objective_runs_the_official_update_without_cuda_graphs(tmp_path):
    """Issue 44: `cpc:TAU_PLUS` is a grid objective; its runs drop --cuda-graphs (a GPU slice's --speed graphs) and
    a grid asking for its fused update is refused before anything starts."""
    import curl_table3
    import tyro

    args = tyro.cli(curl_table3.Args, args=["--out", str(tmp_path), "--tasks", "cartpole-swingup", "--seeds", "0",
                                            "--objectives", "curl", "cpc:0", "--extra=--cuda-graphs",
                                            "--extra=--replay-on-device", "--dry-run"])
    (_, curl_cmd), (cpc_out, cpc_cmd) = curl_table3.commands(args)
    assert "--cuda-graphs" in curl_cmd and "--cuda-graphs" not in cpc_cmd and "--replay-on-device" in cpc_cmd
    assert cpc_cmd[cpc_cmd.index("--aux") + 1] == "cpc" and cpc_out.parent.name == "cpc_0"
    fused = dataclasses.replace(args, updates=["official", "fused"])
    with pytest.raises(ValueError, match="CPC has the official update only"):
        curl_table3.commands(fused)


@pytest.mark.parametrize("module, command", [("paper_tables.table3", "scripts/curl_table3.py --aggregate-only"),
                                             ("paper_tables.table3_slices", "scripts/table3_gpu.py tabulate")])
def test_the_table_modules_name_the_command_that_makes_their_table(module, command):
    """python -m paper_tables.table3 --help printed nothing and exited 0: the module is a library; it now says so in
    one line naming the command that makes the table (stdout and status 0 with --help; an error line and status 2
    otherwise)."""
    res = warm.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.count("\n") == 1 and command in res.stdout, res
    res = warm.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and res.stderr.startswith("error: ") and command in res.stderr, res


def test_a_finished_run_recorded_before_detach_encoder_counts_in_the_grid_as_the_same_run(tmp_path):
    """--detach-encoder was added after runs were recorded without it; the grid's check of finished runs read its
    absence as other settings (None -> False) and refused the whole grid."""
    import importlib.util

    from rl_curl.config import from_cli

    spec = importlib.util.spec_from_file_location("curl_table3", ROOT / "scripts/curl_table3.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cmd = [sys.executable, "-m", "rl_curl.train", "--task", "cartpole-swingup", "--seed", "0"]
    record = {k: v for k, v in dataclasses.asdict(from_cli(cmd[3:]).resolved()).items() if k != "detach_encoder"}
    (tmp_path / "config.json").write_text(json.dumps(record))
    assert mod.changed_settings(tmp_path, cmd) == []
    (tmp_path / "config.json").write_text(json.dumps({**record, "detach_encoder": True}))
    assert mod.changed_settings(tmp_path, cmd) == [("detach_encoder", True, False)]


def _grid_config(args, out):
    """The config.json rl_curl.train would record for the grid's run in ``out``."""
    from paper_tables.table3 import commands
    from rl_curl.config import from_cli

    cmd = dict((str(o), c) for o, c in commands(args))[str(out)]
    return dataclasses.asdict(from_cli(cmd[3:]).resolved())


def test_a_grid_is_refused_where_other_runs_of_its_tasks_were_made_with_other_settings(tmp_path, capsys):
    """The table reads every run under --out, but only the grid's own runs were compared with its settings: a grid
    of seed 2 at batch 16 over seeds 0 1 at batch 8 trained and averaged the three in one cell without a word. Now
    such a grid is refused before anything starts; runs that differ only in seed or objective are not."""
    import curl_table3

    base = curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], objectives=["curl"], seeds=[0, 1],
                            batch_size=8, env_steps=1000)
    for seed in (0, 1):
        out = tmp_path / "cartpole-swingup" / "curl" / f"seed{seed}"
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps(_grid_config(base, out)))
    more = dataclasses.replace(base, seeds=[2], objectives=["curl", "debiased:0.05:1"], dry_run=True)
    assert curl_table3.main(more) == 0  # other seeds and objectives, same settings: the commands
    assert len(capsys.readouterr().out.splitlines()) == 2
    with pytest.raises(ValueError, match=r"--out holds other runs of this grid's tasks made with other settings .*"
                                         r"curl/seed0 \(batch_size: 8 -> 16\); .*curl/seed1 \(batch_size: 8 -> 16\)\. "
                                         r"table3.md counts every run .*nothing was started"):
        curl_table3.main(dataclasses.replace(more, batch_size=16))
    from shared_losses.training.cli import run_cli  # as the command says it: one error: line, status 2 (a bare
    capsys.readouterr()                             # message and status 1 before, unlike every other refusal)
    with pytest.raises(SystemExit) as stopped:
        run_cli(lambda: curl_table3.main(dataclasses.replace(more, batch_size=16)))
    assert stopped.value.code == 2 and capsys.readouterr().err.startswith("error: --out holds other runs")
    assert not (tmp_path / "cartpole-swingup" / "curl" / "seed2").exists()
    # another task's runs share no cell with this grid's: not compared
    assert curl_table3.main(dataclasses.replace(more, batch_size=16, tasks=["walker-walk"])) == 0


def test_the_table_warns_of_cells_that_average_runs_made_with_other_settings(tmp_path, capsys):
    """A folder that already mixes settings (runs copied in, an older grid) is tabulated with a warning under the
    table naming the option, its values and the runs holding each."""
    import curl_table3

    for s in range(3):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, 800 + s])
        fake_run(tmp_path, "cartpole-swingup", "debiased", 0.05, 1, s, [100, 900])
    path = tmp_path / "cartpole-swingup" / "curl_0.0_1" / "seed2" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "batch_size": 16}))
    for s in range(3):
        path = tmp_path / "cartpole-swingup" / "debiased_0.05_1" / f"seed{s}" / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "batch_size": 8}))
    assert curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True)) == 0
    line = ("- warning: cartpole-swingup: its runs were made with other batch_size: None (biased (CURL) seeds 0 1); "
            "16 (biased (CURL) seed 2); 8 (debiased τ⁺=0.05, M=1 seeds 0 1 2): the cells average unlike runs; keep "
            "one setting per grid folder")
    assert line in (tmp_path / "table3.md").read_text().splitlines()
    assert "warning: cartpole-swingup: its runs were made with other batch_size" in capsys.readouterr().err


def test_damaged_run_files_are_named_and_a_cut_eval_csv_is_not_left_out_silently(tmp_path, capsys):
    """An empty summary.json or config.json stopped the grid and --aggregate-only with a bare "Expecting value: line 1
    column 1 (char 0)"; a finished run whose eval.csv lost its final evaluation was left out of its cell without a
    word, and a cut last row was read as a shorter number."""
    import curl_table3

    for s in range(2):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, 800 + s])
    run0, run1 = (tmp_path / "cartpole-swingup" / "curl_0.0_1" / f"seed{s}" for s in range(2))
    config1, eval1 = (run1 / "config.json").read_text(), (run1 / "eval.csv").read_text()
    (run0 / "summary.json").write_text("")
    args = curl_table3.Args(out=str(tmp_path), aggregate_only=True)
    with pytest.raises(ValueError, match=re.escape(f"{run0 / 'summary.json'} is damaged (not valid JSON")):
        curl_table3.main(args)
    (run0 / "summary.json").write_text(json.dumps({"env_steps": 100_000}))
    (run1 / "config.json").write_text("")
    with pytest.raises(ValueError, match=re.escape(f"{run1 / 'config.json'} is damaged (not valid JSON")):
        curl_table3.main(args)
    (run1 / "config.json").write_text(config1)
    with open(run1 / "eval.csv", "a") as fh:
        fh.write("150000,0,12")  # a row cut short
    with pytest.raises(ValueError, match=re.escape(f"{run1 / 'eval.csv'}, line 4 is damaged (3 fields")):
        curl_table3.main(args)
    (run1 / "eval.csv").write_text(eval1)
    (run0 / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n50000,0,100,0\n")
    assert curl_table3.main(args) == 0
    lines = (tmp_path / "table3.md").read_text().splitlines()
    assert "| biased (CURL) | 801 (n=1) |" in lines
    assert (f"- warning: {run0 / 'eval.csv'} ends at environment step 50,000, though summary.json says the run "
            f"finished at 100,000: the file was cut or edited, and the run's final evaluation is not in the table "
            f"(`python -m rl_curl.evaluate --run-dir {run0}` gives it again)") in lines
    assert f"warning: {run0 / 'eval.csv'} ends at" in capsys.readouterr().err


def test_a_run_whose_score_is_not_finite_is_said_and_the_tables_are_still_written(tmp_path):
    """A diverged run (NaN return) stopped the whole table: the paired statistics refuse a NaN, and
    curl_table3 wrote no table3.md. Now its paired row says why it is not paired, and every other table is there."""
    import curl_table3

    for s, r in enumerate([800, 850, 900]):
        fake_run(tmp_path, "cartpole-swingup", "curl", 0.0, 1, s, [100, r])
        fake_run(tmp_path, "cartpole-swingup", "debiased", 0.05, 1, s, [100, "nan" if s == 1 else r + 30])
        fake_run(tmp_path, "cartpole-swingup", "debiased", 0.1, 1, s, [100, r + 10])
    for cfg in tmp_path.glob("*/*/seed*/config.json"):  # each run its seed (fake_run's configs name none)
        cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "seed": int(cfg.parent.name[4:])}))
    assert curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True)) == 0
    md = (tmp_path / "table3.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| debiased τ⁺=0.05, M=1 | – | not paired:"))
    assert "seed(s) 1" in row, row
    assert any(line.startswith("| debiased τ⁺=0.1, M=1 | 0 1 2 | +10.00, +10.00, +10.00 |") for line in md.splitlines())


def test_a_local_grid_whose_runs_at_once_cannot_hold_their_replays_is_refused_before_it_starts(tmp_path, monkeypatch):
    """Each of a local grid's --parallel runs checked its replay against the free memory as it started, all at once,
    before any had filled its ring: a grid whose runs fit only one by one started, and its runs were killed for
    memory with their rings nearly full. Finished runs are not counted (a grid run again skips them)."""
    import curl_table3

    import rl_curl.train as train
    from rl_curl.config import Config
    from rl_curl.replay import FrameReplay

    c = Config().resolved()  # the grid's runs: the paper's replay (100,000 transitions)
    one = sum(v for k, v in FrameReplay.estimate_bytes(c.replay_capacity, c.obs_shape, 64, c.frame_stack,
                                                      transitions=c.agent_steps).items()
              if k != "frames_device_peak")  # what one run fills
    monkeypatch.setattr(train, "available_memory", lambda: (int(one * 2.5), "on this machine"))
    args = curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], objectives=["curl"], seeds=[0, 1, 2, 3],
                            parallel=4)
    with pytest.raises(ValueError, match=r"the runs will need .* GiB of memory for the 4 runs' replays .* but only "
                                         r".* GiB is available on this machine; .*, or lower --parallel \(the runs "
                                         r"trained at once on this machine\)"):
        curl_table3.check_grid(args)
    assert not any(tmp_path.iterdir())
    curl_table3.check_grid(dataclasses.replace(args, parallel=2))  # two at a time fit
    for seed in (0, 1):  # two runs of the grid finished: the two left fit at once
        (tmp_path / "cartpole-swingup" / "curl" / f"seed{seed}").mkdir(parents=True)
        (tmp_path / "cartpole-swingup" / "curl" / f"seed{seed}" / "summary.json").write_text(
            json.dumps({"env_steps": args.env_steps}))
    curl_table3.check_grid(args)


def test_gpus_are_ids_among_the_gpus_this_process_sees(tmp_path, monkeypatch):
    """Inside a job given GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=2,3), --gpus 0 1 set the runs' CUDA_VISIBLE_DEVICES to
    0 and 1: the machine's first two GPUs, another job's."""
    import curl_table3

    args = curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], objectives=["curl"], seeds=[0, 1, 2],
                            gpus=[0, 1], dry_run=True)
    jobs = curl_table3.commands(args)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    curl_table3.check_grid(args)
    assert [r.env["CUDA_VISIBLE_DEVICES"] for r in curl_table3.sweep_runs(jobs, args)] == ["2", "3", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1e, GPU-77b0")  # UUIDs, as some schedulers give them
    assert [r.env["CUDA_VISIBLE_DEVICES"] for r in curl_table3.sweep_runs(jobs, args)] == ["GPU-5a1e", "GPU-77b0",
                                                                                            "GPU-5a1e"]
    with pytest.raises(ValueError, match=r"^--gpus 0 2: this process sees 2 GPU\(s\) \(CUDA_VISIBLE_DEVICES=GPU-5a1e, "
                                         r"GPU-77b0\), ids 0 to 1$"):
        curl_table3.check_grid(dataclasses.replace(args, gpus=[0, 2]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match=r"CUDA_VISIBLE_DEVICES='' leaves this process no GPU"):
        curl_table3.check_grid(args)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # every GPU of the machine: the ids as they are
    assert [r.env["CUDA_VISIBLE_DEVICES"] for r in curl_table3.sweep_runs(jobs, args)] == ["0", "1", "0"]
