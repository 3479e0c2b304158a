"""scripts/rehearse_gpu_command.py without the GPU machine's Python: the command it runs is docs/clusters.md's
prepared command with this checkout's commit and the tiny sizes after it, and its refusals are one line each. (The
rehearsal itself needs a Python 3.12 with torch 2.11 from a package registry; its runs are in the lab notes.)"""

import subprocess
import sys
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import rehearse_gpu_command as rg  # noqa: E402

SCRIPT = ROOT / "scripts" / "rehearse_gpu_command.py"
HEAD = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def test_the_dry_run_is_the_docs_prepared_command_with_this_commit_then_the_tiny_sizes():
    res = warm.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    argv = res.stdout.split()
    n = len(argv) - len(rg.TINY)
    assert argv[n:] == list(rg.TINY)
    doc = rg.prepared_command(HEAD)
    assert argv[:n] == doc and doc[:2] == ["bash", "scripts/gpu_table3.sh"]
    assert doc[doc.index("--commit") + 1] == HEAD and "--bench" in doc and "--fit" in doc


def test_tiny_sizes_come_after_the_options_they_replace():
    """tyro and argparse take the last of a repeated option: every size the rehearsal shrinks comes after the
    prepared command's own value of it (there is none today; if the docs' command gains one, it stays overridden)."""
    argv = rg.rehearsal_argv("abc")
    for option in ("--batch-size", "--env-steps"):
        last = max(i for i, a in enumerate(argv) if a == option or a.startswith(option + "="))
        assert last >= len(argv) - len(rg.TINY)


@pytest.mark.parametrize("text, match", [
    ("no command here\n", "holds 0 prepared commands"),
    ("```bash\nbash scripts/gpu_table3.sh --bench --commit abc\n```\n", "has no '--commit <full sha of HEAD>'"),
    ("```bash\nbash scripts/gpu_table3.sh --bench --commit <full sha of HEAD>\n```\n" * 2, "holds 2 prepared"),
])
def test_a_docs_page_without_one_prepared_command_is_refused(tmp_path, text, match):
    page = tmp_path / "clusters.md"
    page.write_text(text)
    with pytest.raises(rg.RehearsalError, match=match):
        rg.prepared_command("abc", page)


def test_another_python_than_the_gpu_machines_is_refused_in_one_line(tmp_path):
    python = tmp_path / "python3.10"  # a stand-in interpreter that answers the version question as 3.10 would
    python.write_text("#!/bin/sh\necho 3 10\n")
    python.chmod(0o755)
    res = warm.run([sys.executable, str(SCRIPT), "--python", str(python), "--scratch", str(tmp_path / "s")],
                   capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [f"error: --python {python} is Python 3.10; the GPU machine's is 3.12"]
    assert not (tmp_path / "s").exists()


def test_a_python_that_does_not_run_is_one_line(tmp_path):
    res = warm.run([sys.executable, str(SCRIPT), "--python", str(tmp_path / "no_python")],
                   capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"error: --python {tmp_path / 'no_python'}: cannot run it")
