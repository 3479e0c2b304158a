#!/usr/bin/env bash
# DCL Table 3 in GPU slices: one prepared command for a bare GPU machine (docs/clusters.md, "DCL Table 3 in GPU
# slices"). Run it from any folder (relative paths in the options are taken from there), with the wheels of
# scripts/fetch_gpu_deps.py in the repository's .whl/ (and, where the machine lacks the EGL loader, its Debian
# packages in .gl/):
#
#   bash scripts/gpu_table3.sh --seeds 0 1 --deadline 480 --commit <sha>      # then the options of
#   python scripts/table3_gpu.py run --help                                  # (all passed through)
#
# It installs what is missing (only where `import dm_control, mujoco, gymnasium, tyro` fails, so on a machine set up
# by scripts/setup.sh nothing is installed), renders with EGL, and runs scripts/table3_gpu.py run, packing into $OUT
# (the GPU machine's output folder), or ./table3_pack when OUT is unset. PYTHON picks the interpreter (python3).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)" || exit 2  # relative paths of the options stay the caller's
PY="${PYTHON:-python3}"
export MUJOCO_GL="${MUJOCO_GL:-egl}" PYTHONUNBUFFERED=1
t0=$(date +%s)
if ! "$PY" -c "import dm_control, mujoco, gymnasium, tyro" 2>/dev/null; then
    if ! compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
        echo "gpu_table3.sh: dm_control, mujoco, gymnasium or tyro is missing and .whl/ holds no wheels: run" \
             "'python scripts/fetch_gpu_deps.py' on a machine with a package registry and carry .whl" >&2
        exit 2
    fi
    site="${GPU_SITE:-/tmp/site}"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$ROOT"/.whl/*.whl \
        || { echo "gpu_table3.sh: installing .whl/*.whl failed" >&2; exit 2; }
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    echo "installed $(ls "$ROOT"/.whl/*.whl | wc -l) wheels into $site in $(( $(date +%s) - t0 )) s"
fi
if [ "$MUJOCO_GL" = egl ] && ! ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1'; then
    if compgen -G "$ROOT/.gl/*.deb" >/dev/null; then  # the EGL/GL loaders (libglvnd) the driver's EGL needs
        for f in "$ROOT"/.gl/*.deb; do dpkg -x "$f" / || exit 2; done
        ldconfig
        echo "unpacked $(ls "$ROOT"/.gl/*.deb | wc -l) GL packages from .gl/"
    else
        echo "gpu_table3.sh: no libEGL.so.1 on this machine and no .gl/*.deb to bring it; rendering may fail" >&2
    fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # rl_curl and shared_losses without installing the project
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" - <<'PYEOF' || { echo "gpu_table3.sh: the environment does not render; see above" >&2; exit 2; }
import time, importlib.metadata, torch, mujoco
from rl_curl.env import make
t = time.perf_counter(); env = make("cartpole-swingup", seed=0); env.reset(seed=0)
for _ in range(50):
    env.step(env.action_space.sample())
print(f"python ok: torch {torch.__version__} (cuda {torch.cuda.is_available()}), mujoco {mujoco.__version__}, "
      f"dm-control {importlib.metadata.version('dm-control')}; 50 agent steps of "
      f"cartpole rendered in {time.perf_counter() - t:.2f} s")
PYEOF
exec "$PY" "$ROOT/scripts/table3_gpu.py" run --pack "${OUT:-table3_pack}" "$@"
