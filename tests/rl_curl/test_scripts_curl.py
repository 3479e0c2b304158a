import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    code = curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True))
    md = (tmp_path / "table3.md").read_text()
    assert code == 0
    lines = md.splitlines()
    assert "| objective | cartpole swingup | walker walk |" in lines
    assert "| biased (CURL) | 850±41 | – |" in lines
    assert "| debiased τ⁺=0.05, M=1 | 880±41 | – |" in lines
    assert (tmp_path / "curves.png").exists()


def test_table3_dry_run_and_bad_objective(tmp_path, capsys):
    import curl_table3

    curl_table3.main(curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], seeds=[0],
                                      objectives=["curl", "debiased:0.1:2"], dry_run=True))
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "--tau-plus 0.1 --positives 2" in out[1] and "--resume" in out[0]
    with pytest.raises(ValueError, match="objective"):
        curl_table3.main(curl_table3.Args(objectives=["debiased:0.1"], dry_run=True))


def test_bench_json_fields():
    res = subprocess.run([sys.executable, str(ROOT / "scripts/bench_curl.py"), "--json", "--batches", "8",
                          "--updates", "1", "--env-agent-steps", "2", "--threads", "1", "--device", "cpu"],
                         capture_output=True, text=True, timeout=300, check=True, cwd=ROOT)
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 1
    for key in ("batch", "update_ms", "replay_bytes_per_transition", "env_steps_per_s"):
        assert key in rows[0]
    assert rows[0]["batch"] == 8 and rows[0]["replay_bytes_per_transition"] <= 2 * 9 * 100 * 100 / 5
