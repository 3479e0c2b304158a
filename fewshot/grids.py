"""The check a grid script makes of a run folder it would skip as finished (``scripts/fewshot_table5.py``,
``scripts/pu_images_table.py``, ``scripts/pu_selection.py``): the run counts only if it was made with the grid's
options and on the grid's data. Its own module: it reads text runs (:mod:`fewshot.run`) and image runs
(:mod:`fewshot.image_run`, which imports :mod:`fewshot.run`: so neither of them can hold it)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .config import AnyConfig, TextOptions
from .data import check_same_data, data_fingerprints
from .image_run import image_data, refuse_changed_images
from .run import FINISHED_COMPARED, RESOLVED_KEY, comparable_configs, read_json, recorded_options, training_data


def refuse_other_finished_run(folder: Path, cfg: AnyConfig) -> None:
    """A grid script's check of a run folder it would skip as finished: the run counts only if it was made with
    ``cfg``'s options (its config.json against :func:`recorded_config`; the configuration's free fields and the
    process count aside, but not the training length, ``FINISHED_COMPARED``) and, for an option left unset whose
    default has changed (``RESOLVED_DEFAULTS``), with the value that default now resolves to (as its metrics.json
    records it); otherwise one line naming each field that differs."""
    from shared_losses.training.runtime import changes_text, config_changes, read_json_file

    if not (Path(folder) / "config.json").exists():
        raise ValueError(f"{folder} has metrics.json but no config.json: cannot tell which options it was run with; "
                         "move it aside or use another --out")
    saved = read_json_file(Path(folder) / "config.json", "run's configuration")
    saved = {k: v for k, v in saved.items() if k not in ("prior_used", "prior_source")}
    if RESOLVED_KEY not in saved and type(cfg).RESOLVED_DEFAULTS and (Path(folder) / "metrics.json").exists():
        # a run from before config.json recorded them: its metrics.json says what it used (runs from before metrics.json
        # recorded a key used the value ``before``)
        metrics = read_json_file(Path(folder) / "metrics.json", "run's metrics")
        saved[RESOLVED_KEY] = {key: metrics.get(key, before) for _, key, before in type(cfg).RESOLVED_DEFAULTS}
    compared = set(FINISHED_COMPARED)
    if saved.get("passes") is not None and getattr(cfg, "passes", None) is not None:
        compared.discard("max_steps")  # both set by --passes: the run recorded the steps they resolved to on its pool
    free = (set(type(cfg).RESUME_FREE) - compared) | {"num_processes"}
    free |= set(cfg.unused_options())  # a probe's lr, a ce run's lam: they did not shape the run
    changes = config_changes(*comparable_configs(saved, cfg), free=free)
    if changes:
        # options this version does not have (renamed or removed since), or no pipeline (recorded before the pipelines
        # had configurations of their own): not other settings a user could give, but a run of an earlier version
        # (what a run records beside its options, such as the prior it used, is among RESUME_FREE)
        unknown = sorted(set(saved) - set(recorded_options(cfg)) - type(cfg).RESUME_FREE - {RESOLVED_KEY})
        if "pipeline" not in saved or (saved["pipeline"] == cfg.PIPELINE and unknown):
            what = ("names no pipeline" if "pipeline" not in saved else
                    f"records {', '.join(unknown)}, which this version does not have")
            raise ValueError(f"{folder} holds a finished run made by an earlier version of the suite (its config.json "
                             f"{what}): it cannot be counted as this grid's run; run the grid into another --out (or "
                             "move the folder aside)")
        raise ValueError(f"{folder} holds a finished run made with other settings ({changes_text(changes)}: the "
                         "run's -> this grid's); use another --out, or the run's settings")
    refuse_changed_data(folder, cfg)


def refuse_changed_data(folder: Path, cfg: AnyConfig) -> None:
    """A text run's data checked against its sample.json (the draw and its fingerprint,
    :func:`fewshot.data.data_fingerprints`) before a grid counts it: a data file edited or replaced since gives other
    examples under the same options (image runs: :func:`fewshot.image_run.refuse_changed_images`). Runs from before
    sample.json recorded a fingerprint pass."""
    import io
    import warnings

    sample_file = Path(folder) / "sample.json"
    if not sample_file.is_file():
        return
    recorded = read_json(sample_file)
    if "data_sha256" not in recorded:
        return
    if not isinstance(cfg, TextOptions):  # an image run
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = image_data(cfg)
        refuse_changed_images(folder, data, "it cannot count as a run of this grid's data")
        return
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # the data's notes were shown once
        warnings.simplefilter("ignore")
        train_x, train_y, eval_x, eval_y, sample = training_data(cfg)
    fingerprint, parts = data_fingerprints(train_x, train_y, eval_x, eval_y, sample)
    check_same_data(recorded, sample, fingerprint, folder, "it cannot count as a run of this grid's data", parts)
