"""An nlp_qt model folder (also a sentence-transformers folder that needs no nlp_qt) from any checkpoint of a run,
finished or not, or a sentence-transformers folder of standard modules from a bag-of-words baseline:

    python -m nlp_qt.export --run-dir runs/qt                    # writes runs/qt/model_step<N>/
    python -m nlp_qt.export --run-dir runs/qt --output my_encoder
    python -m nlp_qt.export --run-dir runs/w2v                   # a python -m nlp_qt.bow folder: runs/w2v/model/

A finished run already has ``RUN/model/`` (written when training ends); this command is for a run that was
stopped before its end (Ctrl-C, a killed job), or for keeping the weights of a checkpoint before the run
goes on. It reads ``RUN/config.json``, ``RUN/vocab.json`` and the model weights in ``RUN/checkpoint/`` and
writes the same files as training's end does (``config.json``, ``vocab.json``, ``model.safetensors``,
``modules.json``) plus ``modeling_qt.py``, the sentence-transformers module's code (:mod:`nlp_qt.modeling_qt`,
self-contained), which ``modules.json`` names: ``nlp_qt.load_encoder``, ``nlp_qt.senteval --model`` and
``SentenceTransformer(path, trust_remote_code=True)`` load it, the last one also where nlp_qt is not installed. The
folder's ``config.json`` names the run and the step.

A bag-of-words folder (``python -m nlp_qt.bow``: the mean of the known words' word2vec vectors) becomes a
sentence-transformers folder of its standard modules only, loaded without ``trust_remote_code`` or nlp_qt:
``WordEmbeddings`` (a ``tokenizers`` word-level tokenizer whose normalizer and pre-tokenizer reproduce
:func:`nlp_qt.vocab.tokenize`, unknown words mapped to ``<unk>``), ``WordWeights`` (weight 0 for ``<unk>``, 1 for
every word) and ``Pooling`` (mean): the mean over the known words, zeros when there is none, as
:func:`nlp_qt.bow.load_bow_encoder` computes it. The tokenizations differ only on inputs no English text holds:
clitics glued to each other (``it’s’s``, ``x'ſ'd``) and, in a lower-cased folder, letters that Unicode added after
the version of the exporting Python (14.0 for Python 3.11); the tests compare them on random strings.

A target that exists and is not empty is refused: an earlier export of the same run is replaced only with
``--overwrite``, anything else never (nothing is written); what the user added to the earlier export (names it
does not write, such as notes or a conversion) is copied into the new one. The folder is written beside its target
and renamed into place.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

from shared_losses.training.cli import examples_from, parse_dataclass
from shared_losses.training.runtime import (check_finite_weights, check_folder_writable, check_parent_folder,
                                            check_replaceable_folder, export_source, exported_from, run_folder_given,
                                            through_link)


@dataclass
class ExportArgs:
    """Write a run's checkpoint as an nlp_qt / sentence-transformers model folder."""

    run_dir: str
    """Training output directory (holds config.json, vocab.json and checkpoint/), or a bag-of-words folder
    written by python -m nlp_qt.bow (bow.json, words.json, word_vectors.npy)."""
    output: Optional[str] = None
    """Folder to write (default: RUN_DIR/model_step<N>, N the checkpoint's step; RUN_DIR/model for a bag of
    words). Must be new or empty, or an earlier export of this run with --overwrite."""
    overwrite: bool = False
    """Replace an earlier export of this run in --output (a folder holding anything else is never replaced)."""


def _run_settings(run: Path):
    """(train Config, Vocab, checkpoint folder) of the run in ``run``; one-line errors for what is missing."""
    from shared_losses.training.runtime import (another_application, note_if_run_going, read_json_file,
                                                resolve_checkpoint, run_application)

    from .config import Config
    from .vocab import Vocab

    run_folder_given(run)
    owner = run_application(run)
    if owner not in ("nlp_qt", "unknown", None):
        raise FileNotFoundError(another_application(run, owner, "nlp_qt"))
    note_if_run_going(run, "its latest checkpoint")
    for name in ("config.json", "vocab.json"):
        if not (run / name).is_file():
            raise FileNotFoundError(f"{run} is not an nlp_qt run folder: it has no {name}")
    from .model import is_qt_model_dir

    if is_qt_model_dir(run) and not (run / "checkpoint").exists():
        raise FileNotFoundError(f"--run-dir {run} is a model folder already (a run's model/ or an export), not a "
                                "training run: load it as it is (nlp_qt.load_encoder, SentenceTransformer(FOLDER, "
                                "trust_remote_code=True), nlp_qt.senteval --model); --run-dir takes the run folder "
                                "that holds checkpoint/")
    ckpt = resolve_checkpoint(run / "checkpoint")  # names a missing or incomplete checkpoint in one line
    if not (ckpt / "model.safetensors").is_file():
        raise FileNotFoundError(f"checkpoint {ckpt} holds no model.safetensors: not an nlp_qt checkpoint")
    saved = read_json_file(run / "config.json", "run's configuration")
    known = {f.name for f in fields(Config)}
    cfg = Config(**{k: v for k, v in saved.items() if k in known})
    return cfg, Vocab.load(run / "vocab.json"), ckpt


BOW_MARKER = "nlp_qt_export.json"  # in a bag-of-words export: which folder it came from


def _export_record(out: Path) -> dict:
    """What an export folder says of itself: the config.json or bag-of-words marker that names its run (``run_id``,
    or ``exported_from``, the run's path, in an export from before runs had ids; with, since exports record it,
    :data:`WEIGHTS_KEY`); {} for a folder that is no export."""
    for name in ("config.json", BOW_MARKER):
        if (out / name).is_file():
            try:
                meta = json.loads((out / name).read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(meta, dict) and (meta.get("exported_from") or meta.get("run_id")):
                return meta
    return {}


WEIGHTS_KEY = "exported_weights_sha256"  # in an export's config.json or bag-of-words marker: its weights as written
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weights_fingerprint(folder: Path) -> str:
    """SHA-256 over a model folder's weight files (their paths inside it and their bytes, in path order; hidden
    files apart): what an export records of itself, so that a folder fine-tuned and saved over it since is not
    taken for the export."""
    import hashlib

    digest = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES
                    and not any(part.startswith(".") for part in p.relative_to(folder).parts)):
        digest.update(f.relative_to(folder).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _record_weights(staging: Path, meta_name: str) -> None:
    """Add the staging folder's :func:`weights_fingerprint` to its ``meta_name`` (config.json, or the marker)."""
    meta_file = staging / meta_name
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta[WEIGHTS_KEY] = weights_fingerprint(staging)
    meta_file.write_text(json.dumps(meta, indent=2))


def _target(output: str | Path) -> Path:
    """--output as a path with a name (``.`` or ``..``, the folder one is in, resolved): the export is staged
    beside it under that name."""
    out = Path(output)
    return out.resolve() if out.name in ("", ".", "..") else out


def check_target(out: Path, run: Path, overwrite: bool = False) -> None:
    """Refuse a target holding anything but an earlier export of ``run`` as it was written (an export fine-tuned
    and saved over since is the user's model, not the export: its weights differ from those the export recorded),
    and that one without ``overwrite`` (nothing is written)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"--output {out} is a file, not a folder to export into (nothing was written)")
    if not any(out.iterdir()):
        return
    record = _export_record(out)
    if not exported_from(record, run, "exported_from"):  # by the run's id: a moved run is still its own
        raise FileExistsError(f"--output {out} already holds files that are not an export of {run}; pass a new or "
                              "empty folder (nothing was written; --overwrite replaces only an earlier export of "
                              "the same run)")
    recorded = record.get(WEIGHTS_KEY)
    if isinstance(recorded, str) and recorded != weights_fingerprint(out):
        raise FileExistsError(f"--output {out} holds an export of {run} whose weights have changed since it was "
                              "written (fine-tuned and saved there?): it is not replaced, even with --overwrite; "
                              "pass another --output, or move the folder aside yourself (nothing was written)")
    if not overwrite:
        raise FileExistsError(f"--output {out} already holds an export of {run}; pass --overwrite to replace it, or "
                              "another --output (nothing was written)")


def export_checkpoint(run_dir: str | Path, output: str | Path | None = None, overwrite: bool = False) -> dict:
    """Write the model of ``run_dir``'s checkpoint to ``output``; returns ``{"model": path, "step": N}``."""
    from safetensors.torch import load_file

    from shared_losses.training.runtime import (CheckpointError, keep_added_files, kept_files_line, load_checkpoint,
                                                replace_directory, state_dict_mismatch)

    from .model import QuickThought, model_config, save_model

    run = Path(run_dir)
    cfg, vocab, ckpt = _run_settings(run)
    step = int(load_checkpoint(None, ckpt)["step"])
    out = _target(output) if output else run / f"model_step{step}"
    check_target(out, run, overwrite)
    qt = QuickThought(model_config(cfg, len(vocab)))
    weights = ckpt / "model.safetensors"
    try:
        state = load_file(str(weights))
    except Exception as err:  # noqa: BLE001 - safetensors' errors for a truncated or overwritten file
        why = (str(err).strip().splitlines() or [""])[0]
        raise CheckpointError(f"{weights} is damaged (e.g. truncated by a full disk or a copy that did not finish) "
                              f"and cannot be read: {type(err).__name__}: {why}") from None
    check_finite_weights(state, str(weights))
    try:
        qt.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {ckpt} does not match {run / 'config.json'} and {run / 'vocab.json'} "
                              f"({state_dict_mismatch(err)})") from None
    import dataclasses

    # written beside the target, completed there (the module's code, modules.json) and renamed into place
    real = through_link(out)  # beside where a link leads
    staging = real.with_name(f".{real.name}.export")
    with _removed_when_cut_off(staging):
        save_model(qt.eval(), vocab, staging,
                   {"train_config": dataclasses.asdict(cfg), "step": step, **export_source(run, "exported_from")})
        _record_weights(staging, "config.json")  # save_model wrote the sentence-transformers files
        kept = keep_added_files(out, staging)
        replace_directory(staging, out)
    if kept:
        print(kept_files_line(out, kept), file=sys.stderr)
    return {"model": str(out), "step": step}


@contextlib.contextmanager
def _removed_when_cut_off(staging: Path):
    """The staging folder an export is written into beside its target, removed when the export stops before it is
    renamed into place (an error, a Ctrl-C, or SIGTERM on the command line): no hidden half-copy is left beside the
    target, which stays as it was."""
    try:
        yield
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# --- the bag-of-words baseline as standard sentence-transformers modules -------------------------------------------

UNK_TOKEN = "<unk>"  # the word-level tokenizer's id 0: weight 0, a zero vector (nlp_qt.vocab.tokenize never yields it)


@functools.lru_cache(maxsize=None)
def _class_of(predicate_name: str) -> str:
    """An Oniguruma character class of the code points for which ``str.<predicate_name>()`` (or, for "word",
    Python's ``\\w``: ``isalnum()`` or ``_``; for "token", :func:`nlp_qt.modeling_qt.is_word_char`) holds: the
    exporting Python's Unicode tables, written out, so the tokenizer does not depend on the Unicode version of the
    ``tokenizers`` build that reads it."""
    from .modeling_qt import code_point_ranges, word_char_ranges

    def pred(ch: str) -> bool:
        return ch.isalnum() or ch == "_" if predicate_name == "word" else getattr(ch, predicate_name)()

    ranges = word_char_ranges() if predicate_name == "token" else code_point_ranges(pred)
    return "[" + "".join(f"\\x{{{lo:x}}}" + (f"-\\x{{{hi:x}}}" if hi > lo else "") for lo, hi in ranges) + "]"


def bow_tokenizer(words: list[str], lowercase: bool):
    """A ``tokenizers`` word-level tokenizer that splits a text as :func:`nlp_qt.vocab.tokenize` (version 3) does
    and maps each token to its row in ``words`` + 1 (id 0: ``<unk>``)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    from .vocab import TOKENIZER_VERSION

    if TOKENIZER_VERSION != 3:  # the rules below are version 3's; a new version needs them rewritten
        raise NotImplementedError(f"the bag-of-words export reproduces tokenizer version 3, not {TOKENIZER_VERSION}")
    vocab = {UNK_TOKEN: 0}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(WordLevel(vocab, unk_token=UNK_TOKEN))
    word = _class_of("word")
    letter = "A-Za-z\u0130\u0131\u017f\u212a"  # Python's (?i)[a-z]: the ASCII letters and İ ı ſ K (Kelvin)
    rules = []
    if lowercase:
        # str.lower() maps a word-final capital sigma to ς; the Lowercase normalizer, letter by letter, to σ
        ignorable = r"\p{Case_Ignorable}"
        after_cased = "|".join(r"\p{Cased}" + ignorable * k for k in range(4))
        rules += [normalizers.Replace(Regex(f"(?<={after_cased})\u03a3(?!{ignorable}*\\p{{Cased}})"), "\u03c2"),
                  normalizers.Lowercase()]
    # vocab._NOT: "don't" -> "do n't", "DON’T" -> "DO N't" (the apostrophe straight, the t lower-case)
    rules += [normalizers.Replace(Regex(f"(?<=[{letter}]){n}['\u2019][tT](?!{word})"), f" {n}'t") for n in "nN"]
    # vocab._CLITIC: "it’s" -> "it 's", "we'RE" -> "we 'RE"
    clitic = "(?:[sS\u017f]|[rR][eE]|[vV][eE]|[lL][lL]|[dD]|[mM])"
    rules.append(normalizers.Replace(Regex(f"(?<=[{letter}0-9])['\u2019](?={clitic}(?!{word}))"), " '"))
    tok.normalizer = normalizers.Sequence(rules)
    # version 3's token pattern (modeling_qt._unicode_token).findall: whitespace (Python's) apart, then its
    # alternatives in order; every other character is a token of its own, so the pieces between matches are empty
    token = _class_of("token")
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_class_of("isspace") + "+"), "removed"),
        pre_tokenizers.Split(Regex(f"{token}+(?:['\u2019\\-]{token}+)*|n't|'[A-Za-z]+|[^A-Za-z0-9]"), "isolated"),
    ])
    return tok


def export_bow(bow_dir: str | Path, output: str | Path | None = None, overwrite: bool = False) -> dict:
    """Write the bag-of-words baseline in ``bow_dir`` as a sentence-transformers folder of standard modules
    (WordEmbeddings, WordWeights, mean Pooling) to ``output`` (default BOW_DIR/model); returns
    ``{"model": path, "words": N}``."""
    import warnings

    import numpy as np

    from shared_losses.training.runtime import keep_added_files, kept_files_line, replace_directory

    from .bow import bow_tokenizer_version, read_word_vectors
    from .vocab import TOKENIZER_VERSION

    run = Path(bow_dir)
    words, vectors, lowercase = read_word_vectors(run)  # names a missing or damaged file in one line
    if bow_tokenizer_version(run) != TOKENIZER_VERSION:
        warnings.warn(f"{run} was tokenized with tokenizer version {bow_tokenizer_version(run)} (bow.json; a folder "
                      f"without the record is taken as version 2); the export splits text as version "
                      f"{TOKENIZER_VERSION} does, the same on Latin text, not on words of other scripts")
    out = _target(output) if output else run / "model"
    check_target(out, run, overwrite)
    from sentence_transformers import SentenceTransformer
    from transformers import PreTrainedTokenizerFast

    try:  # sentence-transformers 6; sentence_transformers.models is its deprecated alias
        from sentence_transformers.sentence_transformer.modules import Pooling, WordEmbeddings, WordWeights
    except ImportError:  # pragma: no cover - older sentence-transformers
        from sentence_transformers.models import Pooling, WordEmbeddings, WordWeights

    tok = bow_tokenizer(words, lowercase)
    rows = {w: i for i, w in enumerate(words)}  # a repeated word: its last row, as nlp_qt.bow's index takes it
    itos = [w for w, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    table = np.zeros((len(itos), vectors.shape[1]), dtype=np.float32)
    table[1:] = vectors[[rows[w] for w in itos[1:]]]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=sys.maxsize)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(modules=[WordEmbeddings(fast, table, max_seq_length=sys.maxsize),
                                          WordWeights(itos, {UNK_TOKEN: 0.0}, 1.0),
                                          Pooling(vectors.shape[1], "mean")], device="cpu")
    real = through_link(out)  # beside where a link leads
    staging = real.with_name(f".{real.name}.export")
    if staging.exists():
        shutil.rmtree(staging)
    with _removed_when_cut_off(staging):
        _write_bow_folder(st, staging, run, words, vectors, lowercase)
        kept = keep_added_files(out, staging)
        replace_directory(staging, out)
    if kept:
        print(kept_files_line(out, kept), file=sys.stderr)
    return {"model": str(out), "words": len(words)}


def _write_bow_folder(st, staging: Path, run: Path, words, vectors, lowercase: bool) -> None:
    st.save(str(staging), create_model_card=False)
    # transformers 5 names its fast tokenizer class TokenizersBackend; the older name loads in 4.x too
    meta_file = staging / "tokenizer_config.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["tokenizer_class"] = "PreTrainedTokenizerFast"
    meta_file.write_text(json.dumps(meta, indent=2))
    (staging / BOW_MARKER).write_text(json.dumps({
        **export_source(run, "exported_from"), "kind": "bag of words (nlp_qt.bow)", "words": len(words),
        "dim": int(vectors.shape[1]), "lowercase": lowercase,
        "load_with": "sentence_transformers.SentenceTransformer(FOLDER)"}, indent=2))
    _record_weights(staging, BOW_MARKER)


def main(args: ExportArgs | None = None) -> dict:
    args = args or parse_dataclass(ExportArgs, description=f"{ExportArgs.__doc__}\n\n{examples_from(__doc__)}")
    if args.output is not None:
        check_parent_folder(args.output, "--output")
        check_folder_writable(args.output, "--output")
        check_replaceable_folder(args.output, "--output")
    from .bow import is_bow_dir

    if is_bow_dir(args.run_dir):
        result = export_bow(args.run_dir, args.output, args.overwrite)
    else:
        result = export_checkpoint(args.run_dir, args.output, args.overwrite)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    import signal

    from shared_losses.training.cli import run_cli

    def stop(signum, frame):  # SIGTERM (kill, a scheduler) as Ctrl-C: the staging folder is removed on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    run_cli(main, interrupted="stopped (Ctrl-C or SIGTERM): nothing was exported; --output is as it was")
