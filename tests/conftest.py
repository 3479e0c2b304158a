import os
import shutil
import sys

import pytest


@pytest.fixture
def torchrun() -> str:
    """Path of torch's ``torchrun`` launcher (installed with torch next to this Python) for the tests
    that train with two CPU processes."""
    path = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(path):
        pytest.skip("torchrun not available")
    return path
