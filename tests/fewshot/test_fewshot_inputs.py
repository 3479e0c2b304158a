"""fewshot on unusual-but-realistic input: batch sampling, data files, tokenizer folders, resume."""

import dataclasses
import json
import re
import shutil
import warnings

import numpy as np
import pytest
import torch

from fewshot.config import FewShotConfig
from fewshot.data import load_splits
from fewshot.model import load_tokenizer, max_tokens
from fewshot.heads import tokenize
from fewshot.run import Batches, prepare
from fewshot.train import train
from shared_losses.data import DataError, load_local

from .conftest import make_texts, text_config, write_tsv


def test_batches_never_repeat_an_example_within_a_batch():
    # N = 20 labeled with batches of 16 (the defaults): every second batch straddles two passes
    b = Batches(np.arange(20), 16, seed=0)
    seen = []
    for _ in range(50):
        x = b.next()
        assert len(x) == 16 and len(set(x.tolist())) == 16
        seen += x.tolist()
    assert np.bincount(seen).tolist() == [40] * 20  # 40 full passes: each example once per pass
    small = Batches(np.arange(5), 10, seed=0)  # batch larger than the pool: the pool once
    for _ in range(5):
        assert sorted(small.next().tolist()) == [0, 1, 2, 3, 4]


def test_json_files_with_bom_as_array_or_bad_records(tmp_path):
    bom = tmp_path / "a.jsonl"
    bom.write_text('\ufeff{"text": "good", "label": 1}\r\n{"text": "bad", "label": 0}\r\n', encoding="utf-8")
    assert load_local(str(bom), "text", "label", "1") == (["good", "bad"], [1, 0])
    arr = tmp_path / "b.json"
    arr.write_text(json.dumps([{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}], indent=1))
    assert load_local(str(arr), "text", "label", "pos") == (["good", "bad"], [1, 0])
    one_line = tmp_path / "c.json"
    one_line.write_text(json.dumps([{"text": "good", "label": 1}, {"text": "bad", "label": 0}]))
    assert load_local(str(one_line), "text", "label", "1") == (["good", "bad"], [1, 0])
    lists = tmp_path / "d.jsonl"
    lists.write_text('["good", 1]\n["bad", 0]\n')
    with pytest.raises(DataError, match="JSON object"):
        load_local(str(lists), "text", "label", "1")
    header_only = tmp_path / "e.tsv"
    header_only.write_text("sentence\tlabel\n\t1\n")
    with pytest.raises(DataError, match="no rows"):
        load_local(str(header_only), "sentence", "label", "1")


def test_eval_labels_must_be_training_labels(tmp_path):
    train_file = write_tsv(tmp_path / "train.tsv", make_texts(20, 0))  # labels 0 / 1
    only_neg = write_tsv(tmp_path / "neg.tsv", [(t, 0) for t, _ in make_texts(6, 1)])
    _, _, x, y = load_splits(FewShotConfig(dataset=train_file, eval_file=only_neg))
    assert len(x) == 6 and y == [0] * 6  # one class in the evaluation file is fine
    other = write_tsv(tmp_path / "other.tsv", [(t, 1 + i % 2) for i, (t, _) in enumerate(make_texts(6, 1))])
    with pytest.raises(DataError, match=r"\['2'\] do not occur in the training file"):
        load_splits(FewShotConfig(dataset=train_file, eval_file=other))  # '2' would count as negative


def _tiny_bert(folder):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=32)).save_pretrained(folder)


def test_model_only_folder_is_refused_as_tokenizer(tmp_path):
    # transformers builds a tokenizer with only special tokens from config.json alone: all text -> [UNK]
    _tiny_bert(tmp_path / "model_only")
    with pytest.raises(ValueError, match="no vocabulary"):
        load_tokenizer(str(tmp_path / "model_only"))


def test_tokenizer_without_pad_token_can_pad(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "good": 3, "movie": 4}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(tmp_path / "nopad")
    t = load_tokenizer(str(tmp_path / "nopad"))
    ids, mask = tokenize(t, ["good movie", "good"], 8, "cpu")
    assert ids.shape == (2, 2) and mask.tolist() == [[1, 1], [1, 0]]


def _cfg(tiny_encoder, easy_task, out, **kw):
    train_file, dev = easy_task
    base = dict(encoder=tiny_encoder, dataset=train_file, eval_file=dev, n_labeled=10, n_unlabeled=20, max_steps=2,
                batch_labeled=5, batch_unlabeled=5, max_length=16, pooling="mean", proj_dim=8, eval_every=2,
                checkpoint_every=2, output_dir=str(out), device="cpu")
    return text_config(base, **kw)


def test_resume_in_moved_folder_and_refused_resume_leaves_folder_untouched(tiny_encoder, easy_task, tmp_path):
    train(_cfg(tiny_encoder, easy_task, tmp_path / "a"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # a run folder copied elsewhere resumes there
    train(_cfg(tiny_encoder, easy_task, tmp_path / "b", max_steps=3, resume=True))
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["steps"] == 3
    before = {f: (tmp_path / "b" / f).read_text() for f in ("config.json", "sample.json")}
    with pytest.raises(ValueError, match=r"different configuration \(lam: 0.1 -> 0.5, seed: 0 -> 7\)"):
        train(_cfg(tiny_encoder, easy_task, tmp_path / "b", max_steps=4, lam=0.5, seed=7, resume=True))
    assert {f: (tmp_path / "b" / f).read_text() for f in before} == before
    with pytest.raises(FileExistsError, match="--resume"):  # never overwritten without --resume
        train(_cfg(tiny_encoder, easy_task, tmp_path / "b", max_steps=4))
    assert {f: (tmp_path / "b" / f).read_text() for f in before} == before
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["steps"] == 3


def test_pu_setting_refuses_what_it_cannot_do(tiny_encoder, easy_task, tmp_path):
    from fewshot.config import PuConfig

    # --gather-across-processes and --objective are not options of the PU pipeline (it always trains puNCE, PU form)
    names = {f.name for f in dataclasses.fields(PuConfig)}
    assert not names & {"gather_across_processes", "objective", "lam", "head"}
    # was: torch.cat() of nothing
    with pytest.raises(ValueError, match="--n-unlabeled must be >= 2 in the PU pipeline"):
        train(_cfg(tiny_encoder, easy_task, tmp_path / "pu", setting="pu", n_unlabeled=0))
    with pytest.raises(ValueError, match=r"--n-labeled must be >= 1 \(labeled positives\)"):
        train(_cfg(tiny_encoder, easy_task, tmp_path / "pu", setting="pu", n_labeled=0))
    assert not (tmp_path / "pu").exists()


def test_max_eval_is_a_seeded_random_subset_in_file_order(tiny_encoder, easy_task, tmp_path):
    # an evaluation file sorted by label: its first 10 rows are all negatives
    dev = write_tsv(tmp_path / "sorted.tsv", sorted(make_texts(40, 1), key=lambda r: r[1]))
    cfg = lambda out, **kw: _cfg(tiny_encoder, (easy_task[0], dev), tmp_path / out, **kw)  # noqa: E731
    full, a, again = prepare(cfg("full")), prepare(cfg("a", max_eval=10)), prepare(cfg("again", max_eval=10))
    assert len(a.eval_y) == 10 and set(a.eval_y) == {0, 1} and a.eval_x == again.eval_x  # seeded
    rows = iter(zip(full.eval_x, full.eval_y))
    assert all(r in rows for r in zip(a.eval_x, a.eval_y))  # a subsequence: the file's order is kept
    assert prepare(cfg("seed1", max_eval=10, seed=1)).eval_x != a.eval_x
    assert prepare(cfg("all", max_eval=40)).eval_x == full.eval_x
    # its own generator: the few-shot sample, the heads' initialisation and the prior do not change
    assert a.sample.to_json() == full.sample.to_json() and a.prior == full.prior
    assert all(torch.equal(v, full.model.state_dict()[k]) for k, v in a.model.state_dict().items())


@pytest.mark.parametrize("option, value", [
    ("eval_every", 0), ("eval_every", -5), ("checkpoint_every", -1), ("max_steps", -1),
    ("batch_labeled", 0), ("batch_unlabeled", -1), ("lr", -1e-5), ("lr", float("nan")), ("weight_decay", -0.1),
    ("max_length", 0), ("max_eval", 0), ("proj_dim", 0), ("temperature", 0.0), ("lam", 1.5), ("prior", 1.2),
    ("label_pull", 1.5), ("label_pull", -0.1), ("label_pull", float("nan"))])
def test_invalid_numeric_options_are_refused_before_anything_is_written(tiny_encoder, easy_task, tmp_path, option,
                                                                        value):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=f"--{option.replace('_', '-')} must be"):
        train(_cfg(tiny_encoder, easy_task, out, **{option: value}))
    assert not out.exists()


@pytest.mark.parametrize("objective", ["ce", "ce+scl", "probe"])
def test_label_pull_is_refused_where_no_punce_term_reads_it(tiny_encoder, easy_task, tmp_path, objective):
    out = tmp_path / "run"
    refusal = "--label-pull weighs puNCE's unlabeled examples .*--objective " + re.escape(objective)
    with pytest.raises(ValueError, match=refusal):
        train(_cfg(tiny_encoder, easy_task, out, objective=objective, label_pull=0.5))
    assert not out.exists()


@pytest.mark.parametrize("objective,given,words", [
    ("ce", ["--lam", "0.9"], "--lam: not read by --objective ce .*no contrastive term"),
    ("ce", ["--temperature", "0.05", "--batch-unlabeled", "4"], "--temperature, --batch-unlabeled: not read"),
    ("ce+scl", ["--batch-unlabeled", "4"], "--batch-unlabeled: not read by --objective ce\\+scl .*no unlabeled"),
    ("probe", ["--lr", "0.5", "--max-steps", "999", "--head", "linear"],
     "--lr, --max-steps, --head: not read by --objective probe \\(a baseline: it trains no step\\); drop them"),
    ("setfit", ["--train-layers", "1"], "--train-layers: not read by --objective setfit"),
    ("ce", ["--batch_unlabeled", "4", "--lam=0.9"], "--lam, --batch-unlabeled: not read"),  # tyro reads _ as -
])
def test_options_an_objective_does_not_read_are_refused_on_the_command_line(objective, given, words):
    """`--objective ce --lam 0.9` (and a probe's --lr, --max-steps, --head ...) ran, recorded the value in
    config.json and did nothing: the same log.csv to the byte. A preset's values for them are not refused (the
    preset is for every objective); nor are they where the objective reads them."""
    from fewshot.config import from_cli

    base = ["--dataset", "reuters", "--objective", objective]
    with pytest.raises(ValueError, match=words):
        from_cli(base + given)
    assert from_cli(base + ["--preset", "cpu"]).lam == 0.5
    assert from_cli(["--dataset", "reuters", "--objective", "ce+punce"] + given).objective == "ce+punce"


def test_max_length_beyond_the_position_embeddings_is_refused(tiny_encoder, easy_task, tmp_path):
    # the tiny BERT has 64 position embeddings; its tokenizer sets no model_max_length (int(1e30))
    with pytest.raises(ValueError, match=r"--max-length 65 exceeds .* 64 tokens"):
        train(_cfg(tiny_encoder, easy_task, tmp_path / "a", max_length=65))
    assert not (tmp_path / "a").exists()
    prepare(_cfg(tiny_encoder, easy_task, tmp_path / "b", max_length=64))
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    small = dict(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    tok = load_tokenizer(tiny_encoder)
    # RoBERTa's positions start after its padding index (roberta-base: 514 embeddings, 512 tokens)
    for enc, limit in [(BertModel(BertConfig(max_position_embeddings=32, **small)), 32),
                       (RobertaModel(RobertaConfig(max_position_embeddings=34, pad_token_id=1, **small)), 32)]:
        assert max_tokens(enc, tok) == limit
        enc(torch.full((1, limit), 5))  # the limit is exact: one token more breaks the model
        with pytest.raises((IndexError, RuntimeError)):  # an index past the position embeddings
            enc(torch.full((1, limit + 1), 5))
        tok.model_max_length = 20  # a tokenizer's own (smaller) limit counts too
        assert max_tokens(enc, tok) == 20
        tok.model_max_length = int(1e30)


def test_non_utf8_file_names_the_file_and_position(tmp_path):
    for name, text, line in [("latin1.tsv", "sentence\tlabel\ngood film\t1\nun film tr\u00e8s mauvais\t0\n", 3),
                             ("latin1.jsonl",
                              '{"sentence": "good", "label": 1}\n{"sentence": "tr\u00e8s", "label": 0}\n', 2)]:
        f = tmp_path / name
        f.write_bytes(text.encode("latin-1"))
        pos = text.index("\u00e8")  # one byte per character in Latin-1
        with pytest.raises(DataError, match=rf"{name}: not UTF-8 \(byte {pos}, line {line}: b'\\xe8'\); the file "
                                            r"must be UTF-8.*iconv -f latin1 -t utf-8"):
            load_local(str(f), "sentence", "label", "1")


def test_a_damaged_or_misnamed_gz_and_utf16_are_named_in_one_error(tmp_path):
    """A truncated .gz, a plain file named .gz and a corrupt one were tracebacks (EOFError, BadGzipFile, zlib.error)
    for every file option (labeled, evaluation, unlabeled, positives, fewshot.predict's input); a UTF-16 file was
    advised a conversion from Latin-1."""
    import gzip

    from fewshot.data import read_texts

    body = "sentence\tlabel\n" + "".join(f"text number {i} here\t{i % 2}\n" for i in range(400))
    whole = gzip.compress(body.encode())
    (tmp_path / "trunc.tsv.gz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "plain.tsv.gz").write_bytes(body.encode())
    corrupt = bytearray(whole)
    corrupt[40:60] = b"\xff" * 20
    (tmp_path / "corrupt.tsv.gz").write_bytes(bytes(corrupt))
    texts = "".join(f"text number {i} here\n" for i in range(400))
    (tmp_path / "trunc.txt.gz").write_bytes(gzip.compress(texts.encode())[:300])
    (tmp_path / "plain.txt.gz").write_bytes(texts.encode())
    for name, words in (("trunc", "could not decompress it .*is the file complete"),
                        ("plain", "not gzip-compressed, though it ends in .gz .*rename it"),
                        ("corrupt", "could not decompress it")):
        with pytest.raises(DataError, match=f"{name}.tsv.gz: {words}"):
            load_local(str(tmp_path / f"{name}.tsv.gz"), "sentence", "label", "1")
        if name != "corrupt":
            with pytest.raises(DataError, match=f"{name}.txt.gz: {words}"):
                read_texts(str(tmp_path / f"{name}.txt.gz"), "text", "--unlabeled-file")
    (tmp_path / "u16.tsv").write_bytes(body.encode("utf-16"))
    with pytest.raises(DataError, match=r"u16.tsv: UTF-16 .*iconv -f utf-16 -t utf-8"):
        load_local(str(tmp_path / "u16.tsv"), "sentence", "label", "1")


def test_rows_with_empty_text_or_label_are_dropped_with_a_warning(tmp_path):
    train_file = tmp_path / "train.tsv"
    train_file.write_text("sentence\tlabel\ngood\t1\n\t0\nbad\t\nfine\t1\nawful\t0\n")
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"sentence": "good", "label": 1}\n{"sentence": "", "label": 0}\n{"sentence": "bad", "label": 0}\n')
    with pytest.warns(UserWarning) as record:
        got = load_splits(FewShotConfig(dataset=str(train_file), eval_file=str(dev)))
    assert got == (["good", "fine", "awful"], [1, 1, 0], ["good", "bad"], [1, 0])
    messages = [str(w.message) for w in record]
    assert any(str(train_file) in m and "skipped 2 of 5 rows" in m for m in messages)
    assert any(str(dev) in m and "skipped 1 of 3 rows" in m for m in messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped: no warning
        load_local(write_tsv(tmp_path / "clean.tsv", make_texts(6, 0)), "sentence", "label", "1")


def test_mistyped_dataset_name_and_data_folder_are_named(tmp_path):
    # `sst2` used to be taken for a local file and answered with "a local --dataset needs --eval-file"
    with pytest.raises(FileNotFoundError, match=r"'sst2' is neither a named dataset \(glue/sst2, drugreview"):
        load_splits(FewShotConfig(dataset="sst2"))
    glue = tmp_path / "SST-2"  # GLUE's folder passed instead of its files
    glue.mkdir()
    write_tsv(glue / "train.tsv", make_texts(10, 0))
    write_tsv(glue / "dev.tsv", make_texts(10, 1))
    with pytest.raises(DataError, match=r"SST-2 is a folder; pass one data file .*\['dev.tsv', 'train.tsv'\]"):
        load_splits(FewShotConfig(dataset=str(glue), eval_file=str(glue / "dev.tsv")))


def test_elkan_noto_too_few_labeled_positives_says_positives():
    # with --n-labeled 6 a PNU draw may hold 3 positives: "need >= 4 labeled, got 3" read as a contradiction
    from fewshot.prior import elkan_noto_prior

    with pytest.raises(ValueError, match="needs >= 4 labeled positives and >= 2 unlabeled examples, got 3 and 50"):
        elkan_noto_prior(np.zeros((3, 2)), np.zeros((50, 2)))


def test_column_oriented_json_is_named(tmp_path):
    # pandas' DataFrame.to_json default (orient="columns"): used to fail with a wall of dict text as "label values"
    f = tmp_path / "train.json"
    f.write_text(json.dumps({"sentence": {"0": "a fine film", "1": "dull"}, "label": {"0": 1, "1": 0}}))
    with pytest.raises(DataError, match=r"'sentence' holds a JSON object or array.*orient='records', lines=True"):
        load_local(str(f), "sentence", "label", "1")


def test_string_labels_without_positive_label_name_the_option(tmp_path):
    f = tmp_path / "reviews.csv"  # labels as the text "positive" / "negative", the default --positive-label is "1"
    f.write_text('review,sentiment\n"fine, really",positive\n"dull, slow",negative\n')
    with pytest.raises(DataError, match=r"\['negative', 'positive'\]; set --positive-label"):
        load_local(str(f), "review", "sentiment", "1")
    assert load_local(str(f), "review", "sentiment", "positive") == (["fine, really", "dull, slow"], [1, 0])


def test_resume_with_fewer_steps_than_trained_is_refused(tiny_encoder, easy_task, tmp_path):
    # used to rewrite metrics.json with "steps": 1 for the model trained 2 steps
    train(_cfg(tiny_encoder, easy_task, tmp_path / "r"))
    before = {f: (tmp_path / "r" / f).read_text() for f in ("config.json", "metrics.json", "log.csv")}
    with pytest.raises(ValueError, match="--max-steps 1 is below the 2 steps"):
        train(_cfg(tiny_encoder, easy_task, tmp_path / "r", max_steps=1, resume=True))
    assert {f: (tmp_path / "r" / f).read_text() for f in before} == before


def test_parquet_files_as_the_hub_ships_glue(tmp_path):
    """glue/sst2 on the hub is Parquet (columns sentence, label, idx); such a file used to be refused as an
    unsupported file type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = make_texts(8, 0)
    pq.write_table(pa.table({"sentence": [t for t, _ in rows], "label": [y for _, y in rows],
                             "idx": list(range(len(rows)))}), tmp_path / "train-00000-of-00001.parquet")
    texts, labels = load_local(str(tmp_path / "train-00000-of-00001.parquet"), "sentence", "label", "1")
    assert texts == [t for t, _ in rows] and labels == [y for _, y in rows]
    with pytest.raises(DataError, match=r"column\(s\) \['text'\] not found; "
                                        r"available columns: \['sentence', 'label', 'idx'\]"):
        load_local(str(tmp_path / "train-00000-of-00001.parquet"), "text", "label", "1")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_local(str(tmp_path / "broken.parquet"), "sentence", "label", "1")


def test_json_boolean_labels_take_the_json_spelling(tmp_path):
    """{"label": true} used to need --positive-label True (Python's spelling of the parsed value)."""
    f = tmp_path / "bools.jsonl"
    rows = make_texts(6, 0)
    f.write_text("".join(json.dumps({"sentence": t, "label": bool(y)}) + "\n" for t, y in rows))
    texts, labels = load_local(str(f), "sentence", "label", "true")
    assert labels == [y for _, y in rows]
    assert load_local(str(f), "sentence", "label", "True")[1] == labels  # Python's spelling still works
    with pytest.raises(DataError, match=r"not among the label values \['false', 'true'\]"):
        load_local(str(f), "sentence", "label", "1")


def test_a_text_run_seeds_pythons_and_numpys_generators_too(tiny_encoder, easy_task, tmp_path):
    """As the image runs: the saved Python and numpy random states of two runs of one seed are equal (only torch was
    seeded; the others came from the clock)."""
    import random

    states = []
    for k, name in enumerate(("warm-up", "a", "b")):  # the warm-up: a library imported at the first run draws once
        random.seed(k)  # each process's generators start where the clock put them
        np.random.seed(k)
        train(_cfg(tiny_encoder, easy_task, tmp_path / name))
        states.append(torch.load(tmp_path / name / "checkpoint" / "random_states_0.pkl", weights_only=False))
    assert states[1]["random_state"] == states[2]["random_state"]
    assert (states[1]["numpy_random_seed"][1] == states[2]["numpy_random_seed"][1]).all()


def test_checkpoint_every_0_writes_the_checkpoint_at_the_end_only(tiny_encoder, easy_task, tmp_path):
    """rl_curl.train takes --checkpoint-every 0 (only at the end); fewshot.train refused it (">= 1"). It now takes it
    too: no checkpoint on the way, the end's, and a resume that asks for more steps continues from it."""
    train(_cfg(tiny_encoder, easy_task, tmp_path / "run", max_steps=3, checkpoint_every=0))
    state = torch.load(tmp_path / "run" / "checkpoint" / "extra.pt", weights_only=False)
    assert state["step"] == 3
    assert train(_cfg(tiny_encoder, easy_task, tmp_path / "run", max_steps=4, checkpoint_every=0, resume=True))
