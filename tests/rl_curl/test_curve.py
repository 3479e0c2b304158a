"""rl_curl.curve: a run's curve.png, plotted without pyplot (the caller's backend left alone, threads at once)."""

import re
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


@pytest.mark.parametrize("text, says", [
    ("env_step,episode,eval_return_mean,eval_return_std\n500,0,38.119,1.5\n1000,1,38.11",
     "line 3 is damaged (3 fields"),
    ("env_step,episode,eval_return_mean,eval_return_std\n500,0,38.119,1.5,9\n", "line 2 is damaged (5 fields"),
    ("env_step,episode,eval_return_mean,eval_return_std\n500,0,thirty,1.5\n", "line 2 is damaged (env_step '500', "
                                                                               "eval_return_mean 'thirty'"),
    ("step,return\n500,38.1\n", "lacks env_step or eval_return_mean"),
    (b"env_step,eval_return_mean\n\xff\xfe1,2\n", "not UTF-8"),
])
def test_a_damaged_eval_csv_is_named_with_its_line(tmp_path, text, says):
    """A row cut by a crash or an edit used to be read as far as it went (a cut last row "1000,1,38.11" counted as a
    return of 38.11) or failed with a bare KeyError / float() message; now one line names the file and the line."""
    path = tmp_path / "eval.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    where = f"{path}, " if says.startswith("line") else f"{path} is damaged.*"
    with pytest.raises(ValueError, match=re.escape(where).replace(re.escape(".*"), ".*") + re.escape(says)):
        read_eval(path)


def test_an_empty_eval_csv_and_rows_without_a_mean_read_as_no_evaluation(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    assert [a.tolist() for a in read_eval(tmp_path / "empty.csv")] == [[], []]
    (tmp_path / "eval.csv").write_text("env_step,eval_return_mean,eval_return_std\n500,,\n1000,7.5,0\n")
    assert [a.tolist() for a in read_eval(tmp_path / "eval.csv")] == [[1000.0], [7.5]]
