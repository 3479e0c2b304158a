"""The one registry type the applications' objectives and losses are declared with (shared_losses.training.registry):
lookup with a one-line error, the command-line choices, --help lines, and the check that refuses a hyper-parameter
an entry does not use."""

from __future__ import annotations

import typing
from dataclasses import dataclass

import pytest

from shared_losses.training.registry import Entry, Registry, flag


@dataclass(frozen=True)
class Loss(Entry):
    loss: typing.Callable | None = None


def registry() -> Registry[Loss]:
    return Registry("--objective", (
        Loss("plain", "InfoNCE", 1, "the plain loss", loss=lambda *, x: x),
        Loss("debiased", "debiased", 0, "the debiased loss (--tau-plus)", ("tau_plus",), loss=lambda *, x: 2 * x),
        Loss("hard", "hard", 2, "the hard-negative loss (--tau-plus, --beta)", ("tau_plus", "beta")),
    ), neutral={"tau_plus": 0.0, "beta": 1.0, "self_score": "exclude"})


def test_reads_like_a_dict_in_declaration_order():
    reg = registry()
    assert list(reg) == list(reg.keys()) == ["plain", "debiased", "hard"] and len(reg) == 3
    assert "hard" in reg and "simclr" not in reg and reg["debiased"].label == "debiased"
    assert [n for n, _ in reg.items()] == [e.name for e in reg.values()] == list(reg)
    assert [e.name for e in reg.ranked()] == ["debiased", "plain", "hard"]
    assert reg.where(loss=None) == ("hard",)
    assert reg.get("debiased").loss(x=3) == 6  # the loss is reached through the entry, with keywords


def test_an_unknown_name_is_one_line_naming_the_option_and_choices():
    with pytest.raises(ValueError) as err:
        registry().get("simclr")
    assert str(err.value) == "--objective must be one of plain, debiased, hard, got 'simclr'"


def test_the_choices_are_a_literal_of_the_names_and_help_lists_every_entry():
    reg = registry()
    assert typing.get_args(reg.choices) == ("plain", "debiased", "hard")
    text = reg.help_text("pkg.objectives.OBJECTIVES")
    assert text.splitlines() == ["choices of --objective (pkg.objectives.OBJECTIVES):",
                                 "  plain     the plain loss",
                                 "  debiased  the debiased loss (--tau-plus)",
                                 "  hard      the hard-negative loss (--tau-plus, --beta)"]


def test_a_setting_the_entry_does_not_use_is_refused_naming_who_uses_it():
    reg = registry()
    reg.check_fields("hard", {"tau_plus": 0.1, "beta": 2.0})
    reg.check_fields("plain", {"tau_plus": 0.0})  # neutral values are fine
    reg.check_fields("plain", {})  # so are settings left out
    with pytest.raises(ValueError) as err:
        reg.check_fields("plain", {"tau_plus": 0.1})
    assert str(err.value) == "--tau-plus 0.1 only applies to --objective debiased or hard; --objective plain takes " \
                             "--tau-plus 0"
    with pytest.raises(ValueError, match="--beta 0.5 only applies to --objective hard; --objective debiased takes "
                                         "--beta 1"):
        reg.check_fields("debiased", {"tau_plus": 0.1, "beta": 0.5})
    with pytest.raises(ValueError, match="--self-score zero applies to no --objective; --objective hard takes "
                                         "--self-score exclude"):
        reg.check_fields("hard", {"self_score": "zero"})  # a setting no entry uses
    with pytest.raises(ValueError, match="--objective must be one of"):
        reg.check_fields("simclr", {})


def test_a_registry_refuses_two_entries_of_one_name_and_a_setting_without_a_neutral_value():
    with pytest.raises(ValueError, match="--aux: two entries are named 'a'"):
        Registry("--aux", (Entry("a", "A", 0), Entry("a", "A again", 1)))
    with pytest.raises(ValueError, match="--aux b: uses beta, which the registry has no neutral value for"):
        Registry("--aux", (Entry("b", "B", 0, uses=("beta",)),), neutral={"tau_plus": 0.0})


def test_flag_spells_a_field_as_its_option():
    assert flag("tau_plus") == "--tau-plus" and flag("beta") == "--beta"
