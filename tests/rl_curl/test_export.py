import re
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
    # --overwrite replaces an earlier policy only: the run's own config.json was replaced, the run made unusable
    config = (out / "config.json").read_bytes()
    with pytest.raises(FileExistsError, match=r"config.json is not an rl_curl policy file; --overwrite replaces only "
                                              r"an earlier policy"):
        main(ExportArgs(run_dir=str(out), output=str(out / "config.json"), overwrite=True))
    assert (out / "config.json").read_bytes() == config
    main(ExportArgs(run_dir=str(out), output=str(tmp_path / "elsewhere.pt"), overwrite=True))


def test_a_checkpoint_whose_weights_hold_nan_is_refused_by_name(tmp_path):
    """Bytes overwritten in a checkpoint's weights (the size kept) loaded as NaN weights: exported, evaluated and
    acted on without a word. A run never checkpoints a diverged model, so NaN there means a damaged file."""
    import torch

    from rl_curl.evaluate import load_agent
    from shared_losses.training.runtime import CheckpointError, checkpoint_entry

    out = tmp_path / "r"
    run(tiny_config(output_dir=str(out), task="cartpole-swingup", action_repeat=50, env_steps=1000, eval_every=1000))
    entry = checkpoint_entry(out / "checkpoint", "agent")
    state = torch.load(entry, weights_only=False)
    name = next(k for k in state if k.startswith("actor."))  # a flat state dict of the agent
    state[name] = state[name].clone().contiguous()
    state[name].view(-1)[0] = float("nan")
    torch.save(state, entry)
    export = ExportArgs(run_dir=str(out), output=str(tmp_path / "p.pt"))
    for act in (lambda: load_agent(str(out)), lambda: main(export)):
        with pytest.raises(CheckpointError, match=rf"{re.escape(name)} holds 1 NaN or infinite value\(s\) of .*the "
                                                  r"file is damaged"):
            act()
    assert not (tmp_path / "p.pt").exists()
    # a truncated agent file: "does not hold this run's agent (PytorchStreamReader ...)" said nothing of damage
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    for act in (lambda: load_agent(str(out)), lambda: main(export)):
        with pytest.raises(CheckpointError, match=rf"{entry.name}, the agent's file, is unreadable \(.*\); the file "
                                                  r"is damaged \(e.g. truncated"):
            act()
    assert not (tmp_path / "p.pt").exists()


def test_a_run_of_an_earlier_version_is_named_as_such_not_as_another_applications(tmp_path):
    """A run made before the options were renamed (config.json with out_dir) was refused by evaluate and export as
    "not an rl_curl configuration (unknown keys out_dir): is it a run of another application?" though its run.json
    says rl_curl."""
    import json

    from rl_curl.evaluate import load_agent

    out = tmp_path / "r"
    run(tiny_config(output_dir=str(out), task="cartpole-swingup", action_repeat=50, env_steps=1000, eval_every=1000))
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, "out_dir": cfg["output_dir"]}))
    said = rf"^{re.escape(str(out))} is a run of an earlier version of the suite \(its config.json records out_dir, "
    with pytest.raises(ValueError, match=said + r"which this version does not have\), .*policy.pt loads with "
                                             r"rl_curl.load_policy$"):
        load_agent(out)
    with pytest.raises(ValueError, match=said):
        main(ExportArgs(run_dir=str(out), output=str(tmp_path / "p.pt")))
    (out / "run.json").unlink()  # nothing says whose run it is: either
    with pytest.raises(ValueError, match=r"unknown keys out_dir\): is it a run of another application, or of an "
                                         r"earlier version of the suite\?$"):
        load_agent(out)
