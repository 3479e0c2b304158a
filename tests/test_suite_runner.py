"""The suite's own runner: scripts/test.sh (the README's test command, what CI runs) and the file order in
tests/conftest.py that it relies on."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LONG_FILES_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_long_files_sent_first_exist():
    """A renamed or removed file in the list would silently stop being sent first."""
    missing = [name for name in LONG_FILES_FIRST if not (ROOT / name).is_file()]
    assert not missing, f"tests/conftest.py LONG_FILES_FIRST names files that do not exist: {missing}"


def test_collection_puts_the_long_files_first_and_keeps_the_order_within_a_file(request):
    ids = [item.nodeid.split("::", 1)[0] for item in request.session.items]
    if len(set(ids)) < 2:
        pytest.skip("only one file was collected")
    ranks = {name: k for k, name in enumerate(LONG_FILES_FIRST)}
    keys = [ranks.get(i, len(ranks)) for i in ids]
    assert keys == sorted(keys)


@pytest.mark.parametrize("workers", ["x", "-1", "2.5"])
def test_a_bad_worker_count_is_refused_before_the_set_up(workers):
    env = {**os.environ, "TEST_WORKERS": workers, "VENV": "/nonexistent/venv-never-made"}
    res = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], capture_output=True, text=True, env=env,
                         timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: TEST_WORKERS must be a whole number"), res.stderr
    assert not Path("/nonexistent/venv-never-made").exists()


def test_workers_and_the_commands_they_start_use_one_torch_thread():
    """tests/conftest.py: under several workers, torch in a worker and in a command it starts runs one intra-op
    thread (the workers share the cores; more threads spin and wait for each other)."""
    import sys

    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        pytest.skip("the suite runs in one process here: torch keeps its default")
    import torch

    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120, check=True)
    want = int(os.environ.get("OMP_NUM_THREADS", "0"))  # 1 unless the caller exported another value
    assert want >= 1 and torch.get_num_threads() == want and child.stdout.strip() == str(want), (
        os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads(), child.stdout)
