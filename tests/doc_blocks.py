"""The fenced code blocks of the README and of docs/, and how tests/test_doc_examples.py runs them.

Stdlib only at the top level: the interpreter wrappers of a workspace (:func:`prepare_workspace`) import this
module with ``python -S`` to append the tiny settings (:data:`TINY`) to a command line.

* :func:`collect` reads every fenced block of :func:`doc_files` with its ``<!-- doc-test: ... -->`` markers
  and the problems found (an unlabeled block of commands, a skip without a reason, an unknown directive, a
  marker that no block follows, a ``skip "TEXT"`` that matches no command, an unknown language).
* :func:`shell_commands` splits a shell block into commands (comments, blank lines, ``\\`` continuations,
  here-documents and multi-line compound commands kept whole; ``$ `` prompts taken off).
* :data:`TINY` and :func:`tiny_argv`: the options appended to each program's command line.
* :class:`Runner` runs a block's commands in order through one bash process in a fresh workspace, stopping at
  the first that fails (several blocks at once in lanes, reusing the workspace after commands that blocks share);
  :func:`run_python` execs a python block in a fresh namespace with the workspace as cwd.
* :func:`prepare_workspace` makes the folder the commands run in (see tests/test_doc_examples.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------------------------
# Which files, which languages
# --------------------------------------------------------------------------------------------------------------

EXCLUDED_DIRS = ("docs/lab_notes", "docs/data")  # dated notes and raw data: records, not instructions
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh", "shell-session"}
PYTHON_LANGS = {"python", "py", "python3"}
PYCON_LANGS = {"pycon"}  # interactive sessions (>>> ...): run as doctests
NOT_CODE_LANGS = {  # listings, data and output: never run
    "text", "txt", "plain", "plaintext", "output", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "csv",
    "tsv", "markdown", "md", "diff", "html", "xml", "mermaid", "log", "tex", "latex", "math", "none",
}
# What a block's first words look like when it holds commands (an unlabeled block that does is refused).
_COMMAND_RE = re.compile(
    r"^(\$\s+)?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(python3?|\.?\.?/?\.venv/bin/\S+|bash|sh|accelerate|torchrun|pip3?|"
    r"export|cd|git|ray|mkdir|cp|mv|rm|ls|cat|curl|wget|uv|conda|docker|srun|sbatch|make|pytest|ruff|mkdocs|"
    r"tensorboard|wandb|mlflow|source|scripts/\S+)(\s|$)")
_PYTHON_RE = re.compile(r"^(import \w|from [\w.]+ import |>>> )")

# A python block of this file is run by another test; it is listed here, not run twice.
RUN_ELSEWHERE = {
    ("docs/losses.md", "python"): "run by tests/test_docs_site.py::test_losses_page_example_runs",
}


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every .md under docs/ (whatever exists now: new pages are picked up), but not the dated
    lab notes or the raw data folders."""
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    for p in sorted((root / "docs").rglob("*.md")):
        rel = p.relative_to(root).as_posix()
        if not any(rel.startswith(d + "/") for d in EXCLUDED_DIRS):
            files.append(p)
    return files


# --------------------------------------------------------------------------------------------------------------
# Blocks and markers
# --------------------------------------------------------------------------------------------------------------


@dataclass
class Command:
    line: int             # line of its first line in the doc (1-based)
    text: str             # as bash gets it (continuation lines kept)
    skip: str | None = None  # the reason, when a ``skip "TEXT"`` marker matches it

    @property
    def display(self) -> str:
        """One line: continuations joined, the trailing comment taken off."""
        parts = [strip_comment(p).rstrip().rstrip("\\").strip() for p in self.text.split("\n")]
        return " ".join(p for p in parts if p)


@dataclass
class Block:
    path: str             # relative to the repository root
    line: int             # line of the opening fence (1-based)
    lang: str
    code: str
    skip: str | None = None
    skip_commands: list[tuple[str, str, int]] = field(default_factory=list)  # (text, reason, marker line)
    setup: list[tuple[int, str]] = field(default_factory=list)   # (marker line, shell commands)
    define: list[tuple[int, str]] = field(default_factory=list)  # (marker line, python code)
    root: Path = ROOT     # the repository (or test folder) the path is relative to

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def body_line(self) -> int:
        return self.line + 1

    @property
    def kind(self) -> str | None:
        """``shell``, ``python``, ``pycon`` or None (not run: a listing)."""
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang in PYTHON_LANGS:
            return "python"
        if self.lang in PYCON_LANGS:
            return "pycon"
        return None

    @property
    def run_elsewhere(self) -> str | None:
        return RUN_ELSEWHERE.get((self.path, self.lang))

    @property
    def slow(self) -> bool:
        """Shell blocks start processes (torch, training runs); python blocks with setup commands train first.
        A plain python or pycon block is expected to be instant (fast tier)."""
        return self.kind == "shell" or bool(self.setup)

    def commands(self) -> list[Command]:
        """The shell commands, each with the reason of the ``skip "TEXT"`` marker that matches it (if one does)."""
        cmds = shell_commands(self.code, self.body_line, console=self.lang == "console")
        for c in cmds:
            for text, reason, _ in self.skip_commands:
                if text in c.text:
                    c.skip = reason
                    break
        return cmds


_FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_COMMENT_START_RE = re.compile(r"^\s*<!--")
_DIRECTIVE_RE = re.compile(r"^doc-test:\s*(?P<name>[A-Za-z-]*)(?P<rest>.*)$", re.S)
_REASON_RE = re.compile(r"^\((?P<reason>.*)\)$", re.S)
_SKIP_TEXT_RE = re.compile(r'^"(?P<text>[^"]+)"\s*(?P<reason>.*)$', re.S)

MARKER_HELP = ('markers (HTML comments right above a block): <!-- doc-test: skip (REASON) -->, '
               '<!-- doc-test: skip "TEXT" (REASON) --> (the commands containing TEXT), '
               '<!-- doc-test: setup COMMANDS --> (shell commands run first), '
               '<!-- doc-test: define CODE --> (python run first in the example\'s namespace)')


def _lang(info: str) -> str:
    """The language of a fence's info string: ```python, ``` python title="x", ```{.python}."""
    info = info.strip()
    if not info:
        return ""
    word = info.split()[0].strip("{}").lstrip(".")
    return word.lower()


def parse_file(path: Path, root: Path = ROOT) -> tuple[list[Block], list[str]]:
    """The fenced blocks of one Markdown file, with the markers above each, and the problems found."""
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    problems: list[str] = []
    pending: list[tuple[int, str]] = []  # (line, directive text) of markers waiting for their block
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE_RE.match(line)
        if m and not (m.group("fence")[0] == "`" and "`" in m.group("info")):
            indent, fence = len(m.group("indent")), m.group("fence")
            start, body = i + 1, []
            i += 1
            closed = False
            while i < len(lines):
                close = re.match(r"^[ \t]*(" + re.escape(fence[0]) + r"{" + str(len(fence)) + r",})\s*$", lines[i])
                if close:
                    closed = True
                    break
                raw = lines[i]
                body.append(raw[min(indent, len(raw) - len(raw.lstrip())):])
                i += 1
            if not closed:
                problems.append(f"{rel}:{start}: a code fence that is never closed")
            block = Block(rel, start, _lang(m.group("info")), "\n".join(body), root=root)
            _apply_markers(block, pending, problems)
            pending = []
            blocks.append(block)
            i += 1
            continue
        if _COMMENT_START_RE.match(line):
            start = i + 1
            text = line.strip()
            while "-->" not in text and i + 1 < len(lines):
                i += 1
                text += "\n" + lines[i]
            inner = text.strip()[4:]
            inner = inner[: inner.rfind("-->")] if "-->" in inner else inner
            inner = inner.strip()
            if inner.startswith("doc-test"):
                pending.append((start, inner))
            i += 1
            continue
        if line.strip() and pending:
            problems.append(f"{rel}:{pending[0][0]}: a doc-test marker that no code block follows (only blank "
                            "lines or other markers may stand between a marker and its block)")
            pending = []
        i += 1
    if pending:
        problems.append(f"{rel}:{pending[0][0]}: a doc-test marker that no code block follows")
    for b in blocks:
        problems += block_problems(b)
    return blocks, problems


def _apply_markers(block: Block, pending: list[tuple[int, str]], problems: list[str]) -> None:
    where = f"{block.path}:{block.line}"
    for line, text in pending:
        m = _DIRECTIVE_RE.match(text)
        if not m:
            problems.append(f"{block.path}:{line}: unreadable doc-test marker {text!r}; {MARKER_HELP}")
            continue
        name, rest = m.group("name"), m.group("rest").strip()
        if name == "skip":
            t = _SKIP_TEXT_RE.match(rest)
            reason_text = t.group("reason").strip() if t else rest
            r = _REASON_RE.match(reason_text)
            reason = r.group("reason").strip() if r else ""
            if not reason:
                problems.append(f"{block.path}:{line}: a skip marker without a reason (write "
                                f"'<!-- doc-test: skip (WHY) -->' or 'skip \"TEXT\" (WHY)'), for the block at {where}")
                continue
            if t:
                block.skip_commands.append((t.group("text"), reason, line))
            else:
                block.skip = reason
        elif name in ("setup", "define"):
            body = textwrap.dedent(m.group("rest").strip("\n")).strip()  # a multi-line body may be indented
            if not body:
                problems.append(f"{block.path}:{line}: an empty {name} marker")
            (block.setup if name == "setup" else block.define).append((line, body))
        else:
            problems.append(f"{block.path}:{line}: unknown doc-test directive {name!r}; {MARKER_HELP}")


def block_problems(b: Block) -> list[str]:
    """What is wrong with one block as the runner would take it."""
    out = []
    first = next((ln.strip() for ln in b.code.split("\n") if ln.strip() and not ln.strip().startswith("#")), "")
    if not b.lang:
        if looks_like_code(b.code):
            out.append(f"{b.id}: an unlabeled code block that holds commands or code ({first[:60]!r}): label it "
                       "```bash / ```python (then it runs, or takes a doc-test skip marker with a reason)")
        return out
    if b.kind is None and b.lang not in NOT_CODE_LANGS:
        out.append(f"{b.id}: unknown language {b.lang!r}: add it to the languages that run or to NOT_CODE_LANGS "
                   "in tests/doc_blocks.py")
    if b.kind is None and (b.skip or b.skip_commands or b.setup or b.define):
        out.append(f"{b.id}: a doc-test marker on a {b.lang!r} block, which never runs")
    if b.kind in ("python", "pycon") and b.skip_commands:
        out.append(f'{b.id}: skip "TEXT" applies to shell blocks; skip a python block whole')
    if b.kind == "shell" and b.define:
        out.append(f"{b.id}: define (python) on a shell block; use setup")
    if b.kind == "shell" and b.skip_commands:
        try:
            cmds = b.commands()
        except ValueError as e:
            return out + [f"{b.id}: {e}"]
        for text, _, line in b.skip_commands:
            if not any(text in c.text for c in cmds):
                out.append(f'{b.path}:{line}: skip "{text}" matches no command of the block at {b.id}')
    if b.kind == "shell":
        try:
            b.commands()
        except ValueError as e:
            out.append(f"{b.id}: {e}")
    return out


def looks_like_code(code: str) -> bool:
    """Whether an unlabeled block holds commands or Python (any line starting like one)."""
    for raw in code.split("\n"):
        s = raw.strip()
        if s and not s.startswith("#") and (_COMMAND_RE.match(s) or _PYTHON_RE.match(s)):
            return True
    return False


def collect(root: Path = ROOT) -> tuple[list[Block], list[str]]:
    """Every fenced block of :func:`doc_files`, and every problem found in them."""
    blocks, problems = [], []
    for path in doc_files(root):
        b, p = parse_file(path, root)
        blocks += b
        problems += p
    return blocks, problems


# --------------------------------------------------------------------------------------------------------------
# Shell blocks: commands
# --------------------------------------------------------------------------------------------------------------


def strip_comment(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` at the start of a word, outside quotes)."""
    quote, prev = None, " "
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and (quote == "'" or line[i - 1] != "\\"):
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev in " \t;&|(":
            return line[:i]
        prev = ch
    return line


_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_COMPOUND_RE = re.compile(r"(^|[;&|]\s*)(for|while|until|if|case|select|function)\b|[{(]\s*$|\b(do|then|else)\s*$")


def _complete(text: str) -> bool:
    """Whether ``text`` is a whole shell command (``bash -n`` reads it), for multi-line compound commands."""
    if not _COMPOUND_RE.search(strip_comment(text.split("\n")[-1])) and text.count("'") % 2 == 0 \
            and text.count('"') % 2 == 0 and "\n" not in text:
        return True
    return subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0


def shell_commands(code: str, first_line: int = 1, console: bool = False) -> list[Command]:
    """The commands of a shell block: blank lines and comment lines dropped, ``\\`` continuations, here-documents
    and multi-line compound commands (``for ...; do`` / ``done``) kept as one command, ``$ `` prompts taken off.
    In a ``console`` block only the ``$ `` lines (and their continuations) are commands; the rest is output."""
    lines = code.split("\n")
    cmds: list[Command] = []
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if console:
            if not (s.startswith("$ ") or s == "$"):
                i += 1
                continue
            s = s[2:]
        elif s.startswith("$ "):
            s = s[2:]
        if not s or s.startswith("#"):
            i += 1
            continue
        start, parts = i, [s]
        while True:
            while strip_comment(parts[-1]).rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                nxt = lines[i]
                parts.append(nxt[2:] if console and nxt.lstrip().startswith("> ") else nxt)
            text = "\n".join(parts)
            tag = _HEREDOC_RE.search(strip_comment(text))
            if tag and not any(p.strip() == tag.group(2) for p in parts[1:]):
                while i + 1 < len(lines):
                    i += 1
                    parts.append(lines[i])
                    if lines[i].strip() == tag.group(2):
                        break
                else:
                    raise ValueError(f"line {first_line + start}: here-document {tag.group(2)!r} is never closed")
                text = "\n".join(parts)
            if _complete(text):
                break
            if i + 1 >= len(lines):
                raise ValueError(f"line {first_line + start}: an incomplete shell command: {text!r}")
            i += 1
            parts.append(lines[i])
        cmds.append(Command(first_line + start, "\n".join(parts)))
        i += 1
    return cmds


# --------------------------------------------------------------------------------------------------------------
# Tiny settings
# --------------------------------------------------------------------------------------------------------------

_RL_TINY = ["--num-filters", "4", "--num-layers", "2", "--hidden-dim", "16", "--feature-dim", "8",
            "--replay-capacity", "200", "--seed-steps", "5", "--eval-episodes", "1", "--action-repeat", "50",
            "--torch-threads", "1", "--checkpoint-every", "0", "--log-every", "10", "--no-progress"]
_QT_TINY = ["--max-sentences", "300", "--vocab-size", "300", "--word-dim", "8", "--encoder-dim", "8",
            "--batch-size", "16", "--max-steps", "2", "--no-progress", "--log-every", "1"]
_FS_PU = ["--max-steps", "2", "--n-unlabeled", "24", "--batch-labeled", "4", "--batch-unlabeled", "4",
          "--max-length", "16", "--max-eval", "40", "--checkpoint-every", "2", "--no-progress"]
_FS_TEXT = _FS_PU + ["--eval-every", "2"]
_FS_IMAGES = ["--max-steps", "2", "--batch-size", "32", "--hidden", "16", "--passes", "None", "--checkpoint-every", "2",
              "--no-progress"]
DIGITS = ".doc-test/digits.npz"  # in the workspace: 300 8x8 images of 10 classes, for the 5,000 digits of `mnist`
DIGITS16 = ".doc-test/digits16.npz"  # the same at 16x16, the smallest a patch grid takes (--contrastive cpc)


def _last(argv: list[str], flag: str) -> str | None:
    """The value of the last ``flag`` of ``argv`` (``--flag V`` or ``--flag=V``)."""
    value = None
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(flag + "="):
            value = a[len(flag) + 1:]
    return value


def _digits(argv: list[str], flag: str = "--dataset", default_mnist: bool = False) -> list[str]:
    """``--dataset DIGITS`` where a command reads the 5,000 MNIST digits (their probes take seconds each)."""
    value = _last(argv, flag)
    if not (value == "mnist" or (value is None and default_mnist)):
        return []
    classes = [] if "--positive-classes" in argv else ["--positive-classes", "0", "2", "4", "6", "8"]
    patches = _last(argv, "--contrastive") == "cpc" or _last(argv, "--encoder") == "patches"
    # mnist's default positives are the even digits
    return [flag, _workspace_path(DIGITS16 if patches else DIGITS), *classes]


def _workspace_path(rel: str) -> str:
    return str(Path(os.environ.get("DOC_TEST_WORKSPACE", ".")) / rel)


def _fewshot_text(tiny: list[str], text: bool = True) -> Callable[[list[str]], list[str]]:
    def extra(argv: list[str]) -> list[str]:
        # PU data from files uses every row: --n-unlabeled is refused there, as an option it would not read
        own = _without(tiny, "--n-unlabeled") if _last(argv, "--positive-file") else tiny
        if text:  # and so are the training options an objective does not read (a baseline's, ce's --batch-unlabeled)
            for flag in UNREAD_TINY.get(_last(argv, "--objective") or "ce+punce", ()):
                own = _without(own, flag)
        # the default encoder, roberta-base, is on the hub: without --encoder, the shipped MiniLM
        return own + ([] if _last(argv, "--encoder") else ["--encoder", "minilm", "--pooling", "mean"])
    return extra


#: The tiny text options each fewshot objective does not read, and refuses (fewshot.config.unused_by_objective: this
#: wrapper runs before every command, so it imports nothing; test_doc_examples.py checks it against that).
UNREAD_TINY = {"probe": ("--max-steps", "--batch-labeled", "--batch-unlabeled", "--eval-every"),
               "setfit": ("--max-steps", "--batch-labeled", "--batch-unlabeled", "--eval-every"),
               "ce": ("--batch-unlabeled",), "ce+scl": ("--batch-unlabeled",)}


def _without(options: list[str], flag: str) -> list[str]:
    """``options`` without ``flag`` and its value."""
    i = options.index(flag)
    return options[:i] + options[i + 2:]


# Options appended at the end of a command line, by program: the module after ``-m`` (``rl_curl.train``), a
# script's path from scripts/ on (``scripts/curl_table3.py``); a sub-command's own entry (``nlp_qt.senteval
# build-human``) wins over its program's. An entry is a list, or a function of the command line's arguments
# where the options depend on them (fewshot.train: the encoder given or not). Every one of these programs takes the last
# value of a repeated option (tyro and argparse do; --extra / --set add to the earlier ones), so the appended
# values win over the documented ones. They shrink networks, data, steps, seeds and grids until a command takes
# seconds (the 5,000 MNIST digits become 300 8x8 ones; where no --encoder is given, the shipped MiniLM stands
# for the hub's roberta-base); they never rename an output folder, so later commands of a block find what
# earlier ones wrote. The image grid's runs skip their ONNX export (seconds a run; no block reads a grid run's
# model, and the exports have their own tests).
TINY: dict[str, list[str] | Callable[[list[str]], list[str]]] = {
    "rl_curl.train": _RL_TINY + ["--env-steps", "20", "--eval-every", "20", "--batch-size", "8"],
    # after its --: rl_curl.train's options, for every run
    "rl_curl.together": _RL_TINY + ["--env-steps", "20", "--eval-every", "20", "--batch-size", "8"],
    "rl_curl.evaluate": ["--episodes", "1"],
    "scripts/curl_table3.py": ["--tasks", "cartpole-swingup", "--objectives", "curl", "--seeds", "0", "--env-steps",
                               "20", "--batch-size", "8", "--parallel", "1"] + [
        f"--extra={a}={b}" for a, b in zip(_RL_TINY[:-1:2], _RL_TINY[1:-1:2])],
    "nlp_qt.train": _QT_TINY,
    "nlp_qt.bow": ["--dim", "8", "--epochs", "1", "--max-sentences", "300", "--min-count", "1"],
    "nlp_qt.senteval": ["--kfold", "2", "--inner-kfold", "2"],
    "nlp_qt.senteval build-human": [],  # (builds the four tasks in about 2 s)
    "scripts/qt_table2.py": lambda argv: [
        "--seeds", "0", "--tasks", "REUTERS", "--max-sentences", "300", "--max-steps", "2", "--epochs", "1",
        "--batch-size", "16", "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "300",
        "--kfold", "2", "--inner-kfold", "2", "--parallel", "1",
        # baselines: only the bag of words the word2vec presets start from (each baseline is two processes), with
        # its tiny vectors (--bow-dim is refused without it)
        *(["--baselines", "bow", "--bow-dim", "8"] if _last(argv, "--preset") in ("cpu-w2v", "cpu-bow")
          or "--init-from-bow" in argv else ["--baselines"])],
    "fewshot.train": _fewshot_text(_FS_TEXT),
    "fewshot.train pu": _fewshot_text(_FS_PU, text=False),
    # --hidden is the mlp's width: refused for the cnn and the patch grid (--contrastive cpc's encoder)
    "fewshot.train images": lambda argv: (
        _FS_IMAGES if _last(argv, "--encoder") in (None, "mlp") and _last(argv, "--contrastive") != "cpc"
        else _without(_FS_IMAGES, "--hidden")) + _digits(argv, default_mnist=not _last(argv, "--positive-file")),
    "scripts/fewshot_table5.py": ["--seeds", "0", "--methods", "ce+punce", "--max-steps", "2", "--n-unlabeled", "24",
                                  "--max-eval", "40", "--parallel", "1", "--set", "max_length=16",
                                  "--set", "batch_labeled=4", "--set", "batch_unlabeled=4"],
    "scripts/pu_images_table.py": lambda argv: ["--tables", "2", "--n-ps", "50", "--seeds", "0", "--parallel", "1",
                                                "--set", "max_steps=2", "--set", "hidden=16", "--set", "batch_size=32",
                                                "--set", "export=false"]
                                               + _digits(argv, default_mnist=True),
    "scripts/bench_pu_images.py": ["--max-steps", "2", "--repeats", "1"],
    "scripts/pu_files_prior.py": lambda argv: ["--pool", "200", "--n-eval", "60", "--n-p", "10", "--seeds", "0",
                                               "--max-steps", "2", "--hidden", "16", "--batch-size", "32"]
                                              + _digits(argv, default_mnist=True),
    "scripts/sampling_bias.py": ["--steps", "3", "--batch", "32", "--seeds", "0", "1"],
    "scripts/fewshot_prior_check.py": ["--seeds", "0", "1"],
}


def program(argv: list[str]) -> tuple[str, int] | None:
    """The program a command line runs (``rl_curl.train``, ``scripts/x.py``) and the index of its first
    argument, for python, accelerate launch and torchrun command lines; None when there is none."""
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv):
            return argv[i + 1], i + 2
        if a.endswith(".py") and not a.startswith("-"):
            parts = Path(a).parts
            return ("/".join(parts[-2:]) if len(parts) > 1 else a), i + 1
        if a == "-c" or a == "-":
            return None
    return None


def tiny_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with the tiny settings of its program appended, and what was appended."""
    found = program(argv)
    if found is None:
        return argv, []
    prog, first = found
    key = prog
    if first < len(argv) and not argv[first].startswith("-") and f"{prog} {argv[first]}" in TINY:
        key = f"{prog} {argv[first]}"
    extra = TINY.get(key, [])
    if callable(extra):
        extra = extra(argv[first:])
    return argv + list(extra), list(extra)


def tiny_exec(target: str) -> None:
    """The body of a workspace's interpreter wrapper: run ``target`` with this process's arguments and the tiny
    settings appended, and note what was appended in $DOC_TEST_REWRITES."""
    argv, extra = tiny_argv(sys.argv[1:])
    log = os.environ.get("DOC_TEST_REWRITES")
    if log and extra:
        with open(log, "a") as fh:
            fh.write(json.dumps({"program": program(argv)[0], "appended": shlex.join(extra)}) + "\n")
    os.execv(target, [target, *argv])


# --------------------------------------------------------------------------------------------------------------
# The workspace
# --------------------------------------------------------------------------------------------------------------

LINKED = ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables", "docs")
# Copied, not linked: the grid scripts run their runs in the folder above their own (``cwd=ROOT``, with ROOT
# from ``Path(__file__).resolve()``), so a link would send the runs into the repository.
COPIED = ("scripts",)
WRAPPED = ("python", "python3", "python3.11", "accelerate", "torchrun")
_POS = ["a gripping, funny film", "wonderful acting and a clever story", "I loved every minute",
        "great value, works perfectly", "the best purchase this year", "a warm, moving drama"]
_NEG = ["two hours I will not get back", "dull and far too long", "the plot makes no sense",
        "broke after a week", "a waste of money", "boring, badly acted and loud"]
_SPAM = ["WIN a free cruise now, click here", "cheap pills, no prescription needed", "you have won 1,000,000 dollars",
         "limited offer: double your income from home", "claim your prize before midnight"]
_HAM = ["lunch at noon tomorrow?", "the minutes of Monday's meeting are attached", "can you review my draft",
        "the train is late, start without me", "happy birthday! see you on Saturday"]

# The files and folders a user of the docs is assumed to have, made in every workspace: what the commands
# call "your own data" (train.tsv, spam.txt, cells.npz, my_books/, ...), and data/downstream, a tiny stand-in
# in SentEval's layout for what `python -m nlp_qt.senteval download` fetches (online).
SAMPLE_FILES = (DIGITS, DIGITS16, "train.tsv", "dev.tsv", "more_reviews.txt", "texts.txt", "new_mail.txt", "spam.txt",
                "inbox.csv", "labeled_sample.csv", "cells.npz", "cells_test.npz", "my_images.npz", "cells_pos.npz",
                "cells_unlabeled.npz", "my_books/", "books/", "data/downstream/")


def _reviews(n: int, seed: int) -> list[tuple[str, int]]:
    import random

    rng = random.Random(seed)
    rows = []
    for k in range(n):
        stars = [1, 2, 3, 4, 5][k % 5]
        pool = _POS if stars >= 4 else _NEG if stars <= 2 else _POS + _NEG
        rows.append((f"{rng.choice(pool)}; {rng.choice(pool)} ({k})", stars))
    return rows


def _images(path: Path, n: int, seed: int) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    y = np.arange(n) % 5
    x = rng.integers(0, 60, size=(n, 12, 12)).astype(np.uint8)
    for c in range(5):  # a bright bar per class, so the classes differ
        x[y == c, 2 + 2 * c: 4 + 2 * c, 2:10] = 230
    np.savez(path, x=x, y=y)


def make_sample_files(ws: Path) -> None:
    """The files of :data:`SAMPLE_FILES` in the workspace ``ws``."""
    for name, n, seed in (("train.tsv", 80, 0), ("dev.tsv", 40, 1)):
        rows = "".join(f"{t}\t{s}\n" for t, s in _reviews(n, seed))
        (ws / name).write_text("review\tstars\n" + rows)
    (ws / "more_reviews.txt").write_text("".join(f"{t} more\n" for t, _ in _reviews(60, 2)))  # reviews without stars
    texts = "\n".join(_POS[:3] + _NEG[:3]) + "\n"
    (ws / "texts.txt").write_text(texts)
    (ws / "new_mail.txt").write_text("\n".join(_SPAM[:2] + _HAM[:2]) + "\n")
    (ws / "spam.txt").write_text("\n".join(f"{s} ({k})" for k in range(6) for s in _SPAM) + "\n")
    inbox = [f"{t} ({k})" for k in range(8) for t in _HAM + _SPAM[:2]]
    (ws / "inbox.csv").write_text("text\n" + "".join(f'"{t}"\n' for t in inbox))
    sample = [(f"{t} [{k}]", "spam") for k in range(4) for t in _SPAM] + \
             [(f"{t} [{k}]", "ham") for k in range(4) for t in _HAM]
    (ws / "labeled_sample.csv").write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in sample))
    _images(ws / "cells.npz", 600, 0)
    _images(ws / "cells_test.npz", 100, 1)
    _images(ws / "my_images.npz", 200, 2)
    import numpy as np

    with np.load(ws / "cells.npz") as cells:  # PU images as users have them: positives (class 3), unlabeled; x only
        x, y = cells["x"], cells["y"]
    np.savez(ws / "cells_pos.npz", x=x[y == 3][:40])
    np.savez(ws / "cells_unlabeled.npz", x=np.concatenate([x[y == 3][40:], x[y != 3]]))

    rng = np.random.default_rng(0)
    y = np.arange(300) % 10
    x = rng.integers(0, 60, size=(300, 8, 8)).astype(np.uint8)
    for c in range(10):
        x[y == c, c % 8, :] = 230
    (ws / DIGITS).parent.mkdir(exist_ok=True)
    np.savez(ws / DIGITS, x=x, y=y)
    np.savez(ws / DIGITS16, x=np.repeat(np.repeat(x, 2, axis=1), 2, axis=2), y=y)  # each pixel as 2x2
    docstrings = sorted((ROOT / "nlp_qt" / "data" / "corpus_docstrings").glob("*.txt"))
    for folder, files in (("my_books", docstrings[:4]), ("books", docstrings[4:8])):
        (ws / folder).mkdir()
        for f in files:
            (ws / folder / f.name).write_text(f.read_text())
    # data/downstream: SentEval's six tasks, tiny (the shipped demo tasks, and SUBJ / MPQA made from them)
    down = ws / "data" / "downstream"
    down.mkdir(parents=True)
    demo = ROOT / "nlp_qt" / "data" / "senteval_demo"
    for task in ("MR", "CR", "TREC", "MRPC"):
        (down / task).symlink_to(demo / task, target_is_directory=True)
    mr_pos = (demo / "MR" / "rt-polarity.pos").read_text(encoding="latin-1").splitlines()
    mr_neg = (demo / "MR" / "rt-polarity.neg").read_text(encoding="latin-1").splitlines()
    for task, pos, neg in (("SUBJ", "subj.objective", "subj.subjective"), ("MPQA", "mpqa.pos", "mpqa.neg")):
        (down / task).mkdir()
        (down / task / pos).write_text("\n".join(mr_pos[:200]) + "\n", encoding="latin-1")
        (down / task / neg).write_text("\n".join(mr_neg[:200]) + "\n", encoding="latin-1")


def _wrapper(real: Path) -> str:
    return (f"#!{sys.executable} -S\n"
            "# doc-test wrapper: runs the real program with the tiny settings appended (tests/doc_blocks.py)\n"
            f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            f"import doc_blocks\ndoc_blocks.tiny_exec({str(real)!r})\n")


def prepare_workspace(ws: Path, venv: Path | None = None) -> Path:
    """Make ``ws`` the folder a doc's commands run in: links to the repository's folders the commands name
    (:data:`LINKED`; scripts/ is copied, :data:`COPIED`), a ``.venv`` whose ``bin/`` links to the real one's
    programs except python, accelerate and torchrun, which are wrappers appending :data:`TINY` (so ``python
    ...``, ``.venv/bin/python ...``, the demo scripts' own ``.venv/bin/python`` calls and ``accelerate launch``
    / ``torchrun`` all get the tiny settings), and the sample files (:data:`SAMPLE_FILES`). Outputs (runs/,
    ...) land in ``ws``."""
    venv = venv or Path(sys.executable).parent.parent
    ws.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (ws / name).symlink_to(ROOT / name, target_is_directory=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, ws / name, ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = ws / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for entry in (venv / "bin").iterdir():
        if entry.name in WRAPPED:
            path = bin_dir / entry.name
            path.write_text(_wrapper(entry))  # the real venv's path (resolved, python would be the base one)
            path.chmod(0o755)
        else:
            (bin_dir / entry.name).symlink_to(entry)
    for entry in venv.iterdir():
        if entry.name not in ("bin", ".suite-installed"):
            (ws / ".venv" / entry.name).symlink_to(entry)
    (ws / ".venv" / ".suite-installed").touch()  # scripts/setup.sh sees an installed suite (nothing to install)
    make_sample_files(ws)
    return ws


def workspace_env(ws: Path, cache: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a doc's commands: ``base`` (default: this process's) with the workspace's .venv/bin
    first on PATH, offline, one thread, headless rendering, the suite's data cache in ``cache`` (never the
    user's)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "PATH": f"{ws / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
        "VIRTUAL_ENV": str(ws / ".venv"),
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "MUJOCO_GL": env.get("MUJOCO_GL", "egl"), "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
        "CONTRASTIVE_SUITE_CACHE": str(cache), "WANDB_SILENT": "true", "RAY_AUTH_MODE": "disabled",
        "DOC_TEST_REWRITES": str(ws / ".doc-test-rewrites.jsonl"), "DOC_TEST_WORKSPACE": str(ws),
    })
    env.pop("PYTHONPATH", None)
    return env


# --------------------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------------------

SHELL_BUILTINS = {"export", "cd", "unset", "set", "source", ".", "alias", "shopt", "umask", "true", ":"}


@dataclass
class Outcome:
    ok: bool
    message: str = ""                      # on failure: file:line, the command, what was appended, the output
    timings: list[tuple[str, float]] = field(default_factory=list)  # (file:line command, seconds)
    skipped: list[tuple[str, str]] = field(default_factory=list)    # (file:line command, reason)
    reused: list[tuple[str, str]] = field(default_factory=list)     # (file:line command, where it ran)


def is_builtin(cmd: Command) -> bool:
    """Whether a command only changes the shell's state (``export X=1``, ``cd d``, ``common="..."``): such a
    command is run again where a workspace is restored from a snapshot (a snapshot holds files, not a shell)."""
    try:
        words = shlex.split(cmd.display)
    except ValueError:
        return False
    if not words:
        return True
    return words[0] in SHELL_BUILTINS or all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) for w in words)


def command_key(cmd: Command) -> str:
    """A command as the memo compares it: comments off, ``.venv/bin/python`` = ``python`` (the same program in a
    workspace), blanks collapsed."""
    text = re.sub(r"(^|(?<=[\s;&|(]))(\./)?\.venv/bin/(python3?|accelerate|torchrun)(?=\s|$)", r"\3",
                  cmd.display)
    return " ".join(text.split())


def block_sequence(block: Block) -> tuple[list[Command], list[Command]]:
    """The commands a block runs (its setup commands first) and the ones its markers skip."""
    seq = [Command(c.line, c.text) for line, text in block.setup for c in shell_commands(text, line)]
    skipped: list[Command] = []
    if block.kind == "shell":
        for c in block.commands():
            (skipped if c.skip else seq).append(c)
    return seq, skipped


def shared_prefixes(blocks: list[Block]) -> set[tuple[str, ...]]:
    """The command sequences (from a fresh workspace) that start two or more blocks' sequences: the workspace
    after them is kept, and a later block starting with them continues from it instead of running them again."""
    count: Counter = Counter()
    for b in blocks:
        try:
            seq, _ = block_sequence(b)
        except ValueError:
            continue
        keys = [command_key(c) for c in seq]
        for k in range(1, len(keys) + 1):
            if not is_builtin(seq[k - 1]):
                count[tuple(keys[:k])] += 1
    return {k for k, n in count.items() if n > 1}


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().split("\n")[-lines:])


class Runner:
    """Runs doc blocks. Each block runs in a workspace made fresh for it, at a path fixed per *lane*
    (``base/<lane>``), so that what a run writes (absolute paths included) stays valid in a snapshot of it.

    Where blocks start with the same commands (:func:`shared_prefixes`: two python examples train the same run
    first, the README and a guide train the same model), the first block keeps a snapshot of the workspace after
    them and the later ones start from it: the same commands from the same fresh workspace give the same files.
    Their shell builtins (``export``, ``cd``, assignments) run again; the others are reported as reused. Blocks
    that may share so are one group (:meth:`groups`), run one after the other in one lane; :meth:`run_all` runs
    the groups of shell blocks in ``jobs`` lanes at once (a command uses one core: ``OMP_NUM_THREADS=1``)."""

    # A block's commands together, as a hang guard. docs/nlp_qt.md's quick start took 102 s alone and 192 s with the
    # suite's other worker beside it (2026-11-26, 2 cores): the limit leaves room for a slower machine.
    def __init__(self, base: Path, cache: Path, blocks: list[Block] = (), timeout: float = 600):
        self.base, self.cache, self.timeout = Path(base), Path(cache), timeout
        self.snapshots = self.base / "snapshots"
        self.shared = shared_prefixes(list(blocks))
        # (lane, prefix) -> (snapshot, file:line that ran it); a snapshot is restored at the path it was taken at
        self.memo: dict[tuple[str, tuple[str, ...]], tuple[Path, str]] = {}
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self._count = 0
        self.base_env = dict(os.environ)  # read once: a python example swaps os.environ while lanes run
        self._stopped = False

    def ws(self, lane: str = "ws") -> Path:
        return self.base / lane

    def group_key(self, block: Block) -> str:
        """The shortest shared prefix the block starts with (blocks that can reuse each other's workspace have
        the same), else the block itself."""
        try:
            keys = [command_key(c) for c in block_sequence(block)[0]]
        except ValueError:
            return block.id
        for k in range(1, len(keys) + 1):
            if tuple(keys[:k]) in self.shared:
                return "\n".join(keys[:k])
        return block.id

    def groups(self, blocks: list[Block]) -> list[list[Block]]:
        """The blocks by :meth:`group_key`, in the order of their first block; each group in the given order."""
        out: dict[str, list[Block]] = {}
        for b in blocks:
            out.setdefault(self.group_key(b), []).append(b)
        return list(out.values())

    def run_all(self, blocks: list[Block], jobs: int = 2) -> dict[str, Future]:
        """Start running the shell blocks ``blocks`` (a group per lane, ``jobs`` lanes at once) and return a future
        :class:`Outcome` per block id. A failed block's workspace is kept at ``base/failed/<id>``."""
        futures: dict[str, Future] = {b.id: Future() for b in blocks}
        pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="doc-test")

        def lane(index: int, group: list[Block]) -> None:
            for b in group:
                fut = futures[b.id]
                if self._stopped:
                    fut.cancel()
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    fut.set_result(self.run(b, keep=self.base / "failed" / re.sub(r"[^\w.-]", "_", b.id),
                                            lane=f"ws{index}"))
                except BaseException as e:  # noqa: B036 - handed to the test that waits for it
                    fut.set_exception(e)

        for i, group in enumerate(self.groups(blocks)):
            pool.submit(lane, i, group)
        pool.shutdown(wait=False)
        return futures

    def stop(self) -> None:
        """Start no more blocks and kill the commands still running (the session ends)."""
        self._stopped = True
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)

    def _fresh(self, lane: str, prefix: tuple[str, ...]) -> Path:
        ws = self.ws(lane)
        if ws.exists():
            shutil.rmtree(ws)
        if prefix:
            shutil.copytree(self.memo[(lane, prefix)][0], ws, symlinks=True)
        else:
            prepare_workspace(ws)
        return ws

    def run(self, block: Block, keep: Path | None = None, lane: str = "ws") -> Outcome:
        """Run a block in ``lane`` (shell: its commands; python / pycon: its setup commands, then the example, in
        this process: call it from one thread at a time)."""
        out = self.run_commands(block, keep, lane)
        if not out.ok or block.kind == "shell":
            return out
        py = run_python(block, self.ws(lane), workspace_env(self.ws(lane), self.cache, self.base_env))
        py.timings[:0], py.reused, py.skipped = out.timings, out.reused, out.skipped
        if not py.ok and keep is not None:
            self._keep(lane, keep)
            py.message += f"\n(the workspace: {keep})"
        return py

    def _keep(self, lane: str, keep: Path) -> None:
        if keep.exists():
            shutil.rmtree(keep)
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(self.ws(lane)), str(keep))

    def run_commands(self, block: Block, keep: Path | None = None, lane: str = "ws") -> Outcome:
        """Run the block's (setup and) commands in order through one bash process, from the longest prefix of
        them that an earlier block of this lane left a snapshot of; stop at the first that fails. A failure
        names the command as file:line, the tiny settings appended and the tail of the output."""
        seq, skipped = block_sequence(block)
        keys = [command_key(c) for c in seq]
        start = max((k for k in range(len(keys), 0, -1) if (lane, tuple(keys[:k])) in self.memo), default=0)
        ws = self._fresh(lane, tuple(keys[:start]))
        env = {**workspace_env(ws, self.cache, self.base_env), "DOC_TEST_TRACE": str(ws / ".doc-test-trace")}
        lines = ["set -o pipefail",
                 '__doc_test_mark() { printf "%s %s %s\\n" "$1" "$2" "${EPOCHREALTIME:-$(date +%s.%N)}" \\',
                 '    >> "$DOC_TEST_TRACE"; }']
        reused, snap_at = [], {}
        for n, c in enumerate(seq):
            prefix = tuple(keys[:n + 1])
            if n < start:
                if is_builtin(c):
                    lines.append(c.text)
                else:
                    first = self.memo.get((lane, prefix), (None, "an earlier block"))[1]
                    reused.append((f"{block.path}:{c.line} {c.display}", first))
                continue
            lines += [f"__doc_test_mark start {n}", c.text,
                      f'__doc_test_rc=$?; __doc_test_mark end {n}; [ "$__doc_test_rc" = 0 ] || exit "$__doc_test_rc"']
            if prefix in self.shared and (lane, prefix) not in self.memo and not is_builtin(c):
                with self._lock:
                    self._count += 1
                    snap = self.snapshots / str(self._count)
                snap_at[n] = (prefix, snap)
                lines.append(f'mkdir -p "{self.snapshots}" && cp -a "{ws}" "{snap}"')
        (ws / ".doc-test-trace").write_text("")
        log = ws / ".doc-test-output"
        with open(log, "w") as fh:
            proc = subprocess.Popen(["bash", "-c", "\n".join(lines) + "\n"], cwd=ws, env=env, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            self._procs.add(proc)
            try:
                rc = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                rc = None
            finally:
                self._procs.discard(proc)
        started, ended = {}, {}
        for row in (ws / ".doc-test-trace").read_text().split("\n"):
            if row.strip():
                kind, n, t = row.split()
                (started if kind == "start" else ended)[int(n)] = float(t.replace(",", "."))
        timings = [(f"{block.path}:{seq[n].line} {seq[n].display}", ended[n] - started[n]) for n in sorted(ended)]
        skipped_list = [(f"{block.path}:{c.line} {c.display}", c.skip) for c in skipped]
        for n, (prefix, snap) in snap_at.items():
            if snap.is_dir() and (n + 1 in started or (rc == 0 and n == len(seq) - 1)):
                self.memo[(lane, prefix)] = (snap, f"{block.path}:{seq[n].line}")
        if rc == 0:
            return Outcome(True, timings=timings, skipped=skipped_list, reused=reused)
        failed = max(started) if started else None
        cmd = seq[failed] if failed is not None else None
        rewrites = ws / ".doc-test-rewrites.jsonl"
        appended = [json.loads(r) for r in rewrites.read_text().split("\n") if r.strip()] if rewrites.exists() else []
        output = _tail(log.read_text(errors="replace"))
        where = ws
        if keep is not None:
            self._keep(lane, keep)
            where = keep
        what = f"{block.path}:{cmd.line}: `{cmd.display}`" if cmd else f"{block.id}: the block"
        how = "timed out" if rc is None else f"exited with status {rc}"
        msg = [f"{what} {how} (doc block at {block.id}; the workspace: {where})"]
        if appended:
            msg.append("tiny settings appended by the runner: " + "; ".join(
                f"{a['program']} += {a['appended']}" for a in appended[-3:]))
        msg.append("--- last lines of its output ---\n" + output)
        return Outcome(False, "\n".join(msg), timings, skipped_list, reused)


def run_python(block: Block, ws: Path, env: dict[str, str]) -> Outcome:
    """Exec the block's ``define`` code and its code (doctest for pycon) in one fresh namespace, with ``ws`` as
    the working directory and ``env`` as the environment. Line numbers of a traceback are the doc file's."""
    import io
    import traceback

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    ns: dict = {"__name__": "__doc_example__"}
    doc = str(block.root / block.path)
    t0 = time.perf_counter()
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(ws)
        with contextlib.redirect_stdout(io.StringIO()):
            for line, code in block.define:
                exec(compile("\n" * line + code, doc, "exec"), ns)
            if block.kind == "pycon":
                _run_doctest(block, ns, doc)
            else:
                exec(compile("\n" * block.line + block.code, doc, "exec"), ns)
    except Exception as e:  # the traceback from the example's frames on (not this function's)
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        text = "".join(traceback.format_exception(type(e), e, tb))
        return Outcome(False, f"{block.id}: the example raised\n{text}")
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Outcome(True, timings=[(f"{block.id} (python)", time.perf_counter() - t0)])


def _run_doctest(block: Block, ns: dict, doc: str) -> None:
    import doctest

    test = doctest.DocTestParser().get_doctest(block.code, ns, block.id, doc, block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    if runner.failures:
        raise AssertionError("".join(out))
