"""A checkpoint received from someone else cannot run code (a probe ran code from a crafted ``extra.pt``,
``random_states_0.pkl`` or ``custom_checkpoint_0.pkl`` on --resume and on the exports): every pickle of a checkpoint
is read with ``weights_only=True``, and what the suite writes (tensors, numbers, strings, NumPy arrays and random
states) still loads exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from shared_losses.training.runtime import (CheckpointError, checkpoint_entry, load_checkpoint, read_torch_file,
                                            register_named, save_checkpoint)


class Touch:
    """A pickle that creates a file when it is loaded (what a crafted checkpoint could do with any code)."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


class Store:
    """An object registered for checkpointing with NumPy arrays and a NumPy random state, as rl_curl's replay is."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.frames = self.rng.integers(0, 255, size=(5, 3, 4, 4), dtype=np.uint8)
        self.values = self.rng.standard_normal(4).astype(np.float32)

    def state_dict(self) -> dict:
        return {"frames": self.frames.copy(), "values": self.values.copy(), "rng": self.rng.bit_generator.state,
                "shape": (5, 3, 4, 4), "note": "kept"}

    def load_state_dict(self, state: dict) -> None:
        self.frames, self.values = state["frames"], state["values"]
        self.rng.bit_generator.state = state["rng"]


def _setup(seed: int = 0):
    from accelerate import Accelerator

    torch.manual_seed(seed)
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model, opt = acc.prepare(model, opt)
    store = Store(seed)
    register_named(acc, store=store)
    return acc, model, store


def test_what_the_suite_writes_loads_back_exactly(tmp_path):
    acc, model, store = _setup(0)
    extra = {"step": 7, "losses": [1.5, float("nan")], "arr": np.arange(6, dtype=np.int64).reshape(2, 3),
             "t": torch.ones(3), "name": "run", "pair": (1, "a"), "nested": {"x": None, "y": True}}
    save_checkpoint(acc, tmp_path / "ckpt", extra)
    want_next = store.rng.random()
    np_state, torch_state = np.random.get_state(), torch.get_rng_state()
    acc2, model2, store2 = _setup(1)
    np.random.seed(99)
    got = load_checkpoint(acc2, tmp_path / "ckpt")
    assert got["step"] == 7 and got["name"] == "run" and got["pair"] == (1, "a") and got["nested"] == extra["nested"]
    assert np.array_equal(got["arr"], extra["arr"]) and torch.equal(got["t"], extra["t"])
    assert np.array_equal(store2.frames, store.frames) and np.array_equal(store2.values, store.values)
    assert store2.rng.random() == want_next  # the registered object's own random stream, exactly
    assert np.array_equal(np.random.get_state()[1], np_state[1]) and torch.equal(torch.get_rng_state(), torch_state)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("target", ["extra.pt", "random_states_0.pkl", "custom_checkpoint_0.pkl"])
def test_a_crafted_pickle_in_a_checkpoint_is_refused_and_runs_nothing(tmp_path, target):
    acc, _, store = _setup(0)
    save_checkpoint(acc, tmp_path / "ckpt", {"step": 3})
    pwned = tmp_path / "PWNED"
    path = tmp_path / "ckpt" / target
    if target == "extra.pt":  # the real contents with one key more: silently run before
        crafted = {"step": 3, "x": Touch(pwned)}
    elif target == "custom_checkpoint_0.pkl":
        crafted = {**store.state_dict(), "x": Touch(pwned)}
    else:
        crafted = {**torch.load(path, weights_only=False), "x": Touch(pwned)}
    torch.save(crafted, path)
    acc2, _, _ = _setup(1)
    refused = (rf"{target} holds objects other than tensors, numbers, strings and arrays \(the first refused: "
               r"[\w.]+\): such a pickle can run code when it is loaded, so it was not loaded")
    with pytest.raises(CheckpointError, match=refused):
        load_checkpoint(acc2, tmp_path / "ckpt")
    assert not pwned.exists()
    with pytest.raises(CheckpointError, match="can run code"):
        read_torch_file(path)
    assert not pwned.exists()


def test_an_entry_table_naming_a_file_outside_the_checkpoint_is_refused(tmp_path):
    acc, _, _ = _setup(0)
    save_checkpoint(acc, tmp_path / "ckpt", {"step": 1})
    assert checkpoint_entry(tmp_path / "ckpt", "store").name == "custom_checkpoint_0.pkl"
    (tmp_path / "ckpt" / "entries.json").write_text(json.dumps({"store": str(tmp_path / "elsewhere.pkl")}))
    with pytest.raises(CheckpointError, match=r"entries.json names '.*elsewhere.pkl' for 'store', not a file of the "
                                              r"checkpoint \(custom_checkpoint_N.pkl\)"):
        checkpoint_entry(tmp_path / "ckpt", "store")


@pytest.mark.skipif(torch.__version__ < "2.6", reason="a global under a name of one's own needs torch 2.6")
@pytest.mark.parametrize("written_as", ["numpy.core.multiarray", "numpy._core.multiarray"])
def test_arrays_pickled_under_either_numpy_majors_name_read(tmp_path, written_as):
    """NumPy 1 pickles its arrays as numpy.core.multiarray._reconstruct, NumPy 2 as numpy._core...: a checkpoint
    written under either reads under the other."""
    import zipfile

    torch.save({"a": np.arange(3)}, tmp_path / "x.pt")
    with zipfile.ZipFile(tmp_path / "x.pt") as z:
        members = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in members if n.endswith("data.pkl"))
    assert b"cnumpy._core.multiarray\n_reconstruct\n" in members[name] or \
        b"cnumpy.core.multiarray\n_reconstruct\n" in members[name]  # protocol 2: GLOBAL 'module\nname\n', no lengths
    for spelling in (b"numpy._core.multiarray", b"numpy.core.multiarray"):
        members[name] = members[name].replace(b"c" + spelling + b"\n", b"c" + written_as.encode() + b"\n")
    with zipfile.ZipFile(tmp_path / "y.pt", "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    assert np.array_equal(read_torch_file(tmp_path / "y.pt")["a"], np.arange(3))


def test_loads_in_threads_at_once_read_safely_and_give_accelerate_its_reader_back():
    """rl_curl.together resumes its runs in threads of one process: while any load is inside, accelerate's reader of
    the registered objects is the safe one; when the last leaves, accelerate's own is back."""
    import threading

    import accelerate.accelerator as acc

    from shared_losses.training import runtime

    real = acc.load_custom_state
    inside, go = threading.Barrier(3), threading.Event()
    seen = []

    def load():
        with runtime._custom_states_read_safely():
            inside.wait()
            go.wait()
            seen.append(acc.load_custom_state)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert acc.load_custom_state is runtime._load_custom_state
    go.set()
    for t in threads:
        t.join()
    assert seen == [runtime._load_custom_state] * 2 and acc.load_custom_state is real


class OwnFile:
    """A registered object keeping part of its state as a file of the checkpoint folder (as rl_curl's replay keeps
    its frames): written before its state_dict, read after read_files_from."""

    def __init__(self, value: int, fail: bool = False):
        self.value, self.fail, self.calls, self.folder = value, fail, [], None

    def write_files(self, folder, previous):
        self.calls.append((Path(folder).name, None if previous is None else Path(previous).name))
        if self.fail:
            import errno

            raise OSError(errno.ENOSPC, "No space left on device")
        (Path(folder) / "own.txt").write_text(str(self.value))

    def read_files_from(self, folder):
        self.folder = Path(folder)

    def state_dict(self) -> dict:
        return {"file": "own.txt"}

    def load_state_dict(self, state: dict) -> None:
        self.value = int((self.folder / state["file"]).read_text())


def test_objects_with_files_of_their_own_write_them_into_the_new_checkpoint_and_read_them_back(tmp_path):
    """save_checkpoint hands such an object the folder being written and the previous complete checkpoint (to link
    from); load_checkpoint the folder to read from. A write the disk refuses leaves the previous checkpoint whole."""
    from accelerate import Accelerator

    from shared_losses.training.runtime import RunStopped

    acc, own = Accelerator(cpu=True), OwnFile(1)
    register_named(acc, own=own)
    save_checkpoint(acc, tmp_path / "ckpt", {"step": 1})
    own.value = 2
    save_checkpoint(acc, tmp_path / "ckpt", {"step": 2})
    assert own.calls == [(".ckpt.tmp", None), (".ckpt.tmp", "ckpt")]
    acc2, other = Accelerator(cpu=True), OwnFile(0)
    register_named(acc2, own=other)
    assert load_checkpoint(acc2, tmp_path / "ckpt")["step"] == 2 and other.value == 2
    own.value, own.fail = 3, True
    with pytest.raises(RunStopped, match="could not write the checkpoint"):
        save_checkpoint(acc, tmp_path / "ckpt", {"step": 3})
    assert not (tmp_path / ".ckpt.tmp").exists()
    assert load_checkpoint(acc2, tmp_path / "ckpt")["step"] == 2 and other.value == 2


def test_a_cut_marker_is_warned_of_and_the_checkpoint_still_loads(tmp_path, recwarn):
    """A checkpoint/COMPLETE cut by a copy was taken without a word, and what it records (the device the run trained
    on, the logs' rows) went unchecked."""
    acc, model, _ = _setup(0)
    save_checkpoint(acc, tmp_path / "ckpt", {"step": 3})
    load_checkpoint(_setup(1)[0], tmp_path / "ckpt")
    assert not [w for w in recwarn if "marker" in str(w.message)]
    marker = tmp_path / "ckpt" / "COMPLETE"
    marker.write_text(marker.read_text()[:10])
    acc2, model2, _ = _setup(1)
    with pytest.warns(UserWarning, match=r"checkpoint .*ckpt: its COMPLETE marker is damaged \(JSONDecodeError: .*\); "
                                         r"the run goes on from the checkpoint's files, which all loaded"):
        assert load_checkpoint(acc2, tmp_path / "ckpt")["step"] == 3
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))
    marker.write_text("[1, 2]")
    with pytest.warns(UserWarning, match=r"its COMPLETE marker is damaged \(holds list, not a record\)"):
        load_checkpoint(_setup(1)[0], tmp_path / "ckpt")


def test_a_checkpoint_folder_linked_to_another_disk_is_written_there_every_time(tmp_path):
    """checkpoint/ as a symbolic link (to a bigger disk): the first save moved the link aside and rmtree refused it
    ("Cannot call rmtree on a symbolic link"), and every later resume failed until the user cleaned up."""
    from shared_losses.training.runtime import checkpoint_exists, written_whole

    (tmp_path / "disk").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "disk" / "ckpt").mkdir()
    link = tmp_path / "run" / "checkpoint"
    link.symlink_to(tmp_path / "disk" / "ckpt")
    for step in (1, 2, 3):
        acc, _, _ = _setup(0)
        save_checkpoint(acc, link, {"step": step})
        assert link.is_symlink() and load_checkpoint(_setup(1)[0], link)["step"] == step and checkpoint_exists(link)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["ckpt"]
    # a file or folder replaced whole through a link: the link kept, the copy where it leads
    (tmp_path / "disk" / "export").mkdir()
    (tmp_path / "export").symlink_to(tmp_path / "disk" / "export")
    for text in ("a", "b"):
        with written_whole(tmp_path / "export", folder=True) as tmp:
            (tmp / "f.txt").write_text(text)
        assert (tmp_path / "export").is_symlink() and (tmp_path / "disk" / "export" / "f.txt").read_text() == text


def test_a_link_that_leads_nowhere_is_refused_as_a_run_folder_or_above_an_output(tmp_path):
    """A dangling link gave "[Errno 17] File exists", a loop of links "Too many levels of symbolic links" as a
    traceback naming a temporary path."""
    from shared_losses.training.runtime import RunFolderError, check_parent_folder, claim_run_folder

    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for given, link, target in (("dangling", "dangling", "nothing"), ("a/sub", "a", "b"), ("dangling/x/y", "dangling",
                                                                                          "nothing")):
        with pytest.raises(RunFolderError, match=rf"^--output-dir {re.escape(str(tmp_path / given))}: "
                                                 rf"{re.escape(str(tmp_path / link))} is a symbolic link to "
                                                 rf"{re.escape(str(tmp_path / target))}, which does not exist or loops "
                                                 r"back through links; fix or remove the link \(nothing was changed\)"):
            claim_run_folder(tmp_path / given, "toy")
        with pytest.raises(NotADirectoryError, match=rf"^--output {re.escape(str(tmp_path / given / 'm'))}: "
                                                     rf"{re.escape(str(tmp_path / link))} is a symbolic link to"):
            check_parent_folder(tmp_path / given / "m", "--output")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "dangling"]
