"""The folder rules every trainer follows (issue: one run lifecycle), checked the same way for each
application: each case hashes the folder (and its neighbours) before and after, so "nothing was
changed" is checked byte for byte, not by the message."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import pytest

from shared_losses.training import runtime
from shared_losses.training.runtime import RUN_FILE


def tree_hash(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) by relative path -> sha256 of its bytes."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def check_folder_rules(tmp_path: Path, app: str, train: Callable[..., dict], other_app: str) -> None:
    """``train(folder, resume=False, overwrite=False) -> summary`` runs the application's tiny run in
    ``folder``; ``other_app``: the name of another application, whose run must be refused."""
    # a new run starts in a missing folder and marks it as a run of this application
    out = tmp_path / "run"
    first = train(out)
    assert json.loads((out / RUN_FILE).read_text())["application"] == app
    finished = tree_hash(out)

    # a re-run without --resume / --overwrite is refused, naming both; nothing changes
    with pytest.raises(FileExistsError, match=r"--resume.*--overwrite"):
        train(out)
    assert tree_hash(out) == finished

    # --resume of a finished run with the same options does nothing (not even a new TensorBoard file)
    again = train(out, resume=True)
    assert tree_hash(out) == finished
    assert again == first

    # --resume together with --overwrite is refused
    with pytest.raises(ValueError, match="exclude each other"):
        train(out, resume=True, overwrite=True)
    assert tree_hash(out) == finished

    # --overwrite moves the old run aside, byte for byte, and starts a new one
    train(out, overwrite=True)
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("run.replaced-")]
    assert len(aside) == 1 and tree_hash(aside[0]) == finished
    assert json.loads((out / RUN_FILE).read_text())["application"] == app

    # a non-empty folder that is not a run is refused, also with --resume or --overwrite, untouched
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("config.json", "log.csv", "summary.json", "metrics.json", "notes.txt"):
        (mine / name).write_text(f"the user's own {name}\n")
    (mine / "sub").mkdir()
    (mine / "sub" / "data.bin").write_bytes(bytes(range(256)))
    before = tree_hash(mine)
    for flags in ({}, {"resume": True}, {"overwrite": True}):
        with pytest.raises(FileExistsError, match="holds no run"):
            train(mine, **flags)
        assert tree_hash(mine) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("mine")) == ["mine"]

    # another application's run is refused (with every flag), untouched
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / RUN_FILE).write_text(json.dumps({"application": other_app, "format": 1}))
    (theirs / "config.json").write_text("{}")
    before = tree_hash(theirs)
    for flags in ({}, {"resume": True}, {"overwrite": True}):
        with pytest.raises(FileExistsError, match=f"holds a run of {other_app}, not of {app}"):
            train(theirs, **flags)
        assert tree_hash(theirs) == before

    # an empty folder is a new run's place; --resume there has nothing to continue and starts one
    empty = tmp_path / "empty"
    empty.mkdir()
    train(empty, resume=True)
    assert json.loads((empty / RUN_FILE).read_text())["application"] == app


def interrupt_on_call(monkeypatch, module, name: str, at: int, sig=None) -> None:
    """Replace ``module.name`` by a wrapper that sends this process ``sig`` (SIGINT: a Ctrl-C) on its
    ``at``-th call, as a user would while that step runs."""
    import os
    import signal

    sig = signal.SIGINT if sig is None else sig
    real, calls = getattr(module, name), [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), sig)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def check_interrupt_exits_130(capsys, start: Callable[[], object], where: str) -> None:
    """Through the command-line wrapper: one line naming where it stopped and --resume, status 130,
    no traceback, and the signal handlers given back."""
    import signal

    from shared_losses.training.cli import run_cli

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(start)
    assert exit_info.value.code == 130
    err = capsys.readouterr().err
    assert f"interrupted at {where}" in err and "continue with --resume" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    # given back as they were (Python's default_int_handler in a terminal; SIG_IGN for a job started in the
    # background by a non-interactive shell)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def check_final_json_line(monkeypatch, capsys, main: Callable[[], object], cfg, app: str, step: int) -> dict:
    """The application's command-line ``main`` run on ``cfg`` ends with one JSON line whose keys are
    the same in every application."""
    import tyro

    monkeypatch.setattr(tyro, "cli", lambda *args, **kwargs: cfg)
    main()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    line = json.loads(last)
    assert set(line) == {"application", "output_dir", "step", "result"}
    assert line["application"] == app and line["step"] == step and isinstance(line["result"], dict)
    return line


def check_second_ctrl_c_stops_at_once(monkeypatch, capsys, module, name: str, at: int,
                                      start: Callable[[], object]) -> str:
    """Two Ctrl-C during the ``at``-th call of ``module.name`` (the second one before the step could finish):
    through the command-line wrapper the run stops at once with one line, status 130, no traceback, and the
    signal handlers given back. Returns stderr."""
    import os
    import signal

    from shared_losses.training.cli import run_cli

    real, calls = getattr(module, name), [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    # the two come microseconds apart here; a person's second press comes later than the window in which a second
    # SIGINT is taken for the first one forwarded by a launcher (runtime.StopSignals.again_after)
    monkeypatch.setattr(runtime.StopSignals, "again_after", 0.0)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(start)
    monkeypatch.undo()
    assert exit_info.value.code == 130
    err = capsys.readouterr().err
    assert "stopped at once (Ctrl-C)" in err and "--resume" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    return err
