from nlp_qt.train import train

from ..folder_rules import check_folder_rules
from .test_train import _cfg


def test_nlp_qt_follows_the_folder_rules(tmp_path):
    def run(folder, **flags):
        return train(_cfg(tmp_path, folder.name, max_steps=2, **{"resume": False, **flags}))

    check_folder_rules(tmp_path, "nlp_qt", run, other_app="rl_curl")


def test_nlp_qt_ctrl_c_checkpoints_the_step_and_resumes_exactly(tmp_path, monkeypatch, capsys):
    import signal

    from safetensors.torch import load_file

    import nlp_qt.train as qt_train

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call

    train(_cfg(tmp_path, "full", max_steps=5, objective="debiased", tau_plus=0.01))
    # Ctrl-C during step 3 (of 5; checkpoints every 2): step 3 finishes, is checkpointed, the run stops
    interrupt_on_call(monkeypatch, qt_train, "compute_loss", at=3)
    check_interrupt_exits_130(capsys, lambda: train(_cfg(tmp_path, "cut", max_steps=5, objective="debiased",
                                                         tau_plus=0.01)), where="step 3")
    monkeypatch.undo()
    assert not (tmp_path / "cut" / "summary.json").exists()
    from shared_losses.training.runtime import load_checkpoint

    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 3
    # SIGTERM (a scheduler's stop) is handled the same way
    interrupt_on_call(monkeypatch, qt_train, "compute_loss", at=1, sig=signal.SIGTERM)
    check_interrupt_exits_130(capsys, lambda: train(_cfg(tmp_path, "cut", max_steps=5, objective="debiased",
                                                         tau_plus=0.01)), where="step 4")
    monkeypatch.undo()
    resumed = train(_cfg(tmp_path, "cut", max_steps=5, objective="debiased", tau_plus=0.01))
    assert resumed["step"] == 5
    a = load_file(str(tmp_path / "full/model/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    steps = lambda p: [r.split(",")[0] for r in (tmp_path / p / "log.csv").read_text().splitlines()]  # noqa: E731
    assert steps("full") == steps("cut")


def test_nlp_qt_ends_with_the_common_json_line(tmp_path, monkeypatch, capsys):
    from nlp_qt.train import main

    from ..folder_rules import check_final_json_line

    line = check_final_json_line(monkeypatch, capsys, main, _cfg(tmp_path, "j", max_steps=2), "nlp_qt", 2)
    assert line["output_dir"] == str(tmp_path / "j") and "final_loss" in line["result"]
