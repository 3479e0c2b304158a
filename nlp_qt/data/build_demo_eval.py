"""Rebuild ``nlp_qt/data/senteval_demo`` (the demo's SentEval-format tasks) from real text.

The sentences are real English from the docstrings of the Python 3.11 standard library (modules
grouped by topic); the *labels are made by us* from the module a sentence comes from, so these are
topic-classification stand-ins in SentEval's file layout, not the SentEval tasks:

* ``MR``  (binary): numbers/dates/time modules (pos) vs operating-system/file modules (neg)
* ``CR``  (binary): text/data-format modules (pos) vs networking modules (neg)
* ``TREC`` (6 topics, written with TREC's label names; the mapping is in README.md)
* ``MRPC`` (pairs): label 1 = a sentence and the next sentence of the same docstring,
  label 0 = a sentence and a sentence from a module of another topic (coherence, not paraphrase)

Run: ``.venv/bin/python nlp_qt/data/build_demo_eval.py`` (deterministic for a given Python).
"""

from __future__ import annotations

import importlib
import inspect
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nlp_qt.corpus import split_sentences  # noqa: E402

TOPICS = {
    "NUM": ["math", "cmath", "decimal", "fractions", "statistics", "random", "datetime", "calendar", "time",
            "numbers", "zoneinfo"],
    "LOC": ["os", "os.path", "shutil", "pathlib", "subprocess", "tempfile", "glob", "fnmatch", "tarfile",
            "zipfile", "io", "stat", "filecmp", "mmap"],
    "DESC": ["re", "string", "textwrap", "difflib", "json", "csv", "html", "html.parser", "xml.dom.minidom",
             "xml.etree.ElementTree", "codecs", "unicodedata", "configparser", "base64", "email.message"],
    "HUM": ["socket", "http.client", "http.server", "http.cookies", "urllib.request", "urllib.parse", "ssl",
            "smtplib", "ftplib", "imaplib", "poplib", "ipaddress", "socketserver", "email.utils"],
    "ENTY": ["threading", "multiprocessing.pool", "multiprocessing.managers", "concurrent.futures", "queue",
             "asyncio.tasks", "asyncio.locks", "asyncio.queues", "sched", "selectors"],
    "ABBR": ["inspect", "ast", "dis", "pdb", "traceback", "typing", "dataclasses", "functools", "collections",
             "itertools", "abc", "enum", "contextlib", "weakref"],
}
MEANING = {"NUM": "numbers, dates and time", "LOC": "operating system and files", "DESC": "text and data formats",
           "HUM": "networking", "ENTY": "concurrency", "ABBR": "language and introspection"}


def docstrings(module_name: str) -> list[str]:
    mod = importlib.import_module(module_name)
    out, seen = [], set()

    def add(obj):
        doc = inspect.getdoc(obj)
        if doc and id(obj) not in seen:
            seen.add(id(obj))
            out.append(doc)

    add(mod)
    for name, obj in sorted(vars(mod).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
            continue
        add(obj)
        if inspect.isclass(obj):
            for mname, meth in sorted(vars(obj).items()):
                if not mname.startswith("_"):
                    add(meth)
    return out


def clean_sentences(doc: str) -> list[str]:
    paras = [p for p in doc.split("\n\n") if p.strip() and not p.lstrip().startswith((">>>", "..."))]
    sents = []
    for p in paras:
        for s in split_sentences(p):
            words = s.split()
            if 5 <= len(words) <= 40 and not any(c in s for c in "{}<>|=") and s[0].isupper():
                sents.append(s)
    return sents


def main(argv: list[str] | None = None) -> None:
    from shared_losses.training.cli import ArgumentParser

    # no options: the parser gives --help (which must not rebuild the shipped files) and refuses anything else
    ArgumentParser(prog=f"python {Path(__file__).name}", description=__doc__).parse_args(argv)
    rng = random.Random(0)
    out = Path(__file__).resolve().parent / "senteval_demo"
    by_topic: dict[str, list[list[str]]] = {}
    for topic, mods in TOPICS.items():
        docs = []
        for m in mods:
            for d in docstrings(m):
                s = clean_sentences(d)
                if s:
                    docs.append(s)
        by_topic[topic] = docs
    flat = {t: list(dict.fromkeys(s for d in docs for s in d)) for t, docs in by_topic.items()}
    for t in flat:
        rng.shuffle(flat[t])

    def write(path: Path, lines: list[str]):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    n_bin = 400
    write(out / "MR/rt-polarity.pos", flat["NUM"][:n_bin])
    write(out / "MR/rt-polarity.neg", flat["LOC"][:n_bin])
    write(out / "CR/custrev.pos", flat["DESC"][:n_bin])
    write(out / "CR/custrev.neg", flat["HUM"][:n_bin])
    train, test = [], []
    for t, sents in flat.items():
        pool = sents[n_bin : n_bin + 120] if len(sents) >= n_bin + 120 else sents[-120:]
        lines = [f"{t}:demo {s}" for s in pool]
        train += lines[:90]
        test += lines[90:]
    rng.shuffle(train)
    rng.shuffle(test)
    write(out / "TREC/train_5500.label", train)
    write(out / "TREC/TREC_10.label", test)
    pairs = []
    topics = list(by_topic)
    for t, docs in by_topic.items():
        for d in docs:
            for a, b in zip(d, d[1:]):
                pairs.append((1, a, b))
                other = rng.choice([x for x in topics if x != t])
                pairs.append((0, a, rng.choice(flat[other])))
    rng.shuffle(pairs)
    pairs = pairs[:1000]
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    rows = [f"{y}\t{i}\t{i + 1}\t{a}\t{b}" for i, (y, a, b) in enumerate(pairs)]
    write(out / "MRPC/msr_paraphrase_train.txt", [header] + rows[:700])
    write(out / "MRPC/msr_paraphrase_test.txt", [header] + rows[700:])
    readme = [
        "# Demo SentEval-format tasks (NOT the SentEval data)",
        "",
        "Real sentences from Python 3.11 standard-library docstrings; labels made by",
        "nlp_qt/data/build_demo_eval.py from the module topic. TREC label names stand for topics:",
        *[f"- {k}: {v}" for k, v in MEANING.items()],
        "",
        "MR: numbers/time (pos) vs OS/files (neg). CR: text formats (pos) vs networking (neg).",
        "MRPC: 1 = next sentence of the same docstring, 0 = sentence of another topic.",
        f"Sizes: MR {2 * n_bin}, CR {2 * n_bin}, TREC {len(train)} train / {len(test)} test, "
        f"MRPC 700 train / {len(rows) - 700} test.",
    ]
    write(out / "README.md", readme)
    print({t: (len(d), len(flat[t])) for t, d in by_topic.items()}, len(pairs))


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
