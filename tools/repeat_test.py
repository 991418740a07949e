"""Run a pytest test (or file) many times, each run in a fresh interpreter with a hash seed of
its own, and count how the runs ended: for a test whose outcome may depend on addresses or
hashes (docs/development.md, "Tests that depend on addresses"), before CI runs it once a job.

    python tools/repeat_test.py tests/test_launch.py::test_x [-n 300] [-j 2] [-- PYTEST ARGS...]

Prints one line per outcome (the last line of pytest's summary, its time left out) with how
many runs ended so, and the whole output of the first run that failed. Exits 1 if any run
failed.
"""

import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys


def run_once(target, seed, extra):
    """(returncode, output) of one pytest run of ``target`` under PYTHONHASHSEED=``seed``."""
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target, *extra],
        env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def summary(output):
    """pytest's last summary line, less its time ("3 passed", "1 failed, 2 passed")."""
    lines = [line for line in output.splitlines() if line.strip()]
    last = lines[-1] if lines else "(no output)"
    return re.sub(r"\s+in [\d.]+s.*$", "", last).strip("= ")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="a pytest node id or file")
    parser.add_argument("-n", "--runs", type=int, default=100, help="how many runs (100)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs at once (2)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []                                  # pytest's arguments, after --
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = parser.parse_args(argv)
    if args.runs < 1 or args.jobs < 1:
        parser.error("--runs and --jobs must be at least 1")
    outcomes = collections.Counter()
    first_failure = None
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        runs = [pool.submit(run_once, args.target, seed, extra)
                for seed in range(1, args.runs + 1)]
        for seed, run in enumerate(runs, start=1):
            code, output = run.result()
            outcomes[(code == 0, summary(output))] += 1
            if code != 0 and first_failure is None:
                first_failure = (seed, output)
    for (passed, line), count in sorted(outcomes.items(), key=lambda item: -item[1]):
        print(f"{count:6} {'ok    ' if passed else 'FAILED'} {line}")
    if first_failure is not None:
        seed, output = first_failure
        print(f"\nThe first run that failed (PYTHONHASHSEED={seed}):\n{output}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
