import pytest

from fewshot.train import train

from ..folder_rules import check_folder_rules
from .test_fewshot import _cfg


def test_fewshot_follows_the_folder_rules(tiny_encoder, easy_task, tmp_path):
    def run(folder, **flags):
        return train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, checkpoint_every=2,
                          output_dir=str(folder), **flags))

    check_folder_rules(tmp_path, "fewshot", run, other_app="nlp_qt")


def test_fewshot_probe_follows_the_folder_rules(tiny_encoder, easy_task, tmp_path):
    """The probe keeps no checkpoint: its metrics.json is the finished run."""
    def run(folder, **flags):
        return train(_cfg(tiny_encoder, easy_task, tmp_path, objective="probe", output_dir=str(folder), **flags))

    check_folder_rules(tmp_path, "fewshot", run, other_app="rl_curl")


def cut_and_resume(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys, module, name, **kw):
    """A straight run in full/, and in cut/ one Ctrl-C during the 2nd call of ``module.name`` (step 2: it finishes,
    is checkpointed, the run exits 130 with no metrics.json) then --resume; returns both runs' log.csv rows and
    metrics.json, by folder name."""
    import csv
    import json

    from shared_losses.training.runtime import load_checkpoint

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call

    train(_cfg(tiny_encoder, easy_task, tmp_path, output_dir=str(tmp_path / "full"), **kw))
    interrupt_on_call(monkeypatch, module, name, at=2)
    check_interrupt_exits_130(capsys, lambda: train(_cfg(tiny_encoder, easy_task, tmp_path,
                                                         output_dir=str(tmp_path / "cut"), **kw)), where="step 2")
    monkeypatch.undo()
    assert not (tmp_path / "cut" / "metrics.json").exists()
    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 2
    train(_cfg(tiny_encoder, easy_task, tmp_path, output_dir=str(tmp_path / "cut"), resume=True, **kw))
    # every pipeline says where it resumes (the PU pipeline said nothing)
    assert f"resumed from {tmp_path / 'cut' / 'checkpoint'} at step 2 of " in capsys.readouterr().out
    rows = {name: list(csv.DictReader(open(tmp_path / name / "log.csv"))) for name in ("full", "cut")}
    metrics = {name: json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("full", "cut")}
    return rows, metrics


@pytest.mark.slow  # interrupted, resumed and straight runs
def test_fewshot_ctrl_c_checkpoints_the_step_and_resumes_exactly(tiny_encoder, easy_task, tmp_path, monkeypatch,
                                                                   capsys):
    import fewshot.train as fs_train

    # checkpoints every 4: the stop at step 2 writes its own
    rows, metrics = cut_and_resume(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys, fs_train, "fewshot_loss",
                                   max_steps=6, eval_every=3, checkpoint_every=4)
    assert rows["full"] == rows["cut"]
    assert metrics["full"]["eval_accuracy"] == metrics["cut"]["eval_accuracy"]
    assert metrics["full"]["history"] == metrics["cut"]["history"]


def test_fewshot_ends_with_the_common_json_line(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys):
    from fewshot.train import main

    from ..folder_rules import check_final_json_line

    cfg = _cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, output_dir=str(tmp_path / "j"))
    line = check_final_json_line(monkeypatch, capsys, main, cfg, "fewshot", 2)
    assert {"eval_accuracy", "majority_accuracy"} <= set(line["result"])


PU = dict(setting="pu", n_labeled=30, n_unlabeled=100)


@pytest.mark.slow  # PU pipeline runs, resumes and refusals of tests/folder_rules.py
def test_fewshot_pu_pipeline_follows_the_folder_rules(tiny_encoder, easy_task, tmp_path):
    def run(folder, **flags):
        return train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, checkpoint_every=1, output_dir=str(folder),
                          **PU, **flags))

    check_folder_rules(tmp_path, "fewshot", run, other_app="nlp_qt")


@pytest.mark.slow  # interrupted, resumed and straight PU pipeline runs
def test_fewshot_pu_pipeline_ctrl_c_resumes_exactly(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys):
    """The PU pipeline stops on Ctrl-C after the step (checkpointed), and --resume gives the run that was not
    interrupted: the same losses, the same probes (baseline included) and the same metrics."""
    import fewshot.objectives as objectives  # the PU pipeline's puNCE is the ce+punce entry's term

    rows, metrics = cut_and_resume(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys, objectives, "punce_loss",
                                   max_steps=5, checkpoint_every=4, **PU)
    assert len(rows["full"]) == 5 and rows["full"] == rows["cut"]
    for key in ("eval_accuracy", "probes", "prior", "steps"):
        assert metrics["full"][key] == metrics["cut"][key], key


def test_the_learning_rate_schedule_resumes_exactly_and_is_transformers(tiny_encoder, easy_task, tmp_path,
                                                                        monkeypatch, capsys):
    """--warmup-steps, --lr-schedule linear and --max-grad-norm (Trainer's habits; the learning rate was constant and
    unclipped with no option, found by a probe): the learning rate of every step is transformers' own schedule's
    (get_linear_schedule_with_warmup, the first step at 0), log.csv shows it, the gradients are clipped to the norm
    asked, and a run stopped by Ctrl-C and resumed equals the straight one; extending a linear run is refused."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    import fewshot.train as fs_train
    from shared_losses.training.runtime import CheckpointError

    kw = dict(max_steps=6, eval_every=3, checkpoint_every=4, warmup_steps=2, lr_schedule="linear", max_grad_norm=0.5,
              lr=3e-3)
    norms = []
    real = fs_train.FewShotApp.train_step

    def spy(self):
        clip = self.accelerator.clip_grad_norm_
        self.accelerator.clip_grad_norm_ = lambda params, max_norm: norms.append(max_norm) or clip(params, max_norm)
        return real(self)

    monkeypatch.setattr(fs_train.FewShotApp, "train_step", spy)
    rows, metrics = cut_and_resume(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys, fs_train, "fewshot_loss",
                                   **kw)
    assert rows["full"] == rows["cut"] and metrics["full"]["history"] == metrics["cut"]["history"]
    assert norms[:6] == [0.5] * 6  # the straight run's six steps
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=3e-3)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=6)
    expected = []
    for _ in range(6):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert [float(r["lr"]) for r in rows["full"]] == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert expected[0] == 0.0
    with pytest.raises(CheckpointError, match="--lr-schedule linear to --max-steps 6: .* cannot be continued to 8"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, output_dir=str(tmp_path / "full"), resume=True,
                   **{**kw, "max_steps": 8}))
    with pytest.warns(UserWarning, match="--warmup-steps 6 is not below --max-steps 6: the learning rate never"):
        _cfg(tiny_encoder, easy_task, tmp_path, warmup_steps=6, max_steps=6).validate()
    with pytest.raises(ValueError, match="--warmup-steps shape the training steps; --objective probe takes none"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, objective="probe", warmup_steps=2,
                   output_dir=str(tmp_path / "p")))
