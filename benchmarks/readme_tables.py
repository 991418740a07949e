"""Print the README's tables (markdown) from a `python -m kernarg bench --json` file.

    python benchmarks/readme_tables.py benchmarks/results/pack-cpu-x86_64-py311.json
    python benchmarks/readme_tables.py bench-gpu.json     # from `bench --gpu-only` on a GPU
    python benchmarks/readme_tables.py --pythons A.json B.json ...   # runs side by side

The README's "Measured results" tables are this script's output for the committed JSON, so
they can be regenerated whenever the benchmark is re-recorded, rather than edited by hand.
A file with packing rows gives the packing tables; one with a "launch" section (and
"interop_gpu") gives the launch-latency and foreign-GPU-array tables.
"""
import json
import statistics
import sys

DASH = "–"


def _ns(value):
    return DASH if value is None else f"{value:.0f} ns"


def _x(value, bold=False):
    if value is None:
        return DASH
    return f"**{value:.2f}x**" if bold else f"{value:.2f}x"


def packing(result: dict) -> list[str]:
    lines = ["| case | kernarg | ParamHolder | speed-up | goal | floor | kernarg / floor |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        holder = row.get("ParamHolder_ns")
        goal = row.get("goal")
        lines.append(
            f"| {row['case']} | {_ns(row['kernarg_ns'])} | "
            f"{'(unsupported)' if holder is None else _ns(holder)} | "
            f"{_x(row.get('speedup_vs_paramholder'), bold=True)} | "
            f"{DASH if goal is None else f'{goal:.1f}x'} | {_ns(row.get('floor_ns'))} | "
            f"{_x(row.get('ratio_to_floor'))} |")
    m = result.get("marginal_ns_per_int_16_to_256")
    if m:
        lines += ["", "Marginal cost per int argument (16 → 256 slope): "
                  f"kernarg {m['kernarg']:.2f} ns, ParamHolder {m['ParamHolder']:.2f} ns, "
                  f"floor {m['floor']:.2f} ns."]
    return lines


def _two_timings(header: str, key: str, first: str, second: str, ratio: str):
    """A table of one case per row: two timings and their ratio, from result[key]."""
    def table(result: dict) -> list[str]:
        lines = [header, "|---|---:|---:|---:|"]
        for row in result.get(key, []):
            value = row[ratio]
            lines.append(f"| {row['case']} | {_ns(row[first])} | {_ns(row[second])} | "
                         f"{DASH if value is None else f'{value:.2f}'} |")
        return lines
    return table


typed = _two_timings("| case | untyped | typed | untyped / typed |", "typed_vs_untyped",
                     "untyped_ns", "typed_ns", "untyped_over_typed")
bindings = _two_timings("| case | typed | cuda.bindings | cuda.bindings / typed |",
                        "typed_vs_cuda_bindings", "typed_ns", "cuda_bindings_ns",
                        "cuda_bindings_over_typed")
c_api = _two_timings("| case | kernarg.pack | C API | ratio |", "c_api_vs_python",
                     "python_ns", "c_api_ns", "python_over_c_api")
interop = _two_timings("| producer | protocol | kernarg adds | adds / protocol |",
                       "interop_overhead", "protocol_ns", "kernarg_adds_ns",
                       "added_over_protocol")


def launch(section: dict) -> list[str]:
    """Host ns per launch for every contender and the nvcc-built floor, then kernarg's ratios
    against the issue's goals (prepared <= 1.1x and launch <= 1.3x the floor at 16 arguments;
    cuda.core >= 2x kernarg.launch). The floor of the ratios is the in-process "C loop" where
    the run has one (and then cuda.core's overhead above it over kernarg.launch's is shown
    too); results recorded before it existed were taken against the C++ floor."""
    from kernarg._bench_launch import (
        DROP_IN,
        DROP_IN_IN_TURN,
        FLOOR,
        FLOOR_CHECKED,
        FLOOR_EX,
        contender_names,
    )

    rows = section["rows"]
    # The floor's variants get a table of their own (below), not columns here.
    names = [name for name in contender_names(rows) if name not in (FLOOR_EX, FLOOR_CHECKED)]
    in_process = any(f"{FLOOR}_ns" in row for row in rows)
    floor = FLOOR if in_process else "C++ floor"
    ratios = [("prepared_over_floor", f"prepared / {floor}"),
              ("launch_over_floor", f"launch / {floor}"),
              ("cuda_core_over_kernarg", "cuda.core / kernarg.launch")]
    if in_process:
        ratios.append(("cuda_core_overhead_over_kernarg",
                       f"cuda.core / kernarg.launch, above {FLOOR}"))
    if any("cuda_core_over_drop_in" in row for row in rows):
        ratios += [("cuda_core_over_drop_in", f"cuda.core / {DROP_IN}"),
                   ("cuda_core_overhead_over_drop_in", f"cuda.core / {DROP_IN}, above {FLOOR}")]
    if any("cuda_core_over_drop_in_in_turn" in row for row in rows):
        ratios.append(("cuda_core_over_drop_in_in_turn", f"cuda.core / {DROP_IN_IN_TURN}"))
    lines = ["| args | " + " | ".join(names) + " | C++ floor (own process) | "
             + " | ".join(title for _, title in ratios) + " |",
             "|---:|" + "---:|" * (len(names) + 1 + len(ratios))]
    for row in rows:
        cells = [_ns(row.get(f"{name}_ns")) for name in names]
        cells.append(_ns(row.get("cpp_floor_ns")))
        cells += [_x(row.get(key)) for key, _ in ratios]
        lines.append(f"| {row['nargs']} | " + " | ".join(cells) + " |")
    if any("checked_over_floor" in row for row in rows):
        lines += ["", f"A bound launch above {FLOOR}, in parts (medians of per-round ratios):",
                  "", f"| args | {FLOOR_EX} / {FLOOR} | {FLOOR_CHECKED} / {FLOOR} | "
                  f"kernarg bound / {FLOOR_CHECKED} |", "|---:|---:|---:|---:|"]
        lines += [f"| {row['nargs']} | {_x(row.get('ex_over_floor'))} | "
                  f"{_x(row.get('checked_over_floor'))} | {_x(row.get('bound_over_checked'))} |"
                  for row in rows]
    lines += _spread(rows, FLOOR)
    extras = section.get("launch_extras_ns")
    if extras:
        lines += ["", "Each launch also pays: " + ", ".join(
            f"{name} {ns:.0f} ns" for name, ns in extras.items()) + "."]
    return lines


SPREAD = ("kernarg prepared", "kernarg.launch", "kernarg bound", "cuda.core launch")


def _spread(rows: list[dict], floor: str) -> list[str]:
    """How much the ratios to the floor move between rounds: for the main contenders, the
    median of the per-round ratios (the ratio columns above) and the lowest and highest, from
    the times each round recorded (runs from 2026-11-27 on; none before)."""
    if not rows or not all(floor in row.get("rounds", {}) for row in rows):
        return []
    shown = [name for name in SPREAD if all(name in row["rounds"] for row in rows)]
    count = len(rows[0]["rounds"][floor])
    lines = ["", f"Each contender's time over {floor}'s, round by round: the median of the "
             f"{count} rounds' ratios [the lowest – the highest]:", "",
             "| args | " + " | ".join(f"{name} / {floor}" for name in shown) + " |",
             "|---:|" + "---:|" * len(shown)]
    for row in rows:
        cells = []
        for name in shown:
            ratios = sorted(t / f for t, f in zip(row["rounds"][name], row["rounds"][floor],
                                                  strict=True))
            cells.append(f"{statistics.median(ratios):.2f}x [{ratios[0]:.2f}–{ratios[-1]:.2f}]")
        lines.append(f"| {row['nargs']} | " + " | ".join(cells) + " |")
    return lines


def interop_gpu(section: dict) -> list[str]:
    lines = ["| library | path | kernarg ns / argument | protocol calls | ratio |",
             "|---|---|---:|---|---|"]
    for row in section.get("rows", []):
        calls = ", ".join(f"`{k[:-3]}` {row[k]:.0f} ns" for k in row
                          if k.endswith("_ns") and k not in ("kernarg_ns", "typed_ns"))
        # Runs from session 38 on also time the typed pack (`const void* p`) of the array.
        typed = f" (typed: {row['typed_ns']:.0f})" if "typed_ns" in row else ""
        if "protocol_over_kernarg" in row:
            ratio = ", ".join(f"protocol / kernarg {v:.1f}x"
                              for v in row["protocol_over_kernarg"].values())
        else:
            ratio = f"kernarg adds {row.get('adds_over_protocol', float('nan')):.0%}"
        lines.append(f"| {row['library']} | {row['path']} | {row['kernarg_ns']:.0f}{typed} | "
                     f"{calls} | {ratio} |")
    return lines


def pinned_numpy(result: dict) -> list[str]:
    """The CPU run's numpy-over-pinned-memory rows, rendered like the GPU run's arrays."""
    return interop_gpu({"rows": result.get("pinned_numpy", [])})


def pythons(results: list[dict]) -> list[str]:
    """The packing rows of runs on different Pythons (or the same one, again), one column per
    run in the order given: kernarg's time and its speed-up over ParamHolder in that run."""
    def title(result):
        return f"{result['machine']['python']}, {result['date']}"
    lines = ["| case | " + " | ".join(title(r) for r in results) + " |",
             "|---|" + "---:|" * len(results)]
    for i, row in enumerate(results[0]["rows"]):
        cells = []
        for result in results:
            other = result["rows"][i]
            if other["case"] != row["case"]:
                raise ValueError(f"run {result['date']} on {result['machine']['python']} has "
                                 f"case {other['case']!r} where the first has {row['case']!r}")
            speedup = other.get("speedup_vs_paramholder")
            cells.append(_ns(other["kernarg_ns"])
                         + ("" if speedup is None else f", {_x(speedup, bold=True)}"))
        lines.append(f"| {row['case']} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) > 2 and argv[1] == "--pythons":
        results = []
        for path in argv[2:]:
            with open(path) as f:
                results.append(json.load(f))
        print("\n".join(pythons(results)))
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        result = json.load(f)
    if "launch" in result:
        print(f"**Launch latency on {result['launch'].get('device', '?')}** "
              "(host ns per launch)\n")
        print("\n".join(launch(result["launch"])))
        print()
        if "interop_gpu" in result:
            print("**One foreign GPU array per library**\n")
            print("\n".join(interop_gpu(result["interop_gpu"])))
            print()
    if "rows" not in result:
        return 0
    for title, section in (("Packing vs cuda.core's ParamHolder", packing),
                           ("Typed vs untyped", typed),
                           ("Typed vs cuda.bindings' packer", bindings),
                           ("C API vs Python", c_api),
                           ("One foreign-array argument", interop),
                           ("A numpy array over pinned memory", pinned_numpy)):
        lines = section(result)
        if len(lines) > 2:      # a table with rows (older results lack some sections)
            print(f"**{title}**\n")
            print("\n".join(lines))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
