"""Rebuild ``nlp_qt/data/corpus_docstrings`` (the demo's pretraining corpus) from real text.

One document per Python 3.11 standard-library module that is NOT used by the evaluation stand-ins
(build_demo_eval.py): its module docstring followed by the docstrings of its public classes,
methods and functions, in source order, paragraphs separated by blank lines. Real English text
with a sentence-to-sentence discourse inside each docstring; far smaller than BookCorpus.

Run: ``.venv/bin/python nlp_qt/data/build_demo_corpus.py`` (deterministic for a given Python).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_demo_eval import TOPICS  # noqa: E402

MODULES = [
    "argparse", "array", "bisect", "bz2", "cgi", "cmd", "code", "codeop", "colorsys", "compileall", "copy",
    "copyreg", "cProfile", "crypt", "dbm", "doctest", "ensurepip", "errno", "faulthandler", "filecmp",
    "fileinput", "formatter", "gc", "getopt", "getpass", "gettext", "graphlib", "gzip", "hashlib", "heapq",
    "hmac", "imghdr", "importlib", "importlib.metadata", "importlib.resources", "keyword", "linecache",
    "locale", "logging", "logging.handlers", "lzma", "mailbox", "marshal", "mimetypes", "modulefinder",
    "netrc", "operator", "optparse", "pickle", "pickletools", "pkgutil", "platform", "plistlib", "pprint",
    "profile", "pstats", "py_compile", "pyclbr", "pydoc", "quopri", "reprlib", "rlcompleter", "runpy",
    "secrets", "shelve", "shlex", "signal", "site", "sqlite3", "struct", "symtable", "sys", "sysconfig",
    "tabnanny", "termios", "timeit", "token", "tokenize", "trace", "tracemalloc", "tty", "types",
    "unittest", "unittest.mock", "uuid", "venv", "warnings", "wave", "webbrowser", "zipapp", "zipimport",
    "zlib", "gzip", "binascii", "copy", "cmd", "bdb", "sre_compile", "tomllib", "wsgiref.util",
    "wsgiref.handlers", "xmlrpc.client", "xmlrpc.server", "uu", "chunk", "sunau", "aifc", "nntplib",
    "telnetlib", "pipes", "sndhdr", "mailcap", "msilib" if sys.platform == "win32" else "curses",
]


def docs_in_order(mod) -> list[str]:
    out, seen = [], set()

    def add(obj):
        try:
            doc = inspect.getdoc(obj)
        except Exception:  # noqa: BLE001 - odd objects (e.g. unittest.mock.call)
            return
        if doc and doc.strip() and id(obj) not in seen:
            seen.add(id(obj))
            out.append(doc.strip())

    add(mod)
    members = [(n, o) for n, o in vars(mod).items()
               if not n.startswith("_") and getattr(o, "__module__", None) == mod.__name__]

    def line(o):
        try:
            return inspect.getsourcelines(o)[1]
        except Exception:  # noqa: BLE001
            return 10**9

    for _, obj in sorted(members, key=lambda x: (line(x[1]), x[0])):
        add(obj)
        if inspect.isclass(obj):
            for _, meth in sorted(((n, m) for n, m in vars(obj).items() if not n.startswith("_")),
                                  key=lambda x: (line(x[1]), x[0])):
                add(meth)
    return out


def main(argv: list[str] | None = None) -> None:
    from shared_losses.training.cli import ArgumentParser

    # no options: the parser gives --help (which must not rebuild the shipped files) and refuses anything else
    ArgumentParser(prog=f"python {Path(__file__).name}", description=__doc__).parse_args(argv)
    exclude = {m for mods in TOPICS.values() for m in mods}
    out = Path(__file__).resolve().parent / "corpus_docstrings"
    out.mkdir(exist_ok=True)
    for f in out.glob("*.txt"):
        f.unlink()
    total = 0
    for name in dict.fromkeys(MODULES):
        if name in exclude:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - optional modules may be missing
            continue
        paras = []
        for doc in docs_in_order(mod):
            for p in doc.split("\n\n"):
                p = p.strip()
                if p and not p.startswith((">>>", "...", "-", "*", ":")) and " " in p:
                    paras.append(p)
        if paras:
            text = "\n\n".join(paras) + "\n"
            (out / f"{name}.txt").write_text(text, encoding="utf-8")
            total += len(text)
    print(f"{len(list(out.glob('*.txt')))} documents, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
