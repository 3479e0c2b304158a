"""Configuration of quick-thought pretraining (``python -m nlp_qt.train --help``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from shared_losses.training.cli import config_from_cli

from .objectives import OBJECTIVES, ObjectiveName

# The CPU protocol, chosen without looking at evaluation data: on the held-out batches of the training
# corpus (--dev-every 20: every 20th batch of 100 sentences never trained on), the setting and epoch with the lowest
# held-out loss among those tried (docs/results/nlp_qt.md; the pilots in
# docs/lab_notes/2026-11-26_results_history_nlp_qt_rl_curl.md): the shipped books corpus, a 2,000-word vocabulary,
# small GRUs. scripts/qt_table2.py's presets of the same names add the sweep (tasks, seeds, baselines).
_CPU = dict(corpus="nlp_qt/data/books", word_dim=128, encoder_dim=512, vocab_size=2000, batch_size=100, lr=2e-3,
            dev_every=20)
#: Protocol presets (``--preset NAME``): the fields each one sets; options given explicitly win.
PRESETS: dict[str, dict] = {
    # The held-out loss reaches its minimum after 1-2 epochs and rises after it (the 47k-sentence corpus is
    # memorised), so 2 epochs is the plateau, about 7-8 minutes a run with two side by side. A smaller vocabulary
    # over-fits later.
    "cpu": dict(_CPU, epochs=2),
    # cpu with 300-d word embeddings started from word2vec vectors of the same corpus (--word-vectors: a folder of
    # `python -m nlp_qt.bow`; qt_table2.py --preset cpu-w2v trains them first). Size, vocabulary, lr and epochs are
    # again those of the lowest held-out loss among the pilots tried: it over-fits in the second epoch.
    "cpu-w2v": dict(_CPU, epochs=1, word_dim=300, vocab_size=20000),
    # cpu-w2v with S2V's bag-of-words encoder (300-d): what the sentence-level objective adds to the same word2vec
    # vectors. lr 2e-3, temperature 1 and 4 epochs had the lowest held-out loss (lr 1e-2 and temperature 0.1
    # over-fit after 1-2 epochs).
    "cpu-bow": dict(_CPU, epochs=4, word_dim=300, encoder_dim=300, vocab_size=20000, encoder="bow", lr=2e-3),
    # the short version the demo runs (scripts/demo_nlp_qt.sh): the first 10,000 sentences.
    "demo": dict(_CPU, epochs=2, max_sentences=10_000),
}
PresetName = Literal[tuple(PRESETS)]


@dataclass
class Config:
    """Pretrain a quick-thought sentence encoder (QT, Logeswaran & Lee 2018) with the QT, debiased
    (DCL) or hard-negative objective, or a CPC sentence encoder (van den Oord et al. 2018, --objective cpc).
    Defaults are QT's reference configuration, but for four stated choices: the sentence's own score is left out of
    the softmax (--self-score zero keeps it as S2V does); neighbours across a document boundary are dropped; sentences
    are split and tokenized by built-in rules close to NLTK's punkt and word_tokenize (no NLTK data needed); and the
    vocabulary is counted over the first 5,000,000 sentences (--vocab-sentences None counts the whole corpus, as
    S2V does)."""

    #: The official quick-thought code's (lajanugen/S2V) flags that have no option of the same name here, and what
    #: gives the same: named in one line instead of tyro's box (shared_losses.training.cli.refuse_other_names).
    OTHER_NAMES: ClassVar[dict] = {
        "--aux": "--objective (--aux is rl_curl's name for its loss)",
        "--input-file-pattern": "--corpus (a text file or folder, .jsonl/.parquet, or hf:NAME; not a glob)",
        "--train-dir": "--output-dir",
        "--learning-rate": "--lr",
        "--clip-gradient-norm": "--clip-norm (per tensor as S2V's, or --clip-mode global)",
        "--word-embedding-dim": "--word-dim",
        "--sequence-length": "--max-length",
        "--nepochs": "--epochs",
        "--num-train-inst": "--max-steps or --epochs (S2V uses it only to count the steps)",
        "--context-size": "nothing: the positives are the previous and the next sentence (M = 2)",
        "--glove-path": "--word-vectors FILE (GloVe text, word2vec .vec/.bin)",
        "--w2v-path": "--word-vectors FILE (word2vec .bin/.vec); vocabulary expansion is not offered",
        "--save-model-secs": "--checkpoint-every N (steps)",
        "--shuffle-input-data": "nothing: the corpus is read in order, as S2V's default",
        "--max-ckpts": "nothing: a run keeps one checkpoint (--checkpoint-every N steps)",
        "--dropout-rate": "nothing: no dropout (S2V's --dropout is off by default)",
        "--model-config": "the options themselves (--word-dim, --encoder-dim, --bidirectional, --lowercase, ...), or "
                          "--preset",
        "--uniform-init-scale": "nothing: word embeddings start uniform in [-0.1, 0.1], as S2V's default",
        "--dropout": "nothing: no dropout (S2V's --dropout is off by default)",
        "--use-norm": "nothing: the vectors are always [f/|f|; g/|g|]",
    }

    #: Fields a resumed run may change; every other field (new ones included) must agree with the run's.
    #: vocab_sentences: the vocabulary is read back from vocab.json on resume. preset: only a name; the fields it set
    #: are compared one by one.
    RESUME_FREE: ClassVar[frozenset] = frozenset({
        "output_dir", "resume", "device", "overwrite", "progress", "epochs", "max_steps", "log_every",
        "checkpoint_every", "vocab_sentences", "preset", "report_to", "accept_corpus_change", "torch_threads"})

    corpus: str = ""
    """Training corpus: a plain-text file or folder (files in sorted order; .gz/.bz2/.xz read
    directly), a local .json/.jsonl/.csv/.tsv/.parquet file (compressed too) or `save_to_disk` folder, or
    a hub dataset `hf:NAME` or, for one of several configurations, `hf:NAME:CONFIG` (e.g. hf:bookcorpus,
    hf:Salesforce/wikitext:wikitext-103-raw-v1; needs internet)."""
    output_dir: str = "runs/nlp_qt"
    """Run directory: config.json, vocab.json, checkpoint/, model/ (for evaluation), log.csv, tb/, summary.json."""
    preset: Optional[PresetName] = None
    """A protocol preset (nlp_qt.config.PRESETS, listed above with the options each sets): its values become the
    defaults, options given explicitly win (in Python: nlp_qt.config.preset_config(NAME, ...)). cpu: the CPU protocol
    on the shipped books corpus, chosen on held-out batches (docs/results/nlp_qt.md); cpu-w2v: the same with 300-d
    word embeddings (pass --word-vectors, a folder of `python -m nlp_qt.bow`); cpu-bow: cpu-w2v with the
    bag-of-words encoder; demo: cpu on the first 10,000 sentences."""
    text_column: str = "text"
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
    max_length: int = 50
    """Maximum sentence length in tokens (longer ones are cut)."""
    lowercase: bool = False
    """Lower-case text before tokenising (QT is case-sensitive)."""

    word_dim: int = 620
    """Word embedding size."""
    encoder_dim: int = 1200
    """Sentence vector size of each encoder (f and g); the evaluation embedding has twice this."""
    bidirectional: bool = True
    """Bidirectional GRU with encoder_dim/2 units per direction (QT's default)."""
    encoder: Literal["gru", "bow", "conv"] = "gru"
    """Sentence encoder (both f and g; CPC: its one encoder): gru (QT's), bow, S2V's bag of words: the mean of the
    sentence's word embeddings (encoder_dim must equal word_dim; bidirectional does not apply), or conv, CPC's: a 1D
    convolution over the word embeddings (--conv-width words), ReLU, and the mean over the sentence."""
    conv_width: int = 3
    """encoder conv: the convolution's window in words."""
    word_vectors: Optional[str] = None
    """Initialise both encoders' word embeddings from pretrained word vectors: a GloVe text file (glove.6B.300d.txt),
    a word2vec / fastText text file (.vec, a '<count> <dim>' header) or binary file (.bin), each also .gz; or a folder
    written by `python -m nlp_qt.bow`. Their size must equal word_dim. A vocabulary word a file lacks takes its
    lower-case form's vector where the file has that (GloVe is lower case); words without a vector keep the uniform
    init; the vectors are trained on from there. None: uniform init (QT's trained-vocabulary mode)."""

    objective: ObjectiveName = "qt"
    """Loss: one of the objectives listed above (nlp_qt.objectives.OBJECTIVES)."""
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
    cpc_steps: int = 3
    """objective cpc: sentences predicted ahead, k = 1..K (CPC's text model predicts 3); below --cpc-length."""
    cpc_length: int = 10
    """objective cpc: the batch's consecutive sentences are cut into sequences of at most this many (and at every
    document end); the GRU context runs over each."""
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
    """Stop after this many steps in total (across resumes); a step is a batch (a batch without a neighbour pair
    makes no optimiser step but counts: docs/nlp_qt.md)."""
    seed: int = 0
    """Random seed (initialisation)."""
    device: Literal["auto", "cpu"] = "auto"
    """auto = the accelerator's device (GPU if present), cpu = force CPU (the same option as rl_curl and fewshot)."""
    torch_threads: int = 0
    """CPU threads for torch (0 = torch's default, from the cores this process may use and no more than its cgroup's
    CPU quota (a container's --cpus), or OMP_NUM_THREADS; summary.json's torch_threads says how many), as
    rl_curl.train's option. A CPU run's weights depend on it in their last digits (the order of the sums): repeat a
    run with the same count."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""
    report_to: tuple[Literal["tensorboard", "wandb", "mlflow", "none"], ...] = ("tensorboard",)
    """Where the training scalars go besides log.csv: tensorboard (tb/ in the run folder), wandb, mlflow (through
    accelerate's trackers; their usual environment variables apply, e.g. WANDB_MODE=offline,
    MLFLOW_TRACKING_URI), or none. Several may be given."""

    dev_every: int = 0
    """Hold out every Nth batch of the corpus stream (never trained on; N >= 2) and score the loss on the held-out
    batches after each epoch (dev_loss in log.csv and summary.json) and, when --max-steps stops the run inside an
    epoch, at the end (summary.json): the check that training has reached a plateau (or overfits). 0: every batch
    is trained on. The vocabulary is still counted over the whole corpus."""
    dev_max_batches: int = 50
    """Score at most this many held-out batches (the first ones of the stream)."""

    log_every: int = 50
    """Steps between CSV/TensorBoard rows."""
    checkpoint_every: int = 1000
    """Steps between checkpoints (one is also written at the end; 0: only at the end, and on a stop)."""
    resume: bool = False
    """Continue the run in output_dir from its checkpoint (a finished run is left as it is; a missing or
    empty folder starts a new run)."""
    overwrite: bool = False
    """Move the run already in output_dir aside (to OUTPUT_DIR.replaced-<time>, never deleted) and start a
    new one there."""
    accept_corpus_change: bool = False
    """With --resume: continue although the corpus changed since the checkpoint (a resume skips the batches already
    used by count, which is right only if the text read so far is unchanged: a bad file not yet read fixed or
    removed, a bad line of the file being read removed). A warning says so."""
    progress: bool = True
    """Show a progress bar (tqdm, on stderr)."""


def preset_config(preset: str | None = None, **fields) -> Config:
    """The configuration of ``--preset PRESET`` with ``fields`` as options (``preset_config("cpu", objective="debiased",
    tau_plus=0.01)``): the preset's values, then ``fields``. ``Config(preset="cpu")`` takes the name only, and a run
    refuses it."""
    from shared_losses.training.cli import preset_config as _preset_config

    return _preset_config(Config, PRESETS, preset, fields)


def from_cli(argv: list[str] | None = None, description: str | None = None) -> Config:
    """The configuration of ``python -m nlp_qt.train ARGS`` (``argv``: the arguments, default ``sys.argv[1:]``):
    tyro's parse of :class:`Config` with ``--preset NAME`` (:func:`shared_losses.training.cli.config_from_cli`)."""
    return config_from_cli(Config, PRESETS, argv, description,
                           sections=[OBJECTIVES.help_text("nlp_qt.objectives.OBJECTIVES")],
                           prog="python -m nlp_qt.train")
