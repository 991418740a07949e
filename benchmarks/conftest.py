"""pytest-benchmark's JSON keeps every timed round (tens of thousands of floats a benchmark,
megabytes a file); results are committed, so only the summary statistics are written."""


def pytest_benchmark_update_json(config, benchmarks, output_json):
    for bench in output_json.get("benchmarks", ()):
        bench.get("stats", {}).pop("data", None)
