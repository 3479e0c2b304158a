#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. This is the README's test command and what CI runs.
# Extra arguments go to pytest: `bash scripts/test.sh -m "not slow"` is the fast tier (about 2.5 minutes on 2 cores),
# which leaves out the tests marked slow (wheel builds, Ray, multi-process launches, scripts and runs end to end)
# and still imports every module of the four packages (tests/test_fast_tier.py checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MUJOCO_GL="${MUJOCO_GL:-egl}"
.venv/bin/ruff check .  # the linter (configured in pyproject.toml) runs with the tests
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "ERROR: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
