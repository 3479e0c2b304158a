"""shared_losses.training.cli.config_from_cli: one ``--preset NAME`` for every trainer. The preset's values are the
defaults that explicit options override, ``--help`` lists the presets and what each sets, an unknown preset is a
one-line error naming the choices; each application declares its presets beside its configuration."""

import dataclasses
import typing
from dataclasses import dataclass
from typing import Literal, Optional

import pytest
import tyro

from shared_losses.training.cli import config_from_cli, option_given, option_value, presets_help, run_cli

PRESETS = {"small": dict(width=8, lr=0.5, fast=True), "paper": dict(width=512, name="paper run")}
PresetName = Literal[tuple(PRESETS)]


@dataclass
class Toy:
    """A toy trainer."""

    width: int = 64
    """Hidden width."""
    lr: float = 1e-3
    """Learning rate."""
    fast: bool = False
    """Take shortcuts."""
    name: str = "toy"
    """Run name."""
    preset: Optional[PresetName] = None
    """A preset (listed above)."""


@dataclass
class NoPresetField:
    width: int = 64
    lr: float = 1e-3


def test_the_preset_sets_the_defaults_and_explicit_options_win():
    assert config_from_cli(Toy, PRESETS, []) == Toy()
    assert config_from_cli(Toy, PRESETS, ["--preset", "small"]) == Toy(width=8, lr=0.5, fast=True, preset="small")
    cfg = config_from_cli(Toy, PRESETS, ["--width", "16", "--preset=small", "--no-fast"])
    assert (cfg.width, cfg.lr, cfg.fast, cfg.preset) == (16, 0.5, False, "small")  # before or after --preset
    assert config_from_cli(Toy, PRESETS, ["--preset", "small", "--preset", "paper"]).width == 512  # the last one
    assert config_from_cli(Toy, PRESETS, ["--preset", "None"]) == Toy()


def test_a_configuration_without_a_preset_field_takes_presets_too():
    presets = {"big": dict(width=1024)}
    assert config_from_cli(NoPresetField, presets, ["--preset", "big", "--lr", "0.1"]) == NoPresetField(1024, 0.1)
    assert config_from_cli(NoPresetField, presets, ["--preset=big"]).width == 1024


def test_an_unknown_preset_is_one_line_naming_the_choices(capsys, monkeypatch):
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    with pytest.raises(ValueError, match=r"^unknown --preset 'gpu'; choose one of small, paper$"):
        config_from_cli(Toy, PRESETS, ["--preset", "gpu"])
    with pytest.raises(ValueError, match=r"^--preset needs a value: one of small, paper$"):
        config_from_cli(Toy, PRESETS, ["--width", "3", "--preset"])
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: config_from_cli(Toy, PRESETS, ["--preset=gpu"]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "error: unknown --preset 'gpu'; choose one of small, paper"
    assert "Traceback" not in err


def test_help_lists_the_presets_and_what_each_sets(capsys):
    with pytest.raises(SystemExit) as exit_info:
        config_from_cli(Toy, PRESETS, ["--help"], sections=["more text for the top"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "A toy trainer." in out and "more text for the top" in out
    assert "  small  --width 8 --lr 0.5 --fast" in out
    assert "  paper  --width 512 --name 'paper run'" in out
    assert "{None,small,paper}" in out  # the field, with its choices
    with pytest.raises(SystemExit):
        config_from_cli(Toy, PRESETS, ["--preset", "small", "--help"])
    assert "(default: 8)" in capsys.readouterr().out  # the preset's values are the defaults --help shows
    assert presets_help({"p": dict(on=False, ids=(1, 2), x=None, y=1 / 3)}).splitlines()[1] == \
        "  p  --no-on --ids 1 2 --x None --y 0.3333333333333333"


def test_hooks_choose_a_default_preset_and_finish_the_configuration():
    def default(argv):
        return "paper" if option_value(argv, "--name") == "big" else None

    def finish(cfg, argv):
        return dataclasses.replace(cfg, lr=0.0) if option_given(argv, "--width") else cfg

    hooks = dict(default_preset=default, finish=finish)
    assert config_from_cli(Toy, PRESETS, ["--name", "big"], **hooks).preset == "paper"
    assert config_from_cli(Toy, PRESETS, ["--name=big", "--preset", "small"], **hooks).preset == "small"
    assert config_from_cli(Toy, PRESETS, ["--name", "big", "--preset", "None"], **hooks).preset is None
    assert config_from_cli(Toy, PRESETS, ["--preset", "small", "--width=3"], **hooks).lr == 0.0
    assert option_given(["--max-steps=3"], "--steps", "--max-steps") and not option_given(["--steps2"], "--steps")


@pytest.mark.parametrize("argv,given,value", [
    (["--max-steps", "3"], True, "3"),
    (["--max_steps", "3"], True, "3"),  # tyro and ArgumentParser read _ as -: so do the refusals built on these
    (["--max_steps=3"], True, "3"),
    (["--max-steps=3", "--max_steps", "4"], True, "4"),  # the last one, as the parser takes it
    (["--max-steps"], True, None),  # bare: given, no value
    (["--max-steps", "--"], True, None),
    (["--", "--max-steps", "3"], False, None),  # after --: not an option
    (["--max-stepsx", "3", "--max", "3", "-max-steps", "3"], False, None),
    (["--lr", "--max-steps"], True, None),  # named as another option's value: still read as given (as argparse)
])
def test_options_are_found_in_either_spelling(argv, given, value):
    assert option_given(argv, "--max-steps") is given
    assert option_given(argv, "--max_steps") is given  # the name asked for may be spelled either way too
    assert option_value(argv, "--max-steps") == value


APPS = ["rl_curl", "nlp_qt", "fewshot"]


def _app(app):
    if app == "rl_curl":
        from rl_curl import config
        return config, config.Config
    if app == "nlp_qt":
        from nlp_qt import config
        return config, config.Config
    from fewshot import config
    return config, config.FewShotConfig


@pytest.mark.parametrize("app", APPS)
def test_every_trainer_declares_its_presets_beside_its_configuration(app, capsys):
    """Each application's config.py holds PRESETS, the field's choices are its names, and from_cli applies them."""
    module, cls = _app(app)
    hints = typing.get_type_hints(cls, include_extras=True)
    assert typing.get_args(hints["preset"]) == (Literal[tuple(module.PRESETS)], type(None))
    for name, fields in module.PRESETS.items():
        cfg = module.from_cli(["--preset", name])
        assert cfg.preset == name and all(getattr(cfg, k) == v for k, v in fields.items()), name
        assert cfg == dataclasses.replace(cls(), **fields, preset=name)
    with pytest.raises(SystemExit):
        module.from_cli(["--help"])
    out = capsys.readouterr().out
    assert "presets (--preset NAME" in out and all(f"\n  {name} " in out for name in module.PRESETS)
    with pytest.raises(ValueError, match="unknown --preset 'nope'; choose one of " + ", ".join(module.PRESETS)):
        module.from_cli(["--preset", "nope"])
    assert "preset" in cls.RESUME_FREE or app == "fewshot"  # fewshot's sweep treats another preset as another run


def test_rl_curl_presets_are_the_protocols_that_were_command_lines():
    """rl_curl's CPU protocol (docs/results/rl_curl.md, issue 15) and its demo (scripts/demo_rl_curl.sh) were command
    lines; their presets give the same configuration, and explicit options still win."""
    from rl_curl.config import Config, from_cli

    cpu = ("--env-steps 24000 --seed-steps 100 --eval-every 4000 --eval-episodes 3 --image-size 64 --crop-size 56 "
           "--num-filters 16 --hidden-dim 256 --batch-size 64 --replay-capacity 24000 --log-every 2000 "
           "--checkpoint-every 8000 --torch-threads 1").split()
    assert from_cli(["--preset", "cpu"]) == dataclasses.replace(tyro.cli(Config, args=cpu), preset="cpu")
    demo = ("--env-steps 4000 --seed-steps 100 --eval-every 2000 --eval-episodes 2 --image-size 64 --crop-size 56 "
            "--num-filters 16 --hidden-dim 256 --batch-size 64 --replay-capacity 10000 --log-every 400 "
            "--checkpoint-every 2000 --torch-threads 1 --save-video").split()
    assert from_cli(["--preset", "demo"]) == dataclasses.replace(tyro.cli(Config, args=demo), preset="demo")
    cfg = from_cli(["--preset", "cpu", "--image-size", "84", "--crop-size", "64"])
    assert (cfg.image_size, cfg.crop_size, cfg.num_filters) == (84, 64, 16)


def test_fewshot_pipelines_are_chosen_by_name_and_steps_replace_the_image_passes():
    from fewshot.config import PRESETS, FewShotConfig, ImageConfig, PuConfig, from_cli

    assert type(from_cli([])) is FewShotConfig and type(from_cli(["text"])) is FewShotConfig
    assert type(from_cli(["pu"])) is PuConfig and type(from_cli(["images"])) is ImageConfig
    pu = from_cli(["pu", "--preset", "cpu"])  # the PU pipeline takes a preset's fields it has (not lam or head)
    assert pu.preset == "cpu" and pu.max_steps == PRESETS["cpu"]["max_steps"] and not hasattr(pu, "lam")
    assert from_cli(["images", "--dataset", "mnist"]).passes == ImageConfig.passes
    cfg = from_cli(["images", "--max-steps", "3"])
    assert (cfg.max_steps, cfg.passes, cfg.lr) == (3, None, ImageConfig.lr)  # the defaults, but not their passes
    assert from_cli(["images", "--max-steps=3", "--passes", "2"]).passes == 2.0


@dataclass
class Documented:
    """A documented trainer."""

    width: int = 64
    """The hidden width of every layer, a line the source
    wraps, and a second sentence
    that it wraps again.

    A second paragraph:
    - an item
    - another item that the source
      wraps"""
    runs: int = 1
    checked: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.checked.append(self.width)  # counts the checks made on this configuration
        if self.width < 1:
            raise ValueError(f"width must be >= 1, got {self.width}")


def test_reflow_joins_the_source_lines_of_a_paragraph_and_keeps_paragraphs_and_list_items():
    from shared_losses.training.cli import reflow

    text = reflow("One line the source\n    wraps here.\n\n    Second:\n    - item one\n    - item two that\n"
                  "      wraps\n    1. numbered\n    20, 100 or 1000 (a number that only continues the line)")
    assert text == ("One line the source wraps here.\n\nSecond:\n- item one\n- item two that wraps\n1. numbered "
                    "20, 100 or 1000 (a number that only continues the line)")
    assert reflow("single") == "single" and reflow("  padded  \n\n\n  next  ") == "padded\n\nnext"
    example = "Run it:\n\n    python -m x --a 1\n    python -m x --a 2   # two\n\nThen look\nat it."
    assert reflow(example) == "Run it:\n\n    python -m x --a 1\n    python -m x --a 2   # two\n\nThen look at it."


def test_the_description_of_help_is_reflowed_too(capsys, monkeypatch):
    """The class docstring above the options: nlp_qt.train's broke before "(DCL)" (a line starting with a
    bracket is a new line to tyro)."""
    import sys

    import nlp_qt.train

    monkeypatch.setattr(sys, "argv", ["nlp_qt.train", "--help"])
    with pytest.raises(SystemExit):
        nlp_qt.train.main()
    assert "with the QT, debiased (DCL) or hard-negative objective" in capsys.readouterr().out


def test_help_shows_each_field_docstring_as_paragraphs_not_where_the_source_wraps(capsys, monkeypatch):
    """tyro keeps every line break of a field's docstring (its continuation lines are indented, which its list
    test takes for a new line), so --help broke each help text where the source file wraps it."""
    from shared_losses.training.cli import field_docs, parse_dataclass

    assert set(field_docs(Documented)) == {"width"}
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit):
        parse_dataclass(Documented, args=["--help"])
    out = capsys.readouterr().out
    assert "The hidden width of every layer, a line the source wraps, and a second sentence that it wraps again." in out
    assert "A documented trainer." in out
    lines = [line.strip(" │") for line in out.splitlines()]
    assert "A second paragraph:" in lines and "- an item" in lines and "- another item that the source wraps" in lines[
        lines.index("- an item") + 1]
    with pytest.raises(SystemExit):
        tyro.cli(Documented, args=["--help"])  # what it replaces: the source's line breaks
    assert "a line the source wraps" not in capsys.readouterr().out


def test_parsed_configuration_is_the_class_checked_once_with_its_defaults_and_preset_values():
    from shared_losses.training.cli import parse_dataclass

    cfg = parse_dataclass(Documented, args=["--width", "8"])
    assert type(cfg) is Documented and cfg.width == 8 and cfg.runs == 1 and cfg.checked == [8]  # one check
    assert parse_dataclass(Documented, args=[], default=Documented(width=5, runs=3)).runs == 3
    with pytest.raises(ValueError, match="width must be >= 1"):
        parse_dataclass(Documented, args=["--width", "0"])
    assert config_from_cli(Toy, PRESETS, ["--preset", "small"]) == Toy(width=8, lr=0.5, fast=True, preset="small")


def test_subcommands_parse_into_their_own_classes(capsys, monkeypatch):
    from shared_losses.training.cli import parse_subcommands

    got = parse_subcommands({"toy": Toy, "documented": Documented}, args=["documented", "--width", "3"])
    assert type(got) is Documented and got.width == 3
    assert type(parse_subcommands({"toy": Toy, "documented": Documented}, args=["toy"])) is Toy
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit):
        parse_subcommands({"toy": Toy, "documented": Documented}, args=["documented", "--help"])
    assert "a line the source wraps, and a second sentence that it wraps again." in capsys.readouterr().out


@pytest.mark.parametrize("command", [["rl_curl.train"], ["nlp_qt.train"], ["fewshot.train"], ["fewshot.train", "pu"],
                                     ["fewshot.train", "images"], ["nlp_qt.export"]])
def test_every_command_help_joins_the_lines_of_a_help_text(command, capsys, monkeypatch):
    """Each tyro command's --help, on a terminal wide enough for a source line: where a field's docstring wraps
    in the source, the help goes on, on the same line (the last word of the first source line, a space, the first
    word of the next), for every field of the command with a docstring of several lines."""
    import importlib
    import sys

    from shared_losses.training.cli import field_docs

    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(sys, "argv", [command[0], *command[1:], "--help"])
    module = importlib.import_module(command[0])
    with pytest.raises(SystemExit):
        module.main() if command[0] != "nlp_qt.export" else module.main(None)
    out = capsys.readouterr().out
    classes = {"rl_curl.train": "rl_curl.config:Config", "nlp_qt.train": "nlp_qt.config:Config",
               "fewshot.train": "fewshot.config:FewShotConfig", "fewshot.train pu": "fewshot.config:PuConfig",
               "fewshot.train images": "fewshot.config:ImageConfig", "nlp_qt.export": "nlp_qt.export:ExportArgs"}
    where, name = classes[" ".join(command)].split(":")
    cls = getattr(importlib.import_module(where), name)
    undocumented = {f.name for f in dataclasses.fields(cls) if f.init} - set(field_docs(cls))
    assert not undocumented, f"options without a docstring (their --help would be empty): {sorted(undocumented)}"
    joins = []
    for doc in field_docs(cls).values():
        first, second = (line.strip() for line in doc.split("\n")[:2]) if "\n" in doc else ("", "")
        if first and second:
            joins.append(f"{first.split()[-1]} {second.split()[0]}")
    assert joins
    missing = [j for j in joins if j not in out]
    assert not missing, missing


def test_every_tyro_command_parses_through_parse_dataclass():
    """A new command that called tyro.cli itself would bring the broken help texts back."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [p for d in ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables", "scripts")
             for p in (root / d).rglob("*.py")]
    assert len(files) > 50
    direct = [str(p.relative_to(root)) for p in files if p != root / "shared_losses/training/cli.py"
              and any(call in p.read_text() for call in ("tyro.cli(", "subcommand_cli_from_dict("))]
    assert not direct, direct


def test_a_choice_spelled_with_the_other_separator_is_taken():
    """`--log-floor min_negative` (nlp_qt's spelling) was refused by rl_curl.train, whose choice is `min-negative`, and
    the other way round: a command copied between the two failed. Either separator now gives the choice; a value that
    is no choice in either spelling is still refused by the parser."""
    from nlp_qt.config import from_cli as nlp_qt_cli
    from rl_curl.config import from_cli as rl_curl_cli
    from shared_losses.training.cli import respell_choices

    assert rl_curl_cli(["--aux", "debiased", "--log-floor", "min_negative"]).log_floor == "min-negative"
    assert rl_curl_cli(["--aux=debiased", "--log-floor=min_negative"]).log_floor == "min-negative"
    qt = nlp_qt_cli(["--corpus", "c.txt", "--objective", "debiased", "--log-floor", "min-negative", "--doc-boundary",
                     "blank-line"])
    assert (qt.log_floor, qt.doc_boundary) == ("min_negative", "blank_line")
    from rl_curl.config import Config

    args = ["--log-floor", "lowest", "--task", "min_negative", "--", "--log-floor", "min_negative"]
    assert respell_choices(Config, args) == args  # not a choice; not a Literal option; after --: left as given
    with pytest.raises((SystemExit, ValueError)):
        rl_curl_cli(["--log-floor", "lowest"])


def test_the_loss_options_name_is_pointed_to_across_applications():
    """rl_curl calls its loss option --aux, nlp_qt and fewshot --objective: the other application's name was refused
    in tyro's box of every option; now one line names the option to use."""
    from fewshot.config import from_cli as fewshot_cli
    from nlp_qt.config import from_cli as nlp_qt_cli
    from rl_curl.config import from_cli as rl_curl_cli
    from shared_losses.training.cli import UsageError

    with pytest.raises(UsageError, match=r"--objective is not an option here: --aux \(the loss beside SAC's"):
        rl_curl_cli(["--objective", "curl"])
    for cli in (nlp_qt_cli, fewshot_cli):
        with pytest.raises(UsageError, match=r"--aux is not an option here: --objective"):
            cli(["--aux", "debiased"])
