import sys

import numpy as np
import pytest

import rl_curl
from rl_curl.export import ExportArgs, main
from rl_curl.train import run

from .conftest import tiny_config
from tests import warm


def test_export_writes_the_checkpoints_policy_as_the_finished_run_wrote_it(tmp_path):
    """A run stopped after its last checkpoint has no policy.pt; rl_curl.export writes it from the checkpoint. From a
    finished run's (final) checkpoint it acts as the policy.pt the run wrote; an existing file is refused without
    --overwrite and left as it is."""
    out = tmp_path / "r"
    run(tiny_config(output_dir=str(out), task="cartpole-swingup", action_repeat=50, env_steps=1000, eval_every=1000))
    written = rl_curl.load_policy(out)
    obs = np.random.default_rng(0).integers(0, 256, (5, *written.obs_shape), dtype=np.uint8)
    before = (out / "policy.pt").read_bytes()
    with pytest.raises(FileExistsError, match=r"--output .*policy.pt already exists: pass --overwrite"):
        main(ExportArgs(run_dir=str(out)))
    assert (out / "policy.pt").read_bytes() == before
    (out / "policy.pt").unlink()  # as a run interrupted after its last checkpoint
    assert main(ExportArgs(run_dir=str(out))) == out / "policy.pt"
    np.testing.assert_array_equal(rl_curl.load_policy(out)(obs), written(obs))
    main(ExportArgs(run_dir=str(out), output=str(tmp_path / "elsewhere.pt")))
    np.testing.assert_array_equal(rl_curl.load_policy(tmp_path / "elsewhere.pt")(obs), written(obs))
    res = warm.run([sys.executable, "-m", "rl_curl.export", "--run-dir", str(out), "--output",
                    str(tmp_path / "elsewhere.pt")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and res.stderr.startswith("error: --output ") and "pass --overwrite" in res.stderr
