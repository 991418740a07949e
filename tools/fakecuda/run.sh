#!/usr/bin/env bash
# Build the fake libcuda.so.1 (tools/fakecuda/fakecuda.c) and run a command with it in place of
# the driver:  tools/fakecuda/run.sh python -m pytest tests/gpu -q
# It is not a GPU: no kernel code runs (tests/gpu's small kernels are emulated by name, see
# run_kernel in fakecuda.c). What it finds is the rest: exceptions, crashes and driver misuse on
# kernarg's GPU-only paths. Needs gcc and the cuda.h of the nvidia-cuda-runtime wheel (or a
# CUDA toolkit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/build"
mkdir -p "$out"
# The CUDA headers kernarg compiles against: _nvrtc.cuda_include_dir() (the nvidia-cuda-runtime
# wheel's include directory, which has cuda.h), read from the source file so that kernarg need
# not be built; else a CUDA toolkit's.
inc="$(python - "$here/../../kernarg/_nvrtc.py" <<'PY'
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("kernarg_nvrtc", sys.argv[1])
nvrtc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nvrtc)
found = [d for d in (nvrtc.cuda_include_dir(), "/usr/local/cuda/include")
         if d and os.path.exists(os.path.join(d, "cuda.h"))]
if not found:
    sys.exit("no cuda.h: pip install nvidia-cuda-runtime")
print(found[0])
PY
)"
if [[ ! -f "$out/libcuda.so.1" || "$here/fakecuda.c" -nt "$out/libcuda.so.1" ]]; then
    gcc -O1 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared -fvisibility=hidden \
        -I"$inc" "$here/fakecuda.c" -o "$out/libcuda.so.1" -lpthread
fi
export LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
