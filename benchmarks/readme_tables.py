"""Print the README's packing tables (markdown) from a `python -m kernarg bench --json` file.

    python benchmarks/readme_tables.py benchmarks/results/pack-cpu-x86_64-py311.json

The README's "Measured results" tables are this script's output for the committed JSON, so
they can be regenerated whenever the benchmark is re-recorded, rather than edited by hand.
"""
import json
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


def typed(result: dict) -> list[str]:
    lines = ["| case | untyped | typed | untyped / typed |", "|---|---:|---:|---:|"]
    for row in result.get("typed_vs_untyped", []):
        lines.append(f"| {row['case']} | {_ns(row['untyped_ns'])} | {_ns(row['typed_ns'])} | "
                     f"{row['untyped_over_typed']:.2f} |")
    return lines


def c_api(result: dict) -> list[str]:
    lines = ["| case | kernarg.pack | C API | ratio |", "|---|---:|---:|---:|"]
    for row in result.get("c_api_vs_python", []):
        lines.append(f"| {row['case']} | {_ns(row['python_ns'])} | {_ns(row['c_api_ns'])} | "
                     f"{row['python_over_c_api']:.2f} |")
    return lines


def interop(result: dict) -> list[str]:
    lines = ["| producer | protocol | kernarg adds | adds / protocol |", "|---|---:|---:|---:|"]
    for row in result.get("interop_overhead", []):
        lines.append(f"| {row['case']} | {_ns(row['protocol_ns'])} | "
                     f"{_ns(row['kernarg_adds_ns'])} | {row['added_over_protocol']:.2f} |")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        result = json.load(f)
    for title, section in (("Packing vs cuda.core's ParamHolder", packing),
                           ("Typed vs untyped", typed), ("C API vs Python", c_api),
                           ("One foreign-array argument", interop)):
        print(f"**{title}**\n")
        print("\n".join(section(result)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
