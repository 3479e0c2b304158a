"""rl_curl.curve: a run's curve.png, plotted without pyplot (the caller's backend left alone, threads at once)."""

import threading

import matplotlib
import numpy as np
import pytest
from PIL import Image

from rl_curl.curve import plot_curve, read_eval


def write_eval(path, steps, returns):
    path.write_text("env_step,eval_return_mean,eval_return_std\n"
                    + "".join(f"{s},{r},1.0\n" for s, r in zip(steps, returns)))
    return path


def test_the_curve_is_the_runs_evaluations_and_leaves_the_callers_backend_alone(tmp_path):
    csv = write_eval(tmp_path / "eval.csv", [1000, 2000, 3000], [10.5, 80.0, 120.25])
    x, y = read_eval(csv)
    assert x.tolist() == [1000, 2000, 3000] and y.tolist() == [10.5, 80.0, 120.25]
    before = matplotlib.get_backend()
    try:
        matplotlib.use("pdf")  # a user's backend (a notebook's, say): plotting a run must not switch it to Agg
        png = plot_curve(csv, tmp_path / "curve.png", title="cartpole")
        assert matplotlib.get_backend() == "pdf"
    finally:
        matplotlib.use(before)
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (500, 350)  # 5 x 3.5 inches at 100 dpi


def test_runs_trained_together_plot_their_curves_at_once(tmp_path):
    """Runs trained together in one process end at the same step and plot from their threads at the same time."""
    errors, pngs = [], []

    def one(i):
        try:
            csv = write_eval(tmp_path / f"eval{i}.csv", [1000, 2000], [float(i), float(10 * i)])
            pngs.append(plot_curve(csv, tmp_path / f"curve{i}.png", title=f"run {i}"))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(pngs) == 6
    images = []
    for p in sorted(pngs):
        with Image.open(p) as im:
            images.append(np.asarray(im.convert("RGB")))
    assert all(a.shape == (350, 500, 3) for a in images)
    assert not np.array_equal(images[1], images[2])  # each its own run's curve


def test_a_missing_eval_csv_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="eval.csv"):
        plot_curve(tmp_path / "eval.csv", tmp_path / "curve.png")
