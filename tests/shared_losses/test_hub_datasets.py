"""Hub datasets under the names current libraries take (shared_losses.data.load_hub_dataset): a bare legacy name
(``glue``, ``bookcorpus``) asked of the hub for its id with an owner, and a repository that holds only a loading
script read from the hub's Parquet export. The hub itself is not reachable here: its answers are stubbed, the
calls into datasets recorded."""
from __future__ import annotations

import warnings

import datasets
import huggingface_hub
import pytest

from shared_losses import data


class Info:
    def __init__(self, repo_id):
        self.id = repo_id


@pytest.fixture
def hub(monkeypatch):
    """The hub's answers: ``moved`` maps a bare name to the id it redirects to; ``asked`` records the names asked."""
    state = {"moved": {"glue": "nyu-mll/glue", "bookcorpus": "bookcorpus/bookcorpus"}, "asked": []}

    def dataset_info(self, repo_id, **kwargs):
        state["asked"].append(repo_id)
        if repo_id in state["moved"]:
            return Info(state["moved"][repo_id])
        raise huggingface_hub.errors.RepositoryNotFoundError(f"no dataset {repo_id}")

    def list_repo_files(self, repo_id, repo_type=None, revision=None, **kwargs):
        assert (repo_type, revision) == ("dataset", data.PARQUET_EXPORT)
        return state["exports"].get(repo_id, ["plain_text/train/0000.parquet"])

    state["exports"] = {}  # repository -> the files of its Parquet export
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", list_repo_files)
    caches = (data.hub_dataset_id, data.partial_export_folders)  # asked once per name and process: a hub per test
    for cache in caches:
        cache.cache_clear()
    yield state
    for cache in caches:
        cache.cache_clear()


@pytest.fixture
def loads(monkeypatch):
    """datasets.load_dataset recorded: each call's (path, args, kwargs); ``script_only`` names repositories whose
    revisions hold only a loading script (datasets >= 4 refuses them), but for the hub's Parquet export."""
    state = {"calls": [], "script_only": set(), "rows": {"sentence": ["a fine film", "dull"], "label": [1, 0]}}

    def load_dataset(path, *args, **kwargs):
        state["calls"].append((path, args, kwargs))
        if path in state["script_only"] and kwargs.get("revision") != data.PARQUET_EXPORT:
            raise RuntimeError(f"Dataset scripts are no longer supported, but found {path.split('/')[-1]}.py")
        return state["rows"]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return state


def test_an_id_with_an_owner_is_not_asked_for(hub):
    assert data.hub_dataset_id("nyu-mll/glue") == "nyu-mll/glue"
    assert hub["asked"] == []


def test_a_bare_name_becomes_the_id_the_hub_answers(hub):
    assert data.hub_dataset_id("glue") == "nyu-mll/glue"
    assert data.hub_dataset_id("bookcorpus") == "bookcorpus/bookcorpus"
    assert hub["asked"] == ["glue", "bookcorpus"]


def test_a_name_the_hub_does_not_answer_for_stays_as_given(hub, monkeypatch):
    assert data.hub_dataset_id("no-such-set") == "no-such-set"  # load_dataset then says what is wrong

    def offline(self, repo_id, **kwargs):
        raise huggingface_hub.errors.OfflineModeIsEnabled("offline")

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", offline)
    assert data.hub_dataset_id("glue") == "glue"


def test_sst2_is_loaded_under_glues_owner(hub, loads):
    texts, labels = data.load_sst2("validation")
    assert loads["calls"] == [("nyu-mll/glue", ("sst2",), {"split": "validation"})]
    assert hub["asked"] == []  # the id is known: nothing asked
    assert (texts, labels) == (["a fine film", "dull"], [1, 0])


def test_a_script_only_repository_is_read_from_the_parquet_export(hub, loads):
    loads["script_only"].add("bookcorpus/bookcorpus")
    with pytest.warns(UserWarning, match="holds a loading script.*refs/convert/parquet"):
        data.load_hub_dataset("bookcorpus", split="train", streaming=True)
    assert loads["calls"] == [
        ("bookcorpus/bookcorpus", (), {"split": "train", "streaming": True}),
        ("bookcorpus/bookcorpus", (), {"split": "train", "streaming": True, "revision": data.PARQUET_EXPORT}),
    ]


def test_a_partial_parquet_export_is_read_and_said_to_be_a_part(hub, loads):
    """The hub converts a very large dataset only in part (``partial-SPLIT`` folders); datasets reads such a folder
    as the split, so a corpus would be a part of the dataset without a word."""
    loads["script_only"].update({"owner/huge", "owner/whole"})
    hub["exports"]["owner/huge"] = ["en/partial-train/0000.parquet", "en/partial-train/0001.parquet",
                                    "en/validation/0000.parquet", "README.md"]
    with pytest.warns(UserWarning) as said:
        data.load_hub_dataset("owner/huge", split="train", streaming=True)
    partial = [str(w.message) for w in said if "is partial" in str(w.message)]
    assert partial == ["the hub's Parquet export of owner/huge is partial (en/partial-train: the hub converts only "
                       "the first part of a large dataset): what is read of those splits is that part, not the whole "
                       "dataset"]
    with pytest.warns(UserWarning) as said:
        data.load_hub_dataset("owner/whole", split="train", streaming=True)
    assert not [w for w in said if "is partial" in str(w.message)]
    assert data.partial_export_folders("owner/whole") == ()


def test_an_export_that_cannot_be_listed_says_nothing(hub, monkeypatch):
    def offline(self, *args, **kwargs):
        raise huggingface_hub.errors.OfflineModeIsEnabled("offline")

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", offline)
    assert data.partial_export_folders("owner/huge") == ()


def test_a_repository_with_data_is_read_once_without_a_warning(hub, loads):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data.load_hub_dataset("glue", "sst2", split="train")
    assert loads["calls"] == [("nyu-mll/glue", ("sst2",), {"split": "train"})]


def test_other_errors_and_an_asked_revision_are_not_retried(hub, loads, monkeypatch):
    loads["script_only"].add("owner/scripted")
    with pytest.raises(RuntimeError, match="scripts are no longer supported"):
        data.load_hub_dataset("owner/scripted", split="train", revision="v1.0")
    assert loads["calls"] == [("owner/scripted", (), {"split": "train", "revision": "v1.0"})]  # never replaced

    def broken(path, *args, **kwargs):
        loads["calls"].append((path, args, kwargs))
        raise RuntimeError("disk full")

    monkeypatch.setattr(datasets, "load_dataset", broken)
    before = len(loads["calls"])
    with pytest.raises(RuntimeError, match="disk full"):
        data.load_hub_dataset("owner/other", split="train")
    assert len(loads["calls"]) == before + 1


def test_nlp_qt_streams_a_hub_corpus_under_its_id(hub, loads):
    from nlp_qt.corpus import iter_dataset_sentences

    loads["rows"] = [{"text": "The first sentence."}, {"text": "The second one."}]
    loads["script_only"].add("bookcorpus/bookcorpus")
    with pytest.warns(UserWarning, match="Parquet export"):
        got = list(iter_dataset_sentences("hf:bookcorpus"))
    assert [s for _, s in got] == ["The first sentence.", "The second one."]
    assert [c[0] for c in loads["calls"]] == ["bookcorpus/bookcorpus"] * 2
    assert loads["calls"][-1][2] == {"split": "train", "streaming": True, "revision": data.PARQUET_EXPORT}


def _no_such_dataset(path):
    from datasets.exceptions import DatasetNotFoundError

    return DatasetNotFoundError(f"Dataset '{path}' doesn't exist on the Hub or cannot be accessed.")


def _unreachable(path):
    return ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")


def _no_data_files(path):
    from datasets.exceptions import DataFilesNotFoundError

    return DataFilesNotFoundError(f"No (supported) data files found in {path}")


@pytest.mark.parametrize("error,said,not_said", [(_no_such_dataset, "hub has no dataset of that name", "Offline"),
                                                 (_unreachable, "Offline", "no dataset of that name"),
                                                 (_no_data_files, "found no data files in it", "Offline")])
def test_a_name_the_hub_does_not_hold_is_told_apart_from_being_offline(hub, monkeypatch, error, said, not_said):
    """The hub's "no such dataset" was answered with "Offline? ... need internet access", which sends a user who is
    online and mistyped a name to look at the network; so was a repository the hub holds in which datasets found no
    data files it reads."""
    from nlp_qt.corpus import CorpusError, iter_dataset_sentences

    def load_dataset(path, *args, **kwargs):
        raise error(path)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(CorpusError, match=said) as got:
        list(iter_dataset_sentences("hf:someone/no-such-corpus"))
    assert not_said not in str(got.value)
    with pytest.raises(data.DataError, match=said) as got:
        data.load_sst2("validation")
    assert not_said not in str(got.value)


def test_a_hub_corpus_names_its_configuration_after_a_colon(hub, loads):
    from nlp_qt.corpus import CorpusError, hub_corpus, iter_dataset_sentences

    assert hub_corpus("hf:bookcorpus") == ("bookcorpus", None)
    assert hub_corpus("hf:Salesforce/wikitext:wikitext-103-raw-v1") == ("Salesforce/wikitext", "wikitext-103-raw-v1")
    assert hub_corpus("books") == ("books", None)  # not hf: a name as it is
    for bad in ("hf:", "hf::x", "hf:wikitext:", "hf:a:b:c"):
        with pytest.raises(CorpusError, match="hf:NAME or hf:NAME:CONFIG"):
            hub_corpus(bad)
    loads["rows"] = [{"text": "A sentence."}]
    assert [s for _, s in iter_dataset_sentences("hf:wikitext:wikitext-2-raw-v1")] == ["A sentence."]
    assert loads["calls"] == [("wikitext", ("wikitext-2-raw-v1",), {"split": "train", "streaming": True})]


@pytest.mark.parametrize("message,said", [
    ("Config name is missing.\nPlease pick one among the available configs: ['a-1', 'b-2']\nExample of usage:\n\t"
     "`load_dataset('owner/set', 'a-1')`", "has several configurations: name one as hf:owner/set:CONFIG, CONFIG one "
                                           "of ['a-1', 'b-2']"),
    ("BuilderConfig 'zz' not found. Available: ['a-1', 'b-2']", "has no configuration 'zz'; it has ['a-1', 'b-2']"),
    ("Bad split: train. Available splits: ['test']", "has no 'train' split, which training reads (it has ['test'])"),
])
def test_datasets_answers_about_configurations_and_splits_become_one_line(hub, monkeypatch, message, said):
    from nlp_qt.corpus import CorpusError, iter_dataset_sentences

    def load_dataset(path, *args, **kwargs):
        raise ValueError(message)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    source = "hf:owner/set:zz" if "zz" in message else "hf:owner/set"
    with pytest.raises(CorpusError) as got:
        list(iter_dataset_sentences(source))
    text = str(got.value)
    assert said in text and "\n" not in text and "Offline" not in text


def test_listing_a_hub_datasets_splits_fails_in_one_line(hub, monkeypatch):
    def unreachable(path, config=None, **kwargs):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)\nmore lines")

    monkeypatch.setattr(datasets, "get_dataset_split_names", unreachable)
    with pytest.raises(data.DataError, match=r"could not load hf:glue:sst2 \(ConnectionError: .*\)\. Offline\?") as got:
        data.hub_split_names("hf:glue:sst2")
    assert "\n" not in str(got.value) and "nyu-mll/glue" in str(got.value)  # asked under the hub's id


def test_a_script_only_repositorys_splits_are_listed_from_the_parquet_export(hub, monkeypatch):
    calls = []

    def split_names(path, config=None, **kwargs):
        calls.append((path, config, kwargs))
        if kwargs.get("revision") != data.PARQUET_EXPORT:
            raise RuntimeError("Dataset scripts are no longer supported, but found imdb.py")
        return ["train", "test", "unsupervised"]

    monkeypatch.setattr(datasets, "get_dataset_split_names", split_names)
    with pytest.warns(UserWarning, match="Parquet export"):
        assert data.hub_split_names("hf:owner/scripted") == ["train", "test", "unsupervised"]
    assert calls == [("owner/scripted", None, {}), ("owner/scripted", None, {"revision": data.PARQUET_EXPORT})]
