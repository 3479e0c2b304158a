"""Corpora for quick-thought pretraining: streaming, documents kept in order, sentence splitting.

A corpus is read as a stream of ``(doc_id, sentence)`` pairs in corpus order; nothing is held in
memory beyond the current paragraph (a line of over :data:`LINE_PIECE` bytes, a file without line breaks, is read
in pieces; with ``one_sentence_per_line`` or ``doc_boundary="line"`` a line is read whole), so corpora larger than
memory work. Sources:

* a local plain-text file or a folder of them (files sorted by path, recursively; each file is one
  document, or blank lines / every line separate documents, see ``doc_boundary``); gzip, bz2 and xz
  files (``book.txt.gz``) are decompressed, UTF-16 files with a byte-order mark decoded;
* a local ``.json`` / ``.jsonl`` / ``.csv`` / ``.parquet`` file (also ``.jsonl.gz`` etc.), or a dataset saved with
  ``save_to_disk``, read with :mod:`datasets` (``text_column``; ``doc_field`` names a column whose
  change marks a new document, e.g. a book id);
* a Hugging Face hub name such as ``bookcorpus`` (``hf:bookcorpus``; ``hf:NAME:CONFIG`` names one of a dataset's
  configurations, :func:`hub_corpus`), streamed with
  ``datasets.load_dataset(..., streaming=True)`` under the hub's id for the name, from the hub's Parquet export
  where the repository holds only a loading script (:func:`shared_losses.data.load_hub_dataset`); offline this
  fails with a clear message.

Empty lines and lines that are not valid UTF-8 are skipped and counted (:class:`CorpusStats`),
never a crash. A :class:`CorpusError` names the file that cannot be text: a zip or tar archive, a truncated
compressed file, or a million characters without a blank line and almost no sentence end (one
sentence per line read without ``one_sentence_per_line``).

:func:`contiguous_batches` cuts the stream into batches of consecutive sentences; neighbours are
only ever sentences of the same document (``doc_ids`` travel with every batch), so a document
boundary inside a batch never creates a false neighbour -- unlike S2V, which ignores boundaries.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import unicodedata
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

TEXT_SUFFIXES = {".txt", ".text", ".md", ""}
DATASETS_SUFFIXES = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}
DATASETS_OPTIONS = {".tsv": {"sep": "\t"}}  # a tab-separated table is datasets' csv builder with a tab
# Compressed files are read through (``book.txt.gz``, ``rows.jsonl.xz``); recognised by their first bytes.
COMPRESSED = {".gz": (b"\x1f\x8b", gzip.open), ".bz2": (b"BZh", bz2.open), ".xz": (b"\xfd7zXZ\x00", lzma.open)}
ARCHIVES = {b"PK\x03\x04": "zip", b"7z\xbc\xaf": "7z"}  # several files in one: refused with a message
ZSTD = b"\x28\xb5\x2f\xfd"  # zstd's frame (The Pile's .jsonl.zst): not read here; its bytes are no text


def _format_suffix(path: Path) -> str:
    """The suffix that says the format, under a compression suffix: ``.txt`` for ``book.txt.gz``."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix in COMPRESSED else suffix


class CorpusError(ValueError):
    """The corpus cannot be read (missing path, unknown format, no usable text, hub unreachable)."""


@dataclass
class CorpusStats:
    """Counts of what the reader saw; bad lines are counted here instead of raising."""

    lines: int = 0
    empty_lines: int = 0
    undecodable_lines: int = 0
    documents: int = 0
    sentences: int = 0
    files: int = 0
    examples: list = field(default_factory=list)  # a few (file, line number) of undecodable lines

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# Sentence splitting
# ------------------------------------------------------------------------------------------------

# Abbreviations in any case ("Mr.", "etc.", "vs.").
ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "e.g", "i.e", "cf",
    "inc", "ltd", "corp", "approx", "dept", "u.s", "u.k", "a.m", "p.m", "ave", "blvd", "rd",
}
# Abbreviations that are also ordinary lower-case words ("he said no.", "a p.", "the co."): only
# when capitalised ("Gen.", "Co.", "Mar.") or before a number ("no. 5", "p. 12", "Fig. 3"). "No."
# is only an abbreviation before a number: in dialogue ('"No." He left.') it ends a sentence.
CAPITALISED_ABBREVIATIONS = {
    "vol", "fig", "figs", "eq", "eqs", "sec", "ch", "pp", "p", "ed", "eds", "co", "gen", "col",
    "capt", "lt", "sgt", "rev", "hon", "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec",
}
NUMBERED_ABBREVIATIONS = {"no", "vol", "fig", "figs", "eq", "eqs", "sec", "ch", "pp", "p"}

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace, then (optionally
# opening quotes/brackets, Spanish ¿ ¡) the sentence's first letter or digit, which split_sentences checks with
# _starts_sentence. French guillemets may stand apart by a space ("« Oui. » Il"). Groups 1-4.
# A match starts only at the first mark of a run of marks, and takes the run whole (possessive), so
# a long run of "!" or "." costs linear time, not quadratic; the boundaries found are the same.
# Or (groups 5-7) a sentence end of a script without case, followed by anything: 。！？ (Chinese, Japanese; no space
# follows them), । ॥ (Devanagari), ؟ ۔ (Arabic, Urdu); a straight quote after it closes only before a space.
_BOUNDARY = re.compile(
    r"((?<![.!?])[.!?]++|…)((?:[\"'”’“‘)\]»›]|\s[»›])*)(\s+)(?=(?:[\"'“‘(\[¿¡„‚«‹]|[«‹]\s)*(\w))"
    r"|([。！？।॥؟۔][.!?…。！？।॥؟۔]*+)((?:[”’)\]»›」』）〕】》〉]|[\"'](?!\S))*)(\s*)"
)
_WS = re.compile(r"\s+")
PARAGRAPH_CHARS = 1_000_000  # a paragraph this long (no blank line) is split before its end
_LONGEST_WORD = 64  # a longer run of letters and dots before a '.' is never an abbreviation


def _starts_sentence(char: str) -> bool:
    """True if a sentence may start with ``char`` after ``. ``: an upper- or title-case letter, a decimal digit
    (any script), or a letter of a script without case (Unicode category Lo: CJK, Arabic, Hebrew, Devanagari...)."""
    return unicodedata.category(char) in ("Lu", "Lt", "Nd", "Lo")


def _is_abbreviation(text: str, start: int, end: int, next_char: str = "") -> bool:
    """True if the word of ``text[start:end]`` that ends at ``end`` (just before a '.') is an
    abbreviation or a single-letter initial, so the '.' does not end the sentence. ``next_char``:
    the first character after the whitespace that follows the '.'.

    The word is the run of letters (any script) and dots before ``end``, from its first letter. It is read
    by stepping back at most ``_LONGEST_WORD`` characters: linear time, also on degenerate lines."""
    i = end
    while i > start and (text[i - 1].isalpha() or text[i - 1] == "."):
        i -= 1
        if end - i > _LONGEST_WORD:
            return False
    run = text[i:end]
    first = next((k for k, c in enumerate(run) if c != "."), None)
    if first is None:
        return False
    word_raw = run[first:]
    word = word_raw.lower().rstrip(".")
    if word in ABBREVIATIONS:
        return True
    if word in CAPITALISED_ABBREVIATIONS and word_raw[0].isupper():
        return True
    if word in NUMBERED_ABBREVIATIONS and next_char.isdigit():
        return True
    if word == "al" and text[max(start, i - 3):i] == "et ":  # "et al."
        return True
    if len(word) == 1 and word_raw[0].isupper():  # initials: "J. R. R. Tolkien", "А. С. Пушкин"
        return True
    return bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))  # "u.s.a" style


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with rules (no NLTK data is needed).

    Boundaries are ``.``, ``!``, ``?``, ``...`` or ``…`` (with closing quotes or brackets) followed by
    whitespace and (after opening quotes, brackets, ``¿`` or ``¡``) an upper- or title-case letter of any
    script, a decimal digit or a letter of a script without case (:func:`_starts_sentence`); a ``.`` after a
    known English abbreviation (``Mr.``, ``e.g.``, ``Fig.``) or a single capital initial is not a boundary.
    ``。！？`` (CJK, no whitespace needed), ``। ॥`` (Devanagari) and ``؟ ۔`` (Arabic, Urdu) always end a sentence.
    Whitespace is normalised; empty pieces are dropped.
    """
    text = _WS.sub(" ", text).strip()
    if not text:
        return []
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group(1):
            punct = m.group(1)
            if not _starts_sentence(m.group(4)):
                continue
            if punct == "." and _is_abbreviation(text, start, m.start(1), text[m.end(3):m.end(3) + 1]):
                continue
            end, after = m.end(2), m.end(3)
        else:
            end, after = m.end(6), m.end(7)
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = after
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------


def _visible_files(path: Path) -> list[Path]:
    """``path`` itself, or the files under the folder ``path`` in sorted order; hidden files and anything
    under a hidden folder (.git/, .ipynb_checkpoints/) are not corpus data."""
    if path.is_file():
        return [path]
    from shared_losses.training.runtime import files_under

    return files_under(path, hidden=False)  # folders behind links too (a linked folder of books was left out)


_SAID_UNREAD: set[tuple[Path, tuple[Path, ...]]] = set()


def _text_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    visible = _visible_files(path)
    files = [p for p in visible if _format_suffix(p) in TEXT_SUFFIXES]
    skipped = [p for p in visible if _format_suffix(p) not in TEXT_SUFFIXES]
    if files and skipped and (path, tuple(skipped)) not in _SAID_UNREAD:  # a user's notes.rst: said, not dropped
        # silently, once: the corpus is read in several passes (the vocabulary, each epoch), and Python's own
        # once-per-place rule forgets what it showed whenever a library changes the warning filters between them
        _SAID_UNREAD.add((path, tuple(skipped)))
        shown = ", ".join(str(p.relative_to(path)) for p in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
        warnings.warn(f"corpus folder {path}: {len(skipped)} file(s) not read, their suffix is not a text file's "
                      f"({shown}); text files are *.txt, *.text, *.md or have no suffix, also compressed "
                      f"({', '.join(COMPRESSED)})", UserWarning, stacklevel=2)
    if not files:
        named = ", ".join(f"*{suffix}" for suffix in sorted(TEXT_SUFFIXES) if suffix)
        raise CorpusError(f"corpus folder {path} has no text files ({named} or files without a suffix, also "
                          f"compressed ({', '.join(COMPRESSED)}, e.g. *.txt.gz))")
    return files


def _open_text_file(path: Path):
    """``path`` opened in binary mode; gzip, bz2 and xz files (recognised by content) decompressed."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    for magic, kind in ARCHIVES.items():
        if head.startswith(magic):
            raise CorpusError(f"{path} is a {kind} archive: unpack it (gzip, bz2 and xz files are read directly)")
    if head.startswith(ZSTD):
        raise CorpusError(f"{path} is zstd-compressed: decompress it first (zstd -d {path.name}); gzip, bz2 and xz "
                          "files are read directly")
    for magic, opener in COMPRESSED.values():
        if head.startswith(magic) and (magic != b"BZh" or head[3:4].isdigit()):  # bzip2: "BZh" + block size
            return opener(path, "rb")
    return open(path, "rb")


#: The most of one line read at once where lines are joined into paragraphs: a longer line (a file without line
#: breaks) is read in pieces cut after a space, so memory stays bounded (a 100 MB file of one line took 2.2 GB).
LINE_PIECE = 1 << 20


def _line_pieces(readline, limit: int | None, encode=None) -> Iterator[tuple[bytes, bool]]:
    """``(piece, ends_line)`` of the lines ``readline`` gives: whole lines where ``limit`` is None, else a line longer
    than ``limit`` in pieces, each cut after its last whitespace (never inside a word or a UTF-8 character).
    ``encode``: how to make bytes of what ``readline`` returns (a text stream's str)."""
    carry = b""
    while True:
        got = readline() if limit is None else readline(limit)
        raw = encode(got) if encode is not None else got
        if not raw:
            if carry:
                yield carry, True
            return
        raw, carry = carry + raw, b""
        if limit is None or raw.endswith((b"\n", b"\r")) or len(got) < limit:  # the line's end, or the file's
            yield raw, True
            continue
        cut = max(raw.rfind(b" "), raw.rfind(b"\t")) + 1
        if cut <= 0:  # no whitespace: cut before the last character's first byte (UTF-8: never inside one)
            cut = len(raw)
            while cut > 0 and 0x80 <= raw[cut - 1] < 0xC0:
                cut -= 1
            cut = cut - 1 if cut > 0 and raw[cut - 1] >= 0xC0 else cut
            cut = cut if cut > 0 else len(raw)
        piece, carry = raw[:cut], raw[cut:]
        yield piece, False


def _iter_text_file(path: Path, stats: CorpusStats, whole_lines: bool = True) -> Iterator[str | None]:
    """Decoded, stripped lines of a file; ``None`` stands for an empty line (a paragraph break).
    Undecodable lines are counted and skipped; each yields ``""``, which ends the paragraph (the
    text on either side is never joined into one sentence) but is not a blank line. UTF-16 with a
    byte-order mark (Windows editors' "Unicode"), or without one where its first bytes show it, is decoded as such;
    a file whose first 64 KiB end lines with CR alone (old Mac) is split at CR. ``whole_lines=False`` (lines joined
    into paragraphs): a line longer than :data:`LINE_PIECE` comes in pieces cut after a space, whose joining with
    spaces gives the line's text."""
    limit = None if whole_lines else LINE_PIECE
    with _open_text_file(path) as fh:
        head = _first_bytes(fh, path)
        lines = _line_pieces(fh.readline, limit)
        _refuse_tar(head, path)
        if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
            text = io.TextIOWrapper(fh, encoding="utf-16", errors="replace")
            lines = _line_pieces(text.readline, limit, lambda line: line.encode("utf-8"))
        elif _bomless_utf16(head):  # iconv's utf-16le / utf-16be: every other byte 0, read as NULs between letters
            text = io.TextIOWrapper(fh, encoding=_bomless_utf16(head), errors="replace")
            lines = _line_pieces(text.readline, limit, lambda line: line.encode("utf-8"))
        elif b"\r" in head and b"\n" not in head:  # old Mac line endings (CR alone): the whole file was one line
            text = io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline=None)
            lines = _line_pieces(text.readline, limit, lambda line: line.encode("utf-8", "surrogateescape"))
        lineno, ended = 0, True
        for raw, ends_line in _read_or_fail(lines, path):
            if ended:
                lineno += 1
                stats.lines += 1
            continued, ended = not ended, ends_line
            try:
                line = raw.decode("utf-8")
                if "\x00" in line:  # NUL bytes (a binary file, or a write cut off by a crash): no text, as above
                    raise UnicodeDecodeError("utf-8", raw, raw.index(b"\x00"), raw.index(b"\x00") + 1, "NUL byte")
            except UnicodeDecodeError:
                stats.undecodable_lines += 1
                if len(stats.examples) < 5:
                    stats.examples.append(f"{path}:{lineno}")
                yield ""
                continue
            line = line.replace("\ufeff", "").strip()
            if not line:
                if continued or not ended:  # only spaces in a piece of a long line: not a blank line
                    continue
                stats.empty_lines += 1
                yield None
                continue
            yield line


def _bomless_utf16(head: bytes) -> str | None:
    """``"utf-16-le"`` / ``"utf-16-be"`` where the first bytes are text of that encoding without a byte-order mark
    (nearly every odd, or even, byte 0 and the others not), else None."""
    n = len(head) - len(head) % 2
    if n < 8:
        return None
    even, odd = head[0:n:2], head[1:n:2]
    zero = lambda b: b.count(0) / len(b)  # noqa: E731
    if zero(odd) >= 0.9 and zero(even) <= 0.1:
        return "utf-16-le"
    if zero(even) >= 0.9 and zero(odd) <= 0.1:
        return "utf-16-be"
    return None


FIRST_BYTES = 1 << 16  # what the sniffing of a file's kind and line endings reads

_READ_ERRORS = (EOFError, OSError, lzma.LZMAError)  # a truncated or corrupt compressed file


def _unreadable(path: Path, err: Exception) -> CorpusError:
    return CorpusError(f"could not read {path} ({type(err).__name__}: {err}); is the file complete?")


def _read_or_fail(lines, path: Path) -> Iterator[bytes]:
    try:
        yield from lines
    except _READ_ERRORS as err:
        raise _unreadable(path, err) from err


def _refuse_tar(head: bytes, path: Path) -> None:
    if head[257:262] == b"ustar":  # also inside .tar.gz
        raise CorpusError(f"{path} is a tar archive: unpack it (gzip, bz2 and xz files are read directly)")


def _refuse_archive(path: Path) -> None:
    """The :class:`CorpusError` reading ``path`` would raise for an archive (zip, 7z, tar, zstd), raised now."""
    with _open_text_file(path) as fh:  # zip, 7z and zstd refused here
        _refuse_tar(_first_bytes(fh, path), path)


def _first_bytes(fh, path: Path) -> bytes:
    """The first bytes of ``fh``, which is left at its start: enough to see a tar header, and the line ending of a
    file whose first lines are long (a CR-only file's first paragraph of 300 characters was read as all one line)."""
    try:
        head = fh.read(FIRST_BYTES)
        fh.seek(0)
    except _READ_ERRORS as err:
        raise _unreadable(path, err) from err
    return head


def iter_text_sentences(
    source: str | os.PathLike,
    stats: CorpusStats | None = None,
    doc_boundary: str = "file",
    one_sentence_per_line: bool = False,
) -> Iterator[tuple[int, str]]:
    """Stream ``(doc_id, sentence)`` from a plain-text file or folder, in order.

    ``doc_boundary``: ``"file"`` (each file is a document), ``"blank_line"`` (blank lines separate
    documents) or ``"line"`` (each line is a document). Within a document, lines are joined into
    paragraphs at blank lines and split into sentences, unless ``one_sentence_per_line`` (the
    BookCorpus release style), where each non-empty line is one sentence.
    """
    if doc_boundary not in ("file", "blank_line", "line"):
        raise CorpusError(f"doc_boundary must be 'file', 'blank_line' or 'line', got {doc_boundary!r}")
    stats = stats if stats is not None else CorpusStats()
    path = Path(source)
    if not path.exists():
        raise CorpusError(f"corpus not found: {path}")
    doc, has_content = -1, False

    for file in _text_files(path):
        stats.files += 1
        if doc < 0 or has_content:  # every file starts a new document, whatever doc_boundary
            doc, has_content = doc + 1, False
            stats.documents += 1
        pending = False
        para: list[str] = []
        para_chars = carried = 0
        for line in _iter_text_file(file, stats, whole_lines=one_sentence_per_line or doc_boundary == "line"):
            if not line:  # a blank line (None) or a skipped undecodable one (""): the paragraph ends
                pieces = split_sentences(" ".join(para))
                para.clear()
                para_chars = carried = 0
                for s in pieces:
                    stats.sentences += 1
                    has_content = True
                    yield doc, s
                if line is None:
                    pending = doc_boundary == "blank_line" and has_content
                continue
            if (pending or doc_boundary == "line") and has_content:
                doc, has_content = doc + 1, False
                stats.documents += 1
            pending = False
            if one_sentence_per_line:
                pieces = [_WS.sub(" ", line)]
            elif doc_boundary == "line":
                pieces = split_sentences(line)
            else:
                para.append(line)
                para_chars += len(line) + 1
                if para_chars <= max(PARAGRAPH_CHARS, 2 * carried):
                    continue
                # A long run without a blank line: split it now and carry its last (perhaps unfinished)
                # sentence on, so memory stays bounded; the sentences are the same.
                pieces = split_sentences(" ".join(para))
                if para_chars > 10_000 * len(pieces):  # prose has about 100 characters a sentence
                    raise CorpusError(
                        f"{file}: {para_chars} characters without a blank line hold only {len(pieces)} sentence(s) "
                        "the splitter recognises (it needs '.', '!' or '?' before a capital letter or a digit, or "
                        "。！？ । ؟). One sentence per line, such as the lower-cased BookCorpus release? pass "
                        "--one-sentence-per-line True (one paragraph per line: --doc-boundary line)"
                    )
                para[:] = pieces[-1:]
                carried = para_chars = len(pieces[-1])
                pieces = pieces[:-1]
            for s in pieces:
                stats.sentences += 1
                has_content = True
                yield doc, s
        for s in split_sentences(" ".join(para)):
            stats.sentences += 1
            has_content = True
            yield doc, s
    if stats.sentences == 0:
        raise CorpusError(
            f"corpus {path} has no usable sentences ({stats.lines} lines, {stats.empty_lines} empty, "
            f"{stats.undecodable_lines} not UTF-8 text)"
        )


def _is_saved_dataset(path: Path) -> bool:
    """A folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return path.is_dir() and any((path / n).exists() for n in ("dataset_info.json", "state.json", "dataset_dict.json"))


def _rows(ds, source: str, stats: CorpusStats):
    """Rows of a streamed dataset; a read/parse failure (not UTF-8, malformed JSON) becomes a
    :class:`CorpusError` naming the source (datasets cannot skip a bad row). datasets reads a file in blocks and
    numbers the rows of its errors in the failing block, so the rows read before it are the blocks before."""
    from shared_losses.training.cli import end_without_finalising

    end_without_finalising("a datasets stream")  # left part-read, its Parquet reader can abort the exit
    try:
        yield from ds
    except Exception as err:  # noqa: BLE001 - arrow / json / decode errors come in many types
        after = f" after its first {stats.lines} rows" if stats.lines else ""
        raise CorpusError(
            f"could not read {source!r}{after} ({type(err).__name__}: {err}); "
            "datasets sources must be valid UTF-8 and well-formed (bad rows cannot be skipped; plain-text "
            "corpora skip and count bad lines)"
        ) from err


def _parquet_rows(path: Path) -> int:
    """The number of rows a Parquet file's footer records (datasets' streaming fails on a file of none)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def hub_corpus(source: str) -> tuple[str, str | None]:
    """``(dataset id, configuration)`` of a hub corpus: ``hf:NAME`` or ``hf:NAME:CONFIG`` (a dataset of several
    configurations, e.g. ``hf:Salesforce/wikitext:wikitext-103-raw-v1``; :func:`shared_losses.data.hub_spec`). A
    source without ``hf:`` is a name as it is."""
    from shared_losses.data import DataError, hub_spec

    if not source.startswith("hf:"):
        return source, None
    try:
        return hub_spec(source, "a hub corpus")
    except DataError as err:
        raise CorpusError(f"corpus {err}") from None


def _load_datasets_stream(source: str, text_column: str, split: str):
    """A streamed :mod:`datasets` iterable for a local data file/folder or a hub name."""
    import datasets

    from shared_losses.data import hub_choice_error, hub_dataset_hint, load_hub_dataset

    path = Path(source.removeprefix("hf:"))
    try:
        if not source.startswith("hf:") and path.exists():
            if _is_saved_dataset(path):
                ds = datasets.load_from_disk(str(path))
                if isinstance(ds, datasets.DatasetDict):
                    if split not in ds:
                        raise CorpusError(f"dataset {path} has splits {sorted(ds)}, not {split!r}")
                    ds = ds[split]
                return ds.to_iterable_dataset()
            if path.is_file() and (path.stat().st_size == 0 or path.suffix.lower() == ".parquet"
                                   and _parquet_rows(path) == 0):
                raise CorpusError(f"corpus file {path} is empty")
            builder = DATASETS_SUFFIXES.get(_format_suffix(path))
            if builder is None:
                raise CorpusError(f"cannot tell the format of {path}: use .json/.jsonl/.csv/.tsv/.parquet or plain "
                                  "text")
            return datasets.load_dataset(builder, data_files=str(path), split=split, streaming=True,
                                         **DATASETS_OPTIONS.get(_format_suffix(path), {}))
        name, config = hub_corpus(source)
        return load_hub_dataset(name, config, split=split, streaming=True)
    except CorpusError:
        raise
    except Exception as err:  # noqa: BLE001 - hub / network failures come in many types
        if not source.startswith("hf:") and path.exists():  # a local file: no point hinting at the hub
            raise CorpusError(f"could not load {path} with datasets ({type(err).__name__}: {err})") from err
        choice = hub_choice_error(source, split, err) if source.startswith("hf:") else None
        if choice is not None:
            raise CorpusError(choice) from err
        raise CorpusError(
            f"could not load dataset {source!r} with datasets.load_dataset ({type(err).__name__}: {err}). "
            f"{hub_dataset_hint(err)}; or pass a local text file/folder or a local .jsonl/.parquet file."
        ) from err


def iter_dataset_sentences(
    source: str,
    stats: CorpusStats | None = None,
    text_column: str = "text",
    doc_field: str | None = None,
    split: str = "train",
    one_sentence_per_line: bool = True,
) -> Iterator[tuple[int, str]]:
    """Stream ``(doc_id, sentence)`` from a :mod:`datasets` source (local file or hub, e.g.
    ``bookcorpus``, whose rows are single sentences). A change of ``doc_field`` starts a new
    document; without it the whole corpus is one document (as in BookCorpus' public release)."""
    stats = stats if stats is not None else CorpusStats()
    ds = _load_datasets_stream(source, text_column, split)
    doc, last_key = 0, object()
    for row in _rows(ds, source, stats):
        stats.lines += 1
        if text_column not in row:
            raise CorpusError(f"dataset {source!r} has no column {text_column!r}; columns: {sorted(row)}")
        if doc_field is not None:
            if doc_field not in row:
                raise CorpusError(f"dataset {source!r} has no column {doc_field!r}; columns: {sorted(row)}")
            key = row[doc_field]
            if key != last_key:
                if stats.documents > 0:
                    doc += 1
                stats.documents += 1
                last_key = key
        elif stats.documents == 0:
            stats.documents = 1
        text = row[text_column]
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                stats.undecodable_lines += 1
                continue
        if text is not None and not isinstance(text, str):  # a number, true/false, a list: not a text
            raise CorpusError(f"dataset {source!r}, row {stats.lines}: column {text_column!r} holds "
                              f"{type(text).__name__} {str(text)[:40]!r}, not a text (a malformed row; a null "
                              "or empty text is skipped and counted)")
        if text is None or not text.strip():
            stats.empty_lines += 1
            continue
        pieces = [_WS.sub(" ", text.strip())] if one_sentence_per_line else split_sentences(text)
        for s in pieces:
            stats.sentences += 1
            yield doc, s
    if stats.sentences == 0:
        raise CorpusError(f"dataset {source!r} has no usable sentences in column {text_column!r}")


def is_plain_text(source: str) -> bool:
    path = Path(source)
    if source.startswith("hf:") or not path.exists():
        return False
    if path.is_dir():
        return not _is_saved_dataset(path)
    return _format_suffix(path) not in DATASETS_SUFFIXES


def shipped_or_given(source: str) -> str:
    """``source`` itself, unless it is a relative ``nlp_qt/data/...`` path (the presets' shipped books) that the
    current folder does not hold: then that path inside the installed package, so a preset runs from any folder."""
    path = Path(source)
    if not source or source.startswith("hf:") or path.is_absolute() or path.exists():
        return source
    if path.parts[:2] == ("nlp_qt", "data"):
        shipped = Path(__file__).resolve().parent.joinpath(*path.parts[1:])
        if shipped.exists():
            return str(shipped)
    return source


def corpus_fingerprint(source: str) -> dict | None:
    """What a resume checks to know it reads the corpus it stopped in: the number of files under a
    local ``source`` (a file, a text folder or a saved dataset; hidden paths ignored), their total size and
    a digest of their relative paths and sizes. ``None`` for a hub dataset, which cannot be checked cheaply."""
    import hashlib

    source = shipped_or_given(source)
    path = Path(source)
    if source.startswith("hf:") or not path.exists():
        return None
    files = _visible_files(path)
    digest = hashlib.sha256()
    sizes = [f.stat().st_size for f in files]
    for f, size in zip(files, sizes):
        digest.update(f"{f.relative_to(path).as_posix() if f != path else f.name}\0{size}\n".encode())
    return {"files": len(files), "bytes": sum(sizes), "digest": digest.hexdigest()}


def _check_plain_text_source(source: str, text_column: str, doc_field: str | None) -> None:
    """A table's options given for plain text are refused (they were ignored: a .tsv file's header and columns were
    read as sentences); a single file whose suffix is not a text file's is read as text, and a warning says so."""
    tables = "/".join(DATASETS_SUFFIXES)
    for option, value, given in (("--doc-field", doc_field, doc_field is not None),
                                 ("--text-column", text_column, text_column != "text")):
        if given:
            raise CorpusError(f"{option} {value} names a column, but the corpus {source} is plain text, which has "
                              f"none; columns are read from {tables} files (compressed too), save_to_disk folders "
                              "and hf: datasets (for plain text: --doc-boundary)")
    path = Path(source)
    if path.is_file() and _format_suffix(path) not in TEXT_SUFFIXES:
        _refuse_archive(path)  # an archive's refusal alone, without a warning that it would be read as text first
        warnings.warn(f"corpus {path} is read as plain text: its suffix {_format_suffix(path)!r} is neither a text "
                      f"file's (*.txt, *.text, *.md, none) nor a table's ({tables})", UserWarning, stacklevel=3)


def iter_corpus(
    source: str,
    stats: CorpusStats | None = None,
    *,
    text_column: str = "text",
    doc_field: str | None = None,
    doc_boundary: str = "file",
    one_sentence_per_line: bool | None = None,
    split: str = "train",
) -> Iterator[tuple[int, str]]:
    """Dispatch to :func:`iter_text_sentences` (plain text) or :func:`iter_dataset_sentences`."""
    if not source:
        raise CorpusError("no corpus given (pass a text file, a folder, a .jsonl file or hf:NAME)")
    source = shipped_or_given(source)
    if is_plain_text(source):
        _check_plain_text_source(source, text_column, doc_field)
        return iter_text_sentences(source, stats, doc_boundary, bool(one_sentence_per_line))
    local = Path(source)
    if not source.startswith("hf:") and not local.exists() and (os.sep in source or local.suffix):
        raise CorpusError(f"corpus not found: {source}")
    if doc_boundary != "file":  # it was ignored: a table's documents are told apart by a column
        raise CorpusError(f"--doc-boundary {doc_boundary} is for plain text; the corpus {source} is a table, whose "
                          "documents a column tells apart: --doc-field NAME (a new value starts a new document)")
    return iter_dataset_sentences(
        source, stats, text_column, doc_field, split, True if one_sentence_per_line is None else one_sentence_per_line
    )


# ------------------------------------------------------------------------------------------------
# Batching
# ------------------------------------------------------------------------------------------------


@dataclass
class SentenceBatch:
    """Consecutive sentences of the corpus; ``doc_ids[i] == doc_ids[i+1]`` iff i and i+1 are
    neighbours."""

    sentences: list[str]
    doc_ids: list[int]


def contiguous_batches(
    stream: Iterable[tuple[int, str]], batch_size: int, drop_last: bool = True
) -> Iterator[SentenceBatch]:
    """Cut a ``(doc_id, sentence)`` stream into batches of ``batch_size`` consecutive sentences.

    No shuffling (QT's setup): a batch is a contiguous run of the corpus, so each sentence's
    previous and next sentences are in the batch unless it sits at a batch edge or a document edge.
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 (a sentence needs a neighbour), got {batch_size}")
    sents: list[str] = []
    docs: list[int] = []
    for doc, s in stream:
        sents.append(s)
        docs.append(doc)
        if len(sents) == batch_size:
            yield SentenceBatch(sents, docs)
            sents, docs = [], []
    if sents and not drop_last and len(sents) >= 2:
        yield SentenceBatch(sents, docs)
