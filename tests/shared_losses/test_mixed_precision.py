"""The losses under torch.autocast (mixed-precision training): their scores were computed in bfloat16 / float16 again
after the inputs were widened (puNCE 0.09 off the float64 value at temperature 0.01), and supcon, puNCE and SCL-PU
returned a half-precision loss. SPEC: float32 or wider, whatever the inputs."""

import pytest
import torch

import shared_losses as L


def _views():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 32, generator=g, dtype=torch.float64)
    return a, a + 0.3 * torch.randn(64, 32, generator=g, dtype=torch.float64)


def _cases():
    a, b = _views()
    src = torch.arange(64).repeat(2)
    roles = torch.tensor([1] * 4 + [-1] * 4 + [0] * 56).repeat(2)
    labels = (torch.arange(64) % 3).repeat(2)
    feats = torch.cat([a, b])
    return {
        "info_nce": lambda x, y: L.info_nce(x, y, temperature=0.05),
        "debiased_nce": lambda x, y: L.debiased_nce(x, y, tau_plus=0.1, temperature=0.5),
        "debiased_nce M=2": lambda x, y: L.debiased_nce(torch.stack([x, y, y.flip(1)], 1), tau_plus=0.1,
                                                        temperature=0.1),
        "hard_negative_nce": lambda x, y: L.hard_negative_nce(x, y, tau_plus=0.1, beta=1.0, temperature=0.1),
        "punce_loss": lambda x, y: L.punce_loss(torch.cat([x, y]), src, roles, prior=0.3, temperature=0.01),
        "supcon_loss": lambda x, y: L.supcon_loss(torch.cat([x, y]), labels, temperature=0.05, source_ids=src),
        "scl_pu_loss": lambda x, y: L.scl_pu_loss(torch.cat([x, y]), src, roles, temperature=0.05),
        "cpc_nce": lambda x, y: L.cpc_nce(x.reshape(4, 16, 32), y.reshape(4, 16, 1, 32).expand(4, 16, 2, 32)
                                          .contiguous(), temperature=0.1),
    }, a, b, feats


@pytest.mark.parametrize("name", list(_cases()[0]))
@pytest.mark.parametrize("dtype, tol", [(torch.bfloat16, 1e-4), (torch.float16, 1e-4)])
def test_a_loss_under_autocast_is_computed_and_returned_in_float32(name, dtype, tol):
    cases, a, b, _ = _cases()
    loss = cases[name]
    want = loss(a, b).item()  # float64
    with torch.autocast("cpu", dtype=dtype):
        got = loss(a.float(), b.float())
    assert got.dtype == torch.float32, name
    assert abs(got.item() - want) < tol * max(1.0, abs(want)), (name, got.item(), want)


def test_autocast_is_on_again_after_the_loss():
    a, b = _views()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        L.info_nce(a.float(), b.float())
        assert torch.is_autocast_enabled("cpu") and (a.float() @ b.float().T).dtype == torch.bfloat16


@pytest.mark.parametrize("name, value, message", [
    ("tau_plus", "0.1", "tau_plus must be a number, got str"),
    ("tau_plus", torch.tensor(0.1, requires_grad=True), "tau_plus is a tensor that requires grad"),
    ("tau_plus", float("nan"), r"tau_plus .* must be in \[0, 1\), got nan"),
    ("beta", "1", "beta must be a number, got str"),
    ("beta", torch.tensor([1.0, 2.0]), r"beta must be one number, got a tensor of shape \(2,\)"),
])
def test_tau_plus_and_beta_are_numbers_as_temperature_is(name, value, message):
    a, b = _views()
    with pytest.raises(ValueError, match=message):
        L.hard_negative_nce(a, b, **{"tau_plus": 0.1, "beta": 1.0, name: value})
    L.hard_negative_nce(a, b, tau_plus=torch.tensor(0.1), beta=1)  # a detached tensor and an int pass


def test_a_modules_config_with_a_tensor_log_floor_goes_to_json():
    """get_config_dict() returned the tensor itself, which json.dumps refuses (sentence-transformers saves the dict
    beside a model)."""
    import json

    m = L.DebiasedNCELoss(tau_plus=0.1, temperature=0.5, log_floor=torch.tensor([-2.0, -1.5]))
    assert json.loads(json.dumps(m.get_config_dict()))["log_floor"] == [-2.0, -1.5]


def test_the_logit_level_losses_without_host_checks_take_vmap_and_a_full_graph():
    """docs/losses.md: the *_from_logits functions with host_checks=False read nothing on the host (autocast's switch
    included), so vmap and torch.compile(fullgraph=True) take them."""
    from torch.func import vmap

    g = torch.Generator().manual_seed(0)
    pos, neg = torch.randn(5, 4, 1, generator=g), torch.randn(5, 4, 7, generator=g)

    def loss(p, n):
        return L.debiased_nce_from_logits(p, n, tau_plus=0.1, host_checks=False)

    batched = vmap(loss)(pos, neg)
    assert torch.allclose(batched, torch.stack([loss(p, n) for p, n in zip(pos, neg)]))
    whole = torch.compile(loss, fullgraph=True, backend="eager")
    assert torch.allclose(whole(pos[0], neg[0]), loss(pos[0], neg[0]))
