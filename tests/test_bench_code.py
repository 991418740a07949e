"""The benchmark code itself runs (tiny repeats, CPU stand-ins for GPU arrays), so the GPU
session that measures with it does not spend its time on Python errors. No timing is asserted."""
import contextlib
import importlib.util
import math
import os
import sys

import pytest

import kernarg
from kernarg import _bench, _bench_interop


def _timed(value):
    """A time the benchmark measured: a finite float. Not its sign: with tiny repeats on a
    loaded machine, a difference of two timings can come out below zero (it did in CI)."""
    return isinstance(value, float) and math.isfinite(value)


class _Both(_bench._DLPackView):
    """A stand-in array exposing both protocols, like CuPy's or torch's."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (0x9000_0000, False), "version": 3,
                "stream": None}


def test_interop_gpu_benchmark_rows(monkeypatch, capsys):
    monkeypatch.setattr(_bench_interop, "_arrays", lambda file: [("stand-in", _Both())])
    result = _bench_interop.run(repeat=2, target=0.0005)
    rows = {r["path"]: r for r in result["rows"]}
    assert set(rows) == {"kernarg path for the type", "generic CUDA Array Interface",
                         _bench_interop.GENERIC_CAI_C, "generic DLPack"}
    own = rows["kernarg path for the type"]
    assert set(own["protocol_over_kernarg"]) == {"__cuda_array_interface__", "__dlpack__"}
    assert _timed(own["__dlpack___ns"]) and _timed(own["__cuda_array_interface___ns"])
    # The typed pack of the same array (element type read) is timed too, and shown beside it.
    assert _timed(own["typed_ns"]) and "typed_ns" not in rows["generic DLPack"]
    table = _script("readme_tables").interop_gpu(result)
    assert f"| stand-in | kernarg path for the type | {own['kernarg_ns']:.0f} (typed: " \
        f"{own['typed_ns']:.0f}) | " in "\n".join(table)
    assert "`typed`" not in "\n".join(table)
    # The Python calls around the protocol calls were timed, to be subtracted from them.
    assert all(row["call_overhead"] > 0 for row in rows.values())
    assert "adds_over_protocol" in rows["generic DLPack"]
    assert "adds_over_protocol" in rows["generic CUDA Array Interface"]
    assert "adds_over_protocol" in rows[_bench_interop.GENERIC_CAI_C]
    # Both wrappers hand kernarg the very dict of the array they wrap.
    array = _Both()
    for wrapper in (_bench_interop._CAIOnly(array), _bench_interop._CAIOnlyC(array)):
        assert wrapper.__cuda_array_interface__ == array.__cuda_array_interface__
        assert bytes(kernarg.pack((wrapper,))) == bytes(kernarg.pack((array,)))
        assert not hasattr(wrapper, "__dlpack__")


def test_interop_gpu_benchmark_skips_what_kernarg_refuses(monkeypatch, capsys):
    import numpy as np

    monkeypatch.setattr(_bench_interop, "_arrays", lambda file: [("numpy", np.zeros(4))])
    assert _bench_interop.run(repeat=1, target=0.0005)["rows"] == []
    assert "kernarg cannot pack it" in capsys.readouterr().out


def test_pinned_numpy_benchmark_rows_and_their_table():
    # The CPU run's row: kernarg's path for a numpy array over (stand-in) pinned memory against
    # numpy's own protocols, and the README table readme_tables.py makes of it.
    rows = _bench._pinned_numpy_rows(repeat=2, target=0.0005)
    assert len(rows) == 1 and _timed(rows[0]["kernarg_ns"])
    assert set(rows[0]["protocol_over_kernarg"]) == {"__array_interface__", "__dlpack__"}
    table = _script("readme_tables").pinned_numpy({"pinned_numpy": rows})
    assert len(table) == 3 and "`__array_interface__`" in table[2]
    assert _script("readme_tables").pinned_numpy({}) == table[:2]     # older results: no rows


def test_pinned_numpy_gpu_arrays_are_skipped_by_name_without_their_library(capsys):
    # On this machine cupyx is missing and numba and torch cannot pin without a driver: each
    # is skipped, saying which, and the benchmark goes on.
    arrays = _bench_interop._pinned_numpy_arrays(sys.stdout)
    out = capsys.readouterr().out
    for label in ("cupyx.empty_pinned", "numba pinned_array", "a pinned torch tensor"):
        assert (f"numpy over {label} skipped" in out) != any(label in a[0] for a in arrays)


def test_pinned_torch_tensor_row_is_skipped_by_name_where_torch_cannot_pin(capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    arrays = _bench_interop._arrays(sys.stdout)
    out = capsys.readouterr().out
    pinned = [a for label, a in arrays if label == "pinned torch.Tensor"]
    if torch.cuda.is_available():
        assert len(pinned) == 1 and pinned[0].is_pinned()
    else:
        assert pinned == [] and "pinned torch.Tensor skipped: " in out



def test_torch_adapter_row_reads_plain_tensors_with_the_exchange_api_hidden(capsys):
    # torch before 2.10 is read through kernarg's torch adapter. The benchmark measures that on
    # a plain tensor, with torch.Tensor's DLPack C exchange API hidden for the row (a subclass
    # would add torch's __torch_function__ to every call the adapter makes), and puts it back.
    torch = pytest.importorskip("torch", reason="torch is not installed")
    before = torch.Tensor.__dict__.get("__dlpack_c_exchange_api__")
    cpu = torch.zeros(4)        # refused either way; the refusal says which path read it
    exchange = r"\(DLPack device kDLCPU\)$" if before is not None else r"\(torch device cpu\)$"
    for hidden in (False, True, False):     # kernarg has classified torch.Tensor before each
        context = _bench_interop.torch_exchange_api_hidden if hidden else contextlib.nullcontext
        with context(), pytest.raises(TypeError, match=r"\(torch device cpu\)$" if hidden
                                      else exchange):
            kernarg.pack((cpu,))
    assert torch.Tensor.__dict__.get("__dlpack_c_exchange_api__") is before
    arrays = dict(_bench_interop._arrays(sys.stdout))
    if torch.cuda.is_available():
        assert type(arrays[_bench_interop.TORCH_ADAPTER]) is torch.Tensor
    capsys.readouterr()


def test_torch_exchange_api_hidden_leaves_a_torch_without_one_as_it_was(monkeypatch):
    import types

    class Tensor:
        pass

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(Tensor=Tensor))
    with _bench_interop.torch_exchange_api_hidden():
        assert Tensor.__dlpack_c_exchange_api__ is None
    assert "__dlpack_c_exchange_api__" not in Tensor.__dict__


def test_interop_rows_are_measured_inside_their_context(monkeypatch):
    entered = []

    @contextlib.contextmanager
    def context():
        entered.append("in")
        yield
        entered.append("out")

    monkeypatch.setattr(_bench_interop, "_arrays", lambda file: [
        ("with context", _Both()), ("without", _Both())])
    monkeypatch.setitem(_bench_interop._CONTEXTS, "with context", context)
    rows = _bench_interop.run(repeat=1, target=0.0005)["rows"]
    assert entered == ["in", "out"]
    assert [r["library"] for r in rows].count("with context") == 4


ROOT = os.path.join(os.path.dirname(__file__), "..")


def _script(name):
    """benchmarks/<name>.py as a module (the benchmarks directory is not a package)."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plot_script():
    return _script("plot_launch")


def _readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_launch_plot_refuses_results_without_a_launch_section(tmp_path, capsys):
    import json

    results = tmp_path / "cpu.json"
    results.write_text(json.dumps({"rows": []}))
    assert _plot_script().main(["plot", str(results), str(tmp_path / "x.png")]) == 1
    assert "no launch section" in capsys.readouterr().err


def test_launch_plot_draws(tmp_path):
    import json

    import pytest

    pytest.importorskip("matplotlib", reason="matplotlib is not installed (optional)")
    rows = [{"nargs": n, "kernarg.launch_ns": 10.0 + n, "cpp_floor_ns": 5.0}
            for n in (0, 1, 4)]
    results = tmp_path / "gpu.json"
    results.write_text(json.dumps({"launch": {"device": "test rows", "rows": rows}}))
    out = tmp_path / "launch.png"
    assert _plot_script().main(["plot", str(results), str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_launch_floor_builds_without_a_driver_library(tmp_path):
    # The C++ floor opens libcuda.so.1 at run time, so it builds wherever nvcc is -- including
    # toolkits without lib64/stubs and GPU machines whose driver ships no unversioned libcuda.so.
    import shutil
    import subprocess

    import pytest

    nvcc = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if nvcc is None:
        pytest.skip("nvcc is not installed (it builds the benchmark's C++ launch floor)")
    src = os.path.join(ROOT, "benchmarks", "launch", "launch_floor.cu")
    exe = tmp_path / "launch_floor"
    subprocess.run([nvcc, "-O2", "-o", str(exe), src, "-ldl"], check=True, capture_output=True)
    run = subprocess.run([str(exe), "0", "2"], capture_output=True, text=True, timeout=60)
    if run.returncode == 0:     # a GPU machine: it measured
        median, best = (float(v) for v in run.stdout.split())
        assert 0 < best <= median
    else:
        # No driver (CI): it says so; a driver but no GPU: it names the failing call.
        import re

        assert re.search(r"libcuda\.so\.1|p_cu[A-Z]\w+\(", run.stderr), run.stderr


def test_launch_table_prints_the_per_launch_extras():
    import io

    from kernarg import _bench_launch

    row = {"nargs": 16, "kernarg.launch_ns": 2300.0, "kernarg prepared_ns": 2100.0,
           "cpp_floor_ns": 2000.0, "prepared_over_floor": 1.05, "launch_over_floor": 1.15}
    out = io.StringIO()
    _bench_launch.print_table({"device": "stand-in", "rows": [row], "launch_extras_ns": {
        "cuCtxGetCurrent": 9.6, "cuStreamGetCaptureInfo": 41.2}}, file=out)
    text = out.getvalue()
    assert "1.05" in text and "1.15" in text
    assert "cuCtxGetCurrent 10" in text and "cuStreamGetCaptureInfo 41" in text


def test_launch_table_splits_the_bound_launch_above_the_floor():
    import io

    from kernarg import _bench_launch

    row = {"nargs": 16, "kernarg bound_ns": 4100.0, "C loop_ns": 4000.0,
           "ex_over_floor": 1.01, "checked_over_floor": 1.02, "bound_over_checked": 1.03}
    out = io.StringIO()
    _bench_launch.print_table({"device": "stand-in", "rows": [row]}, file=out)
    text = out.getvalue()
    assert "C loop Ex" in text and "C loop checked" in text
    assert "1.01" in text and "1.02" in text and "1.03" in text
    # Without those ratios (results recorded before the variants), no split is printed.
    out = io.StringIO()
    _bench_launch.print_table({"device": "stand-in", "rows": [{"nargs": 16}]}, file=out)
    assert "C loop checked" not in out.getvalue()


def test_readme_tables_match_the_committed_benchmark_results():
    # The README's packing tables are benchmarks/readme_tables.py's rendering of the committed
    # JSON: re-recording the benchmark without regenerating them (or editing them by hand)
    # fails here.
    import io
    import json
    from contextlib import redirect_stdout

    module = _script("readme_tables")
    out = io.StringIO()
    with redirect_stdout(out):
        assert module.main(["readme_tables", os.path.join(
            ROOT, "benchmarks", "results", "pack-cpu-x86_64-py311.json")]) == 0
    readme = _readme()
    lines = [line for line in out.getvalue().splitlines()
             if line.startswith("| ") or line.startswith("Marginal")]
    assert len(lines) > 20
    missing = [line for line in lines if line not in readme]
    assert not missing, missing
    # Every section of the run is in it, the comparison with cuda.bindings' packer included.
    with open(os.path.join(ROOT, "benchmarks", "results", "pack-cpu-x86_64-py311.json")) as f:
        result = json.load(f)
    for section in (module.bindings, module.interop, module.c_api, module.typed):
        assert len(section(result)) > 2
    # The pinned-numpy table (a section since 2026-11-24) is from the same run.
    lines = module.pinned_numpy(result)
    assert len(lines) == 3 and all(line in readme for line in lines)


def test_readme_gpu_tables_match_the_committed_gpu_results():
    # The README's H100 tables are readme_tables.py's rendering of the committed bench-gpu.json
    # of the latest run, row for row: the launch table, its split and the spread of its ratios
    # between rounds, and the interop table.
    import json

    module = _script("readme_tables")
    with open(os.path.join(ROOT, "benchmarks", "results", "gpu-h100-80gb-hbm3-2026-11-27b",
                           "bench-gpu.json")) as f:
        result = json.load(f)
    assert result["launch"]["device"].startswith("NVIDIA H100")
    lines = module.launch(result["launch"]) + module.interop_gpu(result["interop_gpu"])
    lines = [line for line in lines if line.startswith("|")]
    assert len(lines) == (2 + 5) + (2 + 5) + (2 + 5) + (2 + 30)
    readme = _readme()
    assert [line for line in lines if line not in readme] == []


def test_readme_h200_launch_tables_match_the_committed_h200_run():
    # The README's H200 section shows the launch tables of session 85's run (its interop table
    # is linked, not copied), and its reading quotes that run's ratios at 16 arguments with
    # session 62's and session 57's first run's in brackets.
    import json

    module = _script("readme_tables")
    results = os.path.join(ROOT, "benchmarks", "results")
    runs = []
    for path in (("gpu-h200-2026-12-04",), ("gpu-h200-2026-11-28b",),
                 ("gpu-h200-2026-11-28",)):
        with open(os.path.join(results, *path, "bench-gpu.json")) as f:
            runs.append(json.load(f)["launch"])
    assert all(run["device"].startswith("NVIDIA H200") for run in runs)
    lines = [line for line in module.launch(runs[0]) if line.startswith("|")]
    assert len(lines) == (2 + 5) * 3
    readme = _readme()
    assert [line for line in lines if line not in readme] == []
    at_16 = [next(r for r in run["rows"] if r["nargs"] == 16) for run in runs]
    for key, words in (("prepared_over_floor", "**A prepared launch took {} the in-process "
                                               "floor** [{}, {}]"),
                       ("launch_over_floor", "**`Kernel.launch` took {}** [{}, {}]"),
                       ("cuda_core_over_kernarg", "took {} `kernarg.launch`'s time** [{}, {}]")):
        words = words.format(*(f"{row[key]:.2f}x" for row in at_16))
        assert words in " ".join(readme.split()), words


def test_readme_torch_adapter_table_matches_its_committed_run():
    # The README's small table of torch's three paths is read off the torch-adapter rerun.
    import json

    with open(os.path.join(ROOT, "benchmarks", "results", "gpu-h100-80gb-hbm3-2026-11-27",
                           "torch-adapter", "interop-torch.json")) as f:
        rows = {r["library"]: r for r in json.load(f)["rows"]
                if r["path"] == "kernarg path for the type"}
    readme = _readme()
    for label, shown in (("torch.Tensor", "DLPack C exchange API (torch 2.10+)"),
                         (_bench_interop.TORCH_ADAPTER, "adapter, plain tensor (torch < 2.10)"),
                         ("torch.Tensor subclass, adapter (no C exchange API)",
                          "adapter, tensor subclass")):
        row = rows[label]
        ratios = row["protocol_over_kernarg"]
        line = (f"| {shown} | {row['kernarg_ns']:.0f} (typed: {row['typed_ns']:.0f}) | "
                f"{row['__cuda_array_interface___ns']:.0f} ns | {row['__dlpack___ns']:.0f} ns | "
                f"{ratios['__cuda_array_interface__']:.1f}x, {ratios['__dlpack__']:.1f}x |")
        assert line in readme


def test_readme_tables_render_gpu_results(tmp_path, capsys):
    # The same script turns the GPU session's bench-gpu.json into the README's launch tables.
    import json

    module = _script("readme_tables")
    rows = [{"nargs": 16, "kernarg.launch_ns": 2300.0, "kernarg prepared_ns": 2150.0,
             "cuda.core launch_ns": 6100.0, "cpp_floor_ns": 2000.0, "cpp_floor_min_ns": 1900.0,
             "prepared_over_floor": 1.075, "launch_over_floor": 1.15,
             "cuda_core_over_kernarg": 2.65}]
    interop = [{"library": "torch.Tensor", "path": "kernarg path for the type",
                "kernarg_ns": 40.0, "__dlpack___ns": 900.0,
                "protocol_over_kernarg": {"__dlpack__": 22.5}},
               {"library": "torch.Tensor", "path": "generic DLPack", "kernarg_ns": 1100.0,
                "__dlpack___ns": 900.0, "adds_over_protocol": 0.22}]
    results = tmp_path / "bench-gpu.json"
    results.write_text(json.dumps({"launch": {"device": "stand-in GPU", "rows": rows,
                                              "launch_extras_ns": {"cuCtxGetCurrent": 9.6}},
                                   "interop_gpu": {"rows": interop}}))
    assert module.main(["readme_tables", str(results)]) == 0
    out = capsys.readouterr().out
    assert "Launch latency on stand-in GPU" in out
    assert "| 16 | 2300 ns | 2150 ns | 6100 ns | 2000 ns | 1.07x | 1.15x | 2.65x |" in out
    assert "cuCtxGetCurrent 10 ns" in out
    assert "protocol / kernarg 22.5x" in out and "kernarg adds 22%" in out
    assert "prepared / C++ floor" in out           # recorded before the in-process floor
    # With the in-process floor, ratios are to it, and cuda.core's overhead is shown as well.
    rows[0].update({"C loop_ns": 1900.0, "cuda_core_overhead_over_kernarg": 10.5})
    results.write_text(json.dumps({"launch": {"device": "stand-in GPU", "rows": rows}}))
    assert module.main(["readme_tables", str(results)]) == 0
    out = capsys.readouterr().out
    assert "prepared / C loop" in out and "above C loop" in out
    assert ("| 16 | 2300 ns | 2150 ns | 6100 ns | 1900 ns | 2000 ns | 1.07x | 1.15x | 2.65x "
            "| 10.50x |") in out
    # kernarg.launch in cuda.core's call form, one kernel and two in turn: their columns, and
    # cuda.core's time over each.
    from kernarg._bench_launch import CORE_IN_TURN, DROP_IN, DROP_IN_IN_TURN

    rows[0].update({f"{DROP_IN}_ns": 2400.0, f"{CORE_IN_TURN}_ns": 6300.0,
                    f"{DROP_IN_IN_TURN}_ns": 2500.0, "cuda_core_over_drop_in": 2.54,
                    "cuda_core_overhead_over_drop_in": 8.4,
                    "cuda_core_over_drop_in_in_turn": 2.52})
    results.write_text(json.dumps({"launch": {"device": "stand-in GPU", "rows": rows}}))
    assert module.main(["readme_tables", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"| C loop | {DROP_IN} | {CORE_IN_TURN} | {DROP_IN_IN_TURN} | C++ floor" in out
    assert f"cuda.core / {DROP_IN}, above C loop | cuda.core / {DROP_IN_IN_TURN} |" in out
    assert ("| 16 | 2300 ns | 2150 ns | 6100 ns | 1900 ns | 2400 ns | 6300 ns | 2500 ns "
            "| 2000 ns | 1.07x | 1.15x | 2.65x | 10.50x | 2.54x | 8.40x | 2.52x |") in out


def test_cuda_bindings_packer_contender_packs_the_typed_cases(capsys):
    """The packing benchmark's cuda.bindings contender is given every typed case's parameters
    as cuda.bindings documents them (ctypes types; pointers as CUdeviceptr with type None), and
    accepts them; its rows are timed next to Signature.pack."""
    import ctypes

    from cuda.bindings import driver

    packer = _bench.bindings_packer()
    cases = _bench.build_cases()
    for _, decl, args in _bench._typed_cases(cases):
        values, types = _bench.bindings_kernel_params(decl, args)
        assert len(values) == len(types) == len(args)
        for value, ctype, arg in zip(values, types, args, strict=True):
            if ctype is None:
                assert isinstance(value, driver.CUdeviceptr) and int(value) == int(arg.handle)
            else:
                assert ctype in (ctypes.c_float, ctypes.c_int, ctypes.c_longlong)
                assert value is arg
        packer((values, types))
    with pytest.raises(KeyError):       # a type the benchmark has no mapping for
        _bench.bindings_kernel_params("double x", (1.0,))
    rows = _bench._bindings_rows(cases, 1, 0.001, sys.stdout)
    assert [r["case"] for r in rows] == [c[0] for c in _bench._typed_cases(cases)]
    assert all(_timed(r["typed_ns"]) and _timed(r["cuda_bindings_ns"]) for r in rows)


def test_launch_ratios_are_taken_round_by_round_against_the_in_process_floor():
    from kernarg import _bench_launch

    floor = _bench_launch.FLOOR
    times = {floor: [100.0, 200.0, 100.0], "kernarg.launch": [110.0, 240.0, 130.0],
             "cuda.core launch": [150.0, 260.0, 160.0]}
    # Per round 1.1, 1.2, 1.3: the median of the ratios, not the ratio of the medians.
    assert _bench_launch._ratio(times, "kernarg.launch", floor) == 1.2
    assert _bench_launch._ratio(times, "missing", floor) is None
    # Above the floor: 50/10, 60/40, 60/30 -> 5, 1.5, 2.
    assert _bench_launch._overhead_ratio(times, "cuda.core launch", "kernarg.launch") == 2.0
    times["kernarg.launch"][1] = 190.0          # below the floor in one round: no meaning
    assert _bench_launch._overhead_ratio(times, "cuda.core launch", "kernarg.launch") is None


def test_launch_run_records_each_rounds_median(monkeypatch):
    # The recorded rows keep every round's median per contender, beside the medians and the
    # ratios drawn from them, so that a recorded run can be read again with other statistics.
    import io

    from kernarg import _bench_launch

    class StandIn:          # contenders that are Python callables: no driver, no GPU
        stream = 0

        def __init__(self, file):
            self.sync = lambda: None

        def contenders(self, n):
            return {_bench_launch.FLOOR: lambda: None, "kernarg.launch": lambda: None,
                    "kernarg prepared": lambda: None}

    monkeypatch.setattr(_bench_launch, "Setup", StandIn)
    monkeypatch.setattr(_bench_launch, "NARGS", (1, 4))
    monkeypatch.setattr(_bench_launch, "_cpp_floor", lambda n, bursts, file: None)
    monkeypatch.setattr(_bench_launch, "_device_name", lambda: "stand-in")
    log = io.StringIO()
    result = _bench_launch.run(rounds=3, bursts=2, file=log)
    assert [row["nargs"] for row in result["rows"]] == [1, 4]
    for row in result["rows"]:
        assert set(row["rounds"]) == {_bench_launch.FLOOR, "kernarg.launch", "kernarg prepared"}
        for name, values in row["rounds"].items():
            assert len(values) == 3 and all(v >= 0 for v in values)
            # Recorded to 0.1 ns: a median of 24.45 may be kept as 24.4, off by 0.05 and a
            # rounding error of the float, so the tolerance is a little over half a step.
            assert row[f"{name}_ns"] == pytest.approx(sorted(values)[1], abs=0.0501)
        assert "prepared_over_floor" in row
    # Not a contender of the tables, and not printed with the row.
    assert _bench_launch.contender_names(result["rows"]) == [
        _bench_launch.FLOOR, "kernarg.launch", "kernarg prepared"]
    assert "rounds" not in log.getvalue()


def test_numpy_row_stack_is_restored_only_where_numpy_removed_it(monkeypatch):
    # numba-cuda's compiler needs numpy.row_stack, which numpy 2.5 removed.
    import numpy as np

    from kernarg import _bench_launch

    monkeypatch.setattr(np, "row_stack", lambda tup: "numpy's own", raising=False)
    assert _bench_launch._restore_numpy_row_stack() is False
    assert np.row_stack(()) == "numpy's own"          # an existing one is left alone
    monkeypatch.delattr(np, "row_stack")
    assert _bench_launch._restore_numpy_row_stack() is True
    assert np.row_stack is np.vstack


def test_a_whole_burst_contender_is_called_once_per_burst():
    from kernarg import _bench_launch

    calls = []
    syncs = []
    one = _bench_launch._time_bursts(lambda: calls.append(1), 3, lambda: syncs.append(1))
    assert len(calls) == 3 * _bench_launch.BURST and len(one) == 3 and len(syncs) == 3
    calls.clear()
    whole = _bench_launch.WholeBurst(lambda: calls.append(1))
    assert len(_bench_launch._time_bursts(whole, 4, lambda: None)) == 4
    assert len(calls) == 4
    # A contender making two launches a call (two kernels in turn) is called half as often.
    calls.clear()
    twice = _bench_launch._launches(lambda: calls.append(1), 2)
    assert len(_bench_launch._time_bursts(twice, 3, lambda: None)) == 3
    assert len(calls) == 3 * _bench_launch.BURST // 2


def test_launch_table_prints_cuda_cores_time_over_its_call_form():
    import io

    from kernarg import _bench_launch

    row = {"nargs": 16, "cuda_core_over_drop_in": 1.71, "cuda_core_overhead_over_drop_in": 2.05,
           "cuda_core_over_drop_in_in_turn": 1.82, f"{_bench_launch.DROP_IN_IN_TURN}_ns": 435.0}
    out = io.StringIO()
    _bench_launch.print_table({"device": "stand-in", "rows": [row]}, file=out)
    text = out.getvalue()
    assert _bench_launch.DROP_IN_IN_TURN in text            # a column's whole name
    assert "  16               1.71         2.05               1.82" in text


def test_cupy_contender_wraps_its_stream_as_each_cupy_allows():
    # CuPy 14 deprecated ExternalStream(handle) for Stream.from_external(obj), where obj has
    # __cuda_stream__; the CuPy contender must launch on the benchmark's stream with either.
    from types import SimpleNamespace

    from kernarg import _bench_launch

    class NewStream:
        @staticmethod
        def from_external(obj):
            return ("from_external", obj.__cuda_stream__())

    def deprecated(handle):
        raise AssertionError("ExternalStream called where Stream.from_external exists")

    new = SimpleNamespace(cuda=SimpleNamespace(Stream=NewStream, ExternalStream=deprecated))
    assert _bench_launch._cupy_stream(new, 0x1234) == ("from_external", (0, 0x1234))
    old = SimpleNamespace(cuda=SimpleNamespace(Stream=type("Stream", (), {}),
                                               ExternalStream=lambda h: ("ExternalStream", h)))
    assert _bench_launch._cupy_stream(old, 0x1234) == ("ExternalStream", 0x1234)


@pytest.mark.parametrize("argv, rounds", [([], 7), (["--quick"], 3), (["--rounds", "13"], 13),
                                          (["--quick", "--rounds", "2"], 2)])
def test_bench_runs_the_launch_benchmark_for_the_rounds_asked(monkeypatch, argv, rounds):
    # `python -m kernarg bench --rounds N`: the GPU session asks for more rounds than the main
    # job's 7, to see how far the ratios move between rounds. (A driver is made to answer.)
    from cuda.bindings import driver

    from kernarg import __main__ as cli
    from kernarg import _bench_launch

    asked = []
    monkeypatch.setattr(driver, "cuInit", lambda flags: (driver.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(_bench_launch, "run", lambda rounds: asked.append(rounds) or {})
    monkeypatch.setattr(_bench_launch, "print_table", lambda result: None)
    monkeypatch.setattr(_bench_interop, "run", lambda repeat: {"rows": []})
    assert cli.main(["bench", "--gpu-only", *argv]) == 0
    assert asked == [rounds]


@pytest.mark.parametrize("value, message", [("0", "must be 1 or more, got 0"),
                                            ("x", "expected a whole number, got 'x'")])
def test_bench_refuses_rounds_that_are_not_a_positive_whole_number(capsys, value, message):
    from kernarg import __main__ as cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--rounds", value])
    assert exc.value.code == 2
    assert f"argument --rounds: {message}" in capsys.readouterr().err


def test_readme_tables_show_how_far_each_ratio_moves_between_rounds():
    module = _script("readme_tables")
    rounds = {"C loop": [100.0, 200.0, 100.0], "kernarg prepared": [110.0, 300.0, 120.0],
              "kernarg.launch": [130.0, 260.0, 140.0]}
    lines = module._spread([{"nargs": 16, "rounds": rounds}], "C loop")
    assert lines[3] == "| args | kernarg prepared / C loop | kernarg.launch / C loop |"
    assert lines[5] == "| 16 | 1.20x [1.10–1.50] | 1.30x [1.30–1.40] |"
    assert module._spread([{"nargs": 16}], "C loop") == []    # runs before rounds were kept


def test_bench_writes_the_launch_results_before_the_next_part_runs(monkeypatch, tmp_path):
    # A GPU session's time limit kills the bench without cleanup: what was measured before the
    # foreign-array part must already be in the JSON file when that part runs.
    import json

    from cuda.bindings import driver

    from kernarg import __main__ as cli
    from kernarg import _bench_launch

    path = tmp_path / "bench.json"
    seen = []
    monkeypatch.setattr(driver, "cuInit", lambda flags: (driver.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(_bench_launch, "run", lambda rounds: {"rows": [{"nargs": 0}]})
    monkeypatch.setattr(_bench_launch, "print_table", lambda result: None)
    monkeypatch.setattr(_bench_interop, "run", lambda repeat: seen.append(
        json.loads(path.read_text())) or {"rows": []})
    assert cli.main(["bench", "--gpu-only", "--json", str(path)]) == 0
    assert seen[0]["launch"] == {"rows": [{"nargs": 0}]} and "interop_gpu" not in seen[0]
    assert json.loads(path.read_text())["interop_gpu"] == {"rows": []}


def _pythons_table(names):
    """readme_tables.py --pythons of the committed packing runs ``pack-cpu-x86_64-<name>.json``,
    as lines."""
    import io
    from contextlib import redirect_stdout

    runs = [os.path.join(ROOT, "benchmarks", "results", f"pack-cpu-x86_64-{name}.json")
            for name in names]
    out = io.StringIO()
    with redirect_stdout(out):
        assert _script("readme_tables").main(["readme_tables", "--pythons", *runs]) == 0
    return out.getvalue().splitlines()


@pytest.mark.parametrize("names, first, second", [
    # The README's CPython 3.14 table: the four runs of 2026-12-02 on 3.14.10 and 3.11.7 ...
    (("py314-2026-12-02", "py311-2026-12-02", "py314-2026-12-02b", "py311-2026-12-02b"),
     "3.14.10", "3.11.7"),
    # ... and its CPython 3.15 table: the four of 2026-12-06 on 3.15.2 and 3.14.10.
    (("py315-2026-12-06", "py314-2026-12-06", "py315-2026-12-06b", "py314-2026-12-06b"),
     "3.15.2", "3.14.10"),
])
def test_readme_python_tables_match_the_committed_runs(names, first, second):
    # Each is readme_tables.py --pythons of its runs, in the order they ran.
    lines = _pythons_table(names)
    assert len(lines) == 2 + 7 and first in lines[0] and second in lines[0]
    readme = _readme()
    assert [line for line in lines if line not in readme] == []


def test_readme_free_threaded_table_matches_the_committed_runs():
    # The README's free-threaded table: readme_tables.py --pythons of the six alternating runs
    # on 3.14.4 and 3.14.4t, in the order they ran; the free-threaded runs name the build.
    lines = _pythons_table([name for i in (1, 2, 3)
                            for name in (f"py3144-2026-12-02-{i}", f"py3144t-2026-12-02-{i}")])
    assert len(lines) == 2 + 7
    assert lines[0].count("3.14.4t,") == 3 and lines[0].count("3.14.4,") == 3
    readme = _readme()
    assert [line for line in lines if line not in readme] == []


def test_machine_names_a_free_threaded_build(monkeypatch):
    import sysconfig

    from kernarg import _bench

    real = sysconfig.get_config_var
    for flag, suffix in ((1, "t"), (0, ""), (None, "")):
        monkeypatch.setattr(sysconfig, "get_config_var",
                            lambda name, flag=flag: flag if name == "Py_GIL_DISABLED"
                            else real(name))
        assert _bench.machine()["python"] == sys.version.split()[0] + suffix
