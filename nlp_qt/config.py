"""Configuration of quick-thought pretraining (``python -m nlp_qt.train --help``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, Optional

from tyro.conf import arg


@dataclass
class Config:
    """Pretrain a quick-thought sentence encoder (QT, Logeswaran & Lee 2018) with the QT, debiased
    (DCL) or hard-negative objective. Defaults are QT's reference configuration."""

    #: Fields a resumed run may change; every other field (new ones included) must agree with the run's.
    #: vocab_sentences: the vocabulary is read back from vocab.json on resume.
    RESUME_FREE: ClassVar[frozenset] = frozenset({
        "output_dir", "resume", "device", "overwrite", "progress", "epochs", "max_steps", "log_every", "checkpoint_every",
        "vocab_sentences"})

    corpus: str = ""
    """Training corpus: a plain-text file or folder (files in sorted order; .gz/.bz2/.xz read
    directly), a local .json/.jsonl/.csv/.parquet file (compressed too) or `save_to_disk` folder, or
    a hub dataset `hf:NAME` (e.g. hf:bookcorpus; needs internet)."""
    output_dir: str = "runs/nlp_qt"
    """Run directory: config.json, vocab.json, checkpoint/, model/ (for evaluation), log.csv, tb/, summary.json."""
    text_field: Annotated[str, arg(aliases=("--text-column",))] = "text"
    """Column with the text (datasets sources)."""
    doc_field: Optional[str] = None
    """Column whose change starts a new document (datasets sources), e.g. a book id."""
    doc_boundary: Literal["file", "blank_line", "line"] = "file"
    """Plain text: what separates documents (no neighbours across documents)."""
    one_sentence_per_line: Optional[bool] = None
    """Each non-empty line is one sentence (BookCorpus style). Default: False for plain text
    (paragraphs are split by the built-in splitter), True for datasets sources."""
    max_sentences: Optional[int] = None
    """Use only the first N sentences of the corpus."""

    vocab_size: int = 50000
    """Vocabulary size (most frequent words; plus <pad> and <unk>)."""
    vocab_sentences: Optional[int] = 5_000_000
    """Sentences scanned to build the vocabulary (None: the whole corpus)."""
    max_len: Annotated[int, arg(aliases=("--max-length",))] = 50
    """Maximum sentence length in tokens (longer ones are cut)."""
    lowercase: bool = False
    """Lower-case text before tokenising (QT is case-sensitive)."""

    word_dim: int = 620
    """Word embedding size."""
    encoder_dim: int = 1200
    """Sentence vector size of each encoder (f and g); the evaluation embedding has twice this."""
    bidirectional: bool = True
    """Bidirectional GRU with encoder_dim/2 units per direction (QT's default)."""
    encoder: Literal["gru", "bow"] = "gru"
    """Sentence encoder (both f and g): gru (QT's) or bow, S2V's bag of words: the mean of the sentence's word
    embeddings, trained by the same objective (encoder_dim must equal word_dim; bidirectional does not apply)."""
    word_vectors: Optional[str] = None
    """Initialise both encoders' word embeddings from pretrained word vectors: a folder written by
    `python -m nlp_qt.bow` (word2vec on a corpus; its size must equal word_dim). Vocabulary words it lacks keep
    the uniform init; the vectors are trained on from there. None: uniform init (QT's trained-vocabulary mode)."""

    objective: Literal["qt", "debiased", "hard"] = "qt"
    """Loss: qt (S2V softmax, soft targets on both neighbours), debiased (DCL, M = 2), hard (HCL)."""
    tau_plus: float = 0.0
    """Class prior tau+ for debiased/hard (DCL Table 2 uses 0.005 and 0.01)."""
    beta: float = 1.0
    """Hardness concentration for objective hard."""
    temperature: float = 1.0
    """Scores f(s)^T g(c) are divided by this (QT: 1)."""
    log_floor: Literal["min_negative", "none"] = "min_negative"
    """Floor for the debiased negative estimate (dot products are unbounded): each anchor's smallest
    negative score, or none (g >= 0 only)."""
    self_score: Literal["exclude", "zero"] = "exclude"
    """The sentence's own score: excluded (-inf; needed by the debiased estimator) or zero and kept
    in the denominator (exactly S2V; objective qt only)."""
    gather_across_processes: bool = False
    """Multi-process: use the global batch (all processes' sentences) as candidates."""

    batch_size: int = 400
    """Consecutive sentences per batch and process."""
    lr: float = 5e-4
    """Adam learning rate."""
    clip_norm: float = 5.0
    """Gradient clipping threshold (0 disables)."""
    clip_mode: Literal["per_tensor", "global"] = "per_tensor"
    """per_tensor clips each gradient tensor separately (S2V); global clips the total norm."""
    epochs: int = 1
    """Passes over the corpus."""
    max_steps: Optional[int] = None
    """Stop after this many optimiser steps in total (across resumes)."""
    seed: int = 0
    """Random seed (initialisation)."""
    device: Literal["auto", "cpu"] = "auto"
    """auto = the accelerator's device (GPU if present), cpu = force CPU (the same option as rl_curl and fewshot)."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""

    dev_every: int = 0
    """Hold out every Nth batch of the corpus stream (never trained on; N >= 2) and score the loss on the held-out
    batches after each epoch: dev_loss in log.csv and summary.json, the check that training has reached a plateau
    (or overfits). 0: every batch is trained on. The vocabulary is still counted over the whole corpus."""
    dev_max_batches: int = 50
    """Score at most this many held-out batches (the first ones of the stream)."""

    log_every: int = 50
    """Steps between CSV/TensorBoard rows."""
    checkpoint_every: int = 1000
    """Steps between checkpoints (one is also written at the end)."""
    resume: bool = False
    """Continue the run in output_dir from its checkpoint (a finished run is left as it is; a missing or
    empty folder starts a new run)."""
    overwrite: bool = False
    """Move the run already in output_dir aside (to OUTPUT_DIR.replaced-<time>, never deleted) and start a
    new one there."""
    progress: bool = True
    """Show a progress bar (tqdm, on stderr)."""
