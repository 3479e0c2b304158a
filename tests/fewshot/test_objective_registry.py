"""fewshot's registries (fewshot.objectives): ALL_OBJECTIVES for --objective (text) and ENCODER_LOSSES for
--contrastive (image data) are the command line's choices, its --help and the losses; adding a loss is one entry."""

import pytest
import torch

from fewshot import objectives as O
from fewshot.config import FewShotConfig, ImageConfig, PuConfig, from_cli
from shared_losses import debiased_nce, info_nce, punce_loss, scl_pu_loss

from ..registry_entry import check_choices_and_help, run_with_entry


def test_the_cli_choices_are_the_registries_in_their_order_and_help_lists_them(capsys):
    check_choices_and_help(capsys, FewShotConfig, from_cli, {"objective": O.ALL_OBJECTIVES})
    check_choices_and_help(capsys, ImageConfig, lambda argv: from_cli(["images", *argv]),
                           {"contrastive": O.ENCODER_LOSSES})
    assert FewShotConfig().objective == O.DEFAULT_OBJECTIVE == PuConfig.objective
    assert O.ALL_OBJECTIVES.get(O.DEFAULT_OBJECTIVE).reads_unlabeled


def test_image_runs_name_their_pipeline_when_they_refuse_an_objective():
    with pytest.raises(ValueError, match=r"--objective is not an option of the images pipeline; it belongs to "
                                         r"`python -m fewshot.train text`"):
        from_cli(["images", "--objective", "ce"])


def test_encoder_losses_are_the_shared_losses_on_two_views():
    """What fewshot.image_run's contrastive_loss computed for each --contrastive, bit for bit."""
    torch.manual_seed(0)
    B = 6
    z = torch.nn.functional.normalize(torch.randn(2 * B, 8), dim=1)
    roles = torch.tensor([1, -1, 0, 0, 1, 0]).repeat(2)
    src = torch.arange(B).repeat(2)
    want = {"punce": punce_loss(z, src, roles, prior=0.4, temperature=0.5),
            "infonce": info_nce(z[:B], z[B:], temperature=0.5),
            "dcl": debiased_nce(z[:B], z[B:], temperature=0.5, tau_plus=0.1),
            "scl": scl_pu_loss(z, src, roles, temperature=0.5)}
    assert set(want) == {n for n, e in O.ENCODER_LOSSES.items() if e.loss is not None and e.inputs == "views"}
    for name, value in want.items():
        assert torch.equal(O.encoder_loss(name, z, roles, 0.4, 0.5, 0.1), value), name
    for name in ("none", "cpc"):  # no loss; a loss over the patch grid, not two views (tests/fewshot/test_image_cpc.py)
        with pytest.raises(ValueError, match="--contrastive must be one of punce, infonce, dcl, scl for a loss over "
                                             "two views"):
            O.encoder_loss(name, z, roles, 0.4, 0.5, 0.1)


def test_a_new_registry_entry_is_a_new_objective_with_its_loss(tmp_path):
    """Adding a text objective is one entry of ALL_OBJECTIVES: the copy below has one more (CE + twice SupCon), and
    the command line, --help, the run's reading of it (views, unlabeled draws) and fewshot_loss all take it."""
    out = run_with_entry(tmp_path, "fewshot", "ALL_OBJECTIVES", '''
        Objective("ce+toy", "CE + toy", 9, "a toy term: twice SupCon", loss=lambda **kw: 2 * _supcon_term(**kw),
                  views=2)''', '''
        import contextlib, io, torch, fewshot
        from fewshot import objectives as O
        from fewshot.config import from_cli

        cfg = from_cli(["--objective", "ce+toy", "--preset", "cpu", "--dataset", "reuters"])
        cfg.validate()
        assert cfg.objective == "ce+toy" and O.OBJECTIVES[-1] == "ce+toy" and O.ALL_OBJECTIVES.get("ce+toy").views == 2
        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
            from_cli(["--help"])
        assert "{probe,setfit,ce,ce+scl,ce+punce,ce+toy}" in help_text.getvalue()
        assert "a toy term: twice SupCon" in help_text.getvalue()
        torch.manual_seed(0)
        logits, z1, z2 = torch.randn(8, 2), torch.randn(8, 4), torch.randn(8, 4)
        labels, roles = torch.tensor([0, 1, 0, 1, 0, 0, 1, 1]), torch.tensor([-1, 1, -1, 1, 0, 0, 0, 0])
        toy, parts = O.fewshot_loss("ce+toy", logits, z1, z2, labels, roles, 0.5, 0.3, 0.4)
        scl = O.fewshot_loss("ce+scl", logits, z1, z2, labels, roles, 0.5, 0.3, 0.4)[1]["cl"]
        assert torch.equal(parts["cl"], 2 * scl) and torch.equal(toy, 0.5 * parts["ce"] + 0.5 * parts["cl"])
        print(fewshot.__file__)
        ''')
    assert "fewshot/__init__.py" in out


def test_a_new_encoder_loss_entry_is_a_new_contrastive_choice(tmp_path):
    """Image data: one entry of ENCODER_LOSSES is a new --contrastive, with its loss."""
    out = run_with_entry(tmp_path, "fewshot", "ENCODER_LOSSES", '''
        EncoderLoss("toy", "toy", 9, "a toy loss: twice InfoNCE", loss=lambda **kw: 2 * _infonce_views(**kw))''', '''
        import torch, fewshot
        from fewshot import objectives as O
        from fewshot.config import from_cli

        cfg = from_cli(["images", "--dataset", "mnist", "--contrastive", "toy", "--positive-classes", "0", "2"])
        assert cfg.contrastive == "toy" and cfg.PIPELINE == "images"
        torch.manual_seed(0)
        z, roles = torch.randn(12, 4), torch.tensor([1, 0, 0, 1, 0, 0]).repeat(2)
        assert torch.equal(O.encoder_loss("toy", z, roles, 0.3, 0.5, 0.1),
                           2 * O.encoder_loss("infonce", z, roles, 0.3, 0.5, 0.1))
        print(fewshot.__file__)
        ''')
    assert "fewshot/__init__.py" in out
