"""The shipped books corpus (issue 15: at least a million words of contiguous English prose, offline)
and the bag-of-words baseline (mean of word2vec vectors trained on the same corpus)."""

import json
import lzma
from pathlib import Path

import numpy as np
import pytest

from nlp_qt.corpus import CorpusStats, iter_corpus

BOOKS = Path(__file__).resolve().parents[2] / "nlp_qt" / "data" / "books"


def test_books_corpus_has_a_million_words_in_eight_documents():
    manifest = json.loads((BOOKS.parent / "books_manifest.json").read_text())
    files = sorted(BOOKS.glob("*.txt.xz"))
    assert sorted(p.name for p in BOOKS.iterdir()) == [f.name for f in files]  # nothing else is read as text
    assert [f.name[: -len(".txt.xz")] for f in files] == sorted(manifest["files"])
    words = {f.name[: -len(".txt.xz")]: len(lzma.decompress(f.read_bytes()).decode("utf-8").split()) for f in files}
    assert words == {k: v["words"] for k, v in manifest["files"].items()}
    assert sum(words.values()) == manifest["words"] >= 1_000_000
    stats = CorpusStats()
    docs, n = set(), 0
    for doc, sentence in iter_corpus(str(BOOKS), stats):
        docs.add(doc)
        n += 1
        assert "gutenberg" not in sentence.lower()
    assert len(docs) == 8 and stats.undecodable_lines == 0 and n > 40_000


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    text = lzma.decompress((BOOKS / "austen_persuasion.txt.xz").read_bytes()).decode("utf-8")
    (root / "persuasion.txt").write_text(text[:60_000])
    return root


def test_bow_baseline_is_deterministic_and_averages_known_words(small_corpus, tmp_path):
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, is_bow_dir, load_bow_encoder, train_bow

    cfg = dict(corpus=str(small_corpus), dim=16, epochs=2, min_count=2, seed=3)
    a = train_bow(BowConfig(output_dir=str(tmp_path / "a"), **cfg))
    b = train_bow(BowConfig(output_dir=str(tmp_path / "b"), **cfg))
    assert is_bow_dir(a) and np.array_equal(np.load(a / "word_vectors.npy"), np.load(b / "word_vectors.npy"))
    assert train_bow(BowConfig(output_dir=str(a), **cfg)) == a  # same settings: reused, not retrained
    with pytest.raises(FileExistsError, match="not empty"):
        train_bow(BowConfig(output_dir=str(a), **{**cfg, "dim": 8}))
    words = json.loads((a / "words.json").read_text())
    vec = np.load(a / "word_vectors.npy")
    encode = load_bow_encoder(a)
    out = encode(["Anne was at Kellynch.", "qqqzzz xxyyzz"])
    known = [w for w in ["Anne", "was", "at", "Kellynch", "."] if w in words]
    assert len(known) >= 3
    assert np.allclose(out[0], vec[[words.index(w) for w in known]].mean(axis=0), atol=1e-6)
    assert out.shape == (2, 16) and not out[1].any()  # no known word: zeros


def test_bow_refuses_a_folder_holding_other_files(small_corpus, tmp_path):
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, train_bow

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        train_bow(BowConfig(corpus=str(small_corpus), output_dir=str(tmp_path), dim=8, epochs=1))
    assert (tmp_path / "notes.txt").read_text() == "mine" and len(list(tmp_path.iterdir())) == 1
    from nlp_qt.bow import main
    from shared_losses.training.cli import run_cli

    with pytest.raises(SystemExit) as stopped:  # the command: one error: line and status 2, as every refusal (it
        run_cli(lambda: main(["--corpus", str(small_corpus), "--output-dir", str(tmp_path)]))  # was bare, status 1)
    assert stopped.value.code == 2


@pytest.mark.parametrize("option, value, words", [
    ("window", 0, r"--window must be a whole number in \[1, 2147483647\], got 0"),  # gensim's thread died: a hang
    ("window", 10**12, r"--window must be a whole number in \[1, 2147483647\]"),
    ("dim", 0, r"--dim must be a whole number >= 1, got 0"),  # a file of vectors of no dimensions
    ("negative", -1, r"--negative must be a whole number in \[1, "),  # taken silently
    ("epochs", 0, r"--epochs must be a whole number in \[1, "),  # gensim's words, naming no option
    ("seed", -1, r"--seed must be a whole number in \[0, 4294967295\], got -1"),
    ("max_sentences", 0, r"--max-sentences must be a whole number >= 1, got 0"),
    ("min_count", 10**12, r"no word occurs --min-count 1000000000000 times in the \d+ sentences read"),
])
def test_bow_refuses_what_gensim_would_hang_on_take_silently_or_refuse_in_its_words(small_corpus, tmp_path, option,
                                                                                  value, words):
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, train_bow

    with pytest.raises(ValueError, match=words):
        train_bow(BowConfig(corpus=str(small_corpus), output_dir=str(tmp_path / "out"),
                            **{"dim": 8, "epochs": 1, "max_sentences": 300, option: value}))
    assert not list(tmp_path.iterdir())


def test_bow_leaves_a_users_folder_named_like_its_staging_alone(small_corpus, tmp_path):
    """The baseline was written in OUT.tmp (a visible sibling, reused), so a user's folder of that name ended up
    inside the baseline and was gone."""
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, is_bow_dir, train_bow

    (tmp_path / "out.tmp").mkdir()
    (tmp_path / "out.tmp" / "mine.txt").write_text("notes")
    (tmp_path / "out").mkdir()  # an empty folder is taken
    out = train_bow(BowConfig(corpus=str(small_corpus), output_dir=str(tmp_path / "out"), dim=8, epochs=1,
                              max_sentences=300, min_count=1))
    assert is_bow_dir(out) and not (out / "mine.txt").exists()
    assert (tmp_path / "out.tmp" / "mine.txt").read_text() == "notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.tmp"]


def test_bow_encodes_with_the_tokenizer_version_its_words_were_split_with(small_corpus, tmp_path):
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, bow_tokenizer_version, load_bow_encoder, train_bow
    from nlp_qt.vocab import TOKENIZER_VERSION

    a = train_bow(BowConfig(corpus=str(small_corpus), output_dir=str(tmp_path / "a"), dim=8, epochs=1, min_count=1))
    assert json.loads((a / "bow.json").read_text())["tokenizer"] == TOKENIZER_VERSION == bow_tokenizer_version(a)
    # a Cyrillic word: whole under version 3, its letters under version 2 (the version of folders without the record)
    words = json.loads((a / "words.json").read_text())
    (a / "words.json").write_text(json.dumps(["кот", "к", "о", "т"] + words[4:]))
    vec = np.load(a / "word_vectors.npy")
    assert np.allclose(load_bow_encoder(a)(["кот"])[0], vec[0], atol=1e-6)
    info = json.loads((a / "bow.json").read_text())
    del info["tokenizer"]
    (a / "bow.json").write_text(json.dumps(info))
    assert bow_tokenizer_version(a) == 2
    assert np.allclose(load_bow_encoder(a)(["кот"])[0], vec[1:4].mean(axis=0), atol=1e-6)


def test_words_listed_twice_in_word_vectors_are_named(tmp_path):
    """A words.json with 'the' twice gave 'the' its last vector without a word."""
    import json
    import warnings

    import numpy as np

    from nlp_qt.bow import BOW_MARKER, read_word_vectors

    (tmp_path / BOW_MARKER).write_text("{}")
    (tmp_path / "words.json").write_text(json.dumps(["the", "cat", "the", "dog"]))
    np.save(tmp_path / "word_vectors.npy", np.arange(8, dtype=np.float32).reshape(4, 2))
    with pytest.warns(UserWarning, match=r"1 word\(s\) listed more than once in words.json \('the'\); each takes "
                                         r"its last vector"):
        words, vectors, _ = read_word_vectors(tmp_path)
    assert words == ["the", "cat", "the", "dog"] and vectors.shape == (4, 2)
    (tmp_path / "words.json").write_text(json.dumps(["the", "cat", "a", "dog"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_word_vectors(tmp_path)


def test_the_bag_of_words_reads_the_corpus_as_the_encoders_do(tmp_path):
    """nlp_qt.bow took --corpus only: a .jsonl corpus with its text in another column, or plain text read one
    sentence per line, gave the encoders other sentences than the baseline (or none: 'no column text')."""
    pytest.importorskip("gensim")
    from nlp_qt.bow import BowConfig, _sentences, main
    from nlp_qt.config import Config
    from nlp_qt.train import sentence_stream
    from nlp_qt.vocab import tokenize

    rows = [{"body": f"The {w} sat on the mat. It was {w}ish and calm."} for w in ("cat", "dog", "fox", "owl") * 5]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for one in (None, False):
        train_cfg = Config(corpus=str(corpus), text_column="body", one_sentence_per_line=one)
        want = [tokenize(s) for _, s in sentence_stream(train_cfg)]
        got = _sentences(BowConfig(str(corpus), str(tmp_path / "unused"), text_column="body",
                                   one_sentence_per_line=one))
        assert got == [t for t in want if t], one
    text = tmp_path / "lines.txt"
    text.write_text("one short line\nthat goes on here\n\nanother line of words\n")
    for one in (True, False):
        want = [tokenize(s) for _, s in sentence_stream(Config(corpus=str(text), one_sentence_per_line=one))]
        assert _sentences(BowConfig(str(text), "x", one_sentence_per_line=one)) == want
    main(["--corpus", str(corpus), "--output-dir", str(tmp_path / "bow"), "--text-column", "body", "--dim", "8",
          "--min-count", "1", "--epochs", "1"])
    words = json.loads((tmp_path / "bow" / "words.json").read_text())
    assert {"cat", "owl", "mat"} <= set(words)


def test_a_bag_of_words_written_before_the_corpus_options_counts_as_trained_with_their_defaults(small_corpus,
                                                                                             tmp_path):
    pytest.importorskip("gensim")
    from nlp_qt.bow import ADDED_FIELDS, BOW_MARKER, BowConfig, train_bow

    cfg = BowConfig(str(small_corpus), str(tmp_path / "bow"), dim=8, epochs=1, min_count=1)
    out = train_bow(cfg)
    info = json.loads((out / BOW_MARKER).read_text())
    info["config"] = {k: v for k, v in info["config"].items() if k not in ADDED_FIELDS}  # as written before
    (out / BOW_MARKER).write_text(json.dumps(info))
    before = (out / "word_vectors.npy").stat().st_mtime_ns
    assert train_bow(cfg) == out and (out / "word_vectors.npy").stat().st_mtime_ns == before
    with pytest.raises(FileExistsError, match="not empty and holds no bag-of-words baseline with these settings"):
        train_bow(BowConfig(str(small_corpus), str(out), dim=8, epochs=1, min_count=1, one_sentence_per_line=True))
