"""Bag-of-words baseline: the mean of word vectors trained on the same corpus as the encoder.

SentEval's BoW baseline averages pretrained GloVe or fastText vectors. Those cannot be fetched
offline, and vectors trained on billions of words would not say what sentence-level training adds
on *our* corpus anyway. So the baseline here learns skip-gram word2vec vectors (gensim; negative
sampling) from exactly the sentences quick-thought trains on, tokenised the same way
(:func:`nlp_qt.vocab.tokenize`), and a sentence is the mean of its known words' vectors (zeros when
it has none). Trained quick-thought should beat it; if it does not, the sentence-level objective
added nothing a word-level one does not learn from the same text.

``python -m nlp_qt.bow --corpus nlp_qt/data/books --output-dir runs/bow --seed 0`` writes
``word_vectors.npy``, ``words.json`` and ``bow.json`` (the settings); ``nlp_qt.senteval --model`` reads
that folder. gensim is an optional dependency (``pip install gensim``; set-up installs it).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

BOW_MARKER = "bow.json"


@dataclass
class BowConfig:
    """Options of the word2vec bag-of-words baseline (``python -m nlp_qt.bow``)."""

    corpus: str
    output_dir: str
    dim: int = 300
    window: int = 5
    min_count: int = 2
    epochs: int = 5
    negative: int = 5
    seed: int = 0
    lowercase: bool = False
    max_sentences: int | None = None
    # how the corpus is read, as nlp_qt.train reads it (so the baseline learns from exactly its sentences)
    text_column: str = "text"
    one_sentence_per_line: bool | None = None
    doc_boundary: str = "file"


#: BowConfig fields added after baselines were written without them, with the value those baselines were made with
ADDED_FIELDS = {"text_column": "text", "one_sentence_per_line": None, "doc_boundary": "file"}


def is_bow_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / BOW_MARKER).is_file()


def _sentences(cfg: BowConfig) -> list[list[str]]:
    from .corpus import iter_corpus
    from .vocab import tokenize

    out = []
    stream = iter_corpus(cfg.corpus, text_column=cfg.text_column, doc_boundary=cfg.doc_boundary,
                         one_sentence_per_line=cfg.one_sentence_per_line)
    for i, (_, sentence) in enumerate(stream):
        if cfg.max_sentences is not None and i >= cfg.max_sentences:
            break
        toks = tokenize(sentence, cfg.lowercase)
        if toks:
            out.append(toks)
    return out


#: gensim's limits for an option, beyond which it fails inside its own code (a C int, a 32-bit seed)
_INT32, _SEED = 2**31 - 1, 2**32 - 1


def check_bow_config(cfg: BowConfig) -> None:
    """Refuse, naming the option, what gensim would take silently (a word vector of no dimensions, negative
    sampling of -1 words), refuse in its own words (an epochs count of 0: "You must specify an explicit epochs
    count"), or fail on inside a worker thread that then never ends (a --window of 0)."""
    for option, value, low, high in (("--dim", cfg.dim, 1, None), ("--window", cfg.window, 1, _INT32),
                                     ("--min-count", cfg.min_count, 1, None), ("--epochs", cfg.epochs, 1, _INT32),
                                     ("--negative", cfg.negative, 1, _INT32), ("--seed", cfg.seed, 0, _SEED),
                                     ("--max-sentences", cfg.max_sentences, 1, None)):
        if value is None and option == "--max-sentences":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise ValueError(f"{option} must be a whole number {bound}, got {value!r}")


def train_bow(cfg: BowConfig) -> Path:
    """Train word2vec on the corpus and write the baseline's folder (atomically: a temp folder renamed)."""
    check_bow_config(cfg)
    from shared_losses.training.runtime import check_folder_writable, check_parent_folder, check_replaceable_folder

    check_parent_folder(cfg.output_dir, "--output-dir", "nothing was trained")  # before the training, not after
    check_folder_writable(cfg.output_dir, "--output-dir", "nothing was trained")
    check_replaceable_folder(cfg.output_dir, "--output-dir")
    try:
        from gensim.models import Word2Vec
    except ImportError as err:
        raise ValueError("the bag-of-words baseline needs the optional package gensim: pip install gensim (or "
                         "pip install -e \".[demo]\")") from err
    out = Path(cfg.output_dir)
    if out.exists() and any(out.iterdir()):
        saved = json.loads((out / BOW_MARKER).read_text()).get("config") if is_bow_dir(out) else None
        if isinstance(saved, dict) and {**ADDED_FIELDS, **saved} == asdict(cfg):
            return out  # already trained with these settings
        raise FileExistsError(f"--output-dir {out} is not empty and holds no bag-of-words baseline with these "
                              "settings; choose another folder (nothing was changed)")
    from shared_losses.training.runtime import written_whole

    t0 = time.perf_counter()
    sents = _sentences(cfg)
    if not sents:
        raise ValueError(f"--corpus {cfg.corpus}: no sentence with a word in it was read"
                         + (f" (--max-sentences {cfg.max_sentences})" if cfg.max_sentences is not None else ""))
    if not _words_kept(sents, cfg.min_count):
        raise ValueError(f"no word occurs --min-count {cfg.min_count} times in the {len(sents)} sentences read, so "
                         "there is no vocabulary to learn vectors for; lower --min-count")
    # workers=1: gensim is only deterministic for a seed with one worker thread
    model = Word2Vec(sentences=sents, vector_size=cfg.dim, window=cfg.window, min_count=cfg.min_count, sg=1,
                     negative=cfg.negative, epochs=cfg.epochs, seed=cfg.seed, workers=1)
    with written_whole(out, folder=True) as tmp:  # a hidden name of its own: a user's folder NAME.tmp is not touched
        _write_vectors(tmp, model, cfg, sents, t0)
    return out


def _words_kept(sents: list[list[str]], min_count: int) -> int:
    """How many distinct words occur at least ``min_count`` times (gensim's vocabulary)."""
    from collections import Counter

    counts = Counter(w for s in sents for w in s)
    return sum(1 for n in counts.values() if n >= min_count)


def _write_vectors(tmp: Path, model, cfg: BowConfig, sents, t0: float) -> None:
    from .vocab import TOKENIZER_VERSION

    np.save(tmp / "word_vectors.npy", model.wv.vectors.astype(np.float32))
    (tmp / "words.json").write_text(json.dumps(list(model.wv.index_to_key)))
    info = {"config": asdict(cfg), "sentences": len(sents), "words": int(sum(map(len, sents))),
            "vocabulary": len(model.wv.index_to_key), "seconds": round(time.perf_counter() - t0, 1),
            "model": "gensim Word2Vec skip-gram, negative sampling", "tokenizer": TOKENIZER_VERSION}
    (tmp / BOW_MARKER).write_text(json.dumps(info, indent=1) + "\n")


def read_word_vectors(path: str | os.PathLike) -> tuple[list[str], np.ndarray, bool]:
    """``(words, vectors [len(words), dim] float32, lowercase)`` of a folder written by :func:`train_bow`,
    checked: a clear error names the folder and what is wrong with it."""
    path = Path(path)
    need = [path / BOW_MARKER, path / "word_vectors.npy", path / "words.json"]
    missing = [p.name for p in need if not p.is_file()]
    if missing:
        raise ValueError(f"word vectors {path}: no {', '.join(missing)} there; expected a folder written by "
                         "python -m nlp_qt.bow (bow.json, word_vectors.npy, words.json)")
    try:
        info = json.loads((path / BOW_MARKER).read_text())
        words = json.loads((path / "words.json").read_text())
        vectors = np.load(path / "word_vectors.npy")
    except (ValueError, OSError) as err:
        raise ValueError(f"word vectors {path}: unreadable ({err})") from err
    if not (isinstance(words, list) and all(isinstance(w, str) for w in words)):
        raise ValueError(f"word vectors {path}: words.json must be a list of strings")
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise ValueError(f"word vectors {path}: word_vectors.npy has shape {vectors.shape}, expected "
                         f"[{len(words)} words, dim]")
    if not np.isfinite(vectors).all():
        raise ValueError(f"word vectors {path}: word_vectors.npy holds non-finite values")
    if len(set(words)) != len(words):  # a word listed twice: which vector it gets would otherwise go unsaid
        seen, twice = set(), []
        for w in words:
            if w in seen and w not in twice:
                twice.append(w)
            seen.add(w)
        shown = ", ".join(repr(w) for w in twice[:5]) + (", ..." if len(twice) > 5 else "")
        warnings.warn(f"word vectors {path}: {len(twice)} word(s) listed more than once in words.json ({shown}); "
                      "each takes its last vector", UserWarning, stacklevel=2)
    return words, vectors.astype(np.float32, copy=False), bool(info.get("config", {}).get("lowercase", False))


def bow_tokenizer_version(path: str | os.PathLike) -> int:
    """The :func:`nlp_qt.vocab.tokenize` version a baseline's words were split with (bow.json's ``tokenizer``; 2 for
    a folder written before it was recorded, which version 2 made, or version 3 on the same words for Latin text)."""
    return int(json.loads((Path(path) / BOW_MARKER).read_text()).get("tokenizer", 2))


def load_bow_encoder(path: str | os.PathLike) -> Callable[[Sequence[str]], np.ndarray]:
    """``encode(sentences) -> [n, dim]``: the mean of the sentence's known words' vectors (zeros if none), the
    sentences split by the tokenizer version the words were (:func:`bow_tokenizer_version`)."""
    from .vocab import tokenize

    words, vectors, lowercase = read_word_vectors(path)
    version = bow_tokenizer_version(path)
    index = {w: i for i, w in enumerate(words)}

    def encode(sentences: Sequence[str]) -> np.ndarray:
        res = np.zeros((len(sentences), vectors.shape[1]), dtype=np.float32)
        for k, s in enumerate(sentences):
            ids = [index[t] for t in tokenize(s, lowercase, version) if t in index]
            if ids:
                res[k] = vectors[ids].mean(axis=0)
        return res

    return encode


def main(argv=None) -> None:
    from shared_losses.training.cli import ArgumentParser  # usage errors: one error: line

    p = ArgumentParser(prog="python -m nlp_qt.bow", description=__doc__.split("\n\n")[0],
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", required=True, help="training corpus, as nlp_qt.train --corpus")
    p.add_argument("--output-dir", required=True, help="folder for word_vectors.npy, words.json, bow.json")
    for f, d, h in [("dim", 300, "word vector size"), ("window", 5, "context window"),
                    ("min-count", 2, "ignore rarer words"), ("epochs", 5, "passes over the corpus"),
                    ("negative", 5, "negative samples per positive"), ("seed", 0, "random seed"),
                    ("max-sentences", None, "use only the first N sentences")]:
        p.add_argument(f"--{f}", type=int, default=d, help=h)
    p.add_argument("--lowercase", action="store_true", help="lower-case before tokenising")
    p.add_argument("--text-column", default="text", help="column with the text (datasets sources), as nlp_qt.train")
    p.add_argument("--one-sentence-per-line", choices=["None", "True", "False"], default="None",
                   help="each non-empty line is one sentence, as nlp_qt.train's option; None: no for plain text "
                   "(paragraphs split by the built-in splitter), yes for datasets sources")
    p.add_argument("--doc-boundary", choices=["file", "blank_line", "line"], default="file",
                   help="plain text: what separates documents, as nlp_qt.train (a sentence never spans two)")
    a = p.parse_args(argv)
    cfg = BowConfig(corpus=a.corpus, output_dir=a.output_dir, dim=a.dim, window=a.window, min_count=a.min_count,
                    epochs=a.epochs, negative=a.negative, seed=a.seed, lowercase=a.lowercase,
                    max_sentences=a.max_sentences, text_column=a.text_column,
                    one_sentence_per_line={"None": None, "True": True, "False": False}[a.one_sentence_per_line],
                    doc_boundary=a.doc_boundary)
    out = train_bow(cfg)
    print(json.dumps({"output_dir": str(out), **{k: v for k, v in json.loads((out / BOW_MARKER).read_text()).items()
                                                  if k != "config"}}))


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
