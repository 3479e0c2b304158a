"""One vocabulary across the three trainers: the same option names for the same things, one spelling of each,
and each option named as its field (issues 16 and 43)."""

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
    got = (cfg.output_dir, cfg.seed, cfg.resume, cfg.mixed_precision, cfg.checkpoint_every, cfg.log_every, cfg.progress)
    assert got == ("runs/x", 3, True, "bf16", 7, 5, False)
    assert parse(cls, ["--overwrite"]).overwrite is True
    assert parse(cls, []).resume is False  # no trainer continues a run unless asked to


@pytest.mark.parametrize("app,flag,old,field,value", [
    ("rl_curl", "--output-dir", "--out-dir", "output_dir", "runs/a"),
    ("nlp_qt", "--max-length", "--max-len", "max_length", "17"),
    ("nlp_qt", "--text-column", "--text-field", "text_column", "body"),
    ("fewshot", "--max-steps", "--steps", "max_steps", "9"),
    ("fewshot", "--gather-across-processes", "--gather-negatives", "gather_across_processes", None),
    ("fewshot", "--device", "--cpu", "device", "cpu"),
])
def test_each_option_has_one_spelling_named_as_its_field(app, flag, old, field, value, capsys):
    """The field is named as its flag (config.json and --help say the same), and the spellings of before 0.1.0
    are gone: the command line refuses them."""
    args = [flag] if value is None else [flag, value]
    got = getattr(parse(APPS[app], args), field)
    assert got == (True if value is None else type(got)(value))
    assert field.replace("_", "-") == flag.lstrip("-")
    with pytest.raises(SystemExit) as e:
        parse(APPS[app], [old] if value is None or old == "--cpu" else [old, value])
    assert e.value.code == 2
    assert old in capsys.readouterr().err


def test_gathering_across_processes_has_one_spelling():
    assert parse(QTConfig, ["--gather-across-processes"]).gather_across_processes is True
    assert parse(FewShotConfig, ["--gather-across-processes"]).gather_across_processes is True


def test_fewshot_device_cpu_forces_the_cpu(monkeypatch):
    import accelerate

    from fewshot import run

    seen = []
    one_process = type("OneProcess", (), {"num_processes": 1})()  # what make_accelerator's launch check reads
    monkeypatch.setattr(accelerate, "Accelerator", lambda **kw: seen.append(kw["cpu"]) or one_process)
    for args in (["--device", "cpu"], []):
        run.make_accelerator(parse(FewShotConfig, args))
    assert seen == [True, False]
