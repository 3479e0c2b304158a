"""Examples that cannot rot: every code block of README.md and docs/ that a user would copy runs here.

What is collected (tests/doc_blocks.py): every fenced block of README.md and of every .md under docs/ (pages
added later are picked up), except docs/lab_notes/ and docs/data/ (dated records). By language:

* ``bash`` / ``sh`` / ``shell`` / ``console``: each command runs through bash, in order, in one process per
  block (``export``, ``cd``, ``VAR=value cmd``, ``&&``, ``\\`` continuations, comments, here-documents work as
  in a terminal; a ``console`` block's commands are its ``$ `` lines); the first command that fails fails the
  test with its file:line, its text, the tiny settings appended and the tail of its output;
* ``python``: exec'd in a fresh namespace (a traceback's line numbers are the doc file's); ``pycon``: doctest;
* ``text``, ``json``, ``yaml``, ... (tests/doc_blocks.py ``NOT_CODE_LANGS``): listings, never run. An
  unlabeled block is a listing too, unless it looks like commands or Python: that is an error (label it).
* docs/losses.md's python blocks are run by tests/test_docs_site.py, so not here (listed as skipped).

Where: each block runs in a fresh workspace (a tmp folder; ``prepare_workspace``) holding links to the
repository's docs/ and package folders and a copy of scripts/ (so ``scripts/...``, ``nlp_qt/data/books``
resolve, and the grid scripts' runs, which they start in the folder above scripts/, stay in the workspace), a
``.venv`` and the sample files a user is assumed to have (``SAMPLE_FILES``: train.tsv, spam.txt, cells.npz,
my_books/, a tiny stand-in for SentEval's data/downstream, ...). Outputs (runs/...) land there, never in the
repository; a failed block's workspace is kept (its path is in the failure message). The environment is
offline (HF_*_OFFLINE=1), headless (MUJOCO_GL=egl), one thread, with the suite's data cache in a session tmp
folder.

Time: the shell blocks run in ``DOC_TEST_JOBS`` lanes at once (default 2: the rest of the suite runs one
process at a time; 1 runs them one after the other), started by the first shell block's test; each test waits
for its own block. Blocks that start with the same commands (a README line repeated in a guide, two examples
training the same run) run in one lane, and the later ones continue from a snapshot of the workspace after
those commands instead of running them again (``Runner``; reported as "reused").

Tiny settings: the workspace's ``.venv/bin/python`` (also ``python`` on PATH), ``accelerate`` and ``torchrun``
are wrappers that append the options of ``TINY`` (tests/doc_blocks.py) for the program the command line runs:
the module after ``-m`` or the script (``rl_curl.train``, ``scripts/curl_table3.py``, ``nlp_qt.senteval
build-human``, ...). Every CLI here takes the last value of a repeated option (tyro, argparse), so the appended
values win: tiny networks, 2 steps, 1 seed, one task, small data. The wrapper also catches the python calls
inside ``bash scripts/demo*.sh``, so the demos run tiny end to end. A program without an entry runs as written.

Markers (HTML comments right above a block, invisible on GitHub and in the site):

* ``<!-- doc-test: skip (REASON) -->``: the block is not run; for what cannot run here (a GPU cluster, the
  Hugging Face hub, the internet, several nodes). A block without one MUST run; a skip without a reason is an
  error. Every skip shows as a skipped test case with its reason (``pytest -rs``).
* ``<!-- doc-test: skip "TEXT" (REASON) -->``: skip only the commands of a shell block containing TEXT (it
  must match one); the others run.
* ``<!-- doc-test: setup COMMANDS -->``: shell commands run (tiny) in the workspace before the block, e.g. the
  training run a python example loads.
* ``<!-- doc-test: define CODE -->``: python run in the example's namespace first, for the names a sketch
  takes as given (``encoder``, ``x``).

Tiers: shell blocks and python blocks with setup commands are ``slow``; other python blocks are fast. The fast
tier also checks the collector itself, and that a broken README command fails with its file:line.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path

import pytest

from tests import doc_blocks as D

BLOCKS, PROBLEMS = D.collect()
RUNNABLE = [b for b in BLOCKS if b.kind and not b.skip and not b.run_elsewhere]


JOBS = int(os.environ.get("DOC_TEST_JOBS", "2"))  # lanes of shell blocks at once; 1: one after the other
FAST = [b for b in RUNNABLE if not b.slow]  # python examples without setup commands
SLOW = [b for b in RUNNABLE if b.slow]      # shell blocks, python examples that train first


def skipped_entries(blocks=BLOCKS) -> list[tuple[str, str]]:
    """(where, reason) of every block or command that is not run, for the report."""
    out = []
    for b in blocks:
        if b.kind is None:
            continue
        if b.skip or b.run_elsewhere:
            out.append((f"{b.id} ({b.lang} block)", b.skip or b.run_elsewhere))
        elif b.kind == "shell" and b.skip_commands:
            try:
                out += [(f"{b.path}:{c.line} `{c.display}`", c.skip) for c in b.commands() if c.skip]
            except ValueError:
                pass  # reported by test_doc_blocks_are_well_formed
    return out


@pytest.fixture(scope="session")
def doc_cache(tmp_path_factory) -> Path:
    """The suite's data cache of the doc examples (e.g. ``--data human`` tasks): one per session, never the
    user's ~/.cache."""
    return tmp_path_factory.mktemp("doc_cache")


@pytest.fixture(scope="session")
def runner(tmp_path_factory, doc_cache):
    """One runner for the session: blocks that start with the same commands reuse the workspace after them."""
    r = D.Runner(tmp_path_factory.mktemp("doc_examples"), doc_cache, RUNNABLE)
    yield r
    r.stop()


@pytest.fixture(scope="session")
def shell_outcomes(request, runner) -> dict:
    """Started by the first shell block's test: every selected shell block, JOBS lanes at once (the rest of the
    suite runs one process at a time, so the other core is free); each test waits for its own block."""
    selected = {item.callspec.params["block"].id for item in request.session.items
                if getattr(item, "originalname", "") == "test_doc_block_runs" and hasattr(item, "callspec")}
    return runner.run_all([b for b in SLOW if b.kind == "shell" and b.id in selected], JOBS)


def report(out: D.Outcome) -> None:
    for where, seconds in out.timings:
        print(f"{seconds:7.1f} s  {where}")
    for where, first in out.reused:
        print(f"reused:  {where} (the workspace after it, from {first})")
    for where, reason in out.skipped:
        print(f"skipped: {where} ({reason})")


def check(out: D.Outcome) -> None:
    report(out)
    if not out.ok:
        pytest.fail(out.message, pytrace=False)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in FAST])
def test_doc_example_runs(block: D.Block, runner, tmp_path):
    check(runner.run(block, keep=tmp_path / "ws", lane="py"))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a shell block's test waits for its lane: the blocks before it in the lane count too
@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in SLOW])
def test_doc_block_runs(block: D.Block, request, runner, tmp_path):
    if block.kind == "shell":
        check(request.getfixturevalue("shell_outcomes")[block.id].result())
    else:  # python examples run in this process (one at a time), after their setup commands
        check(runner.run(block, keep=tmp_path / "ws", lane="py"))


# --------------------------------------------------------------------------------------------------------------
# What is not run, and why (fast: visible in every run, -rs lists the reasons)
# --------------------------------------------------------------------------------------------------------------

SKIPPED = skipped_entries()


@pytest.mark.parametrize("where,reason", SKIPPED, ids=[w.split(" ")[0] for w, _ in SKIPPED])
def test_doc_block_not_run(where, reason):
    assert reason.strip()
    pytest.skip(f"{where}: {reason}")


def test_doc_blocks_are_well_formed():
    """No unlabeled block of commands, no skip without a reason, no unknown marker or language, no marker
    without its block, no ``skip "TEXT"`` matching nothing; and the collector found the README's blocks."""
    assert not PROBLEMS, "problems in the docs' code blocks:\n" + "\n".join(PROBLEMS)
    assert any(b.path == "README.md" and b.kind == "shell" for b in BLOCKS)


def test_report_of_collected_blocks():
    """Counts by file (run / skipped / listings), printed with the skipped ones (``pytest -s`` shows them)."""
    counts: dict[str, Counter] = {}
    for b in BLOCKS:
        c = counts.setdefault(b.path, Counter())
        if b.kind is None:
            c["listing"] += 1
        elif b.skip or b.run_elsewhere:
            c["skipped"] += 1
        else:
            c["run"] += 1
            if b.kind == "shell":
                with contextlib.suppress(ValueError):  # reported by test_doc_blocks_are_well_formed
                    cmds = b.commands()
                    c["commands"] += sum(not x.skip for x in cmds)
                    c["commands skipped"] += sum(bool(x.skip) for x in cmds)
    for path, c in counts.items():
        print(f"{path}: blocks {c['run']} run, {c['skipped']} skipped, {c['listing']} listings; shell commands "
              f"{c['commands']} run, {c['commands skipped']} skipped")
    for where, reason in SKIPPED:
        print(f"not run: {where}: {reason}")
    assert sum(c["run"] for c in counts.values()) >= 10


# --------------------------------------------------------------------------------------------------------------
# The collector and the runner (fast)
# --------------------------------------------------------------------------------------------------------------


def _page(tmp_path: Path, text: str, name: str = "README.md") -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
    return tmp_path


def test_commands_continuations_comments_prompts_and_compounds():
    code = "\n".join([
        "# a comment line",
        "export MUJOCO_GL=egl      # trailing comment",
        "",
        "$ python -m x.train --a 1 \\",
        "    --b 2   # the rest",
        "WANDB_MODE=offline python -m y --c 'quoted # not a comment' && echo done",
        "for s in 0 1; do",
        "  echo $s",
        "done",
        "cat <<'EOF' > f.txt",
        "line # kept",
        "EOF",
    ])
    cmds = D.shell_commands(code, first_line=10)
    assert [c.line for c in cmds] == [11, 13, 15, 16, 19]
    assert cmds[0].display == "export MUJOCO_GL=egl"
    assert cmds[1].display == "python -m x.train --a 1 --b 2"
    assert cmds[1].text == "python -m x.train --a 1 \\\n    --b 2   # the rest"
    assert cmds[2].display == "WANDB_MODE=offline python -m y --c 'quoted # not a comment' && echo done"
    assert cmds[3].text == "for s in 0 1; do\n  echo $s\ndone"
    assert cmds[4].text.endswith("line # kept\nEOF")
    console = D.shell_commands("$ python -m a \\\n> --b\noutput line\n$ echo hi\nhi", console=True)
    assert [c.display for c in console] == ["python -m a --b", "echo hi"]


def test_markers_labels_and_problems(tmp_path):
    root = _page(tmp_path, "\n".join([
        "# page",                                                   # 1
        "<!-- doc-test: skip (needs the Hugging Face hub) -->",     # 2
        "```bash",                                                  # 3
        "python -m fewshot.train --encoder roberta-base",
        "```",
        "<!-- doc-test: skip -->",                                  # 6  no reason
        "",
        "```bash",                                                  # 8
        "echo hi",
        "```",
        '<!-- doc-test: skip "roberta" (needs the hub) -->',        # 11
        "<!-- doc-test: setup",                                     # 12
        "python -m nlp_qt.train --corpus books/ --output-dir runs/qt",
        "-->",
        "```sh",                                                    # 15
        "python -m fewshot.train --encoder roberta-base",
        "python -m fewshot.train --encoder minilm",
        "```",
        "```",                                                      # 19 unlabeled commands
        ".venv/bin/python scripts/qt_table2.py --preset cpu",
        "```",
        "```",                                                      # 22 unlabeled listing
        "shared_losses/   the loss core",
        "```",
        '<!-- doc-test: skip "nothing like it" (x) -->',            # 25
        "```bash",
        "echo a",
        "```",
        "<!-- doc-test: frobnicate -->",                            # 29
        "```python",
        "x = 1",
        "```",
        "<!-- doc-test: skip (dangling) -->",                       # 33
        "some prose",
        "```text",
        "output",
        "```",
    ]))
    blocks, problems = D.collect(root)
    by_line = {b.line: b for b in blocks}
    assert by_line[3].skip == "needs the Hugging Face hub"
    assert by_line[8].skip is None  # refused marker: the block still runs
    cmds = by_line[15].commands()
    assert [c.skip for c in cmds] == ["needs the hub", None]
    assert by_line[15].setup == [(12, "python -m nlp_qt.train --corpus books/ --output-dir runs/qt")]
    assert by_line[15].slow and not by_line[30].slow
    assert by_line[22].kind is None and by_line[35].kind is None
    text = "\n".join(problems)
    assert "README.md:6: a skip marker without a reason" in text
    assert "README.md:19: an unlabeled code block that holds commands" in text
    assert "README.md:22" not in text
    assert 'README.md:25: skip "nothing like it" matches no command' in text
    assert "README.md:29: unknown doc-test directive 'frobnicate'" in text
    assert "README.md:33: a doc-test marker that no code block follows" in text
    assert len(problems) == 5, problems


def test_tiny_settings_are_appended_by_program():
    argv, extra = D.tiny_argv(["-m", "rl_curl.train", "--task", "walker-walk", "--env-steps", "100000"])
    assert extra and argv[-len(extra):] == extra and "--env-steps" in extra
    launch = ["launch", "--multi_gpu", "-m", "nlp_qt.train", "--corpus", "books/"]
    assert D.tiny_argv(launch)[1] == D.TINY["nlp_qt.train"]
    assert D.tiny_argv(["/x/scripts/curl_table3.py", "--parallel", "4"])[1] == D.TINY["scripts/curl_table3.py"]
    assert D.tiny_argv(["-m", "nlp_qt.senteval", "--model", "m"])[1] == D.TINY["nlp_qt.senteval"]
    saved = dict(D.TINY)
    try:  # a sub-command's own entry wins over its program's
        D.TINY["nlp_qt.senteval build-human"] = ["--tasks", "REUTERS"]
        assert D.tiny_argv(["-m", "nlp_qt.senteval", "build-human", "--data", "d"])[1] == ["--tasks", "REUTERS"]
    finally:
        D.TINY.clear()
        D.TINY.update(saved)
    text = D.tiny_argv(["-m", "fewshot.train", "--dataset", "train.tsv"])[1]
    assert text[-4:] == ["--encoder", "minilm", "--pooling", "mean"]  # the hub's default encoder: the shipped one
    pu = D.tiny_argv(["-m", "fewshot.train", "pu", "--dataset", "train.tsv"])[1]
    assert "--eval-every" not in pu and pu[-4:] == ["--encoder", "minilm", "--pooling", "mean"]  # not a PU option
    files = D.tiny_argv(["-m", "fewshot.train", "pu", "--positive-file", "p.txt", "--unlabeled-file", "u.csv"])[1]
    assert "--n-unlabeled" not in files and "--n-unlabeled" in pu  # refused beside PU files (every row is used)
    images = D.tiny_argv(["-m", "fewshot.train", "images", "--dataset", "mnist", "--positive-classes", "1"])[1]
    assert "--hidden" in images and images[images.index("--dataset") + 1].endswith(D.DIGITS)
    default = D.tiny_argv(["-m", "fewshot.train", "images"])[1]  # mnist is the image pipeline's default data
    assert default[default.index("--dataset") + 1].endswith(D.DIGITS)
    cpc = D.tiny_argv(["-m", "fewshot.train", "images", "--dataset", "mnist", "--contrastive", "cpc"])[1]
    assert cpc[cpc.index("--dataset") + 1].endswith(D.DIGITS16)  # a patch grid needs 16 pixels a side
    assert "--hidden" not in cpc  # the mlp's width: refused for the patch grid
    # the tiny options an objective does not read are left out, as it refuses them (the wrapper imports nothing, so
    # its table is written out: here it is checked against the code's)
    from fewshot.config import ALL_OBJECTIVES, unused_by_objective

    for objective in ALL_OBJECTIVES:
        flags = {a for a in D._FS_TEXT if a.startswith("--")}
        unread = {f"--{o.replace('_', '-')}" for o in unused_by_objective(objective)} & flags
        assert set(D.UNREAD_TINY.get(objective, ())) == unread, objective
        got = D.tiny_argv(["-m", "fewshot.train", "--dataset", "t.tsv", "--objective", objective])[1]
        assert not unread & set(got) and "--max-length" in got
    assert "--bow-dim" not in D.tiny_argv(["scripts/qt_table2.py", "--preset", "cpu"])[1]
    assert "--bow-dim" in D.tiny_argv(["scripts/qt_table2.py", "--preset", "cpu-w2v"])[1]
    assert D.tiny_argv(["-c", "import rl_curl.train"])[1] == []
    assert D.tiny_argv(["-", "runs/x"])[1] == []


def test_a_broken_readme_command_fails_naming_file_line_and_command(tmp_path, doc_cache):
    """A README block with an option renamed (as a code change would leave it) fails, and the message names
    README.md:LINE and the command."""
    block = next(b for b in BLOCKS if b.path == "README.md" and b.kind == "shell"
                 and any("--tau-plus" in c.text for c in b.commands()))
    cmd = next(c for c in block.commands() if "--tau-plus" in c.text)
    broken = D.Block(block.path, block.line, block.lang, block.code.replace("--tau-plus", "--tau-pluss", 1))
    out = D.Runner(tmp_path, doc_cache, timeout=120).run(broken)
    assert not out.ok
    assert f"README.md:{cmd.line}: `" in out.message and "--tau-pluss" in out.message, out.message
    assert "exited with status 2" in out.message, out.message


def test_a_failing_python_example_names_its_doc_line(tmp_path, doc_cache):
    root = _page(tmp_path, "text\n\n```python\nx = 1\nraise RuntimeError('the example broke')\n```\n")
    blocks, problems = D.collect(root)
    assert not problems
    out = D.Runner(tmp_path / "run", doc_cache).run(blocks[0])
    assert not out.ok and "README.md:3: the example raised" in out.message
    assert "line 5" in out.message and "the example broke" in out.message, out.message


def test_workspace_wraps_python_and_keeps_outputs_out_of_the_repository(tmp_path, doc_cache):
    ws = D.prepare_workspace(tmp_path / "ws")
    assert (ws / "nlp_qt").resolve() == D.ROOT / "nlp_qt" and (ws / "train.tsv").is_file()
    assert (ws / "scripts").is_dir() and not (ws / "scripts").is_symlink()  # a copy: the grids' runs stay in ws
    assert os.access(ws / ".venv" / "bin" / "python", os.X_OK)
    block = D.Block("README.md", 1, "bash", "\n".join([
        "mkdir -p runs && python -c 'import sys; print(sys.argv)' > runs/argv.txt",
        ".venv/bin/python scripts/curl_table3.py --help > runs/help.txt",
        "python -m nlp_qt.bow --help | head -1",
    ]))
    runner = D.Runner(tmp_path / "run", doc_cache, timeout=60)
    out = runner.run(block)
    ws = runner.ws()
    assert out.ok, out.message
    assert (ws / "runs" / "argv.txt").read_text().strip() == "['-c']"
    rewrites = (ws / ".doc-test-rewrites.jsonl").read_text()
    assert "scripts/curl_table3.py" in rewrites and "nlp_qt.bow" in rewrites
    assert len(out.timings) == 3
