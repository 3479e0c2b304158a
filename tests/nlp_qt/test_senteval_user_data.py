"""nlp_qt.senteval on a user's own copy of SentEval's data and their own encoders: every file read and checked
before anything is encoded, empty and malformed files named with the file's own line numbers, TREC split only at
line ends, MRPC refused when it is not UTF-8, an encoder's output checked, finished tasks kept in --output and a
stopped evaluation resumed."""

import json
import shutil
import warnings

import numpy as np
import pytest

from nlp_qt import senteval as se
from tests.nlp_qt.test_senteval import _keyword_encoder, _write_task_folder


@pytest.fixture
def root(tmp_path):
    return _write_task_folder(tmp_path / "downstream")


def _counting(encode):
    calls = []

    def wrapped(sentences):
        calls.append(len(sentences))
        return encode(sentences)

    return wrapped, calls


def test_a_bad_file_of_the_last_task_is_found_before_any_task_is_encoded(root):
    path = root / "MRPC" / "msr_paraphrase_test.txt"
    lines = path.read_text().splitlines()
    lines[7] = "1\t123\t456\tonly one sentence here"
    path.write_text("\n".join(lines) + "\n")
    encode, calls = _counting(_keyword_encoder)
    with pytest.raises(se.SentEvalDataError, match=r"msr_paraphrase_test.txt:8: expected 5 tab-separated columns"):
        se.evaluate(encode, root, ["MR", "CR", "TREC", "MRPC"], kfold=3)
    assert calls == []  # nothing encoded, nothing scored


def test_folds_a_class_cannot_fill_are_refused_before_any_task_is_encoded(root):
    encode, calls = _counting(_keyword_encoder)
    with pytest.raises(ValueError, match="task TREC: a class has 20 examples, fewer than k = 30"):
        se.evaluate(encode, root, ["MR", "TREC"], kfold=30)  # MR: 60 a class; TREC: 20 a class in train
    assert calls == []


@pytest.mark.parametrize("task, name", [("MRPC", "msr_paraphrase_train.txt"), ("MRPC", "msr_paraphrase_test.txt"),
                                        ("TREC", "train_5500.label"), ("TREC", "TREC_10.label")])
@pytest.mark.parametrize("content", ["", "\n\n", "header only\n"])
def test_an_mrpc_or_trec_file_without_examples_is_named(root, task, name, content):
    if task == "TREC" and content == "header only\n":
        content = "\r\n"
    (root / task / name).write_text(content)
    with pytest.raises(se.SentEvalDataError, match=rf"task {task}: .*{name} holds no"):
        se.evaluate(_keyword_encoder, root, [task], kfold=3)


def test_trec_errors_give_the_files_own_line_numbers(root):
    path = root / "TREC" / "train_5500.label"
    lines = path.read_text().splitlines()
    lines[2:2] = ["", ""]  # two blank lines, physical lines 3 and 4
    lines[9] = "What is this question without a label ?"  # physical line 10
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(se.SentEvalDataError, match=r"train_5500.label:10: expected 'COARSE:fine words"):
        se.load_trec(root)


def test_trec_lines_split_only_at_line_ends_as_senteval_reads_them(root):
    path = root / "TREC" / "train_5500.label"
    raw = path.read_bytes().split(b"\n")
    # a Latin-1 0x85 (cp1252's ellipsis), a form feed and a vertical tab inside questions; CRLF endings
    raw[4] = b"DESC:def What does \x85 mean ?"
    raw[5] = b"DESC:def Form\x0cfeed and vertical\x0btab ?"
    path.write_bytes(b"\r\n".join(raw))
    trec = se.load_trec(root)
    assert len(trec["train"][0]) == 120
    assert trec["train"][0][4] == "What does \x85 mean ?" and trec["train"][1][4] == se.TREC_CLASSES.index("DESC")
    assert trec["train"][0][5] == "Form\x0cfeed and vertical\x0btab ?"


def test_a_users_utf8_task_files_are_read_as_utf8_and_senteval_latin1_as_latin1(root):
    """MR/TREC files in UTF-8 were decoded as Latin-1, SentEval's encoding: "caf\u00e9" became "cafÃ©", missing
    every vocabulary, and a byte-order mark stayed in the first sentence ("ï»¿For ...") or broke TREC's first line.
    A file that is valid UTF-8 is read as UTF-8 (a BOM dropped); one with Latin-1 bytes as Latin-1, as before."""
    mr, trec = root / "MR" / "rt-polarity.pos", root / "TREC" / "train_5500.label"
    texts, _ = se.load_binary(root, "MR")
    first = texts[0]
    mr.write_bytes(b"\xef\xbb\xbf" + mr.read_bytes().replace(first.encode(), first.encode() + " café".encode(), 1))
    got, _ = se.load_binary(root, "MR")
    assert got[0] == first + " café" and got[1:] == texts[1:]
    before = se.load_trec(root)["train"][0]
    trec.write_bytes(b"\xef\xbb\xbf" + trec.read_bytes().replace(b"\n", " naïve\n".encode(), 1))
    assert se.load_trec(root)["train"][0] == [before[0] + " naïve"] + before[1:]
    mr.write_bytes(mr.read_bytes().replace("café".encode(), b"caf\xe9"))  # Latin-1 bytes: SentEval's reading
    got, _ = se.load_binary(root, "MR")
    assert got[0] == first + " café"  # Latin-1's é is the same letter
    mr.write_bytes(mr.read_bytes().decode("latin-1").encode("utf-16"))
    with pytest.raises(se.SentEvalDataError, match=r"rt-polarity.pos is UTF-16 .*iconv -f utf-16 -t utf-8"):
        se.load_binary(root, "MR")


def test_mrpc_that_is_not_utf8_is_refused_by_name(root):
    path = root / "MRPC" / "msr_paraphrase_train.txt"
    path.write_bytes(path.read_bytes().replace(b"alpha", b"Jos\xe9", 1))
    with pytest.raises(se.SentEvalDataError, match=r"msr_paraphrase_train.txt is not UTF-8 text"):
        se.load_mrpc(root)
    shutil.copy(path, path.with_suffix(".bak"))
    import gzip

    path.write_bytes(gzip.compress(path.with_suffix(".bak").read_bytes()))
    with pytest.raises(se.SentEvalDataError, match=r"msr_paraphrase_train.txt is not (a text file|UTF-8)"):
        se.load_mrpc(root)


def test_mrpc_with_a_byte_order_mark_and_crlf_reads_as_without(root):
    path = root / "MRPC" / "msr_paraphrase_test.txt"
    plain = se.load_mrpc(root)["test"]
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bom = se.load_mrpc(root)["test"]
    assert bom[0] == plain[0] and bom[1] == plain[1] and bom[2].tolist() == plain[2].tolist()


def test_mrpc_without_its_header_line_warns_that_the_first_pair_is_skipped(root):
    path = root / "MRPC" / "msr_paraphrase_train.txt"
    path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")
    with pytest.warns(UserWarning, match="line 1 looks like a sentence pair"):
        mrpc = se.load_mrpc(root)
    assert len(mrpc["train"][0]) == 39


class _Object:
    def encode(self, sentences):
        return _keyword_encoder(sentences)


def test_evaluate_takes_an_object_with_encode_or_a_torch_tensor(root):
    import torch

    want = se.evaluate(_keyword_encoder, root, ["MR", "TREC"], kfold=3)
    assert se.evaluate(_Object(), root, ["MR", "TREC"], kfold=3)["MR"]["acc"] == want["MR"]["acc"]
    as_tensor = se.evaluate(lambda s: torch.tensor(_keyword_encoder(s), dtype=torch.bfloat16), root, ["MR", "TREC"],
                            kfold=3)
    assert as_tensor["TREC"]["acc"] == want["TREC"]["acc"]
    lists = se.evaluate(lambda s: _keyword_encoder(s).astype(int).tolist(), root, ["MR"], kfold=3)
    assert lists["MR"]["acc"] == want["MR"]["acc"]
    with pytest.raises(TypeError, match="evaluate\\(\\) takes a function"):
        se.evaluate(42, root, ["MR"], kfold=3)


@pytest.mark.parametrize("bad, message", [
    (lambda s: _keyword_encoder(s)[:-1], r"task MR: the encoder returned shape \(119, 6\) for 120 sentences"),
    (lambda s: _keyword_encoder(s)[:, 0], r"task MR: the encoder returned shape \(120,\) for 120 sentences"),
    (lambda s: np.where(np.arange(len(s))[:, None] == 3, np.nan, _keyword_encoder(s)),
     r"task MR: the encoder returned NaN or infinite values in 1 of 120 rows \(first: sentence 3"),
    (lambda s: [[1.0, 2.0]] + [[1.0]] * (len(s) - 1), "task MR: the encoder returned list that is not an array"),
    (lambda s: np.array(s)[:, None], "task MR: the encoder returned an array of <U"),
    (lambda s: np.zeros((len(s), 0), np.float32), r"task MR: the encoder returned vectors of no dimensions"),
    (lambda s: np.full((len(s), 2), 1e38, np.float32), "task MR: the encoder returned values as large as 1e.38; the "
                                                        "logistic regression .* takes at most 1e30"),
])
def test_an_encoders_bad_output_is_named_with_the_task(root, bad, message):
    with pytest.raises(ValueError, match=message):
        se.evaluate(bad, root, ["MR"], kfold=3)


def test_a_task_named_twice_is_scored_once_and_bad_seeds_are_refused_first(root):
    encode, calls = _counting(_keyword_encoder)
    res = se.evaluate(encode, root, ["MR", "MR"], kfold=3)
    assert list(res) == ["MR"] and len(calls) == 1
    assert list(se.evaluate(encode, root, "MR", kfold=3)) == ["MR"]  # one name, not its letters (M, R)
    for seed in (-5, 2**32, 1.5, True):
        with pytest.raises(ValueError, match="seed must be a whole number in"):
            se.evaluate(encode, root, ["MR"], kfold=3, seed=seed)
    assert len(calls) == 2  # the refusals encoded nothing


def _cli(root, out, *extra):
    return ["--model", "unused", "--data", str(root), "--kfold", "3", "--json", "--output", str(out), *extra]


@pytest.fixture
def keyword_model(monkeypatch):
    """The command line with the keyword encoder in place of a model folder."""
    from nlp_qt.senteval import cli

    loads = []

    def load(model, device, batch_size, max_length, trust_remote_code=False):
        loads.append(model)
        return _keyword_encoder, f"keyword encoder ({model})"

    monkeypatch.setattr(cli, "load_encoder", load)
    return loads


def test_the_output_keeps_finished_tasks_and_a_resume_scores_only_the_others(root, tmp_path, keyword_model,
                                                                             monkeypatch):
    out = tmp_path / "res.json"
    whole = tmp_path / "whole.json"
    se.main(_cli(root, whole, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2"))
    from nlp_qt.senteval import protocols

    real = protocols.PROTOCOLS["pair"]

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setitem(protocols.PROTOCOLS, "pair", protocols.Protocol(real.load, stop, real.description, real.check))
    with pytest.raises(KeyboardInterrupt):
        se.main(_cli(root, out, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2"))
    saved = json.loads(out.read_text())
    assert set(saved["results"]) == {"MR", "TREC"} and saved["complete"] is False  # keys sorted; order: "tasks"
    assert saved["inner_kfold"] == 2 and saved["data"] == str(root) and saved["tasks"] == ["MR", "TREC", "MRPC"]
    monkeypatch.setitem(protocols.PROTOCOLS, "pair", real)
    with pytest.raises(FileExistsError, match="exists; pass --overwrite"):
        se.main(_cli(root, out, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2"))
    with pytest.raises(ValueError, match=r"other settings \(inner_kfold 2 there, 3 now\); evaluate into another"):
        se.main(_cli(root, out, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "3", "--resume"))
    # an output of an earlier version, which did not record inner_kfold: said so, not "None there"
    older = tmp_path / "older.json"
    older.write_text(json.dumps({k: v for k, v in saved.items() if k != "inner_kfold"}))
    with pytest.raises(ValueError, match=r"other settings \(inner_kfold not recorded there, 2 now\) \(an output of "
                                         r"an earlier version, which did not record"):
        se.main(_cli(root, older, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2", "--resume"))
    encode_calls = len(keyword_model)
    res = se.main(_cli(root, out, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2", "--resume"))
    assert len(keyword_model) == encode_calls + 1
    full = json.loads(whole.read_text())
    resumed = json.loads(out.read_text())
    assert resumed["complete"] is True and set(resumed["results"]) == {"MR", "TREC", "MRPC"}
    for t in ("MR", "TREC", "MRPC"):
        for k in ("acc", "devacc", "n"):
            assert resumed["results"][t][k] == full["results"][t][k] == res[t][k]
    # everything finished: a resume loads no model
    se.main(_cli(root, out, "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2", "--resume"))
    assert len(keyword_model) == encode_calls + 1


def test_a_resume_knows_a_local_model_by_its_folder_not_its_spelling(root, tmp_path, keyword_model, monkeypatch):
    """--resume compared --model as typed: the same folder typed from another working folder (or absolutely) was
    refused, and another folder typed the same way from elsewhere was taken, its scores merged with the first
    model's in one results file."""
    model, other = tmp_path / "models" / "qt", tmp_path / "elsewhere" / "models" / "qt"
    model.mkdir(parents=True)
    other.mkdir(parents=True)
    out = tmp_path / "res.json"

    def cli(spelling, *extra):
        return ["--model", spelling, "--data", str(root), "--kfold", "3", "--json", "--output", str(out), *extra]

    monkeypatch.chdir(tmp_path)
    se.main(cli("models/qt", "--tasks", "MR"))
    assert json.loads(out.read_text())["model"] == str(model)
    monkeypatch.chdir(tmp_path / "models")
    se.main(cli("qt", "--tasks", "MR", "TREC", "--resume"))  # the same folder, typed from its parent
    assert set(json.loads(out.read_text())["results"]) == {"MR", "TREC"}
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match=rf"other settings \(model '{model}' there, '{other}' now\)"):
        se.main(cli("models/qt", "--tasks", "MR", "TREC", "MRPC", "--resume"))  # the same spelling, another model
    # a results file written before, with the model as typed, resumes from the folder it was typed in
    saved = json.loads(out.read_text())
    out.write_text(json.dumps({**saved, "model": "models/qt"}))
    monkeypatch.chdir(tmp_path)
    se.main(cli(str(model), "--tasks", "MR", "TREC", "MRPC", "--resume"))
    assert set(json.loads(out.read_text())["results"]) == {"MR", "TREC", "MRPC"}


@pytest.mark.parametrize("args, message", [
    (["--seed", "-5"], r"--seed must be in \[0, 2\*\*32 - 1\]"),
    (["--resume", "--overwrite"], "pass one of them"),
])
def test_cli_refusals_come_before_the_model_is_loaded(root, tmp_path, keyword_model, args, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        se.main(_cli(root, tmp_path / "res.json", "--tasks", "MR", *args))
    assert keyword_model == []


def test_resume_without_an_output_file_yet_evaluates_every_task(root, tmp_path, keyword_model):
    """--resume on an --output not written yet was refused ("nothing to continue"), where the trainers' --resume
    starts a run that is not there: a requeued job that always adds --resume failed on its first attempt."""
    out = tmp_path / "res.json"
    res = se.main(_cli(root, out, "--tasks", "MR", "--resume"))
    assert set(json.loads(out.read_text())["results"]) == {"MR"} and "MR" in res
    with pytest.raises(IsADirectoryError, match="is a folder"):
        se.main(_cli(root, tmp_path, "--tasks", "MR", "--resume"))


def test_cli_refuses_bad_data_before_the_model_is_loaded(root, tmp_path, keyword_model):
    (root / "TREC" / "TREC_10.label").write_text("")
    with pytest.raises(se.SentEvalDataError, match="TREC_10.label holds no examples"):
        se.main(_cli(root, tmp_path / "res.json", "--tasks", "MR", "TREC"))
    assert keyword_model == [] and not (tmp_path / "res.json").exists()


def _tiny_st_folder(path, custom: bool):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "alpha", "beta", "x", "y", "z", "w"]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                     sep_token="[SEP]")
    raw = path.parent / "bert"
    BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(raw)
    hf_tok.save_pretrained(raw)
    st = SentenceTransformer(modules=[models.Transformer(str(raw)), models.Pooling(16, "mean")], device="cpu")
    st.save(str(path))
    if custom:
        (path / "mypool.py").write_text("from sentence_transformers.models import Pooling\n\n\n"
                                        "class MyPooling(Pooling):\n    pass\n")
        modules = json.loads((path / "modules.json").read_text())
        modules[1]["type"] = "mypool.MyPooling"
        (path / "modules.json").write_text(json.dumps(modules))
    return path


def test_a_sentence_transformers_folder_with_its_own_code_needs_trust_remote_code(tmp_path):
    folder = _tiny_st_folder(tmp_path / "st_custom", custom=True)
    with pytest.raises(FileNotFoundError, match="pass --trust-remote-code") as err:
        se.load_encoder(str(folder))
    assert "offline?" not in str(err.value)
    encode, desc = se.load_encoder(str(folder), trust_remote_code=True)
    assert encode(["alpha x y", "beta z"]).shape == (2, 16)


def test_the_command_line_reads_each_task_file_once(root, tmp_path, keyword_model, monkeypatch):
    """The files are read and checked before the model loads; evaluate() then scores those examples instead of
    reading every file again (a BookCorpus-size MR or a slow disk paid twice)."""
    from nlp_qt.senteval import protocols

    reads = []
    for kind, real in list(protocols.PROTOCOLS.items()):
        def load(root_, task, real=real):
            reads.append(task)
            return real.load(root_, task)
        monkeypatch.setitem(protocols.PROTOCOLS, kind, protocols.Protocol(load, real.score, real.description,
                                                                           real.check))
    res = se.main(_cli(root, tmp_path / "res.json", "--tasks", "MR", "TREC", "MRPC", "--inner-kfold", "2"))
    assert set(res) == {"MR", "TREC", "MRPC"}
    assert sorted(reads) == ["MR", "MRPC", "TREC"]


def test_evaluate_with_prepared_examples_scores_them_and_names_a_task_they_lack(root):
    _, examples = se.prepare_tasks(root, ["MR", "TREC"], 3, 2)
    kept = dict(examples)
    res = se.evaluate(_keyword_encoder, root, ["MR"], kfold=3, inner_kfold=2, examples=examples)
    assert res["MR"]["acc"] == se.evaluate(_keyword_encoder, root, ["MR"], kfold=3, inner_kfold=2)["MR"]["acc"]
    assert examples.keys() == kept.keys()  # the caller's examples are left whole
    with pytest.raises(ValueError, match="examples holds no MRPC"):
        se.evaluate(_keyword_encoder, root, ["MR", "MRPC"], kfold=3, inner_kfold=2, examples=examples)
