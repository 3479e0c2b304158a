"""The demo scripts start each demo afresh by deleting their folder; they delete only a folder that is the demo's
own (its default, one an earlier demo marked, or an empty one). Given a folder of real runs by mistake, the
few-shot, nlp_qt and image demos used to delete it whole (they took it from an ``OUT`` variable, which a user's
shell may well hold for something else)."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ["demo_fewshot.sh", "demo_nlp_qt.sh", "demo_images.sh", "demo_rl_curl.sh"]


@pytest.mark.parametrize("script", DEMOS)
def test_a_demo_given_a_folder_it_did_not_make_deletes_nothing(tmp_path, script):
    keep = tmp_path / "my runs" / "thesis.txt"
    keep.parent.mkdir()
    keep.write_text("important")
    res = subprocess.run(["bash", str(ROOT / "scripts" / script), str(keep.parent)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert keep.read_text() == "important"
    assert res.returncode == 1 and f"{script}: {keep.parent} exists and was not made by this demo" in res.stderr


@pytest.mark.parametrize("script", DEMOS)
def test_a_demo_ignores_an_out_variable_of_the_callers_shell(tmp_path, script):
    """``OUT`` named the folder before; a caller's OUT must not reach the demo (it takes its folder as an argument)."""
    text = (ROOT / "scripts" / script).read_text()
    assert "${OUT:-" not in text and '"${1:-$DEFAULT_OUT}"' in text


def _fresh(folder: Path, default: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", '. scripts/demo_folder.sh; fresh_demo_folder "$1" "$2" .demo_mark demo.sh',
                           "_", str(folder), str(default)], capture_output=True, text=True, timeout=30, cwd=ROOT)


def test_the_folder_rule_deletes_the_demos_own_and_refuses_the_rest(tmp_path):
    default = tmp_path / "default"
    (default / "old run").mkdir(parents=True)
    assert _fresh(default, default).returncode == 0 and not default.exists()  # the default is the demo's own

    marked = tmp_path / "marked"
    (marked / "old run").mkdir(parents=True)
    (marked / ".demo_mark").touch()
    assert _fresh(marked, default).returncode == 0 and not marked.exists()  # marked by an earlier demo

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _fresh(empty, default).returncode == 0 and not empty.exists()
    assert _fresh(tmp_path / "missing", default).returncode == 0

    other = tmp_path / "other"
    (other / "run").mkdir(parents=True)
    res = _fresh(other, default)
    assert res.returncode == 1 and (other / "run").is_dir() and "not made by this demo" in res.stderr

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    res = _fresh(a_file, default)
    assert res.returncode == 1 and a_file.read_text() == "mine"


def test_a_folder_whose_name_starts_with_a_dash_is_a_folder_not_an_option(tmp_path):
    """`bash scripts/demo_rl_curl.sh -mine` ended in "rm: invalid option", and `ls` failing on such a name let the
    guard take a folder of someone's runs for an empty one. The folder rule passes names after `--`, and the demos
    give such a relative name a ./ (mkdir and the trainers' --output-dir would read it as an option)."""
    def bash(code, *args):
        return subprocess.run(["bash", "-c", f". {ROOT / 'scripts' / 'demo_folder.sh'}; {code}", "_", *args],
                              capture_output=True, text=True, timeout=30, cwd=tmp_path)

    (tmp_path / "-mine" / "run").mkdir(parents=True)  # someone's runs
    res = bash('fresh_demo_folder "$1" default .demo_mark demo.sh', "-mine")
    assert res.returncode == 1 and "not made by this demo" in res.stderr and (tmp_path / "-mine" / "run").is_dir()
    (tmp_path / "-empty").mkdir()
    assert bash('fresh_demo_folder "$1" default .demo_mark demo.sh', "-empty").returncode == 0
    assert not (tmp_path / "-empty").exists()
    assert bash('not_an_option "$1"', "-dash/rl").stdout == "./-dash/rl"
    assert bash('not_an_option "$1"', "runs/x").stdout == "runs/x"
    assert bash('not_an_option "$1"', "/abs/-x").stdout == "/abs/-x"
    for script in DEMOS:  # each demo passes its folder through it, after the folder rule is read
        text = (ROOT / "scripts" / script).read_text()
        assert '. scripts/demo_folder.sh\nOUT=$(not_an_option "$OUT")\n' in text
