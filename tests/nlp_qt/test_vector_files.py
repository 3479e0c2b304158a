"""nlp_qt.vector_files, the reader of published word-vector files (GloVe text, word2vec / fastText .vec, word2vec
.bin, each also .gz), on its own: what --word-vectors FILE reads (tests/nlp_qt/test_train.py runs it in training)."""

import gzip

import numpy as np
import pytest

from nlp_qt.vector_files import open_vector_file


def test_every_format_gives_the_vectors_of_the_words_asked_for(tmp_path):
    words = ["the", "cat", "a word", "dog"]
    vectors = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    text = "\n".join(f"{w} " + " ".join(repr(float(x)) for x in v) for w, v in zip(words, vectors)) + "\n"
    (tmp_path / "g.txt").write_text(text)
    (tmp_path / "w.vec.gz").write_bytes(gzip.compress(("4 3\n" + text).encode()))
    binary = b"3 3\n" + b"".join(w.encode() + b" " + v.astype("<f4").tobytes() for w, v in
                                  zip(["the", "cat", "dog"], vectors[[0, 1, 3]]))  # no newline between entries
    (tmp_path / "w.bin").write_bytes(binary)
    for name in ("g.txt", "w.vec.gz", "w.bin"):
        f = open_vector_file(tmp_path / name)
        assert f.dim == 3 and f.binary == name.endswith(".bin") and f.header == (name != "g.txt")
        got_words, got = f.select({"dog", "the", "zebra"})
        assert got_words == ["the", "dog"] and np.array_equal(got, vectors[[0, 3]]), name
    assert open_vector_file(tmp_path / "g.txt").select({"a word"})[0] == ["a word"]  # GloVe 840B's spaced words
    assert open_vector_file(tmp_path / "g.txt").select(set())[1].shape == (0, 3)


def test_a_damaged_file_is_named_by_line_or_entry(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty.txt: no word and numbers on its first line"):
        open_vector_file(tmp_path / "empty.txt")
    (tmp_path / "nan.txt").write_text("cat 0.1 0.2\nthe nan 0.2\n")
    with pytest.raises(ValueError, match="nan.txt, line 2: the vector of 'the' holds a value that is not finite"):
        open_vector_file(tmp_path / "nan.txt").select({"the"})
    (tmp_path / "words.txt").write_text("cat 0.1 0.2\nthe x y\n")
    with pytest.raises(ValueError, match="words.txt, line 2: the 2 fields after the word are not all numbers"):
        open_vector_file(tmp_path / "words.txt").select({"the"})
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="bad.gz: unreadable"):
        open_vector_file(tmp_path / "bad.gz")


def test_a_header_claiming_more_than_the_vectors_hold_is_called_damaged(tmp_path):
    """A header '3 1000000000' was refused by --word-dim's check with the advice "set --word-dim 1000000000", which
    then tried to allocate 808 GB (a probe): the header is now checked against the first vector (text) or the file's
    size (binary)."""
    (tmp_path / "w.vec").write_text("3 1000000000\nthe 0.1 0.2 0.3\ncat 0.1 0.2 0.3\ndog 0.1 0.2 0.3\n")
    with pytest.raises(ValueError, match=r"w.vec: its header says 1000000000-d vectors but its first vector has 3 "
                                         r"numbers: the header is damaged"):
        open_vector_file(tmp_path / "w.vec")
    (tmp_path / "w.bin").write_bytes(b"1 1000000000\nthe " + np.zeros(3, "<f4").tobytes())
    with pytest.raises(ValueError, match=r"w.bin: its header says 1000000000-d vectors, which need 4000000000 bytes "
                                         r"each, more than the file's 29: the header is damaged"):
        open_vector_file(tmp_path / "w.bin")
