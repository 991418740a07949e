#!/usr/bin/env bash
# Coverage-guided fuzzing of kernarg (by hand, not in CI): builds a copy of the working tree
# with clang's libFuzzer coverage and AddressSanitizer, then runs one atheris target.
#
#   bash tools/fuzz/run.sh pack  [SECONDS]   # fuzz_pack.py: kernarg.pack, Signature.pack
#   bash tools/fuzz/run.sh parse [SECONDS]   # fuzz_parse.py: Signature text, PTX, source
#
# Default 600 s. Needs clang (Debian: apt-get install clang libclang-rt-dev) and a Python
# with kernarg's build and test dependencies and atheris (pip install atheris). The corpus is
# kept in $KERNARG_FUZZ_DIR (default /tmp/kernarg-fuzz/<target>); a crash or an unexpected
# exception stops the run and is written there as crash-<hash>. Re-run one input with
#   bash tools/fuzz/run.sh pack 0 /tmp/kernarg-fuzz/pack/crash-<hash>
set -euo pipefail
target=${1:?usage: run.sh pack|parse [SECONDS] [INPUT]}
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
corpus=${KERNARG_FUZZ_DIR:-/tmp/kernarg-fuzz/$target}
mkdir -p "$corpus"
if [ $# -ge 3 ]; then
    exec env LD_PRELOAD="$runtime" python "$build/tools/fuzz/fuzz_$target.py" "$3"
fi
exec env LD_PRELOAD="$runtime" python "$build/tools/fuzz/fuzz_$target.py" \
    -max_total_time="$seconds" -max_len=512 -artifact_prefix="$corpus/" "$corpus"
