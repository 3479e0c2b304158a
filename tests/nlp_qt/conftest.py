import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every nlp_qt test runs torch on one thread (tests/conftest.py): the tiny GRUs took 1.7 s a step instead of
    10 ms on two threads of cores busy with other jobs."""
    yield
