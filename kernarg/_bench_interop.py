"""Foreign GPU arrays on a GPU (issue 3): what one argument costs kernarg, per library.

For each library present (torch, CuPy, numba-cuda, JAX, cuda.core) one small device array --
and a numpy array over each library's pinned host memory (cupyx, numba, torch) -- is
packed alone, ``kernarg.pack((obj,))`` minus ``kernarg.pack(())``, and compared, in the same
interleaved rounds, with the library's own protocol calls: reading ``__cuda_array_interface__``
(numpy's ``__array_interface__``), and ``__dlpack_device__()`` + ``__dlpack__(stream=...)``
(the capsule dropped, so its deleter runs, as kernarg's does). The Python calls the protocol
calls are made by are timed alone (a function that does nothing, called the same way) and
subtracted, as ``pack(())`` is from kernarg's side, so both sides are the work alone.
Two goals, from the issue:

- an adapter or the C exchange API -- the path kernarg takes for the library's own type -- beats
  the protocol path by >= 5x (``protocol_over_kernarg``);
- the generic paths, measured on wrappers that expose only one protocol of the same array, add
  <= 20% over the protocol call itself (``adds_over_protocol``).

The CUDA Array Interface wrapper comes twice. On Python 3.12+ the interpreter runs a property
whose getter is a Python function inline when Python code reads it, while kernarg, reading it
from C, enters the interpreter anew: through ``_CAIOnly`` the wrapper's own forwarding costs
kernarg more than the protocol call it is compared with (tools/probes/cai_cost.py: ~550
instructions on 3.12, none on 3.11). ``_CAIOnlyC`` forwards through a getter written in C
(``operator.attrgetter``), which costs both sides alike, so its row is what kernarg's generic
reading adds to a library's own call; the first row is what it adds to a Python class's.

Run on an H100 once (benchmarks/results/gpu-h100-80gb-hbm3-2026-11-23/bench-gpu.json); it
also runs against tools/fakecuda (no GPU arrays there but cuda.core's).
"""
from __future__ import annotations

import contextlib
import operator
import statistics
import sys

from kernarg._bench import _measure, _no_protocol


class _CAIOnly:
    """Exposes only the wrapped array's CUDA Array Interface (the generic CAI path)."""

    def __init__(self, array):
        self._array = array

    @property
    def __cuda_array_interface__(self):
        return self._array.__cuda_array_interface__


class _CAIOnlyC:
    """As _CAIOnly, forwarding through a getter written in C (see the module's docstring)."""

    def __init__(self, array):
        self._array = array

    __cuda_array_interface__ = property(operator.attrgetter("_array.__cuda_array_interface__"))


class _DLPackOnly:
    """Exposes only the wrapped array's DLPack methods (the generic DLPack path)."""

    def __init__(self, array):
        self._array = array

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)


GENERIC_CAI_C = "generic CUDA Array Interface, C-level wrapper"


def without_exchange_api(tensor):
    """``tensor`` as a subclass that hides torch's DLPack C exchange API, which kernarg then
    reads through its torch adapter. Every method call on a subclass goes through torch's
    ``__torch_function__`` in Python (~1.4 us a call on the development VM, against 35-110 ns
    on a plain tensor), so this is what a subclass costs, not what a plain tensor of torch
    before 2.10 does: for that, see :func:`torch_exchange_api_hidden`."""
    class NoExchange(type(tensor)):
        __dlpack_c_exchange_api__ = None

    return tensor.as_subclass(NoExchange)


_ABSENT = object()


@contextlib.contextmanager
def torch_exchange_api_hidden():
    """For the duration, ``torch.Tensor`` has no DLPack C exchange API, and kernarg forgets the
    types it has classified, so it reads plain tensors as it reads those of torch before 2.10:
    through its torch adapter. Restored (and forgotten again) on leaving."""
    import torch

    from kernarg._handler import _forget_types

    cls = torch.Tensor
    saved = cls.__dict__.get("__dlpack_c_exchange_api__", _ABSENT)
    cls.__dlpack_c_exchange_api__ = None
    _forget_types()
    try:
        yield
    finally:
        if saved is _ABSENT:
            del cls.__dlpack_c_exchange_api__
        else:
            cls.__dlpack_c_exchange_api__ = saved
        _forget_types()


TORCH_ADAPTER = "torch.Tensor, adapter (no C exchange API)"
# Rows measured inside a context: label -> the context's factory.
_CONTEXTS = {TORCH_ADAPTER: torch_exchange_api_hidden}


def _arrays(file) -> list[tuple[str, object]]:
    out = []
    try:
        import torch

        out.append(("torch.Tensor", torch.zeros(16, device="cuda")))
        out.append((TORCH_ADAPTER, torch.zeros(16, device="cuda")))
        out.append(("torch.Tensor subclass, adapter (no C exchange API)",
                    without_exchange_api(torch.zeros(16, device="cuda"))))
    except Exception as exc:
        print(f"torch skipped: {exc}", file=file)
    try:
        import torch

        # A CPU tensor in pinned memory, which a kernel can read and write: torch calls it
        # pinned only when asked (is_pinned()), which kernarg must, on every pack.
        out.append(("pinned torch.Tensor", torch.zeros(16).pin_memory()))
    except Exception as exc:
        print(f"pinned torch.Tensor skipped: {exc}", file=file)
    try:
        import cupy

        out.append(("cupy.ndarray", cupy.zeros(16, dtype=cupy.float32)))
    except Exception as exc:
        print(f"CuPy skipped: {exc}", file=file)
    try:
        import numpy as np
        from numba import cuda as ncuda

        out.append(("numba DeviceNDArray", ncuda.device_array(16, np.float32)))
    except Exception as exc:
        print(f"numba-cuda skipped: {exc}", file=file)
    try:
        import jax
        import jax.numpy as jnp

        x = jax.device_put(jnp.zeros(16, jnp.float32), jax.devices("gpu")[0])
        x.block_until_ready()
        out.append(("jax.Array", x))
    except Exception as exc:
        print(f"JAX skipped: {exc}", file=file)
    try:
        from kernarg._bench import cuda_core

        dev = cuda_core().Device(0)
        dev.set_current()
        # cuda.core 1.x requires the stream (keyword-only); older ones take it too.
        out.append(("cuda.core Buffer", dev.allocate(1024, stream=dev.default_stream)))
    except Exception as exc:
        print(f"cuda.core skipped: {exc}", file=file)
    return out + _pinned_numpy_arrays(file)


def _pinned_numpy_arrays(file) -> list[tuple[str, object]]:
    """numpy arrays over page-locked memory from each library's allocator (kernarg finds the
    allocation down .base; numpy's own protocol is __array_interface__)."""
    import numpy as np

    makers = {
        "numpy over cupyx.empty_pinned": lambda: __import__("cupyx").empty_pinned(16, np.float32),
        "numpy over numba pinned_array": lambda: __import__(
            "numba.cuda", fromlist=["cuda"]).pinned_array(16, np.float32),
        "numpy over a pinned torch tensor": lambda: __import__("torch").zeros(16).pin_memory()
        .numpy(),
    }
    out = []
    for label, make in makers.items():
        try:
            out.append((label, make()))
        except Exception as exc:
            print(f"{label} skipped: {exc}", file=file)
    return out


def _protocols(obj, stream: int) -> dict[str, object]:
    calls = {}
    try:
        if isinstance(obj.__cuda_array_interface__, dict):
            calls["__cuda_array_interface__"] = lambda o: o.__cuda_array_interface__
    except Exception:
        pass
    if isinstance(getattr(obj, "__array_interface__", None), dict):      # numpy's own
        calls["__array_interface__"] = lambda o: o.__array_interface__
    # The same fallbacks kernarg's DLPack consumer makes, in its order.
    for kwargs in ({"stream": stream, "max_version": (1, 1)}, {"stream": stream}, {}):
        try:
            obj.__dlpack_device__()
            obj.__dlpack__(**kwargs)
        except Exception:
            continue

        def dlpack(o, kwargs=kwargs):
            o.__dlpack_device__()
            return o.__dlpack__(**kwargs)

        calls["__dlpack__"] = dlpack
        break
    return calls


def _rows(kernarg, label: str, array, stream: int, repeat: int, target: float,
          file) -> list[dict]:
    """The rows of one array: the path kernarg takes for its type, then each generic path."""
    rows = []
    protocols = _protocols(array, stream)
    subjects = [("kernarg path for the type", array)]
    if "__cuda_array_interface__" in protocols:
        subjects.append(("generic CUDA Array Interface", _CAIOnly(array)))
        subjects.append((GENERIC_CAI_C, _CAIOnlyC(array)))
    if "__dlpack__" in protocols:
        subjects.append(("generic DLPack", _DLPackOnly(array)))
    for path, obj in subjects:
        try:
            kernarg.pack((obj,))
        except Exception as exc:
            print(f"[{label}, {path}] kernarg cannot pack it: {exc}", file=file)
            continue
        # The protocols as called on this very object: on a wrapper, its forwarding call is
        # part of both sides and cancels out.
        calls = _protocols(obj, stream)
        # pack1 and pack0 are called the same way (a lambda each), so that their difference
        # is the argument alone: kernarg.pack called directly, against a lambda for pack0,
        # came out ~20 ns below zero for a cheap argument (a cuda.core Buffer).
        contenders = [("pack1", lambda a, pack=kernarg.pack: pack(a)),
                      ("pack0", lambda a, pack=kernarg.pack: pack(()))]
        if obj is array:
            # Typed, as a kernel with a signature packs it (the element type read too):
            # `const void* p` takes any array, against the same signature given an int.
            typed = kernarg.Signature("const void* p").pack
            contenders += [("typed1", lambda a, pack=typed: pack(a)),
                           ("typed0", lambda a, pack=typed, zero=(0,): pack(zero))]
        contenders += [(name, (lambda a, fn=fn: fn(a[0]))) for name, fn in calls.items()]
        # ... and the protocol calls minus the Python calls they are made by: the same
        # two calls around a function that does nothing.
        contenders.append(("call", lambda a, fn=_no_protocol: fn(a[0])))
        rounds = _measure(contenders, (obj,), repeat, target)
        per_arg = [p1 - p0 for p1, p0 in zip(rounds["pack1"], rounds["pack0"], strict=True)]
        for name in calls:
            rounds[name] = [pr - c for pr, c in zip(rounds[name], rounds["call"],
                                                    strict=True)]
        row = {"library": label, "path": path, "kernarg_ns": statistics.median(per_arg),
               **{f"{name}_ns": statistics.median(rounds[name]) for name in calls},
               "call_overhead": statistics.median(rounds["call"])}     # ns, subtracted
        if obj is array:
            row["protocol_over_kernarg"] = {
                name: statistics.median(pr / k for pr, k in zip(rounds[name], per_arg,
                                                                strict=True))
                for name in calls}
            row["typed_ns"] = statistics.median(
                t1 - t0 for t1, t0 in zip(rounds["typed1"], rounds["typed0"], strict=True))
        else:
            (name,) = calls
            row["adds_over_protocol"] = statistics.median(
                (k - pr) / pr for pr, k in zip(rounds[name], per_arg, strict=True))
        rows.append(row)
        print(row, file=file)
    return rows


def run(repeat: int = 15, target: float = 0.02, file=None, arrays=None) -> dict:
    """``arrays``: (label, array) pairs to measure instead of the libraries' (_arrays)."""
    import kernarg

    file = file or sys.stdout
    stream = kernarg.resolve_stream(None)
    rows = []
    for label, array in (_arrays(file) if arrays is None else arrays):
        with _CONTEXTS.get(label, contextlib.nullcontext)():
            rows += _rows(kernarg, label, array, stream, repeat, target, file)
    return {"benchmark": "one foreign GPU array: ns per argument (medians over rounds)",
            "rows": rows}
