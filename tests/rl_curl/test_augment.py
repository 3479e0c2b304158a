import pytest
import torch

from rl_curl.augment import center_crop, crop_at, random_crop


def test_random_crop_is_a_window_within_bounds():
    torch.manual_seed(0)
    B, C, H, S = 64, 9, 12, 8
    # Pixel value encodes its position, so each crop's offset can be read back.
    pos = (torch.arange(H)[:, None] * H + torch.arange(H)[None, :]).to(torch.uint8)
    x = pos.expand(B, C, H, H).clone()
    out = random_crop(x, S)
    assert out.shape == (B, C, S, S) and out.dtype == torch.uint8
    tops, lefts = out[:, 0, 0, 0] // H, out[:, 0, 0, 0] % H
    assert tops.min() >= 0 and tops.max() <= H - S and lefts.min() >= 0 and lefts.max() <= H - S
    for b in range(B):
        t, l = int(tops[b]), int(lefts[b])
        assert torch.equal(out[b], x[b, :, t:t + S, l:l + S])
    # Offsets vary over the batch and reach both extremes with 64 draws over 5 values.
    assert set(tops.tolist()) == set(range(H - S + 1))


def test_crop_at_extremes_and_center():
    x = torch.arange(2 * 3 * 10 * 10).view(2, 3, 10, 10)
    out = crop_at(x, torch.tensor([0, 2]), torch.tensor([2, 0]), 8)
    assert torch.equal(out[0], x[0, :, 0:8, 2:10]) and torch.equal(out[1], x[1, :, 2:10, 0:8])
    assert torch.equal(center_crop(x, 8), x[..., 1:9, 1:9])


def test_crop_too_large_is_refused():
    with pytest.raises(ValueError, match="larger"):
        random_crop(torch.zeros(1, 3, 8, 8), 9)
    with pytest.raises(ValueError, match="B, C, H, W"):
        random_crop(torch.zeros(3, 8, 8), 4)
