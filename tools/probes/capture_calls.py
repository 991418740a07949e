"""Which module and library calls a real driver refuses while a stream captures a CUDA graph,
in each capture mode, and whether the capture survives them (cuStreamEndCapture's result).
tools/fakecuda models the answers. Run on a GPU machine, also under CUDA_MODULE_LOADING=EAGER
and compute-sanitizer (the driver's lazy loading and the sanitizer change what a load does):

    python tools/probes/capture_calls.py
"""
import os
import sys

from cuda.bindings import driver as d

PTX = b""".version 8.0
.target sm_75
.address_size 64
.visible .entry noop() { ret; }
"""
M = d.CUstreamCaptureMode


def ok(result):
    err = result[0] if isinstance(result, tuple) else result
    assert err == d.CUresult.CUDA_SUCCESS, err
    return result[1] if isinstance(result, tuple) and len(result) == 2 else None


def name(result):
    return (result[0] if isinstance(result, tuple) else result).name


def loaded(kind, launch_first):
    """A module (or library) loaded before the capture; launched once if launch_first."""
    if kind == "module":
        mod = ok(d.cuModuleLoadData(PTX))
        fn = ok(d.cuModuleGetFunction(mod, b"noop"))
    else:
        mod = ok(d.cuLibraryLoadData(PTX, None, None, 0, None, None, 0))
        fn = ok(d.cuKernelGetFunction(ok(d.cuLibraryGetKernel(mod, b"noop"))))
    if launch_first:
        ok(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, None, 0))
        ok(d.cuCtxSynchronize())
    return mod


def case(label, mode, during):
    """Begin a capture in mode, launch one kernel into it, run during(), end the capture."""
    ready = loaded("module", True)
    fn = ok(d.cuModuleGetFunction(ready, b"noop"))
    stream = ok(d.cuStreamCreate(1))
    ok(d.cuStreamBeginCapture(stream, mode))
    ok(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, None, 0))
    calls = during()
    err, graph = d.cuStreamEndCapture(stream)
    print(f"{label:58s} {mode.name[23:]:12s} {calls:60s} EndCapture: {err.name}")
    if graph is not None and err == d.CUresult.CUDA_SUCCESS:
        ok(d.cuGraphDestroy(graph))
    ok(d.cuStreamDestroy(stream))
    ok(d.cuModuleUnload(ready))


def main():
    ok(d.cuInit(0))
    dev = ok(d.cuDeviceGet(0))
    ctx = ok(d.cuDevicePrimaryCtxRetain(dev))
    ok(d.cuCtxSetCurrent(ctx))
    print("CUDA_MODULE_LOADING =", os.environ.get("CUDA_MODULE_LOADING", "<unset>"),
          "; driver", ok(d.cuDriverGetVersion()),
          "".join(f"; {a}" for a in sys.argv[1:]))
    for mode in (M.CU_STREAM_CAPTURE_MODE_GLOBAL, M.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                 M.CU_STREAM_CAPTURE_MODE_RELAXED):
        case("cuMemAlloc (a prohibited call: the control)", mode,
             lambda: name(d.cuMemAlloc(256)))

        case("cuModuleLoadData (+GetFunction, Unload) during", mode,
             lambda: load_and_unload(d.cuModuleLoadData, "cuModuleLoadData",
                                     d.cuModuleGetFunction, "GetFunction", d.cuModuleUnload))
        case("cuLibraryLoadData (+GetKernel, Unload) during", mode,
             lambda: load_and_unload(lambda ptx: d.cuLibraryLoadData(ptx, None, None, 0, None,
                                                                     None, 0),
                                     "cuLibraryLoadData", d.cuLibraryGetKernel, "GetKernel",
                                     d.cuLibraryUnload))

        for launch_first in (True, False):
            how = "launched" if launch_first else "never launched"
            unload_case(f"cuModuleUnload of one loaded before ({how})", mode,
                        loaded("module", launch_first), "cuModuleUnload", d.cuModuleUnload)
        unload_case("cuModuleGetFunction, first of a module loaded before", mode,
                    loaded("module", False), "cuModuleGetFunction",
                    lambda m: d.cuModuleGetFunction(m, b"noop"))
        unload_case("cuLibraryUnload of one loaded before (launched)", mode,
                    loaded("library", True), "cuLibraryUnload", d.cuLibraryUnload)
        unload_case("cuModuleUnload in relaxed mode (kernarg's _unload)", mode,
                    loaded("module", True), "", relaxed_unload)


def load_and_unload(load, load_name, get, get_name, unload):
    """Load PTX, then (where it loaded) look up its kernel and unload it: what each did."""
    r = load(PTX)
    out = f"{load_name} {name(r)}"
    if name(r) == "CUDA_SUCCESS":
        out += f", {get_name} {name(get(r[1], b'noop'))}"
        out += f", Unload {name(unload(r[1]))}"
    return out


def relaxed_unload(mod):
    # kernarg's _unload: relax the thread's mode for the unload alone, then give it back.
    old = d.cuThreadExchangeStreamCaptureMode(M.CU_STREAM_CAPTURE_MODE_RELAXED)
    r = d.cuModuleUnload(mod)
    back = d.cuThreadExchangeStreamCaptureMode(old[1])
    return old[0], f"exchange {name(old)}, cuModuleUnload {name(r)}, back {name(back)}"


def unload_case(label, mode, handle, call, during):
    """case() with during(handle) as what runs in the capture. The GetFunction row's module is
    unloaded after; a module whose unload was refused stays loaded until the process ends."""
    def run():
        r = during(handle)
        return r[1] if call == "" else f"{call} {name(r)}"
    case(label, mode, run)
    if call == "cuModuleGetFunction":
        ok(d.cuModuleUnload(handle))


main()
