import json
from pathlib import Path

import pytest
import torch

from nlp_qt.corpus import (
    CorpusError, CorpusStats, contiguous_batches, iter_corpus, iter_text_sentences, split_sentences,
)
from nlp_qt.objectives import neighbours
from nlp_qt.vocab import Vocab, tokenize


def test_split_sentences_rules():
    text = ('Mr. Smith went to Washington. He said "Hi!" Then he left... The U.S. is big. '
            "It cost 3.5 dollars. J. R. R. Tolkien wrote it? Yes.")
    assert split_sentences(text) == [
        "Mr. Smith went to Washington.", 'He said "Hi!"', "Then he left...", "The U.S. is big.",
        "It cost 3.5 dollars.", "J. R. R. Tolkien wrote it?", "Yes.",
    ]
    assert split_sentences("  \n ") == []
    assert split_sentences("no final stop") == ["no final stop"]
    assert split_sentences("See e.g. this one. And that.") == ["See e.g. this one.", "And that."]
    # Abbreviations that are also lower-case words end a sentence unless capitalised or before a number
    assert split_sentences("The answer was no. She cried. He was in the co. Then left.") == [
        "The answer was no.", "She cried.", "He was in the co.", "Then left."]
    assert split_sentences("See no. 5 and p. 12 of the book. Gen. Lee and Co. Ltd. came. Smith et al. Found it.") == [
        "See no. 5 and p. 12 of the book.", "Gen. Lee and Co. Ltd. came.", "Smith et al. Found it."]
    # "No." in dialogue (BookCorpus is fiction) ends a sentence; "No. 5" does not
    text = "\u201cAre you coming?\u201d \u201cNo.\u201d She shook her head. No. Not now. See No. 5 here."
    assert split_sentences(text) == [
        "\u201cAre you coming?\u201d", "\u201cNo.\u201d", "She shook her head.", "No.", "Not now.", "See No. 5 here."]


def test_folder_documents_in_order_and_wrapped_lines(tmp_path):
    (tmp_path / "b.txt").write_text("Book two starts. It goes on.\n")
    (tmp_path / "a.txt").write_text("First sentence of a\nwrapped paragraph. Second one.\n\nNew paragraph here.\n")
    stats = CorpusStats()
    got = list(iter_text_sentences(tmp_path, stats))
    assert got == [
        (0, "First sentence of a wrapped paragraph."), (0, "Second one."), (0, "New paragraph here."),
        (1, "Book two starts."), (1, "It goes on."),
    ]
    assert stats.files == 2 and stats.sentences == 5


def test_blank_line_and_line_boundaries(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("Doc one. Still one.\n\n\nDoc two.\nStill two.\n\nDoc three.\n")
    docs = [d for d, _ in iter_text_sentences(f, doc_boundary="blank_line")]
    assert docs == [0, 0, 1, 1, 2]
    docs = [d for d, _ in iter_text_sentences(f, doc_boundary="line")]
    assert docs == [0, 0, 1, 2, 3]
    assert [s for _, s in iter_text_sentences(f, one_sentence_per_line=True)][:2] == ["Doc one. Still one.", "Doc two."]


def test_bad_lines_are_skipped_and_counted(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"Good line one.\n\xff\xfe\xfa broken bytes\n\n   \nGood line two.\n")
    stats = CorpusStats()
    got = [s for _, s in iter_text_sentences(f, stats, one_sentence_per_line=True)]
    assert got == ["Good line one.", "Good line two."]
    assert stats.undecodable_lines == 1 and stats.empty_lines == 2
    assert stats.examples == [f"{f}:2"]


def test_corpus_errors(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        list(iter_corpus(str(tmp_path / "nope.txt")))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n\n\xff\xff\n")
    with pytest.raises(CorpusError, match="no usable sentences"):
        list(iter_corpus(str(empty)))
    with pytest.raises(CorpusError, match="no corpus"):
        iter_corpus("")


def test_hub_name_offline_gives_clear_error():
    with pytest.raises(CorpusError, match="Offline"):
        next(iter_corpus("hf:this-dataset/does-not-exist-qt"))


def test_datasets_local_stand_in_with_doc_field(tmp_path):
    # BookCorpus through `datasets`: one sentence per row; a book id column marks documents
    rows = [{"text": "A one.", "book": "x"}, {"text": "A two.", "book": "x"}, {"text": "", "book": "x"},
            {"text": "B one.", "book": "y"}, {"text": "B two.", "book": "y"}]
    f = tmp_path / "books.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    stats = CorpusStats()
    got = list(iter_corpus(str(f), stats, doc_field="book"))
    assert got == [(0, "A one."), (0, "A two."), (1, "B one."), (1, "B two.")]
    assert stats.empty_lines == 1 and stats.documents == 2
    with pytest.raises(CorpusError, match="no column 'sentence'"):
        list(iter_corpus(str(f), text_column="sentence"))
    # a folder written by save_to_disk
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    assert [s for _, s in iter_corpus(str(tmp_path / "saved"))] == ["A one.", "A two.", "B one.", "B two."]


def test_contiguous_batches_have_no_false_neighbours(tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}.txt").write_text(" ".join(f"Doc {i} sentence {j}." for j in range(3 + i)))
    stream = list(iter_text_sentences(tmp_path))
    batches = list(contiguous_batches(iter(stream), 4, drop_last=False))
    flat = [s for b in batches for s in b.sentences]
    assert flat == [s for _, s in stream]  # consecutive, in corpus order, nothing lost
    for b in batches:
        d = torch.tensor(b.doc_ids)
        nb = neighbours(d, torch.arange(len(d)))
        for i, s in enumerate(b.sentences):
            doc, j = int(s.split()[1]), int(s.split()[3].rstrip("."))
            if nb.has_prev[i]:
                assert b.sentences[int(nb.prev[i])] == f"Doc {doc} sentence {j - 1}."
            else:  # absent only at the batch start or the document start
                assert i == 0 or j == 0
            if nb.has_next[i]:
                assert b.sentences[int(nb.next[i])] == f"Doc {doc} sentence {j + 1}."
            else:
                assert i == len(b.sentences) - 1 or j == 2 + doc
    with pytest.raises(ValueError, match="batch_size"):
        next(contiguous_batches(iter(stream), 1))


def test_vocab_build_encode_save(tmp_path):
    v = Vocab.build(["The cat sat.", "The dog sat down."], size=3, max_len=4)
    assert v.itos[:2] == ["<pad>", "<unk>"] and len(v) == 5
    assert tokenize("Don't stop-it, 3.5!") == ["Do", "n't", "stop-it", ",", "3", ".", "5", "!"]
    # clitics apart, as NLTK's word_tokenize and SentEval's PTB-tokenized files have them
    assert tokenize("I can't say it's John's; we'll see, I'm sure they’d won’t.") == [
        "I", "ca", "n't", "say", "it", "'s", "John", "'s", ";", "we", "'ll", "see", ",", "I", "'m", "sure",
        "they", "'d", "wo", "n't", "."]
    assert tokenize("do n't it 's") == ["do", "n't", "it", "'s"]  # already split text stays as it is
    assert tokenize("rock'n'roll at 5 o'clock") == ["rock'n'roll", "at", "5", "o'clock"]
    ids, lengths = v.batch(["The cat sat on the mat.", ""])
    assert ids.shape == (2, 4) and lengths.tolist() == [4, 1]
    v.save(tmp_path / "v.json")
    w = Vocab.load(tmp_path / "v.json")
    assert w.itos == v.itos and w.max_len == 4


def test_vocabulary_keeps_the_tokenizer_it_was_built_with(tmp_path):
    """A vocabulary saved before clitics were split (no "tokenizer" field) still tokenizes as it did
    when its model was trained; a new one records version 3 (version 2: Latin letters only)."""
    import json

    new = Vocab.build(["I don't know."], size=10)
    new.save(tmp_path / "new.json")
    assert json.loads((tmp_path / "new.json").read_text())["tokenizer"] == 3
    (tmp_path / "v2.json").write_text(json.dumps({"itos": ["<pad>", "<unk>", "д", "а", "да"], "max_len": 50,
                                                  "lowercase": False, "tokenizer": 2}))
    assert Vocab.load(tmp_path / "v2.json").encode("да") == [2, 3]
    assert Vocab(["да"]).encode("да") == [2]
    assert Vocab.load(tmp_path / "new.json").encode("don't") == [new.stoi["do"], new.stoi["n't"]]
    (tmp_path / "old.json").write_text(json.dumps({"itos": ["<pad>", "<unk>", "I", "don't", "know", "."],
                                                   "max_len": 50, "lowercase": False}))
    old = Vocab.load(tmp_path / "old.json")
    assert old.tokenizer == 1 and old.encode("I don't know.") == [2, 3, 4, 5]
    with pytest.raises(ValueError, match="unknown tokenizer version 7"):
        Vocab(["a"], tokenizer=7)


def test_datasetdict_saved_to_disk_is_read_as_a_dataset(tmp_path):
    """`load_dataset(...).save_to_disk(d)` writes a DatasetDict (dataset_dict.json + split folders);
    it was taken for a plain-text folder and refused ("no text files")."""
    import datasets

    rows = [{"text": "A one."}, {"text": "A two."}, {"text": "A three."}]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dd"))
    assert [s for _, s in iter_corpus(str(tmp_path / "dd"))] == ["A one.", "A two.", "A three."]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dt"))
    with pytest.raises(CorpusError, match="splits"):
        list(iter_corpus(str(tmp_path / "dt")))


def test_hidden_folders_inside_a_corpus_folder_are_skipped(tmp_path):
    (tmp_path / "book.txt").write_text("The real text. It has two sentences.\n")
    (tmp_path / ".git" / "logs").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "logs" / "HEAD").write_text("0000 1111 A U <a@b.c> 1700000000 +0100\tcommit: Init.\n")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "book-checkpoint.txt").write_text("An old copy. Of the text.\n")
    stats = CorpusStats()
    assert [s for _, s in iter_text_sentences(tmp_path, stats)] == ["The real text.", "It has two sentences."]
    assert stats.files == 1


def test_folders_behind_links_in_a_corpus_folder_are_read_each_once(tmp_path):
    """A linked folder of books was left out without a word (rglob does not follow folder links), while linked files
    were read. A link back to a folder above, or a second link to one folder, reads nothing twice."""
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "more.txt").write_text("Linked text here. It counts too.\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "own.txt").write_text("This is one sentence. Here is another one.\n")
    (corpus / "more").symlink_to(tmp_path / "extra")
    (corpus / "more_again").symlink_to(tmp_path / "extra")
    (corpus / "loop").symlink_to(corpus)
    stats = CorpusStats()
    got = [s for _, s in iter_text_sentences(corpus, stats)]
    assert sorted(got) == sorted(["This is one sentence.", "Here is another one.", "Linked text here.",
                                  "It counts too."]) and stats.files == 2


def test_bad_rows_of_a_datasets_file_give_a_corpus_error_naming_it(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"text": "Caf\xe9 au lait."}\n{"text": "Fine."}\n')
    with pytest.raises(CorpusError, match="latin.jsonl.*UTF-8"):
        list(iter_corpus(str(latin)))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok."}\n{"text": oops\n')
    with pytest.raises(CorpusError, match="broken.jsonl"):
        list(iter_corpus(str(broken)))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(CorpusError, match="empty"):
        list(iter_corpus(str(empty)))


def test_degenerate_lines_split_like_ordinary_text():
    """Long runs of abbreviations, initials or marks (linear-time splitting; these were quadratic)."""
    assert split_sentences("Mr. " * 3000 + "Smith left. He came back.") == ["Mr. " * 2999 + "Mr. Smith left.",
                                                                            "He came back."]
    assert split_sentences("J. " * 3000 + "Doe") == [("J. " * 3000 + "Doe").strip()]
    assert split_sentences("!" * 5000 + "a") == ["!" * 5000 + "a"]
    assert split_sentences("Wait" + "." * 5000 + " Then!!! So?! Yes") == ["Wait" + "." * 5000, "Then!!!", "So?!", "Yes"]
    long_word = "a" * 100 + "mr"
    assert split_sentences(f"The {long_word}. Next one.") == [f"The {long_word}.", "Next one."]


def test_compressed_and_utf16_files_are_read_as_text(tmp_path):
    """A gzip file was read as raw bytes (its short byte runs that happen to be valid UTF-8 became
    "sentences"; otherwise "no usable sentences"), a folder's *.txt.gz files were skipped, a .jsonl.gz
    went to the plain-text reader, and a UTF-16 file (Windows "Unicode") gave NUL-riddled sentences."""
    import bz2
    import gzip
    import lzma
    import zipfile

    books = tmp_path / "books"
    books.mkdir()
    (books / "a.txt.gz").write_bytes(gzip.compress(b"Gzipped book. It has two sentences.\n"))
    (books / "b.txt").write_bytes("A Windows book.\r\nSaved as \u201cUnicode\u201d.\r\n".encode("utf-16"))
    (books / "c.txt.bz2").write_bytes(bz2.compress(b"A bzip2 book. Also two.\n"))
    (books / "d").write_bytes(lzma.compress(b"An xz book without a suffix.\n"))
    stats = CorpusStats()
    assert list(iter_corpus(str(books), stats)) == [
        (0, "Gzipped book."), (0, "It has two sentences."), (1, "A Windows book."),
        (1, "Saved as \u201cUnicode\u201d."), (2, "A bzip2 book."), (2, "Also two."),
        (3, "An xz book without a suffix."),
    ]
    assert stats.undecodable_lines == 0 and stats.files == 4
    rows = tmp_path / "rows.jsonl.gz"
    rows.write_bytes(gzip.compress(b'{"text": "Row one.", "book": 1}\n{"text": "Row two.", "book": 2}\n'))
    assert list(iter_corpus(str(rows), doc_field="book")) == [(0, "Row one."), (1, "Row two.")]
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(gzip.compress("".join(f"Line {i} of a long book.\n" for i in range(5000)).encode())[:2000])
    with pytest.raises(CorpusError, match="cut.txt.gz.*complete"):
        list(iter_corpus(str(cut)))
    with zipfile.ZipFile(tmp_path / "books.zip", "w") as z:
        z.writestr("a.txt", "A zipped book. It is not read.\n")
    import tarfile
    import warnings

    with tarfile.open(tmp_path / "books1.tar.gz", "w:gz") as t:  # as books1 of the Pile ships
        t.add(books / "a.txt.gz", "a.txt.gz")
    (tmp_path / "pile.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(100)))
    for name, kind in (("books.zip", "a zip archive"), ("books1.tar.gz", "a tar archive"),
                       ("pile.jsonl.zst", "zstd-compressed")):
        with warnings.catch_warnings(record=True) as said, pytest.raises(CorpusError, match=f"{name} is {kind}"):
            warnings.simplefilter("always")
            list(iter_corpus(str(tmp_path / name)))
        assert not said, name  # the refusal alone: it was preceded by "read as plain text" (a .zip, a .tar.gz)


def test_text_without_blank_lines_is_split_as_it_streams(tmp_path, monkeypatch):
    """A file without blank lines was one paragraph held whole: the lower-cased, one-sentence-per-line
    BookCorpus release read without --one-sentence-per-line became a single "sentence" of the whole
    file (2.5 GB for the real one). Long paragraphs are now split as they grow (same sentences), and
    text with almost no sentence ends is refused with the option to use."""
    import nlp_qt.corpus as corpus

    prose = tmp_path / "prose.txt"
    prose.write_text("".join(f"Line {i} starts here and\nends on the next line. Mr. Smith said no. "
                             f"He left at {i} p.m. Then\n" for i in range(200)))
    whole = list(iter_corpus(str(prose)))
    monkeypatch.setattr(corpus, "PARAGRAPH_CHARS", 100)
    assert list(iter_corpus(str(prose))) == whole and len(whole) > 400
    release = tmp_path / "books_large_p1.txt"
    release.write_text("".join(f"he looked at her and said nothing , number {i} .\n" for i in range(600)))
    monkeypatch.setattr(corpus, "PARAGRAPH_CHARS", 20_000)
    with pytest.raises(CorpusError, match="books_large_p1.txt.*--one-sentence-per-line"):
        list(iter_corpus(str(release)))
    assert len(list(iter_corpus(str(release), one_sentence_per_line=True))) == 600


def test_a_skipped_undecodable_line_ends_the_paragraph(tmp_path):
    """A Latin-1 line inside a wrapped paragraph used to be dropped and the text around it joined:
    'He walked into the little down by the window.' became one training sentence."""
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"He walked into the little\ncaf\xe9 on the corner and sat\ndown by the window.\n\nNext one.\n")
    stats = CorpusStats()
    got = list(iter_text_sentences(f, stats, doc_boundary="blank_line"))
    assert [s for _, s in got] == ["He walked into the little", "down by the window.", "Next one."]
    assert [d for d, _ in got] == [0, 0, 1]  # not a document boundary: only the blank line is
    assert stats.undecodable_lines == 1 and stats.examples == [f"{f}:2"]


def test_a_line_holding_nul_bytes_is_skipped_and_counted_as_not_text(tmp_path):
    """"Be\x00ta" became the tokens Be, \x00, ta; a line with NUL bytes (binary data, a write cut off) is no text."""
    f = tmp_path / "nul.txt"
    f.write_bytes(b"Alpha is here. Be\x00ta is not.\nGamma stays.\n\x00\x00\x00\x00\n")
    stats = CorpusStats()
    got = [s for _, s in iter_text_sentences(f, stats)]
    assert got == ["Gamma stays."] and stats.undecodable_lines == 2 and stats.examples == [f"{f}:1", f"{f}:3"]


def test_sentences_of_any_script_are_split():
    """Only an ASCII capital or digit started a sentence: French, Spanish, German, Russian or Greek text lost its
    boundaries (a Russian book became one "sentence"), and scripts without case had none at all."""
    assert split_sentences("Él dijo hola. ¿Qué tal? ¡Muy bien! Émile est là. Über alles.") == [
        "Él dijo hola.", "¿Qué tal?", "¡Muy bien!", "Émile est là.", "Über alles."]
    assert split_sentences("Привет. Как дела? Хорошо! А. С. Пушкин родился в 1799 г. Он поэт. Это т. е. так.") == [
        "Привет.", "Как дела?", "Хорошо!", "А. С. Пушкин родился в 1799 г.", "Он поэт.", "Это т. е. так."]
    assert split_sentences("Γεια σου. Ωραία! ǅemal je došao. ٣ أيام") == [
        "Γεια σου.", "Ωραία!", "ǅemal je došao.", "٣ أيام"]  # titlecase ǅ; an Arabic-Indic digit
    # French guillemets, spaced or not; German quotes
    assert split_sentences("« Bonjour. » Il part. « Oui ! » dit-il. Fin. «Non.» Elle rit. „Ja.“ Er ging.") == [
        "« Bonjour. »", "Il part.", "« Oui ! » dit-il.", "Fin.", "«Non.»", "Elle rit.", "„Ja.“", "Er ging."]
    # scripts without case: their own sentence ends, and '.' '!' '?' before any of their letters
    assert split_sentences("今天天气很好。我们去公园吧！你呢？“好的。”他说。") == [
        "今天天气很好。", "我们去公园吧！", "你呢？", "“好的。”", "他说。"]
    assert split_sentences("यह किताब है। वह घर है॥ ठीक है") == ["यह किताब है।", "वह घर है॥", "ठीक है"]
    assert split_sentences("هل أنت بخير؟ نعم. شكرا") == ["هل أنت بخير؟", "نعم.", "شكرا"]
    # no boundary before a lower-case letter, in any script
    assert split_sentences("Il est né en 1900 env. à Paris. Он сказал т. е. нет.") == [
        "Il est né en 1900 env. à Paris.", "Он сказал т. е. нет."]


def test_a_russian_corpus_has_its_sentences(tmp_path):
    f = tmp_path / "ru.txt"
    f.write_text(" ".join(f"Кот номер {i} видел большой дом." for i in range(200)) + "\n", encoding="utf-8")
    stats = CorpusStats()
    got = [s for _, s in iter_text_sentences(f, stats)]
    assert len(got) == 200 and got[1] == "Кот номер 1 видел большой дом."


def test_words_of_any_script_are_tokens():
    """Every Cyrillic, Greek, Arabic or Indic word fell apart into single letters (a character vocabulary)."""
    assert tokenize("Привет, мир! Кто-то сказал «нет».") == ["Привет", ",", "мир", "!", "Кто-то", "сказал", "«", "нет",
                                                            "»", "."]
    assert tokenize("नमस्ते दुनिया। Ελληνικά κείμενα. مرحبا ١٢٣ 한국어 문장입니다 e\u0301te") == [
        "नमस्ते", "दुनिया", "।", "Ελληνικά", "κείμενα", ".", "مرحبا", "١٢٣", "한국어", "문장입니다", "e\u0301te"]
    # scripts written without spaces: a run of their letters is a phrase (a vocabulary of phrases is all <unk>), so
    # each character is a token, as BERT's tokenizer treats Han
    assert tokenize("今天天气很好，我们去公园吧！") == list("今天天气很好，我们去公园吧！")
    assert tokenize("東京都に住んでいます。カタカナ") == list("東京都に住んでいます。カタカナ")
    assert tokenize("สวัสดีครับ 𠀀𠀁") == list("สวัสดีครับ𠀀𠀁")
    # Latin as before: clitics, apostrophes and hyphens; other numbers (², ½), symbols and ª µ º stand alone
    assert tokenize("Don't it’s l'été x² 3×4 ½ well-known 5µg") == ["Do", "n't", "it", "'s", "l'été", "x", "²", "3×4",
                                                                   "½", "well-known", "5", "µ", "g"]
    # a vocabulary of version 2 (before this) still splits as it did when its model was trained
    assert tokenize("Привет мир", version=2) == list("Приветмир")


def test_the_unicode_tokenizer_splits_latin_text_as_version_2_did():
    """Version 3 differs from version 2 only on letters, marks and digits from U+0250 on (lower-cased: also on the
    few capitals below it whose lower case lies beyond, Ɗ -> ɗ, İ -> i + U+0307)."""
    import random

    rng = random.Random(0)
    quotes = list("’‘“”«»—–… \t")
    for lowercase, last in ((False, 0x250), (True, 0x180)):
        chars = [chr(c) for c in range(0x20, last) if chr(c) != "İ"] + quotes
        for _ in range(20000):
            text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 20)))
            assert tokenize(text, lowercase, 3) == tokenize(text, lowercase, 2), text


def test_an_empty_parquet_file_and_a_bad_last_row_are_named_plainly(tmp_path):
    """A Parquet file of no rows failed with "after 0 rows (ArrowInvalid: BatchSize must be greater than 0)"; a
    malformed last JSONL row gave "after 0 rows (... in row 60)": datasets reads blocks, so no row had been read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    with pytest.raises(CorpusError, match=r"^corpus file .*empty.parquet is empty$"):
        list(iter_corpus(str(tmp_path / "empty.parquet")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(f'{{"text": "Row {i}."}}\n' for i in range(60)) + "{not json\n")
    with pytest.raises(CorpusError, match=r"could not read '.*bad.jsonl' \(ArrowInvalid: .* in row 60\)") as err:
        list(iter_corpus(str(bad)))
    assert "after" not in str(err.value)


def test_a_folder_without_text_files_names_every_kind_that_is_read(tmp_path):
    """The message listed *.txt, *.txt.gz and files without a suffix; .md, .text, .bz2 and .xz are read too."""
    import bz2
    import lzma

    from nlp_qt.corpus import COMPRESSED, TEXT_SUFFIXES

    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4")
    with pytest.raises(CorpusError) as err:
        list(iter_corpus(str(tmp_path)))
    message = str(err.value)
    assert "*.md, *.text, *.txt or files without a suffix" in message and ".gz, .bz2, .xz" in message
    assert all(f"*{s}" in message for s in TEXT_SUFFIXES if s) and all(c in message for c in COMPRESSED)
    (tmp_path / "a.md").write_text("Markdown.\n")
    (tmp_path / "b.text").write_text("Text.\n")
    (tmp_path / "c.bz2").write_bytes(bz2.compress(b"Bzip2.\n"))
    (tmp_path / "d.txt.xz").write_bytes(lzma.compress(b"Xz.\n"))
    with pytest.warns(UserWarning, match=r"1 file\(s\) not read, .*\(paper.pdf\)"):  # named, not dropped silently
        assert [s for _, s in iter_corpus(str(tmp_path))] == ["Markdown.", "Text.", "Bzip2.", "Xz."]


def test_the_presets_shipped_books_are_found_from_any_folder(tmp_path, monkeypatch):
    from nlp_qt.config import PRESETS
    from nlp_qt.corpus import corpus_fingerprint, iter_corpus, shipped_or_given

    given = PRESETS["cpu"]["corpus"]
    assert given == "nlp_qt/data/books"
    in_repo = corpus_fingerprint(given) if Path(given).exists() else None
    monkeypatch.chdir(tmp_path)  # a user's own folder, outside the repository
    found = Path(shipped_or_given(given))
    assert found.is_absolute() and found.is_dir() and found.parent.name == "data"
    assert next(iter(iter_corpus(given)))[1]  # read, not "corpus not found"
    if in_repo is not None:
        assert corpus_fingerprint(given) == in_repo  # a resume from another folder checks the same corpus
    for other in ("nlp_qt/data/no_such_corpus", "my/books", "hf:bookcorpus", ""):
        assert shipped_or_given(other) == other
    (tmp_path / "nlp_qt/data/books").mkdir(parents=True)  # a folder of that name here is the user's: it wins
    (tmp_path / "nlp_qt/data/books/mine.txt").write_text("My own sentence. Another one.\n")
    assert shipped_or_given(given) == given
    assert [s for _, s in iter_corpus(given)] == ["My own sentence.", "Another one."]


@pytest.mark.parametrize("encode", [
    lambda t: t.encode("utf-16-le"), lambda t: t.encode("utf-16-be"),  # iconv -t utf-16le: no byte-order mark
    lambda t: t.replace("\n", "\r").encode(),  # old Mac line endings
    lambda t: t.replace("\n", "\r").encode("utf-16-le"),
])
def test_bomless_utf16_and_cr_line_endings_read_as_the_same_text(tmp_path, encode):
    """UTF-16 without a byte-order mark decoded as UTF-8 with a NUL between the letters (NUL the commonest token);
    a file ending its lines with CR alone was one line: one sentence, one document."""
    text = "Emma was handsome. She was clever.\nShe was rich.\n\nA new part starts here. It ends.\n"
    (tmp_path / "lf.txt").write_bytes(text.encode())
    (tmp_path / "other.txt").write_bytes(encode(text))
    want = [s for _, s in iter_corpus(str(tmp_path / "lf.txt"))]
    assert [s for _, s in iter_corpus(str(tmp_path / "other.txt"))] == want and len(want) == 5
    for boundary in ("line", "blank_line"):  # the documents too: (document, sentence) pairs
        docs = lambda f: list(iter_corpus(str(tmp_path / f), doc_boundary=boundary))  # noqa: E731
        assert docs("other.txt") == docs("lf.txt")


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_cr_line_endings_are_seen_past_a_long_first_line(tmp_path, suffix):
    """The line ending was sniffed in the first 262 bytes: a CR-only file whose first paragraph was longer was read
    as one line (one document, one sentence per paragraph-run), without a word."""
    import gzip

    paras = [" ".join(f"Sentence {p} {i} has several words in it." for i in range(12)) for p in range(6)]
    text = "\n\n".join(paras) + "\n"
    assert len(paras[0]) > 262
    (tmp_path / "lf.txt").write_bytes(text.encode())
    data = text.replace("\n", "\r").encode()
    other = tmp_path / f"cr{suffix}"
    other.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    for boundary in ("file", "blank_line"):
        want = list(iter_corpus(str(tmp_path / "lf.txt"), doc_boundary=boundary))
        assert list(iter_corpus(str(other), doc_boundary=boundary)) == want and len(want) == 72
    assert len({d for d, _ in iter_corpus(str(other), doc_boundary="blank_line")}) == 6


def test_a_row_whose_text_is_a_number_or_a_list_is_refused_by_its_row(tmp_path):
    """Rows whose text was 987654, true or [1, 2] were skipped and counted among the empty lines, unsaid."""
    for value, kind in ((987654, "int"), ([1, 2], "list")):
        f = tmp_path / f"{kind}.jsonl"
        f.write_text("\n".join(json.dumps({"text": t}) for t in ["A one. A two.", None, value, "B one."]))
        with pytest.raises(CorpusError, match=rf"row 3: column 'text' holds {kind} .*not a text"):
            list(iter_corpus(str(f)))
    f = tmp_path / "nulls.jsonl"
    f.write_text("\n".join(json.dumps({"text": t}) for t in ["A one.", None, "", "B one."]))
    stats = CorpusStats()
    assert [s for _, s in iter_corpus(str(f), stats)] == ["A one.", "B one."] and stats.empty_lines == 2


def test_a_tsv_corpus_is_a_table_and_table_options_on_plain_text_are_refused(tmp_path):
    """A .tsv file was read as plain text: its header and book ids became sentences and --doc-field was ignored,
    unsaid. It is now a table (datasets' csv with a tab); a column option given for plain text is refused; a single
    file of another suffix is read as text with a warning."""
    rows = [("A first one. A second one.", "b1"), ("A third one.", "b1"), ("Another book starts.", "b2")]
    tsv = tmp_path / "rows.tsv"
    tsv.write_text("text\tbook\n" + "".join(f"{t}\t{b}\n" for t, b in rows))
    got = list(iter_corpus(str(tsv), doc_field="book"))
    assert [s for _, s in got] == ["A first one. A second one.", "A third one.", "Another book starts."]
    assert got[0][0] == got[1][0] != got[2][0]
    renamed = tmp_path / "rows.tab.txt"
    renamed.write_text(tsv.read_text())
    for kw, words in (({"doc_field": "book"}, "--doc-field book names a column"),
                      ({"text_column": "review"}, "--text-column review names a column")):
        with pytest.raises(CorpusError, match=f"{words}, but the corpus .*rows.tab.txt is plain text"):
            list(iter_corpus(str(renamed), **kw))
    with pytest.raises(CorpusError, match=r"--doc-boundary line is for plain text; .* is a table, .*--doc-field NAME"):
        list(iter_corpus(str(tsv), doc_boundary="line"))  # it was ignored for a table's rows
    odd = tmp_path / "book.rst"
    odd.write_text("One sentence here. And another.\n")
    with pytest.warns(UserWarning, match=r"book.rst is read as plain text: its suffix '.rst'"):
        assert [s for _, s in iter_corpus(str(odd))] == ["One sentence here.", "And another."]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "cr"])
def test_a_file_without_line_breaks_is_read_in_pieces_with_the_same_sentences(tmp_path, monkeypatch, encoding):
    """A corpus of one 100 MB line took 2.2 GB of memory (a probe: the line was read whole, the paragraph cap only
    counted after it): paragraph modes now read a long line in pieces cut after a space, and the sentences are those
    of the same text with line breaks; the line modes still take whole lines."""
    import random

    import nlp_qt.corpus as corpus

    rng = random.Random(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "déjà", "vu", "naïve", "café", "éé"]
    sents = [" ".join([rng.choice(words).capitalize()] + [rng.choice(words) for _ in range(rng.randint(2, 9))])
             + rng.choice(".!?") for _ in range(400)]
    body = " ".join(sents[:200]) + "   " * 30 + " ".join(sents[200:])  # a run of spaces longer than a piece
    lines = "\n".join(sents[:200]) + "\n\n" + "\n".join(sents[200:]) + "\n"
    one = body.replace("   " * 30, "\n\n")  # one line, a blank line, one line
    if encoding == "cr":
        data, reference = one.replace("\n", "\r").encode(), lines.encode()
    else:
        data, reference = one.encode(encoding), lines.encode(encoding)
    (tmp_path / "one.txt").write_bytes(data)
    (tmp_path / "lines.txt").write_bytes(reference)
    (tmp_path / "spaces.txt").write_bytes(body.encode())
    want = list(corpus.iter_text_sentences(tmp_path / "lines.txt", doc_boundary="blank_line"))
    monkeypatch.setattr(corpus, "LINE_PIECE", 48)
    stats = corpus.CorpusStats()
    assert list(corpus.iter_text_sentences(tmp_path / "one.txt", stats, doc_boundary="blank_line")) == want
    assert stats.lines == 3 and stats.empty_lines == 1 and stats.undecodable_lines == 0
    # spaces alone in a piece are not a blank line: one paragraph, one document
    assert [s for _, s in corpus.iter_text_sentences(tmp_path / "spaces.txt", doc_boundary="blank_line")] == sents
    # a line is still one document (--doc-boundary line) and one sentence (--one-sentence-per-line), whole
    assert len({d for d, _ in corpus.iter_text_sentences(tmp_path / "spaces.txt", doc_boundary="line")}) == 1
    whole = list(corpus.iter_text_sentences(tmp_path / "spaces.txt", one_sentence_per_line=True))
    assert len(whole) == 1 and whole[0][1] == " ".join(body.split())
