"""Build ``nlp_qt/data/books/``: about 1.1 million words of public-domain English books for CPU-scale
quick-thought training, read from Debian packages (nothing is downloaded at set-up; the built,
xz-compressed files are shipped in the repository).

Sources (Debian bookworm; every text is in the public domain, see ``books_README.md``; both it and
``books_manifest.json`` sit beside the folder, since the corpus reader reads every text file in it):

* ``r-cran-janeaustenr`` 1.0.0 (MIT, Julia Silge): Jane Austen's six novels, one R character vector
  of lines per novel in the package's lazy-load database ``data/Rdata.rdb``;
* ``r-cran-tokenizers`` 0.3.0 (MIT): Herman Melville's *Moby Dick* (a Project Gutenberg text) in
  the same kind of database;
* ``bible-kjv-text`` and ``bible-kjv`` 4.38: the King James Version; only the New Testament is kept
  (Matthew to Revelation), read verse by verse with the package's own ``bible`` program.

Cleaning: Project Gutenberg's header and licence are cut (only the book's text is kept, so nothing
of the Project Gutenberg trademark remains), chapter and volume headings and the title lines are
dropped, Gutenberg's ``_italics_`` underscores removed; paragraphs stay separated by blank lines
and each book is one file (one document: quick-thought neighbours never cross books). The Bible is
written one chapter per paragraph.

Needs ``apt-get download`` (no root), ``dpkg-deb`` and the ``rdata`` package
(``pip install rdata``) to parse R's serialisation format; run from the repository root::

    python nlp_qt/data/build_books_corpus.py [--work /tmp/books_build]
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import subprocess
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent / "books"
AUSTEN = {  # R object -> file stem, title
    "sensesensibility": ("austen_sense_and_sensibility", "Sense and Sensibility"),
    "prideprejudice": ("austen_pride_and_prejudice", "Pride and Prejudice"),
    "mansfieldpark": ("austen_mansfield_park", "Mansfield Park"),
    "emma": ("austen_emma", "Emma"),
    "northangerabbey": ("austen_northanger_abbey", "Northanger Abbey"),
    "persuasion": ("austen_persuasion", "Persuasion"),
}
HEADING = re.compile(r"^(chapter|volume|book|epilogue|etymology|extracts|the end|finis)\b[\s\dIVXLCivxlc.:-]*.*$",
                     re.IGNORECASE)


def fetch_deb(name: str, work: Path) -> Path:
    """``apt-get download NAME`` into ``work`` and unpack it; the unpacked root."""
    work.mkdir(parents=True, exist_ok=True)
    debs = sorted(work.glob(f"{name}_*.deb"))
    if not debs:
        subprocess.run(["apt-get", "download", name], cwd=work, check=True)
        debs = sorted(work.glob(f"{name}_*.deb"))
    root = work / name
    if not root.exists():
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(root)], check=True)
    return root


def _decompress(chunk: bytes) -> bytes:
    """One object of an R lazy-load database: a 4-byte length, then zlib data, or a type byte
    (Z zlib, 2 bzip2, X xz) and that compression."""
    body = chunk[4:]
    if body[:1] in (b"Z", b"2", b"X"):
        return {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress}[body[:1]](body[1:])
    return zlib.decompress(body)


def read_rdata(prefix: Path) -> dict:
    """Every object of an R package's ``data/Rdata.rdb``/``.rdx`` pair, converted by ``rdata``."""
    import rdata

    def parse(raw: bytes):
        return rdata.conversion.convert(rdata.parser.parse_data(raw, expand_altrep=True))

    index = parse(gzip.decompress(prefix.with_suffix(".rdx").read_bytes()))
    out = {}
    with open(prefix.with_suffix(".rdb"), "rb") as f:
        for name, (offset, length) in index["variables"].items():
            f.seek(int(offset))
            out[name] = parse(_decompress(f.read(int(length))))
    return out


def paragraphs(lines: list[str], title: str) -> list[str]:
    """Blank-line separated paragraphs of a book's lines, headings and title lines dropped."""
    paras, cur = [], []
    for line in [*lines, ""]:
        line = line.rstrip()
        if line.strip():
            cur.append(line.strip())
            continue
        if cur:
            text = " ".join(cur).replace("_", "")
            one_line = len(cur) == 1
            cur = []
            if one_line and (HEADING.match(text) or text.upper() == text or text.lower() in
                             (title.lower(), "by jane austen", "by herman melville")):
                continue  # a heading, a title, "THE END" or a line in capitals
            if "project gutenberg" in text.lower():
                continue  # the closing "End of Project Gutenberg's ..." line
            paras.append(re.sub(r"\s+", " ", text))
    return paras


def gutenberg_body(text: str) -> str:
    """The book between Project Gutenberg's ``*** START OF ...`` and ``*** END OF ...`` lines."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    start = re.search(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", text, re.MULTILINE)
    end = re.search(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG.*$", text, re.MULTILINE)
    if not start or not end:
        raise SystemExit("Moby Dick: Project Gutenberg's START/END lines not found; the package changed")
    body = text[start.end():end.start()]
    # the table of contents and the front matter: the book starts at its first chapter, "Loomings"
    first = re.search(r"^CHAPTER 1\. Loomings\.\s*$", body, re.MULTILINE)
    etym = body.find("ETYMOLOGY.")
    if first is None or etym < 0:
        raise SystemExit("Moby Dick: front matter markers not found; the package changed")
    return body[etym:]


def kjv_new_testament(work: Path) -> list[str]:
    """Matthew 1:1 to Revelation 22:21, one paragraph per chapter, with the package's ``bible`` program."""
    text = fetch_deb("bible-kjv-text", work) / "usr" / "lib"
    prog = fetch_deb("bible-kjv", work) / "usr" / "bin" / "bible"
    res = subprocess.run([str(prog), "-p", str(text), "-f", "mat1:1-rev22:21"], capture_output=True, text=True,
                         check=True)
    chapters: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"^(\w+?\d+):\d+ (.*)$", line.strip())
        if m:
            chapters.setdefault(m.group(1), []).append(m.group(2).strip())
    if len(chapters) != 260:
        raise SystemExit(f"KJV New Testament: expected 260 chapters, read {len(chapters)}")
    return [" ".join(v) for v in chapters.values()]


def write(stem: str, paras: list[str], stats: dict) -> None:
    data = ("\n\n".join(paras) + "\n").encode("utf-8")
    path = OUT / f"{stem}.txt.xz"
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    tmp.replace(path)
    stats[stem] = {"paragraphs": len(paras), "words": sum(len(p.split()) for p in paras),
                   "bytes_xz": path.stat().st_size}


def main() -> None:
    from shared_losses.training.cli import ArgumentParser

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/books_build"), help="where the .deb files are unpacked")
    args = p.parse_args()
    OUT.mkdir(exist_ok=True)
    stats: dict = {}
    austen = read_rdata(fetch_deb("r-cran-janeaustenr", args.work)
                        / "usr/lib/R/site-library/janeaustenr/data/Rdata")
    for obj, (stem, title) in AUSTEN.items():
        write(stem, paragraphs([str(x) for x in austen[obj]], title), stats)
    moby = read_rdata(fetch_deb("r-cran-tokenizers", args.work)
                      / "usr/lib/R/site-library/tokenizers/data/Rdata")["mobydick"][0]
    write("melville_moby_dick", paragraphs(gutenberg_body(str(moby)).split("\n"), "Moby Dick"), stats)
    write("kjv_new_testament", kjv_new_testament(args.work), stats)
    total = sum(v["words"] for v in stats.values())
    (OUT.parent / "books_manifest.json").write_text(json.dumps({"files": stats, "words": total}, indent=1) + "\n")
    print(json.dumps({"words": total, "bytes_xz": sum(v["bytes_xz"] for v in stats.values())}))


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
