"""The benchmark code itself runs (tiny repeats, CPU stand-ins for GPU arrays), so the GPU
session that measures with it does not spend its time on Python errors. No timing is asserted."""
from kernarg import _bench, _bench_interop


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
                         "generic DLPack"}
    own = rows["kernarg path for the type"]
    assert set(own["protocol_over_kernarg"]) == {"__cuda_array_interface__", "__dlpack__"}
    assert own["__dlpack___ns"] > 0 and own["__cuda_array_interface___ns"] > 0
    assert "adds_over_protocol" in rows["generic DLPack"]
    assert "adds_over_protocol" in rows["generic CUDA Array Interface"]


def test_interop_gpu_benchmark_skips_what_kernarg_refuses(monkeypatch, capsys):
    import numpy as np

    monkeypatch.setattr(_bench_interop, "_arrays", lambda file: [("numpy", np.zeros(4))])
    assert _bench_interop.run(repeat=1, target=0.0005)["rows"] == []
    assert "kernarg cannot pack it" in capsys.readouterr().out
