#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. This is the README's test command and what CI runs.
# Extra arguments go to pytest: `bash scripts/test.sh -m "not slow"` is the fast tier (its time and the suite's are in
# docs/getting_started.md),
# which leaves out the tests marked slow (wheel builds, Ray, multi-process launches, scripts and runs end to end)
# and still imports every module of the four packages (tests/test_fast_tier.py checks it).
# The tests run in TEST_WORKERS processes (default 2, pytest-xdist), a test file to a process (module fixtures and
# the doc examples' lanes stay in one process); TEST_WORKERS=0 runs them in this process, one after the other
# (what `pytest --pdb` and print-debugging want). On 2 cores, 2 workers took 0.716 of the time of one process
# (docs/lab_notes/2026-11-26_suite_time.md).
# The tests' own `python -m ...` / `python SCRIPT.py` commands run in processes forked from one that imported torch,
# transformers and scikit-learn once per worker (tests/warm.py; the doc examples, and the runs a grid starts, stay
# fresh interpreters); CONTRASTIVE_SUITE_COLD_COMMANDS=1 runs every command in a fresh interpreter instead.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${TEST_WORKERS:-2}
case "$workers" in
  ''|*[!0-9]*) echo "error: TEST_WORKERS must be a whole number of processes (0: none, run here), got '$workers'" >&2
               exit 2 ;;
esac
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MUJOCO_GL="${MUJOCO_GL:-egl}"
.venv/bin/ruff check .  # the linter (configured in pyproject.toml) runs with the tests
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "ERROR: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
