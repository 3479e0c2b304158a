"""Rebuild reuters_acq_crude_{train,validation}.tsv from the Debian package r-cran-tm.

Provenance: the R package `tm` (GPL-3; Debian package r-cran-tm) ships 70 documents of the
Reuters-21578 collection (Lewis 1997; "may be freely distributed for research purposes"):
50 with topic `acq` (corporate acquisitions) and 20 with topic `crude` (crude oil), in
tm/texts/{acq,crude}/*.xml. Each document's title and each body paragraph become one example
labelled 1 (acq) or 0 (crude): the label is the *document's* topic, so it is real but a little
noisy at paragraph level. Train and validation are split by document (every 3rd document of each
topic, by file name, goes to validation) so no document contributes to both.

    apt-get download r-cran-tm && dpkg -x r-cran-tm_*.deb x
    python shared_losses/data/build_reuters_acq_crude.py x/usr/lib/R/site-library/tm/texts
"""

import html
import re
from pathlib import Path

from shared_losses.training.runtime import written_whole


def paragraphs(xml_text: str) -> list[str]:
    title = re.search(r"<TITLE>(.*?)</TITLE>", xml_text, re.S)
    body = re.search(r"<BODY>(.*?)</BODY>", xml_text, re.S)
    out = []
    if title:
        out.append(title.group(1))
    if body:
        text = re.sub(r"\s*Reuter\s*$", "", body.group(1).strip())
        out += re.split(r"\n\s{3,}", text)
    clean = [html.unescape(re.sub(r"\s+", " ", p)).strip() for p in out]
    return [p for p in clean if len(p.split()) >= 4]


def main(texts_dir: str) -> None:
    here = Path(__file__).resolve().parent
    rows = {"train": [], "validation": []}
    if not Path(texts_dir).is_dir():
        raise NotADirectoryError(f"{texts_dir}: not a folder; give tm's texts folder (in the unpacked r-cran-tm "
                                 "package: usr/lib/R/site-library/tm/texts)")
    for topic, label in (("acq", 1), ("crude", 0)):
        files = sorted(Path(texts_dir, topic).glob("*.xml"))
        if not files:
            raise ValueError(f"no {topic}/*.xml under {texts_dir}: give tm's texts folder (in the unpacked r-cran-tm "
                             "package: usr/lib/R/site-library/tm/texts); the shipped files were left as they were")
        for k, f in enumerate(files):
            split = "validation" if k % 3 == 2 else "train"
            for p in paragraphs(f.read_text(encoding="utf-8", errors="replace")):
                rows[split].append((p.replace("\t", " ").replace("\\", "/"), label, f"{topic}/{f.stem}"))
    for split, rs in rows.items():
        # GLUE-style TSV: tab-separated, no quoting (texts hold no tabs or newlines)
        with written_whole(here / f"reuters_acq_crude_{split}.tsv") as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write("sentence\tlabel\tdocument\n")
            fh.writelines(f"{t}\t{y}\t{d}\n" for t, y, d in rs)
        print(split, len(rs), "examples,", sum(r[1] for r in rs), "acq")


if __name__ == "__main__":
    import argparse

    from shared_losses.training.cli import ArgumentParser, run_cli

    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts_dir", help="tm's texts folder (holding acq/ and crude/)")
    run_cli(lambda: main(parser.parse_args().texts_dir))
