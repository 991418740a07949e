#!/usr/bin/env bash
# Build the fake libcuda.so.1 (tools/fakecuda/fakecuda.c) and run a command with it in place of
# the driver:  tools/fakecuda/run.sh python -m pytest tests/gpu -q
# It is not a GPU: kernels do not run, so tests that read back what a kernel wrote fail. What
# it finds is everything else: exceptions, crashes and driver misuse on kernarg's GPU-only
# paths. Needs gcc and the cuda.h of the nvidia-cuda-runtime wheel (or a CUDA toolkit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/build"
mkdir -p "$out"
inc="$(python - <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages(), "/usr/local/cuda"]
hits = [os.path.dirname(h) for r in roots
        for h in glob.glob(os.path.join(r, "nvidia", "cu*", "include", "cuda.h"))
        + glob.glob(os.path.join(r, "nvidia", "cuda_runtime", "include", "cuda.h"))
        + glob.glob(os.path.join(r, "include", "cuda.h"))]
if not hits:
    sys.exit("no cuda.h: pip install nvidia-cuda-runtime")
print(sorted(hits)[-1])
PY
)"
if [[ ! -f "$out/libcuda.so.1" || "$here/fakecuda.c" -nt "$out/libcuda.so.1" ]]; then
    gcc -O1 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared -fvisibility=hidden \
        -I"$inc" "$here/fakecuda.c" -o "$out/libcuda.so.1" -lpthread
fi
export LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
