"""Rebuild fine_foods_{train,validation}.tsv.gz from the Debian package r-cran-modeldata.

Provenance: the R package `modeldata` 1.1.0 (Max Kuhn, RStudio; MIT licence per
/usr/share/doc/r-cran-modeldata/copyright; Debian package r-cran-modeldata 1.1.0-1) ships the data
set `small_fine_foods`: a subset of the Amazon Fine Foods reviews (McAuley & Leskovec 2013,
https://snap.stanford.edu/data/web-FineFoods.html), split by modeldata's authors into
`training_data` (4,000 reviews) and `testing_data` (1,000 reviews), one review per product, no
product in both. The label is the reviewer's own star rating: `score` is "great" when the reviewer
gave the product 5 stars and "other" otherwise; we write 1 (great) / 0 (other). Each example is
one whole review (HTML line breaks and entities removed, whitespace collapsed, nothing truncated).

Split: modeldata's own split, training_data -> train, testing_data -> validation (so, by product).
Exact duplicate texts are dropped (first kept), as is any train review whose text also occurs in
validation.

The data sit in R's lazy-load database (data/Rdata.rdb/.rdx); this script reads it in Python with
the `rdata` package (not a project dependency), so R itself is not needed:

    apt-get download r-cran-modeldata && dpkg -x r-cran-modeldata_*.deb x
    pip install --target /tmp/pylib rdata
    PYTHONPATH=/tmp/pylib python shared_losses/data/build_fine_foods.py x/usr/lib/R/site-library/modeldata/data/Rdata
"""

import bz2
import gzip
import html
import lzma
import re
import struct
import zlib
from pathlib import Path

import rdata

from shared_losses.training.runtime import written_whole


def _inflate(b: bytes) -> bytes:
    """One object of an R lazy-load database (or its gzip-ed index): see R's R_decompress{1,2,3}."""
    if b[:2] == b"\x1f\x8b":
        return gzip.decompress(b)
    n, kind = struct.unpack(">I", b[:4])[0], b[4:5]
    if kind == b"Z":  # xz: a raw LZMA2 stream
        d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2,
                                                             "preset": 9 | lzma.PRESET_EXTREME}]).decompress(b[5:])
    elif kind == b"2":
        d = bz2.decompress(b[5:])
    elif kind == b"0":
        d = b[5:]
    else:
        d = zlib.decompress(b[4:])
    assert len(d) == n, (len(d), n)
    return d


def load(base: str, name: str):
    """The R object `name` of the lazy-load database base.rdb / base.rdx, converted by rdata."""
    idx = rdata.conversion.convert(rdata.parser.parse_data(_inflate(Path(base + ".rdx").read_bytes())))
    offset, length = (int(v) for v in idx["variables"][name])
    with open(base + ".rdb", "rb") as fh:
        fh.seek(offset)
        return rdata.conversion.convert(rdata.parser.parse_data(_inflate(fh.read(length))))


def clean(text: str) -> str:
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.I)
    return re.sub(r"\s+", " ", html.unescape(text)).strip().replace("\\", "/")


def main(rdata_base: str) -> None:
    here = Path(__file__).resolve().parent
    splits = {"train": load(rdata_base, "training_data"), "validation": load(rdata_base, "testing_data")}
    rows = {}
    for split, df in splits.items():
        rows[split], seen = [], set()
        for product, review, score in zip(df["product"], df["review"], df["score"]):
            t = clean(str(review))
            if not t or t in seen:
                continue
            seen.add(t)
            rows[split].append((t, int(str(score) == "great"), str(product)))
    val_texts = {t for t, _, _ in rows["validation"]}
    rows["train"] = [r for r in rows["train"] if r[0] not in val_texts]
    empty = [split for split, rs in rows.items() if not rs]
    if empty:
        raise ValueError(f"{rdata_base}: no review for the {' and '.join(empty)} split; the shipped files were left "
                         "as they were")
    for split, rs in rows.items():
        # GLUE-style TSV (no quoting; texts hold no tabs or newlines), gzip-ed reproducibly (mtime 0)
        body = "sentence\tlabel\tdocument\n" + "".join(f"{t}\t{y}\t{d}\n" for t, y, d in rs)
        with written_whole(here / f"fine_foods_{split}.tsv.gz") as tmp, open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(body.encode("utf-8"))
        print(split, len(rs), "examples,", sum(r[1] for r in rs), "great (5 stars)")


if __name__ == "__main__":
    import argparse

    from shared_losses.training.cli import ArgumentParser, run_cli

    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rdata_base", help="modeldata's data/Rdata (the .rdb / .rdx pair, without the suffix)")
    run_cli(lambda: main(parser.parse_args().rdata_base))
