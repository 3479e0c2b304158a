import math

import pytest
import torch

from nlp_qt.model import ModelConfig, QuickThought
from nlp_qt.objectives import compute_loss, score_matrix
from nlp_qt.vocab import Vocab

DOCS = torch.tensor([0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 4])


def _uv(seed=0, n=12, d=8, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(n, d, generator=g)).requires_grad_(), scale * torch.randn(n, d, generator=g)


def _s2v_reference(u, v, docs, self_zero=False):
    """Loop version of QT's loss: soft targets 0.5/0.5 (1 on a lone neighbour)."""
    s = u @ v.T
    total, count = 0.0, 0
    for i in range(len(docs)):
        nbs = [j for j in (i - 1, i + 1) if 0 <= j < len(docs) and docs[j] == docs[i]]
        if not nbs:
            continue
        row = s[i].clone()
        row[i] = 0.0 if self_zero else -math.inf
        logp = torch.log_softmax(row, 0)
        total = total - sum(logp[j] for j in nbs) / len(nbs)
        count += 1
    return total / count


def test_qt_matches_loop_reference_and_drops_isolated():
    u, v = _uv()
    assert torch.allclose(compute_loss(u, v, DOCS, objective="qt"), _s2v_reference(u, v, DOCS), atol=1e-6)
    assert torch.allclose(compute_loss(u, v, DOCS, objective="qt", self_score="zero"),
                          _s2v_reference(u, v, DOCS, self_zero=True), atol=1e-6)


@pytest.mark.parametrize("floor", ["none", "min_negative"])
@pytest.mark.parametrize("scale", [0.3, 2.0])
def test_debiased_tau0_equals_qt_loss_and_gradient(floor, scale):
    """In float64 with a tight tolerance, and at a small scale where every candidate weighs in the denominators:
    at scale 2 alone (scores of 10-20) the neighbours' terms were negligible, and leaving the other neighbour out
    of a turn's negatives moved the loss by 1.8e-8, under the old tolerance of 1e-5."""
    u, v = _uv(1, scale=scale)
    u, v = u.detach().double().requires_grad_(), v.double().requires_grad_()
    a = compute_loss(u, v, DOCS, objective="qt")
    ga = torch.autograd.grad(a, (u, v))
    b = compute_loss(u, v, DOCS, objective="debiased", tau_plus=0.0, log_floor=floor)
    gb = torch.autograd.grad(b, (u, v))
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)


def test_temperature_divides_the_scores():
    """score_matrix is u v^T / t, and the loss at temperature t is the loss of u / t at temperature 1."""
    u, v = _uv(3, scale=0.5)
    u = u.detach()
    torch.testing.assert_close(score_matrix(u, v, 0.5), 2.0 * (u @ v.T))
    for objective in ("qt", "debiased", "hard"):
        kw = {} if objective == "qt" else {"tau_plus": 0.1}
        torch.testing.assert_close(compute_loss(u, v, DOCS, objective=objective, temperature=0.5, **kw),
                                   compute_loss(2.0 * u, v, DOCS, objective=objective, **kw))


def test_debiased_and_hard_differ_and_hard_beta0_is_debiased():
    u, v = _uv(2)
    d = compute_loss(u, v, DOCS, objective="debiased", tau_plus=0.1)
    h0 = compute_loss(u, v, DOCS, objective="hard", tau_plus=0.1, beta=0.0)
    h1 = compute_loss(u, v, DOCS, objective="hard", tau_plus=0.1, beta=1.0)
    q = compute_loss(u, v, DOCS, objective="qt")
    assert torch.allclose(d, h0, atol=1e-6)
    assert not torch.allclose(d, q) and not torch.allclose(h1, d)


def test_floor_min_negative_is_used_for_unbounded_scores():
    # tau_plus close to 1 drives the unfloored estimate below 0: g is clamped at the smallest
    # negative exp-score of each turn's anchor (min over both turns), so the loss stays finite
    u, v = _uv(3, n=6)
    docs = torch.zeros(6, dtype=torch.long)
    loss = compute_loss(u, v, docs, objective="debiased", tau_plus=0.95)
    s = (u @ v.T).detach()
    total = 0.0
    for i in range(6):
        pos_idx = [j for j in (i - 1, i + 1) if 0 <= j < 6]
        negs_per_turn = [[s[i, k] for k in range(6) if k not in (i, j)] for j in pos_idx]
        floor = min(min(x) for x in negs_per_turn)
        mean_pos = sum(torch.exp(s[i, j]) for j in pos_idx) / len(pos_idx)
        li = 0.0
        for j, negs in zip(pos_idx, negs_per_turn):
            n = len(negs)
            g = (sum(torch.exp(x) for x in negs) / n - 0.95 * mean_pos) / 0.05
            g = max(g, torch.exp(floor))
            li += -torch.log(torch.exp(s[i, j]) / (torch.exp(s[i, j]) + n * g))
        total += li / len(pos_idx)
    assert torch.allclose(loss.detach(), total / 6, atol=1e-4)
    assert torch.isfinite(compute_loss(u, v, docs, objective="debiased", tau_plus=0.95, log_floor="none"))


def test_anchor_subsets_match_full_batch():
    # what each process computes with gathered candidates: local anchors, global positions
    u, v = _uv(4)
    docs = torch.tensor([0] * 12)
    full = compute_loss(u, v, docs, objective="debiased", tau_plus=0.05)
    halves = [compute_loss(u[i:i + 6], v, docs, torch.arange(i, i + 6), "debiased", 0.05) for i in (0, 6)]
    assert torch.allclose(full, sum(halves) / 2, atol=1e-6)


def test_bad_arguments():
    u, v = _uv()
    with pytest.raises(ValueError, match="objective"):
        compute_loss(u, v, DOCS, objective="nope")
    with pytest.raises(ValueError, match="self_score"):
        compute_loss(u, v, DOCS, objective="debiased", self_score="zero")
    with pytest.raises(ValueError, match="no sentence"):
        compute_loss(u, v, torch.arange(12), objective="qt")
    with pytest.raises(ValueError, match="doc_ids"):
        compute_loss(u, v, DOCS[:5])
    with pytest.raises(ValueError, match="temperature"):
        score_matrix(u, v, 0.0)


@pytest.mark.parametrize("objective,tau", [("qt", 0.0), ("debiased", 0.01), ("hard", 0.01)])
def test_loss_lowers_on_a_fixed_batch(objective, tau):
    torch.manual_seed(0)
    sents = [f"sentence number {i} talks about topic {i % 3} and word{i}." for i in range(16)]
    vocab = Vocab.build(sents, 100, 16)
    model = QuickThought(ModelConfig(len(vocab), 16, 16))
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    ids, lengths = vocab.batch(sents)
    docs = torch.tensor([0] * 8 + [1] * 8)
    losses = []
    for _ in range(60):
        u, v = model(ids, lengths)
        loss = compute_loss(u, v, docs, objective=objective, tau_plus=tau)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_model_embedding_halves_are_unit_norm():
    model = QuickThought(ModelConfig(20, 8, 6, bidirectional=True))
    ids = torch.tensor([[2, 3, 4], [5, 6, 0]])
    e = model.embed(ids, torch.tensor([3, 2]))
    assert e.shape == (2, 12)
    assert torch.allclose(e[:, :6].norm(dim=1), torch.ones(2)) and torch.allclose(e[:, 6:].norm(dim=1), torch.ones(2))
    # padding does not change a sentence's encoding
    e2 = model.embed(torch.tensor([[5, 6]]), torch.tensor([2]))
    assert torch.allclose(e[1], e2[0], atol=1e-6)
    with pytest.raises(ValueError, match="even"):
        ModelConfig(20, 8, 7)


def test_the_objectives_table_is_what_the_cli_validation_and_sweep_read(tmp_path):
    """nlp_qt.objectives.OBJECTIVES is the one table (issue 16, item 4): the CLI's choices, the check of which
    hyper-parameters apply, the Table 2 sweep's folder names and row labels."""
    import typing

    from nlp_qt import objectives as O
    from nlp_qt.config import Config
    from nlp_qt.train import validate

    hints = typing.get_type_hints(Config, include_extras=True)
    assert set(typing.get_args(hints["objective"])) == set(O.OBJECTIVES)
    assert [O.folder_name("qt"), O.folder_name("debiased", 0.01), O.folder_name("hard", 0.1, 2.0)] == \
        ["qt", "debiased_0.01", "hard_0.1_b2"]
    assert [O.label("qt"), O.label("debiased", 0.01), O.label("hard", 0.1, 2.0)] == \
        ["biased (QT)", "debiased τ⁺=0.01", "hard τ⁺=0.1 β=2"]
    with pytest.raises(ValueError, match="objective must be one of qt, debiased, hard"):
        O.OBJECTIVES.get("simclr")
    ok = dict(corpus="c", output_dir=str(tmp_path / "r"))
    validate(Config(**ok, objective="hard", tau_plus=0.1, beta=2.0))
    with pytest.raises(ValueError, match="--beta 2 only applies to --objective hard; --objective debiased takes "
                                         "--beta 1"):
        validate(Config(**ok, objective="debiased", tau_plus=0.1, beta=2.0))  # silently ignored before
    with pytest.raises(ValueError, match="--tau-plus 0.1 only applies to --objective debiased or hard or cpc"):
        validate(Config(**ok, objective="qt", tau_plus=0.1))


def test_qt_table2_takes_its_folders_and_rows_from_the_table():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("qt_table2", Path(__file__).parents[2] / "scripts" / "qt_table2.py")
    t2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t2)
    a = t2.parse_args(["--corpus", "c", "--data", "d", "--out", "o", "--seeds", "0", "--tau-plus", "0.01", "0.1"])
    assert [(j["name"], str(j["dir"])) for j in t2.jobs(a)] == [
        ("biased (QT)", "o/qt/seed0"), ("debiased τ⁺=0.01", "o/debiased_0.01/seed0"),
        ("debiased τ⁺=0.1", "o/debiased_0.1/seed0")]


def test_the_cli_choices_are_the_registry_in_its_order_and_help_lists_them(capsys):
    """--objective's type is built from nlp_qt.objectives.OBJECTIVES, and --help lists each entry's help line."""
    from nlp_qt import objectives as O
    from nlp_qt.config import Config, from_cli

    from ..registry_entry import check_choices_and_help

    check_choices_and_help(capsys, Config, from_cli, {"objective": O.OBJECTIVES})


def test_self_score_is_a_setting_of_the_registry():
    """self_score zero applies to the objectives whose entry uses it (qt): check_fields refuses it elsewhere."""
    from nlp_qt import objectives as O

    O.OBJECTIVES.check_fields("qt", {"tau_plus": 0.0, "beta": 1.0, "self_score": "zero"})
    with pytest.raises(ValueError, match="--self-score zero only applies to --objective qt; --objective hard takes "
                                         "--self-score exclude"):
        O.OBJECTIVES.check_fields("hard", {"tau_plus": 0.1, "beta": 1.0, "self_score": "zero"})


def test_a_new_registry_entry_is_a_new_objective_with_its_loss(tmp_path):
    """Adding an objective is one entry of OBJECTIVES: the copy below has one more (twice the debiased loss), and
    the command line, --help, validation, the sweep's folder names and compute_loss all take it."""
    from ..registry_entry import run_with_entry

    out = run_with_entry(tmp_path, "nlp_qt", "OBJECTIVES", '''
        Objective("toy", "toy", 9, "a toy loss: twice the debiased one", ("tau_plus",),
                  loss=lambda **kw: 2 * _debiased(**kw))
        ''', '''
        import contextlib, io, torch, nlp_qt
        from nlp_qt import objectives as O
        from nlp_qt.config import from_cli
        from nlp_qt.train import validate

        cfg = from_cli(["--objective", "toy", "--tau-plus", "0.1", "--corpus", "c", "--output-dir", "r"])
        validate(cfg)
        assert cfg.objective == "toy" and O.folder_name("toy", 0.1) == "toy_0.1" and O.label("toy", 0.1) == "toy τ⁺=0.1"
        try:
            validate(from_cli(["--objective", "toy", "--beta", "2", "--corpus", "c", "--output-dir", "r"]))
        except ValueError as err:
            assert "--beta 2 only applies to --objective hard; --objective toy takes --beta 1" in str(err), err
        else:
            raise AssertionError("beta was not refused")
        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
            from_cli(["--help"])
        assert "{qt,debiased,hard,cpc,toy}" in help_text.getvalue()
        assert "a toy loss: twice the debiased one" in help_text.getvalue()
        torch.manual_seed(0)
        u, v, docs = torch.randn(8, 4), torch.randn(8, 4), torch.tensor([0, 0, 0, 1, 1, 1, 1, 2])
        got = O.compute_loss(u, v, docs, objective="toy", tau_plus=0.1)
        assert torch.equal(got, 2 * O.compute_loss(u, v, docs, objective="debiased", tau_plus=0.1))
        print(nlp_qt.__file__)
        ''')
    assert "nlp_qt/__init__.py" in out
