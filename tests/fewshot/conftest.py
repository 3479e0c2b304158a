"""A tiny randomly initialised BERT encoder and word-level tokenizer, and an easy synthetic task."""

import random

import pytest

POS_WORDS = ["good", "great", "fine", "lovely", "superb", "nice"]
NEG_WORDS = ["bad", "awful", "poor", "nasty", "dire", "grim"]
FILLER = ["the", "movie", "was", "a", "plot", "and", "cast", "really", "very", "it"]


def make_texts(n, seed):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        y = i % 2
        words = [rng.choice(FILLER) for _ in range(5)] + [rng.choice(POS_WORDS if y else NEG_WORDS) for _ in range(2)]
        rng.shuffle(words)
        rows.append((" ".join(words), y))
    return rows


def write_tsv(path, rows, text_col="sentence", label_col="label"):
    with open(path, "w") as fh:
        fh.write(f"{text_col}\t{label_col}\n")
        for t, y in rows:
            fh.write(f"{t}\t{y}\n")
    return str(path)


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    import torch

    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + POS_WORDS + NEG_WORDS + FILLER)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]")
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)  # the default --max-length fits
    BertModel(cfg).save_pretrained(folder)
    return str(folder)


@pytest.fixture
def easy_task(tmp_path):
    train = write_tsv(tmp_path / "train.tsv", make_texts(200, 0))
    dev = write_tsv(tmp_path / "dev.tsv", make_texts(60, 1))
    return train, dev


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every fewshot test runs torch on one thread (tests/conftest.py): the tiny encoders run fastest so."""
    yield


def text_config(base: dict, **kw):
    """A text run's configuration: the PU pipeline's (fewshot.config.PuConfig) when ``kw`` says ``setting="pu"``,
    else the few-shot one (FewShotConfig). ``base`` holds a test file's shared fields; those the PU pipeline does
    not have (eval_every, objective, ...) are left out of its configuration; a field in ``kw`` is always passed."""
    import dataclasses

    from fewshot.config import FewShotConfig, PuConfig

    cls = PuConfig if kw.pop("setting", "pnu") == "pu" else FewShotConfig
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in base.items() if k in names}, **kw})
