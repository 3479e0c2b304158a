"""A preset in a configuration made in code: each application's preset_config(NAME, **fields) is the command line's
--preset NAME with those options, and a run refuses Config(preset=NAME), which records the name and holds none of
the preset's values (it trained with the class's defaults under the preset's name)."""

import dataclasses

import pytest

from shared_losses.training.cli import check_preset_applied, preset_config


@dataclasses.dataclass
class Toy:
    preset: str | None = None
    width: int = 8
    depth: int = 2
    seed: int = 0


PRESETS = {"small": dict(width=2, depth=1, seed=5), "same": dict(width=8)}


def test_preset_config_sets_the_presets_values_then_the_fields():
    assert preset_config(Toy, PRESETS, "small", dict(depth=5)) == Toy(preset="small", width=2, depth=5, seed=5)
    assert preset_config(Toy, PRESETS, None, dict(seed=3)) == Toy(seed=3)
    with pytest.raises(ValueError, match="unknown preset 'big'; choose one of small, same"):
        preset_config(Toy, PRESETS, "big", {})
    with pytest.raises(ValueError, match="first argument"):
        preset_config(Toy, PRESETS, "small", dict(preset="small"))


def test_a_configuration_holding_none_of_its_presets_values_is_refused():
    with pytest.raises(ValueError, match=r"preset 'small' is named but 3 of the 3 values it sets hold the class's "
                                         r"defaults \(width 8 \(the preset's: 2\), depth 2 \(the preset's: 1\), "
                                         r"seed 0 \(the preset's: 5\)\): .* make it with HOW"):
        check_preset_applied(Toy(preset="small"), PRESETS, "HOW")
    # one value given as the preset has it, the other two the class's defaults
    with pytest.raises(ValueError, match=r"2 of the 3 values .*\(depth 2 .*, seed 0 "):
        check_preset_applied(Toy(preset="small", width=2), PRESETS, "HOW")
    for fine in (Toy(), Toy(preset="small", width=2, depth=1, seed=5), Toy(preset="small", width=5, depth=1, seed=5),
                 Toy(preset="small", width=3, depth=1),  # one of the preset's values, one given, one default: 1 vs 1
                 dataclasses.replace(preset_config(Toy, PRESETS, "small", {}), seed=4),
                 Toy(preset="same"), Toy(preset="not one of them")):  # "same" sets only a default: nothing tells
        check_preset_applied(fine, PRESETS, "HOW")


def test_rl_curl():
    from rl_curl.config import Config, from_cli
    from rl_curl.config import preset_config as rl_preset

    made = rl_preset("cpu", task="reacher-easy", seed=1, batch_size=32)
    assert made == from_cli(["--preset", "cpu", "--task", "reacher-easy", "--seed", "1", "--batch-size", "32"])
    assert made.resolved().num_filters == 16 and made.resolved().batch_size == 32
    with pytest.raises(ValueError, match=r"preset 'cpu' is named but .* rl_curl\.config\.preset_config\(NAME"):
        Config(preset="cpu", task="reacher-easy").resolved()


def test_nlp_qt():
    from nlp_qt.config import Config, from_cli
    from nlp_qt.config import preset_config as qt_preset
    from nlp_qt.train import validate

    made = qt_preset("demo", objective="debiased", tau_plus=0.01)
    assert made == from_cli(["--preset", "demo", "--objective", "debiased", "--tau-plus", "0.01"])
    validate(made)
    with pytest.raises(ValueError, match=r"preset 'cpu' is named but .* nlp_qt\.config\.preset_config\(NAME"):
        validate(Config(preset="cpu", corpus="nlp_qt/data/books"))  # the corpus given, the preset's other values not


def test_fewshot():
    from fewshot.config import FewShotConfig, ImageConfig, PuConfig, from_cli
    from fewshot.config import preset_config as fs_preset

    made = fs_preset("cpu", encoder="minilm", n_labeled=10)
    assert made == from_cli(["--preset", "cpu", "--encoder", "minilm", "--n-labeled", "10"])
    made.validate()
    FewShotConfig(preset="paper").validate()  # the class's defaults are the paper preset's
    with pytest.raises(ValueError, match="unknown preset 'gpu'; choose one of paper, cpu"):
        fs_preset("gpu")
    with pytest.raises(ValueError, match="unknown preset 'cpu': image data has none"):
        fs_preset("cpu", ImageConfig)
    for cls in (FewShotConfig, PuConfig):
        with pytest.raises(ValueError, match=r"preset 'cpu' is named but .* fewshot\.config\.preset_config\(NAME"):
            cls(preset="cpu").validate()
