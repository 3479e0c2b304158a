"""One vocabulary across the three trainers: the same option names for the same things, and the
old spellings still accepted (issue 16, item 3)."""

import pytest
import tyro

from fewshot.config import FewShotConfig
from nlp_qt.config import Config as QTConfig
from rl_curl.config import Config as CurlConfig

APPS = {"rl_curl": CurlConfig, "nlp_qt": QTConfig, "fewshot": FewShotConfig}


def parse(config_cls, args):
    return tyro.cli(config_cls, args=args)


@pytest.mark.parametrize("app", sorted(APPS))
def test_shared_options_have_one_name_in_every_trainer(app):
    cls = APPS[app]
    cfg = parse(cls, ["--output-dir", "runs/x", "--seed", "3", "--resume", "--mixed-precision", "bf16",
                      "--checkpoint-every", "7", "--log-every", "5", "--no-progress", "--device", "cpu"])
    assert cfg.device == "cpu" and parse(cls, []).device == "auto"  # --device in every trainer
    out = cfg.out_dir if app == "rl_curl" else cfg.output_dir
    assert (out, cfg.seed, cfg.resume, cfg.mixed_precision, cfg.checkpoint_every, cfg.log_every, cfg.progress) == \
        ("runs/x", 3, True, "bf16", 7, 5, False)
    assert parse(cls, ["--overwrite"]).overwrite is True
    assert parse(cls, []).resume is False  # no trainer continues a run unless asked to


@pytest.mark.parametrize("app,new,old,field,value", [
    ("rl_curl", "--output-dir", "--out-dir", "out_dir", "runs/a"),
    ("nlp_qt", "--max-length", "--max-len", "max_len", "17"),
    ("nlp_qt", "--text-column", "--text-field", "text_field", "body"),
    ("fewshot", "--max-steps", "--steps", "steps", "9"),
])
def test_old_spellings_are_aliases(app, new, old, field, value):
    a, b = parse(APPS[app], [new, value]), parse(APPS[app], [old, value])
    assert getattr(a, field) == getattr(b, field) == type(getattr(a, field))(value)


def test_gathering_across_processes_has_one_spelling():
    assert parse(QTConfig, ["--gather-across-processes"]).gather_across_processes is True
    assert parse(FewShotConfig, ["--gather-across-processes"]).gather_negatives is True
    assert parse(FewShotConfig, ["--gather-negatives"]).gather_negatives is True  # the old spelling


def test_fewshot_old_cpu_flag_still_forces_the_cpu(monkeypatch):
    import accelerate

    from fewshot import run

    seen = []
    one_process = type("OneProcess", (), {"num_processes": 1})()  # what make_accelerator's launch check reads
    monkeypatch.setattr(accelerate, "Accelerator", lambda **kw: seen.append(kw["cpu"]) or one_process)
    for args in (["--cpu"], ["--device", "cpu"], []):
        run.make_accelerator(parse(FewShotConfig, args))
    assert seen == [True, True, False]
