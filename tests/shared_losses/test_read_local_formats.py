"""What users hand to --dataset / --eval-file (and the PU files, fewshot.predict's --input) besides plain tables:
datasets' save_to_disk folders and .arrow files, and a .json that is one pretty-printed object holding the records
(shared_losses.data.read_local / read_records)."""

import json
from pathlib import Path

import pytest

from shared_losses.data import DataError, load_local, read_local, read_records

ROWS = {"sentence": ["a fine film", "dull and slow", "lovely cast"], "label": [1, 0, 1], "idx": [0, 1, 2]}


def _dataset():
    import datasets

    return datasets.Dataset.from_dict(ROWS)


def _saved(ds, folder: Path) -> Path:
    ds.save_to_disk(str(folder))
    return folder


def test_a_dataset_save_to_disk_folder_reads_as_one_table(tmp_path):
    """Used to be refused as "a folder; pass one data file", listing dataset_info.json and state.json."""
    folder = _saved(_dataset(), tmp_path / "sst2_train")
    assert read_local(str(folder), "sentence", "label") == (ROWS["sentence"], ROWS["label"])
    assert load_local(str(folder), "sentence", "label", "1") == (ROWS["sentence"], [1, 0, 1])
    # only the columns asked for, unless the caller keeps the others (as fewshot.predict writes them back)
    assert read_records(folder, ("sentence",))[0] == {"sentence": "a fine film"}
    assert read_records(folder, ("sentence",), only=False)[0] == {"sentence": "a fine film", "label": 1, "idx": 0}
    with pytest.raises(DataError, match=r"column\(s\) \['text'\] not found; available columns: "
                                        r"\['sentence', 'label', 'idx'\]"):
        read_local(str(folder), "text", "label")


def test_a_datasetdict_folder_of_several_splits_names_them_and_how_to_pass_one(tmp_path):
    import datasets

    ds = _dataset()
    folder = _saved(datasets.DatasetDict({"train": ds, "test": ds.select([1])}), tmp_path / "sst2")
    with pytest.raises(DataError) as err:
        read_local(str(folder), "sentence", "label")
    message = str(err.value)
    assert "DatasetDict" in message and "['train', 'test']" in message and str(folder / "train") in message
    assert len(message.splitlines()) == 1 and "dataset_dict.json" not in message
    # as the message says: each split's folder is a Dataset folder of its own
    assert read_local(str(folder / "test"), "sentence", "label") == (["dull and slow"], [0])
    # one split only: no choice to make
    one = _saved(datasets.DatasetDict({"validation": ds}), tmp_path / "only_validation")
    assert read_local(str(one), "sentence", "label") == (ROWS["sentence"], ROWS["label"])


def test_a_datasets_metadata_file_passed_instead_of_its_folder_names_the_folder(tmp_path):
    """Following the old folder error's list gave "not valid JSON" (dataset_info.json) or nonsense columns."""
    folder = _saved(_dataset(), tmp_path / "saved")
    for name in ("state.json", "dataset_info.json"):
        with pytest.raises(DataError, match=rf"{name} is the metadata of a datasets folder .*pass the folder, "
                                            rf".*saved$"):
            read_local(str(folder / name), "sentence", "label")


def test_a_folder_of_data_files_lists_data_files_not_metadata(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    (folder / "dataset_info.json").write_text("{}")  # a copied datasets folder's metadata, without state.json
    (folder / "data-00000-of-00001.arrow").write_bytes(b"")
    with pytest.raises(DataError, match=r"mixed is a folder; pass one data file .* it holds "
                                        r"\['data-00000-of-00001.arrow', 'train.tsv'\]$"):
        read_local(str(folder), "sentence", "label")


def test_an_arrow_file_reads_in_datasets_stream_format_and_arrow_s_file_format(tmp_path):
    """datasets' data-*.arrow used to be "unsupported file type '.arrow'"."""
    import pyarrow as pa
    import pyarrow.feather as feather

    folder = _saved(_dataset(), tmp_path / "saved")
    shard = next(folder.glob("data-*.arrow"))
    assert read_local(str(shard), "sentence", "label") == (ROWS["sentence"], ROWS["label"])
    feather.write_feather(pa.table(ROWS), tmp_path / "table.arrow")  # the Arrow IPC file format (Feather v2)
    assert read_local(str(tmp_path / "table.arrow"), "sentence", "label") == (ROWS["sentence"], ROWS["label"])
    (tmp_path / "broken.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DataError, match=r"broken.arrow: not a readable Arrow file"):
        read_local(str(tmp_path / "broken.arrow"), "sentence", "label")


def test_a_damaged_datasets_folder_is_one_line(tmp_path):
    folder = _saved(_dataset(), tmp_path / "saved")
    for shard in folder.glob("data-*.arrow"):
        shard.unlink()
    with pytest.raises(DataError, match=r"saved: not a readable datasets folder") as err:
        read_local(str(folder), "sentence", "label")
    assert len(str(err.value).splitlines()) == 1


def test_a_pretty_printed_json_object_holding_the_records_under_one_key_is_read(tmp_path):
    """json.dump({"data": [...]}, f, indent=2) used to be "FILE:1: not valid JSON (Expecting property name...)"."""
    records = [{"sentence": s, "label": y} for s, y in zip(ROWS["sentence"], ROWS["label"])]
    f = tmp_path / "train.json"
    with open(f, "w") as fh:
        json.dump({"version": "1.0", "data": records}, fh, indent=2)
    assert read_local(str(f), "sentence", "label") == (ROWS["sentence"], ROWS["label"])
    f.write_text(json.dumps({"data": records}))  # the same on one line
    assert read_local(str(f), "sentence", "label") == (ROWS["sentence"], ROWS["label"])
    f.write_text(json.dumps(records[0], indent=2))  # one record, pretty-printed
    assert read_local(str(f), "sentence", "label") == (["a fine film"], [1])


def test_a_json_object_without_one_list_of_records_names_its_keys(tmp_path):
    records = [{"sentence": "a", "label": 1}]
    f = tmp_path / "splits.json"
    f.write_text(json.dumps({"train": records, "test": records}, indent=2))
    with pytest.raises(DataError, match=r"splits.json: one JSON object with lists of records under several keys "
                                        r"\['train', 'test'\]"):
        read_local(str(f), "sentence", "label")
    f.write_text(json.dumps({"version": 2, "info": {"rows": 3}}, indent=2))
    with pytest.raises(DataError, match=r"splits.json: one JSON object with the keys \['version', 'info'\], none of "
                                        r"them a list of records"):
        read_local(str(f), "sentence", "label")


def test_broken_json_names_the_line_of_the_document_or_of_the_json_lines(tmp_path):
    f = tmp_path / "broken.json"
    f.write_text('{\n  "data": [\n    {"sentence": "a", "label": 1},\n    {"sentence": \n')  # cut short
    with pytest.raises(DataError, match=r"broken.json:5: not valid JSON"):
        read_local(str(f), "sentence", "label")
    f.write_text('{"sentence": "a", "label": 1}\n{broken\n')  # JSON lines, the second one broken
    with pytest.raises(DataError, match=r"broken.json:2: not valid JSON"):
        read_local(str(f), "sentence", "label")


def test_the_pu_files_and_predict_inputs_read_save_to_disk_folders_too(tmp_path):
    """fewshot's files of texts without labels (the PU pipeline's --positive-file / --unlabeled-file, predict's
    --input) refused every folder before reaching the shared reader."""
    from fewshot.data import read_rows, read_texts

    folder = _saved(_dataset(), tmp_path / "unlabeled")
    assert read_texts(str(folder), "sentence", "--unlabeled-file") == ROWS["sentence"]
    texts, others = read_rows(str(folder), "sentence", "--input")
    assert texts == ROWS["sentence"] and others[1] == {"label": 0, "idx": 1}
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(DataError, match="is a folder; pass one file"):
        read_texts(str(plain), "sentence", "--unlabeled-file")


def test_a_json_lines_record_that_is_not_an_object_is_named_by_its_line(tmp_path):
    lines = tmp_path / "u.jsonl"
    lines.write_text('{"text": "a"}\n\nnull\n[1, 2]\n{"text": "b"}\n')
    with pytest.raises(DataError, match=r"u\.jsonl:3: null where a record should be \(2 such records\); each record "
                                        r"must be a JSON object"):
        read_records(Path(lines), ["text"])
    array = tmp_path / "a.json"
    array.write_text('[{"text": "a"}, 5]')
    with pytest.raises(DataError, match=r"a\.json: record 2: a number \(5\) where a record should be; "):
        read_records(Path(array), ["text"])


@pytest.mark.parametrize("suffix,sep", [(".tsv", "\t"), (".csv", ",")])
def test_a_text_longer_than_csvs_default_field_limit_is_read(tmp_path, suffix, sep):
    """csv refuses a field over 131072 characters by default (a raw _csv.Error traceback): a long document is data."""
    long = " ".join(["good"] * 60_000)  # 299999 characters
    path = tmp_path / f"long{suffix}"
    path.write_text(f"sentence{sep}label\n{long}{sep}1\nshort{sep}0\n")
    assert read_local(str(path), "sentence", "label") == ([long, "short"], ["1", "0"])


@pytest.mark.parametrize("suffix,sep", [(".tsv", "\t"), (".csv", ",")])
def test_a_column_named_twice_in_the_header_is_refused_where_it_is_read(tmp_path, suffix, sep):
    """csv.DictReader keeps the last of two columns of one name, silently: a run trained on the second label."""
    path = tmp_path / f"twice{suffix}"
    path.write_text(f"sentence{sep}label{sep}label\nfine{sep}1{sep}0\ndull{sep}0{sep}1\n")
    with pytest.raises(DataError, match=r"twice\.(tsv|csv): the header names the column\(s\) \['label'\] more than "
                                        "once"):
        read_local(str(path), "sentence", "label")
    other = tmp_path / f"other{suffix}"  # a repeated column that is not read is no one's concern
    other.write_text(f"sentence{sep}note{sep}label{sep}note\nfine{sep}a{sep}1{sep}b\n")
    assert read_local(str(other), "sentence", "label") == (["fine"], ["1"])


@pytest.mark.parametrize("name,text", [("e.tsv", ""), ("e.csv", ""), ("e.jsonl", ""), ("e.json", "[]"),
                                       ("e.jsonl", "\n\n")])
def test_an_empty_file_is_said_to_be_empty(tmp_path, name, text):
    """It was "column(s) ['sentence', 'label'] not found; available columns: []. Set --text-column ...", which no
    column option can mend."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError, match=rf"{name} holds no records: it is empty"):
        read_local(str(path), "sentence", "label")


def test_a_csv_quote_left_open_is_warned_with_the_lines_it_swallowed(tmp_path):
    """An unclosed quote reads every line up to the next quote as one text: 190 rows trained as none, silently."""
    rows = [f"text number {i},{i % 2}" for i in range(20)]
    rows[10] = '"' + rows[10]
    path = tmp_path / "open.csv"
    path.write_text("sentence,label\n" + "\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match=r"open\.csv: 1 quoted text\(s\) span several lines that look like rows of "
                                         r"their own \(the longest, lines 12-21, was read as one row\): a quote left "
                                         "open"):
        texts, _ = read_local(str(path), "sentence", "label")
    assert len(texts) == 10
    fine = tmp_path / "paragraphs.csv"  # a quoted text with line breaks of its own is data, not a warning
    fine.write_text('sentence,label\n"first paragraph\nsecond paragraph",1\nplain,0\n')
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        texts, labels = read_local(str(fine), "sentence", "label")
    assert texts == ["first paragraph\nsecond paragraph", "plain"] and labels == ["1", "0"]


def test_the_same_column_for_texts_and_labels_is_refused(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("sentence\tlabel\nfine\t1\n")
    with pytest.raises(DataError, match="--text-column and --label-column are both 'sentence'"):
        read_local(str(path), "sentence", "sentence")


def test_an_empty_data_path_is_said_to_be_empty():
    """--dataset "" said "--dataset: . is a folder"."""
    with pytest.raises(DataError, match="a data file's path is empty"):
        read_local("", "sentence", "label")
