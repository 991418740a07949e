"""Plot launch latency from `python -m kernarg bench --json` output (the "launch" section).

    python benchmarks/plot_launch.py RESULTS.json OUT.png

One line per contender: host µs per launch against the number of kernel arguments, with the
in-process C loop as the floor and the C++ loop dashed. The time axis is logarithmic: the
contenders span 3 µs to hundreds (numba-cuda), and on a linear axis every launcher within 2x of
the floor lies on one line. Needs matplotlib (not a kernarg dependency).
"""
from __future__ import annotations

import json
import sys


def plot(results: dict, path: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernarg._bench_launch import FLOOR_CHECKED, FLOOR_EX, IN_TURN, contender_names

    launch = results["launch"]
    rows = launch["rows"]
    # The floor's variants are ratios in the tables, not lines here.
    names = [name for name in contender_names(rows) if name not in (FLOOR_EX, FLOOR_CHECKED)]
    names.append("cpp_floor")
    fig, ax = plt.subplots(figsize=(8, 6), dpi=120)
    # A colour per contender: more lines than the default cycle's ten would repeat colours.
    colours = iter(plt.get_cmap("tab20").colors)
    for name in names:
        points = [(row["nargs"], row[f"{name}_ns"] / 1000) for row in rows if f"{name}_ns" in row]
        if not points:
            continue
        label = {"cpp_floor": "C++ cuLaunchKernel loop, own process",
                 "C loop": "C cuLaunchKernel loop, in process (floor)"}.get(name, name)
        style = ({"color": "black", "linestyle": "--"} if name == "cpp_floor" else
                 {"color": "black"} if name == "C loop" else {"color": next(colours)})
        if name.startswith("kernarg"):
            style["linewidth"] = 2.5
        if name.endswith(IN_TURN):         # the same launcher as a line of its own, dotted
            style["linestyle"] = ":"
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=label,
                **style)
    ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xticks([row["nargs"] for row in rows], [str(row["nargs"]) for row in rows])
    ax.set_xlabel("kernel arguments")
    ax.set_ylabel("host µs per launch (median, log scale)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_title(f"Launch latency — {launch.get('device', 'GPU')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        results = json.load(f)
    if "launch" not in results:
        print(f"{argv[1]} has no launch section (was it measured on a GPU?)", file=sys.stderr)
        return 1
    plot(results, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
