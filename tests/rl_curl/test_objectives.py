"""The table of auxiliary objectives (rl_curl.objectives) is what every other place reads."""

import typing

import pytest

from rl_curl import objectives as O
from rl_curl.config import Config

from .conftest import tiny_config


def test_the_cli_choices_are_the_table():
    hints = typing.get_type_hints(Config, include_extras=True)
    assert set(typing.get_args(hints["aux"])) == set(O.OBJECTIVES)


@pytest.mark.parametrize("spec,folder,label", [
    ("curl", "curl", "biased (CURL)"),
    ("none", "none", "pixel SAC (no aux)"),
    ("debiased:0.05:1", "debiased-tau0.05", "debiased τ⁺=0.05, M=1"),
    ("debiased:0.1:2", "debiased-tau0.1-M2", "debiased τ⁺=0.1, M=2"),
    ("hard:0.1:1:0.5", "hard-tau0.1-beta0.5", "hard β=0.5 τ⁺=0.1, M=1"),
    ("debiased:-0:1", "debiased-tau0", "debiased τ⁺=0, M=1"),  # -0 is 0 (it made a folder debiased-tau-0 of its own)
    ("hard:0:1:-0", "hard-tau0-beta0", "hard β=0 τ⁺=0, M=1"),
])
def test_spec_folder_and_label_agree_for_each_objective(spec, folder, label):
    fields = O.parse_spec(spec)
    cfg = tiny_config(**{k: v for k, v in fields.items()}, task="cartpole-swingup").resolved()
    assert cfg.objective_name() == folder and f"/{folder}/seed0" in cfg.output_dir
    assert O.label({**O.NEUTRAL, **fields}) == label
    assert O.cli_flags(fields)[:2] == ["--aux", fields["aux"]]


def test_rows_follow_dcl_table3_order():
    rows = [O.parse_spec(s) for s in ("none", "debiased:0.1:2", "hard:0.1:1:1", "debiased:0.01:1", "curl")]
    ordered = sorted(rows, key=lambda r: O.order({**O.NEUTRAL, **r}))
    assert [r["aux"] for r in ordered] == ["curl", "debiased", "debiased", "hard", "none"]


@pytest.mark.parametrize("aux,field,value,message", [
    ("curl", "tau_plus", 0.1, "--tau-plus 0.1 only applies to --aux debiased or hard or cpc; --aux curl takes "
                              "--tau-plus 0"),
    ("debiased", "beta", 0.5, "--beta 0.5 only applies to --aux hard; --aux debiased takes --beta 1"),
    ("none", "positives", 2, "--positives 2 only applies to --aux curl or debiased or hard; --aux none takes "
                             "--positives 1"),
    # pixel SAC has no auxiliary update: the option was recorded and changed nothing (log.csv byte-equal)
    ("none", "aux_update_every", 7, "--aux-update-every 7 only applies to --aux curl or debiased or hard or cpc; "
                                    "--aux none takes --aux-update-every 1"),
])
def test_a_hyperparameter_the_objective_ignores_is_refused(aux, field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiny_config(aux=aux, **{field: value}).resolved()


def test_an_encoder_lr_typed_for_pixel_sac_is_refused_on_the_command_line():
    """--aux none has no auxiliary update, so --encoder-lr was recorded in config.json and used nowhere. The
    command line refuses it; a resolved configuration (the task's value filled in, as a saved run's) loads."""
    from rl_curl.config import from_cli

    with pytest.raises(ValueError, match=r"--encoder-lr 0.5 only applies to --aux curl or debiased or hard or cpc"):
        from_cli(["--aux", "none", "--encoder-lr", "0.5"])
    with pytest.raises(ValueError, match="--aux none has no auxiliary update"):
        from_cli(["--aux=none", "--encoder-lr=0.5"])
    with pytest.raises(ValueError, match="--aux none has no auxiliary update"):  # the spelling tyro takes too
        from_cli(["--aux", "none", "--encoder_lr", "0.5"])
    assert from_cli(["--aux", "curl", "--encoder-lr", "0.5"]).encoder_lr == 0.5
    from rl_curl.together import configs_from_cli  # runs trained together: each run's own objective (the base's,

    with pytest.raises(ValueError, match="--aux none has no auxiliary update"):  # curl, was checked and let it by)
        configs_from_cli(["--objectives", "curl", "none", "--seeds", "0", "--", "--encoder-lr", "5e-4"])
    with pytest.raises(ValueError, match="--aux none has no auxiliary update"):
        configs_from_cli(["--objectives", "curl", "none", "--seeds", "0", "--", "--encoder_lr=5e-4"])
    assert [c.encoder_lr for c in configs_from_cli(["--objectives", "curl", "debiased:0.05:1", "--seeds", "0", "--",
                                                    "--encoder-lr", "5e-4"])] == [5e-4, 5e-4]
    saved = Config(aux="none").resolved()
    assert Config(**{**saved.__dict__}).resolved().encoder_lr == saved.encoder_lr == 1e-3


@pytest.mark.parametrize("field", ["lr", "encoder_lr", "alpha_lr"])
@pytest.mark.parametrize("value", [-1e-3, float("nan"), float("inf")])
def test_a_learning_rate_below_0_or_not_finite_is_refused_by_name(field, value):
    """torch's "Invalid learning rate: -0.001" named none of the three options (and NaN and inf passed it)."""
    flag = "--" + field.replace("_", "-")
    with pytest.raises(ValueError, match=rf"invalid config: {flag} must be a number >= 0, got {value}"):
        Config(**{field: value}).resolved()
    Config(**{field: 0.0}).resolved()  # 0: nothing trains, a check that nothing else moves the weights


@pytest.mark.parametrize("spec", ["infonce", "debiased", "debiased:2:1", "debiased:0.1:3", "hard:0.1:1", "curl:1"])
def test_bad_specs_are_refused(spec):
    with pytest.raises(ValueError, match="objective|unknown"):
        O.parse_spec(spec)


def test_the_cli_choices_are_the_registry_in_its_order_and_help_lists_them(capsys):
    """--aux's type is built from rl_curl.objectives.OBJECTIVES, and --help lists each entry's help line."""
    from rl_curl.config import from_cli

    from ..registry_entry import check_choices_and_help

    check_choices_and_help(capsys, Config, from_cli, {"aux": O.OBJECTIVES})


def test_a_new_registry_entry_is_a_new_aux_with_its_loss(tmp_path):
    """Adding an objective is one entry of OBJECTIVES: the copy below has one more (twice the debiased loss), and
    the command line, --help, validation, folder names, specs and the agent's loss all take it."""
    from ..registry_entry import run_with_entry

    out = run_with_entry(tmp_path, "rl_curl", "OBJECTIVES", '''
        Objective("toy", "toy", 9, "a toy loss: twice the debiased one", ("tau_plus", "positives"),
                  loss=lambda pos, neg, tau_plus, beta, floor, host_checks: 2 * debiased_nce_from_logits(
                      pos, neg, tau_plus=tau_plus, log_floor=floor, host_checks=host_checks),
                  label_fields=("tau_plus", "positives"))''', '''
        import contextlib, io, torch, rl_curl
        from rl_curl import objectives as O
        from rl_curl.config import from_cli

        cfg = from_cli(["--aux", "toy", "--tau-plus", "0.1", "--preset", "cpu"]).resolved()
        assert cfg.aux == "toy" and cfg.image_size == 64 and "/toy-tau0.1/seed0" in cfg.output_dir
        try:
            from_cli(["--aux", "toy", "--beta", "2"]).resolved()
        except ValueError as err:
            assert "--beta 2 only applies to --aux hard; --aux toy takes --beta 1" in str(err), err
        else:
            raise AssertionError("beta was not refused")
        assert O.cli_flags(O.parse_spec("toy:0.1:2")) == ["--aux", "toy", "--tau-plus", "0.1", "--positives", "2"]
        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
            from_cli(["--help"])
        assert "{curl,debiased,hard,cpc,none,toy}" in help_text.getvalue()
        assert "a toy loss: twice the debiased one" in help_text.getvalue()
        torch.manual_seed(0)
        pos, neg = torch.randn(6, 1), torch.randn(6, 5)
        assert torch.equal(O.auxiliary_loss(pos, neg, "toy", 0.1), 2 * O.auxiliary_loss(pos, neg, "debiased", 0.1))
        print(rl_curl.__file__)
        ''')
    assert "rl_curl/__init__.py" in out
