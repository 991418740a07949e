#!/usr/bin/env bash
# Coverage-guided fuzzing of kernarg (by hand, not in CI): builds a copy of the working tree
# with clang's libFuzzer coverage and AddressSanitizer, then runs one atheris target.
#
#   bash tools/fuzz/run.sh pack  [SECONDS]   # fuzz_pack.py: kernarg.pack, Signature.pack
#   bash tools/fuzz/run.sh parse [SECONDS]   # fuzz_parse.py: Signature text, PTX, source
#   bash tools/fuzz/run.sh launch [SECONDS]  # fuzz_launch.py: launches, against tools/fakecuda
#
# Default 600 s. Needs clang (Debian: apt-get install clang libclang-rt-dev) and a Python
# with kernarg's build and test dependencies and atheris (pip install atheris). The corpus is
# kept in $KERNARG_FUZZ_DIR (default /tmp/kernarg-fuzz/<target>); a crash or an unexpected
# exception stops the run and is written there as crash-<hash>. Re-run one input with
#   bash tools/fuzz/run.sh pack 0 /tmp/kernarg-fuzz/pack/crash-<hash>
set -euo pipefail
target=${1:?usage: run.sh pack|parse|launch [SECONDS] [INPUT]}
seconds=${2:-600}
root=$(cd "$(dirname "$0")/../.." && pwd)
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cc" ] || { echo "fuzz: needs clang (apt-get install clang libclang-rt-dev)"; exit 1; }
cxx=${cc/clang/clang++}
runtime=$(python -c "import atheris; print(atheris.path())")/asan_with_fuzzer.so
build=${KERNARG_FUZZ_BUILD:-/tmp/kernarg-fuzz/build}
mkdir -p "$build"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar -c --null -T -) |
    tar -x -C "$build"
flags="-fsanitize=fuzzer-no-link,address -g -O1 -fno-omit-frame-pointer"
(cd "$build" && CC="$cc" CXX="$cxx" LDSHARED="$cc -shared" LDCXXSHARED="$cxx -shared" \
    CFLAGS="$flags" LDFLAGS="-fsanitize=fuzzer-no-link,address" \
    python setup.py -q build_ext --inplace -j 2 >/dev/null)
export PYTHONPATH="$build" PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0
# Under a preloaded ASan runtime NVRTC does not find libnvrtc-builtins beside itself (as in
# .ci/sanitizers): name its directory.
builtins=$(python -c 'import glob, os, nvidia
hits = sorted(h for b in nvidia.__path__ for p in ("*/lib/libnvrtc-builtins.so*",
              "*/*/lib/libnvrtc-builtins.so*") for h in glob.glob(os.path.join(b, p)))
print(os.path.dirname(hits[0]) if hits else "")')
export LD_LIBRARY_PATH="$builtins${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
wrap=()
if [ "$target" = launch ]; then     # the stand-in driver in place of libcuda.so.1
    wrap=("$root/tools/fakecuda/run.sh")
fi
corpus=${KERNARG_FUZZ_DIR:-/tmp/kernarg-fuzz/$target}
mkdir -p "$corpus"
if [ $# -ge 3 ]; then
    exec "${wrap[@]}" env LD_PRELOAD="$runtime" python "$build/tools/fuzz/fuzz_$target.py" "$3"
fi
# KERNARG_FUZZ_MAX_LEN (default 512) and KERNARG_FUZZ_TIMEOUT (seconds an input may take,
# default libFuzzer's 1200): longer inputs and a short timeout hunt for inputs whose cost
# grows faster than their length (a timeout is written as timeout-<hash>); with a longer
# MAX_LEN, inputs may be that long from the start (-len_control=0).
len_control=()
[ -n "${KERNARG_FUZZ_MAX_LEN:-}" ] && len_control=(-len_control=0)
exec "${wrap[@]}" env LD_PRELOAD="$runtime" python "$build/tools/fuzz/fuzz_$target.py" \
    -max_total_time="$seconds" -max_len="${KERNARG_FUZZ_MAX_LEN:-512}" "${len_control[@]}" \
    -timeout="${KERNARG_FUZZ_TIMEOUT:-1200}" -artifact_prefix="$corpus/" "$corpus"
