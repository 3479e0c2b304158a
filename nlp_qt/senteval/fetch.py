"""``download``: SentEval's data fetched and prepared as its data/get_transfer_data.bash does (needs internet):
the MR/CR/SUBJ/MPQA zip through ``cat -v`` and the Penn Treebank tokenizer rules, TREC's quotes removed, MRPC."""

from __future__ import annotations

import io
import re
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, Sequence

from .tasks import ALL_TASKS, BINARY_TASKS, SentEvalDataError, is_human

# Where SentEval's data/get_transfer_data.bash fetches the data (mirrors tried in order).
_FB = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
_S3 = "https://s3.amazonaws.com/senteval/senteval_data"
DOWNLOADS = {
    "binary": (f"{_FB}/datasmall_NB_ACL12.zip", f"{_S3}/datasmall_NB_ACL12.zip"),
    "TREC/train_5500.label": ("https://cogcomp.seas.upenn.edu/Data/QA/QC/train_5500.label",
                              "http://cogcomp.cs.illinois.edu/Data/QA/QC/train_5500.label"),
    "TREC/TREC_10.label": ("https://cogcomp.seas.upenn.edu/Data/QA/QC/TREC_10.label",
                           "http://cogcomp.cs.illinois.edu/Data/QA/QC/TREC_10.label"),
    "MRPC/msr_paraphrase_train.txt": (f"{_FB}/msr_paraphrase_train.txt", f"{_S3}/msr_paraphrase_train.txt"),
    "MRPC/msr_paraphrase_test.txt": (f"{_FB}/msr_paraphrase_test.txt", f"{_S3}/msr_paraphrase_test.txt"),
}


def _drop_quotes(raw: bytes) -> bytes:
    return raw.replace(b"`", b"").replace(b"'", b"")


# what `download` does to a fetched file before writing it (as SentEval's get_transfer_data.bash does)
DOWNLOAD_FIXES: dict[str, Callable[[bytes], bytes]] = {
    "TREC/train_5500.label": _drop_quotes,
    "TREC/TREC_10.label": _drop_quotes,
}

# member of datasmall_NB_ACL12.zip -> our path
_ZIP_MEMBERS = {
    "data/rt10662/rt-polarity.pos": "MR/rt-polarity.pos",
    "data/rt10662/rt-polarity.neg": "MR/rt-polarity.neg",
    "data/customerr/custrev.pos": "CR/custrev.pos",
    "data/customerr/custrev.neg": "CR/custrev.neg",
    "data/subj/subj.objective": "SUBJ/subj.objective",
    "data/subj/subj.subjective": "SUBJ/subj.subjective",
    "data/mpqa/mpqa.pos": "MPQA/mpqa.pos",
    "data/mpqa/mpqa.neg": "MPQA/mpqa.neg",
}



def check_data_folder(root: Path, option: str = "--data") -> None:
    """Refuse a data folder that is a file or lies under one (a raw ``[Errno 20] Not a directory`` otherwise)."""
    for place in (root, *root.absolute().parents):
        if place.exists():
            if not place.is_dir():
                raise ValueError(f"{option} {root}: {place} is a file, not a folder; give a folder (nothing was "
                                 "written)")
            return


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data)
    tmp.replace(path)


def cat_v(raw: bytes) -> bytes:
    """``raw`` as ``cat -v`` prints it: control bytes as ``^X``, DEL as ``^?``, bytes from 128 as ``M-``
    followed by the same notation for the byte minus 128; tab and newline stay. SentEval passes the
    MR/CR/SUBJ/MPQA files through it (so its files are ASCII, an accented letter becoming e.g. ``M-i``)."""
    def show(b: int, keep=(9, 10)) -> str:
        if b >= 128:
            return "M-" + show(b - 128, keep=())  # tab and newline too: 137 is M-^I
        if b == 127:
            return "^?"
        if b < 32 and b not in keep:
            return "^" + chr(b + 64)
        return chr(b)
    return "".join(show(b) for b in raw).encode("ascii")


# The Penn Treebank tokenizer rules (the sed script SentEval applies after cat -v), in their order.
_PTB_RULES = [
    (re.compile(r'^"'), "`` "),
    (re.compile(r'([ (\[{<])"'), r"\1 `` "),
    (re.compile(r"\.\.\."), " ... "),
    (re.compile(r"[,;:@#$%&]"), r" \g<0> "),
    (re.compile(r"""([^.])([.])([\])}>"']*) *$"""), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"[\]\[(){}<>]"), r" \g<0> "),
    (re.compile(r"--"), " -- "),
    (re.compile(r"^(.*)$"), r" \1 "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"'([sSmMdD]) "), r" '\1 "),
    *[(re.compile(clitic + " "), f" {clitic} ") for clitic in ("'ll", "'re", "'ve", "n't", "'LL", "'RE", "'VE", "N'T")],
    (re.compile(r" ([Cc])annot "), r" \1an not "),
    (re.compile(r" ([Dd])'ye "), r" \1' ye "),
    (re.compile(r" ([Gg])imme "), r" \1im me "),
    (re.compile(r" ([Gg])onna "), r" \1on na "),
    (re.compile(r" ([Gg])otta "), r" \1ot ta "),
    (re.compile(r" ([Ll])emme "), r" \1em me "),
    (re.compile(r" ([Mm])ore'n "), r" \1ore 'n "),
    (re.compile(r" '([Tt])is "), r" '\1 is "),
    (re.compile(r" '([Tt])was "), r" '\1 was "),
    (re.compile(r" ([Ww])anna "), r" \1an na "),
    (re.compile(r"  +"), " "),
    (re.compile(r"^ +"), ""),
]


def ptb_tokenize(text: str) -> str:
    """``text`` through the Penn Treebank tokenizer rules line by line, as ``sed -f tokenizer.sed``
    in SentEval's get_transfer_data.bash (each output line keeps the trailing space sed leaves)."""
    if not text:
        return ""
    ends_with_newline = text.endswith("\n")
    out = []
    for line in (text[:-1] if ends_with_newline else text).split("\n"):
        for pattern, repl in _PTB_RULES:
            line = pattern.sub(repl, line)
        out.append(line)
    return "\n".join(out) + ("\n" if ends_with_newline else "")  # sed keeps a missing final newline missing


def download(data: str | Path, tasks: Sequence[str] = ALL_TASKS, urls: dict | None = None) -> Path:
    """Fetch SentEval's data into ``data`` (SentEval's data/downstream layout). Needs internet.

    Follows SentEval's ``data/get_transfer_data.bash``: MR, CR, SUBJ and MPQA come from one zip and
    go through ``cat -v`` and the PTB tokenizer (:func:`cat_v`, :func:`ptb_tokenize`); TREC from its
    authors' site with backticks and single quotes removed (:data:`DOWNLOAD_FIXES`); MRPC's two files. Each
    file is written whole (temporary name, then rename), so an interrupted download leaves no
    half-written file behind. ``urls`` replaces :data:`DOWNLOADS` (mirrors, tests).
    """
    root = Path(data)
    human = [t for t in tasks if is_human(t)]
    if human:
        raise ValueError(f"{', '.join(human)} are not downloaded but built offline: `python -m nlp_qt.senteval "
                         f"build-human --data {root} --tasks {' '.join(human)}`")
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise ValueError(f"unknown SentEval task(s) {unknown}; known: {', '.join(ALL_TASKS)}")
    check_data_folder(root)
    made = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _download(root, tasks, DOWNLOADS if urls is None else urls)
    except BaseException:
        if made and not any(root.iterdir()):  # nothing fetched: no empty folder left behind
            root.rmdir()
        raise


def _download(root: Path, tasks: Sequence[str], urls: dict) -> Path:
    """:func:`download`'s fetching into the folder ``root``, which exists."""

    def get(mirrors: Sequence[str]) -> bytes:
        errors = []
        for url in mirrors:
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    return r.read()
            except Exception as err:  # noqa: BLE001
                errors.append(f"{url}: {err}")
        raise ConnectionError("could not download (offline?): " + "; ".join(errors))

    if any(t in BINARY_TASKS for t in tasks):
        with zipfile.ZipFile(io.BytesIO(get(urls["binary"]))) as z:
            names = z.namelist()
            for member, target in _ZIP_MEMBERS.items():
                if target.split("/")[0] not in tasks:
                    continue
                # the zip's top folder has varied between mirrors: match on the last two path parts
                tail = "/".join(member.split("/")[-2:])
                found = [n for n in names if n == member or n.endswith("/" + tail)]
                if not found:
                    raise SentEvalDataError(f"{urls['binary'][0]}: the archive has no {tail} (members: "
                                            f"{', '.join(names[:10])}{', ...' if len(names) > 10 else ''})")
                # as get_transfer_data.bash: cat -v, then the PTB tokenizer
                write_atomic(root / target, ptb_tokenize(cat_v(z.read(found[0])).decode("ascii")).encode("ascii"))
    for target, mirrors in urls.items():
        if target != "binary" and target.split("/")[0] in tasks:
            raw, fix = get(mirrors), DOWNLOAD_FIXES.get(target)
            write_atomic(root / target, fix(raw) if fix else raw)
    return root

