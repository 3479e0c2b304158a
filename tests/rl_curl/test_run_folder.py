import pytest

from rl_curl.train import run as train

from ..folder_rules import check_folder_rules
from .test_train import cfg


@pytest.mark.slow  # runs, resumes and refusals of tests/folder_rules.py
def test_rl_curl_follows_the_folder_rules(tmp_path):
    def run(folder, **flags):
        return train(cfg(tmp_path, folder.name, env_steps=1000, **flags))

    check_folder_rules(tmp_path, "rl_curl", run, other_app="fewshot")


@pytest.mark.slow  # interrupted, resumed and straight runs
def test_rl_curl_ctrl_c_finishes_the_episode_checkpoints_and_resumes_exactly(tmp_path, monkeypatch, capsys):
    import torch

    from rl_curl.agent import CurlAgent

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call
    from .test_train import agent_state

    # 3 episodes of 20 agent steps (action repeat 50), checkpoints only at the end
    train(cfg(tmp_path, "full", env_steps=3000, checkpoint_every=0))
    # Ctrl-C during the 3rd update (first episode): the episode is finished, checkpointed, and the run stops
    interrupt_on_call(monkeypatch, CurlAgent, "update", at=3)
    check_interrupt_exits_130(capsys, lambda: train(cfg(tmp_path, "cut", env_steps=3000, checkpoint_every=0)),
                              where="environment step 1000")
    monkeypatch.undo()
    assert not (tmp_path / "cut" / "summary.json").exists()
    from shared_losses.training.runtime import load_checkpoint

    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 20
    train(cfg(tmp_path, "cut", env_steps=3000, checkpoint_every=0, resume=True))
    a, b = agent_state(tmp_path / "full"), agent_state(tmp_path / "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "full" / "eval.csv").read_text() == (tmp_path / "cut" / "eval.csv").read_text()


def test_rl_curl_ends_with_the_common_json_line(tmp_path, monkeypatch, capsys):
    from rl_curl.train import main

    from ..folder_rules import check_final_json_line

    line = check_final_json_line(monkeypatch, capsys, main, cfg(tmp_path, "j", env_steps=1000), "rl_curl", 1000)
    assert "final_eval_return" in line["result"]
