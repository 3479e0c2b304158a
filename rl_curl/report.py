"""Learning curves and the DCL Table 3 layout (mean ± std over seeds at a given environment step)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from . import objectives

TABLE3_TASKS = ["finger-spin", "cartpole-swingup", "reacher-easy", "cheetah-run", "walker-walk", "ball_in_cup-catch"]


def read_eval(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps, mean returns)`` from an eval.csv."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("eval_return_mean") not in (None, "")]
    return (np.array([float(r["env_step"]) for r in rows]), np.array([float(r["eval_return_mean"]) for r in rows]))


def plot_curve(eval_csv: str | Path, png: str | Path, title: str = "") -> Path:
    """Evaluation return against environment steps, one run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, y = read_eval(eval_csv)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(x, y, marker="o")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return Path(png)


def objective_label(cfg: dict) -> str:
    """The row of a run in the table (and its line in the plots): :func:`rl_curl.objectives.label`."""
    return objectives.label(cfg)


def table3_tasks(runs: list[dict]) -> list[str]:
    """The tasks of ``runs``: Table 3's in the paper's order, then any others sorted by name."""
    tasks = [t for t in TABLE3_TASKS if any(r["cfg"]["task"] == t for r in runs)]
    return tasks + sorted({r["cfg"]["task"] for r in runs} - set(tasks))


def objective_order(cfg: dict) -> tuple:
    """Where an objective's row goes in DCL Table 3's order: :func:`rl_curl.objectives.order`."""
    return objectives.order(cfg)


def collect(root: str | Path) -> list[dict]:
    """Every run under ``root`` (a directory holding config.json and eval.csv)."""
    runs = []
    for cfg_path in sorted(Path(root).rglob("config.json")):
        eval_csv = cfg_path.parent / "eval.csv"
        if eval_csv.exists():
            cfg = json.loads(cfg_path.read_text())
            x, y = read_eval(eval_csv)
            if len(x):
                runs.append({"cfg": cfg, "steps": x, "returns": y, "dir": str(cfg_path.parent)})
    return runs


def score_at(run: dict, env_step: int) -> float | None:
    """The evaluation at ``env_step`` (the last one at or before it; None if the run has not got there).

    A run counts environment steps in whole agent steps, so its evaluation "at" ``env_step`` is logged at
    ``env_step`` rounded up to its action repeat (a 100k run with action repeat 3 ends, and makes its
    final evaluation, at 100002): that step is what "at or before" is measured against."""
    repeat = int(run["cfg"].get("action_repeat") or 1)
    ok = run["steps"] <= -(-env_step // repeat) * repeat
    if not ok.any() or run["steps"].max() < env_step:
        return None
    return float(run["returns"][ok][-1])


def table3(root: str | Path, env_step: int = 100_000) -> str:
    """Markdown table: objectives (in the paper's order) x tasks, mean ± std (population std over seeds,
    n shown if < 3)."""
    runs = collect(root)
    cells: dict[tuple[str, str], list[float]] = {}
    objectives: dict[str, tuple] = {}  # label -> its place in the table (objective_order)
    tasks = table3_tasks(runs)
    for r in runs:
        s = score_at(r, env_step)
        label = objective_label(r["cfg"])
        objectives.setdefault(label, objective_order(r["cfg"]))
        if s is not None:
            cells.setdefault((label, r["cfg"]["task"]), []).append(s)
    lines = ["| objective | " + " | ".join(t.replace("-", " ") for t in tasks) + " |",
             "|---" * (len(tasks) + 1) + "|"]
    for o in sorted(objectives, key=objectives.__getitem__):
        row = []
        for t in tasks:
            v = cells.get((o, t), [])
            row.append("–" if not v
                       else f"{np.mean(v):.0f}±{np.std(v):.0f}" + ("" if len(v) >= 3 else f" (n={len(v)})"))
        lines.append(f"| {o} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def final_scores(root: str | Path, env_step: int = 100_000) -> dict[str, dict[str, dict[int, float]]]:
    """``{task: {objective label: {seed: score at env_step}}}`` for every run that got there."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for r in collect(root):
        s = score_at(r, env_step)
        if s is not None:
            out.setdefault(r["cfg"]["task"], {}).setdefault(
                objective_label(r["cfg"]), {})[int(r["cfg"].get("seed", 0))] = s
    return out




def wall_minutes(root: str | Path) -> dict[str, dict[str, dict[int, str]]]:
    """``{task: {objective label: {seed: minutes}}}`` of the finished runs whose summary.json records the wall
    time (``train_seconds``); a run that was resumed shows the part after its resume, marked
    "(from step N)"."""
    out: dict[str, dict[str, dict[int, str]]] = {}
    for r in collect(root):
        path = Path(r["dir"]) / "summary.json"
        summary = json.loads(path.read_text()) if path.exists() else {}
        if "train_seconds" not in summary:
            continue
        text = f"{summary['train_seconds'] / 60:.1f}"
        if summary.get("train_from_env_step"):
            text += f" (from step {summary['train_from_env_step']})"
        cfg = r["cfg"]
        out.setdefault(cfg["task"], {}).setdefault(objective_label(cfg), {})[int(cfg.get("seed", 0))] = text
    return out


def _paired_lines(title: str, pairs: list[tuple[str, str, str]], cells: dict[str, dict[int, float]]) -> str:
    """One paired-difference table: a row ``name`` per ``(name, a, b)`` with ``a − b`` over their common seeds."""
    from shared_losses.training.stats import paired_stats

    lines = ["", title, "", "| objective | seeds | differences | mean ± std | 95 % t interval | 95 % bootstrap | "
             "wins/losses |", "|---|---|---|---|---|---|---|"]
    for name, a, b in pairs:
        st = paired_stats(cells[a], cells[b])
        if not st["n_seeds"]:
            continue
        fmt = lambda ci: f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "–"  # noqa: E731
        sd = f"{st['std']:.2f}" if st["std"] is not None else "–"
        lines.append(f"| {name} | {' '.join(map(str, st['seeds']))} | " + ", ".join(f"{d:+.2f}" for d in st["diffs"])
                     + f" | {st['mean']:+.2f} ± {sd} | {fmt(st['t_ci'])} | {fmt(st['bootstrap_ci'])} | "
                     f"{st['wins']}/{st['losses']} |")
    return "\n".join(lines)


def paired_table(root: str | Path, env_step: int = 100_000, anchor: str = "biased (CURL)") -> str:
    """Markdown: per task, every objective's score at ``env_step`` per seed, then its paired difference
    against ``anchor`` (the same seed gives both runs the same environment seeds and initial weights):
    mean, sample std, 95 % paired-t and paired-bootstrap intervals and wins/losses over the common seeds.
    Runs of the fused update are also paired with their official-schedule runs (same objective and seeds).
    Empty when no run reached ``env_step``."""
    scores = final_scores(root, env_step)
    runs = collect(root)
    order = {objective_label(r["cfg"]): objective_order(r["cfg"]) for r in runs}
    walls = wall_minutes(root)
    parts = []
    for task in [t for t in table3_tasks(runs) if t in scores]:
        cells = scores[task]
        labels = sorted(cells, key=lambda lab: order.get(lab, (99,)))
        seeds = sorted({s for v in cells.values() for s in v})
        lines = [f"#### {task}: score at {env_step} environment steps per seed", "",
                 "| objective | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std |",
                 "|---" * (len(seeds) + 2) + "|"]
        for lab in labels:
            v = cells[lab]
            vals = list(v.values())
            sd = f"{np.std(vals, ddof=1):.2f}" if len(vals) > 1 else "–"
            lines.append(f"| {lab} | " + " | ".join(f"{v[s]:.2f}" if s in v else "–" for s in seeds)
                         + f" | {np.mean(vals):.2f} ± {sd} |")
        parts.append("\n".join(lines))
        wall = walls.get(task, {})
        if wall:
            lines = ["", "Wall time of each run, minutes (summary.json's train_seconds: training, evaluations and "
                         "checkpoints in the run's process)", "",
                     "| objective | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
            lines += [f"| {lab} | " + " | ".join(wall.get(lab, {}).get(s, "–") for s in seeds) + " |" for lab in labels]
            parts.append("\n".join(lines))
        if anchor in cells:
            parts.append(_paired_lines(f"Paired differences against {anchor} (objective − {anchor}, same seeds; std is "
                                       "the sample std of the differences)",
                                       [(lab, lab, anchor) for lab in labels if lab != anchor], cells))
        schedules = [(base, base + objectives.FUSED_LABEL, base) for base in labels
                     if base + objectives.FUSED_LABEL in cells]
        if schedules:
            parts.append(_paired_lines("Fused update against the official schedule (fused − official, same objective "
                                       "and seeds)", schedules, cells))
    return "\n\n".join(parts)


def mean_curve(runs: list[dict], ddof: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``steps, mean, std, n`` over seeds at every evaluation step any of ``runs`` reached: the mean and std
    (population std; ``ddof=1``: the sample std, NaN where only one seed has the step) of the seeds evaluated at
    that step, and how many they were. Seeds that stopped early or evaluated at other steps simply drop out where
    they have no evaluation."""
    steps = np.unique(np.concatenate([r["steps"] for r in runs]))
    mean, std, n = (np.zeros(len(steps)) for _ in range(3))
    for i, s in enumerate(steps):
        v = np.array([r["returns"][r["steps"] == s][-1] for r in runs if (r["steps"] == s).any()])
        mean[i], std[i], n[i] = v.mean(), v.std(ddof=ddof) if len(v) > ddof else np.nan, len(v)
    return steps, mean, std, n.astype(int)


def plot_grid(root: str | Path, png: str | Path) -> Path:
    """Learning curves per task: per objective, the mean over seeds with a ±std band where at least two
    seeds were evaluated; where fewer seeds got that far the line is dashed (see ``mean_curve``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = collect(root)
    tasks = table3_tasks(runs)
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.5 * max(1, len(tasks)), 3.5), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        groups: dict[str, list[dict]] = {}
        for r in runs:
            if r["cfg"]["task"] == task:
                groups.setdefault(objective_label(r["cfg"]), []).append(r)
        partial = False
        for label, rs in groups.items():
            x, m, sd, n = mean_curve(rs)
            full = n == len(rs)
            partial |= not full.all()
            line, = ax.plot(np.where(full, x, np.nan), np.where(full, m, np.nan), label=f"{label} ({len(rs)} seeds)")
            if not full.all():  # fewer seeds: dashed, joined to the last point with every seed
                k = max(int(np.argmin(full)) - 1, 0)
                ax.plot(x[k:], m[k:], ls="--", color=line.get_color())
            band = n >= 2
            ax.fill_between(x, np.where(band, m - sd, np.nan), np.where(band, m + sd, np.nan), alpha=0.15,
                            color=line.get_color())
        if partial:
            ax.plot([], [], ls="--", color="gray", label="dashed: fewer seeds evaluated")
        ax.set_title(task)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("evaluation return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return Path(png)
