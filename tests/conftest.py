import os
import shutil
import sys

import pytest

# One intra-op thread per process when the suite runs in several workers (scripts/test.sh: pytest-xdist, one worker
# per core). torch's OpenMP pool takes one thread per core by default; each worker and every command it starts
# (a training run, a grid's runs) would then spread over cores the other worker is using, and the threads spin while
# they wait for each other: measured 2026-12-02 on the 2-core machine, three test files took 188 s with the
# default and 167 s with one thread (user CPU 299 s -> 275 s, system 28 s -> 19 s). Set before torch is imported
# here, and inherited by the commands the tests start; a value already in the environment is kept, and a suite run
# in one process (TEST_WORKERS=0) keeps torch's default.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    if "torch" in sys.modules:  # imported before this file (a plugin): its pool may be sized already
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# The longest test files (census of 2026-12-02, 2 cores: each 50 s to 12 min), sent first: the suite runs a file to a
# worker (scripts/test.sh: pytest-xdist, --dist loadfile), and a long file handed out last leaves the other worker
# idle while it runs. Order within a file is kept (tests/test_suite_runner.py checks that the names exist).
LONG_FILES_FIRST = (
    "tests/test_doc_examples.py",
    "tests/rl_curl/test_gpu_table3.py",
    "tests/nlp_qt/test_qt_scripts.py",
    "tests/fewshot/test_pu_images_table.py",
    "tests/rl_curl/test_train.py",
    "tests/rl_curl/test_graphs.py",
    "tests/fewshot/test_fewshot.py",
    "tests/fewshot/test_table5_stats.py",
    "tests/fewshot/test_images.py",
    "tests/rl_curl/test_together.py",
    "tests/rl_curl/test_scripts_curl.py",
    "tests/fewshot/test_fewshot_scripts.py",
    "tests/test_docs_site.py",
    "tests/fewshot/test_pu_selection.py",
    "tests/test_grid_checks.py",
    "tests/shared_losses/test_sweep_slurm.py",
    "tests/shared_losses/test_slurm_multinode.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test: tiny networks run fastest so, and do not thrash when other jobs share
    the cores (a 4-step image run took 15 s instead of 1 s on two threads of busy cores)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def torchrun() -> str:
    """Path of torch's ``torchrun`` launcher (installed with torch next to this Python) for the tests
    that train with two CPU processes. The one next to this Python first: a ``torchrun`` found first on PATH
    can belong to another Python (a pyenv shim did, 2026-11-26) that lacks this project's packages."""
    here = os.path.join(os.path.dirname(sys.executable), "torchrun")
    path = here if os.path.exists(here) else shutil.which("torchrun") or here
    if not os.path.exists(path):
        pytest.skip("torchrun not available")
    return path


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray (2 CPUs) shared by every test that runs a grid on Ray; shut down at the end of the session."""
    import ray

    from shared_losses.training.sweep import connect_ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token notice in a throwaway local cluster
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    connect_ray(None)  # reuses the connection
    yield ray
    ray.shutdown()
