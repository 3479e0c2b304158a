"""Pretrained word vectors as their authors publish them, for ``nlp_qt.train --word-vectors FILE``.

Read without gensim (not needed for these formats):

* GloVe's text files (``glove.6B.300d.txt``): one word and its numbers per line, no header. A word may hold spaces
  (GloVe's 840B vectors have such entries): the last ``dim`` fields of a line are the numbers, the rest the word.
* word2vec's and fastText's text files (``.vec``, word2vec ``binary=False``): the same after a header line
  ``<count> <dim>``.
* word2vec's binary files (``.bin``, Mikolov's ``GoogleNews-vectors-negative300.bin``): the header line, then per word
  its UTF-8 bytes up to a space and ``dim`` little-endian float32 numbers (a newline between entries is allowed).

Each may be gzip-compressed (``.gz``). :func:`open_vector_file` reads the header and the first entry only (the size is
checked before the corpus is read); :meth:`VectorFile.select` then reads the file once, keeping only the vectors of
the words asked for, so a multi-GB file costs the vocabulary's share of memory, not the file's. A malformed line
or entry, a number that is not finite, or a file that ends inside an entry is a ValueError naming the file and the
line (or entry).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import numpy as np

#: The endings of a binary word2vec file (also with .gz); every other file is read as text.
BINARY_SUFFIXES = (".bin",)


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _is_binary(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(BINARY_SUFFIXES)


def _header(line: bytes) -> tuple[int, int] | None:
    """``(count, dim)`` of a word2vec / fastText header line, or None for a line that is not one."""
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


@dataclass
class VectorFile:
    """A word-vector file, opened (:func:`open_vector_file`): its format and size; :meth:`select` reads the vectors."""

    path: Path
    dim: int
    binary: bool
    header: bool

    def entries(self) -> Iterator[tuple[str, np.ndarray]]:
        """Every ``(word, vector)`` of the file, in order, checked."""
        with _open(self.path) as f:
            yield from (self._binary_entries(f) if self.binary else self._text_entries(f))

    def _text_entries(self, f: BinaryIO) -> Iterator[tuple[str, np.ndarray]]:
        for number, raw in enumerate(f, start=1):
            if number == 1 and self.header:
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.rstrip().rsplit(" ", self.dim)
            if len(parts) != self.dim + 1 or not parts[0]:
                raise ValueError(f"word vectors {self.path}, line {number}: expected a word and {self.dim} numbers, "
                                 f"got {len(line.split())} fields")
            try:
                vector = np.array(parts[1:], dtype=np.float32)
            except ValueError:
                raise ValueError(f"word vectors {self.path}, line {number}: the {self.dim} fields after the word are "
                                 f"not all numbers ({line[:80]!r})") from None
            if not np.isfinite(vector).all():
                raise ValueError(f"word vectors {self.path}, line {number}: the vector of {parts[0]!r} holds a value "
                                 "that is not finite")
            yield parts[0], vector

    def _binary_entries(self, f: BinaryIO) -> Iterator[tuple[str, np.ndarray]]:
        count, _ = _header(f.readline()) or (0, 0)
        size = 4 * self.dim
        for entry in range(1, count + 1):
            word = bytearray()
            while True:
                c = f.read(1)
                if not c:
                    raise ValueError(f"word vectors {self.path}: the file ends inside entry {entry} of {count} (cut "
                                     "short?)")
                if c == b" ":
                    break
                if c != b"\n" or word:  # a newline before the word ends the previous entry
                    word += c
            data = f.read(size)
            if len(data) < size:
                raise ValueError(f"word vectors {self.path}: the file ends inside entry {entry} of {count} (cut "
                                 "short?)")
            vector = np.frombuffer(data, dtype="<f4").astype(np.float32)
            text = word.decode("utf-8", errors="replace")
            if not np.isfinite(vector).all():
                raise ValueError(f"word vectors {self.path}, entry {entry}: the vector of {text!r} holds a value that "
                                 "is not finite")
            yield text, vector

    def select(self, wanted: Iterable[str]) -> tuple[list[str], np.ndarray]:
        """``(words, vectors [len(words), dim])``: the file's vectors of the words in ``wanted`` (the first where the
        file lists a word twice), read in one pass."""
        wanted = set(wanted)
        words: list[str] = []
        rows: list[np.ndarray] = []
        seen: set[str] = set()
        for word, vector in self.entries():
            if word in wanted and word not in seen:
                seen.add(word)
                words.append(word)
                rows.append(vector)
        vectors = np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
        return words, vectors


def is_vector_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file (a word-vector file, as opposed to an nlp_qt.bow folder)."""
    return Path(path).is_file()


def open_vector_file(path: str | os.PathLike) -> VectorFile:
    """The format and size of the word-vector file ``path``, from its first line(s); one ValueError naming the file
    otherwise (empty, no numbers, a binary file's header missing)."""
    path = Path(path)
    binary = _is_binary(path)
    try:
        with _open(path) as f:
            first = f.readline()
            head = _header(first)
            if binary:
                if head is None:
                    raise ValueError(f"word vectors {path}: a binary word2vec file starts with a line '<count> <dim>',"
                                     f" this one with {first[:40]!r}")
                if not path.name.endswith(".gz") and 4 * head[1] > path.stat().st_size - len(first):
                    raise ValueError(f"word vectors {path}: its header says {head[1]}-d vectors, which need "
                                     f"{4 * head[1]} bytes each, more than the file's {path.stat().st_size}: the "
                                     "header is damaged")
                return VectorFile(path, head[1], True, True)
            line = f.readline() if head is not None else first
    except (OSError, EOFError) as err:  # gzip's BadGzipFile is an OSError
        raise ValueError(f"word vectors {path}: unreadable ({err})") from None
    text = line.decode("utf-8", errors="replace").split()
    if len(text) < 2:
        raise ValueError(f"word vectors {path}: no word and numbers on its first line (a GloVe or word2vec text file "
                         "holds a word and its numbers per line; binary word2vec files end in .bin)")
    dim = head[1] if head is not None else len(text) - 1
    if head is not None and len(text) < dim + 1:
        raise ValueError(f"word vectors {path}: its header says {dim}-d vectors but its first vector has "
                         f"{len(text) - 1} numbers: the header is damaged (or the file is not word2vec text)")
    if head is None:  # GloVe: the dimension from the first line; its numbers must be numbers
        try:
            np.array(text[-dim:], dtype=np.float32)
        except ValueError:
            raise ValueError(f"word vectors {path}: its first line is not a word and numbers ({line[:80]!r})") from None
    return VectorFile(path, dim, False, head is not None)
