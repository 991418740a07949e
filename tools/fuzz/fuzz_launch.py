"""Coverage-guided fuzzing of kernarg's launch front end against tools/fakecuda (the stand-in
driver: no kernel runs, but it checks every launch's parameter block against the kernel's PTX
layout and the configuration against the device's limits, and refuses unknown handles).
``run.sh launch`` builds the fake driver and runs this with it.

Each input gives a grid, a block, shared memory, a cluster, the cooperative/PDL/priority
flags, the hint, mode and event attributes (cluster scheduling, a preferred cluster, the memory
synchronisation domain and its map, NVLink scheduling, the cluster size and shared memory
modes, the carveout, an access policy window, launch completion and
programmatic events: events of this process's or refused values), a stream (None, the
default-stream handles, a stream of this process, or objects of the stream protocols), the
call form (``launch``, ``kernel[...]``, ``prepare``, ``kernarg.launch``, or a kernel node:
``graph_node`` into a graph of its own, device-updatable or not, then ``set_args`` or
``set_exec_args`` with a second set of arguments and maybe a new grid, block or shared memory,
and ``set_enabled``; or a launch captured into a graph, whose node ``Kernel.nodes_in`` must
find with the launch's configuration, then given the second set in an instantiated graph)
and arguments of every kind (fuzz_pack's). The launch must either reach
the driver with a block the fake driver accepts, or be refused with TypeError/ValueError/
OverflowError/RuntimeError/BufferError (kernarg.CudaError is a RuntimeError) with a message.
Some inputs launch while a context of the process's own is current, over the kernels' (device
0's primary); launched or refused, the thread's current context must be the one it had.
"""
import os
import sys

import atheris

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

with atheris.instrument_imports(include=["kernarg"]):
    import kernarg
    from kernarg._nvrtc import compile_program

import fuzz_pack  # noqa: E402

ALLOWED = fuzz_pack.ALLOWED
SOURCE = r"""
struct S { int a; float b; char c; };
extern "C" __global__ void k(const float* p, int n, double x, float4 v, S s, unsigned char u)
{}
"""
# Typed from the source, and from the PTX alone (ints of either sign, opaque structs).
KERNELS = [kernarg.Kernel.from_source(SOURCE, "k"),
           kernarg.Kernel.from_ptx(compile_program(SOURCE, arch="compute_90").ptx, "k")]


class StreamProtocol:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


class TorchStyle:
    def __init__(self, handle):
        self.cuda_stream = handle


def _stream_handle():
    from cuda.bindings import driver

    err, stream = driver.cuStreamCreate(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(stream)


def _own_context():
    """A context of this process's own on device 0 (cuda-bindings 13's cuCtxCreate takes
    creation parameters first, 12's not), and a stream of it; the primary is current after."""
    from cuda.bindings import driver

    try:
        err, ctx = driver.cuCtxCreate(None, 0, 0)
    except TypeError:
        err, ctx = driver.cuCtxCreate(0, 0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    stream = _stream_handle()
    err, _ = driver.cuCtxPopCurrent()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return ctx, stream


def _current():
    from cuda.bindings import driver

    err, ctx = driver.cuCtxGetCurrent()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(ctx)


def _event_handle():
    from cuda.bindings import driver

    err, event = driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(event)


OWN_STREAM = _stream_handle()
CAPTURE_STREAM = _stream_handle()              # captures only (fuzzed streams may be OWN_STREAM)
EVENTS = [_event_handle(), _event_handle()]
OWN_CONTEXT, OTHER_STREAM = _own_context()     # a stream no kernel here can launch on
HANDLES = [1, 2, OWN_STREAM, OTHER_STREAM]


def _stream(fdp):
    choice = fdp.ConsumeIntInRange(0, 6)
    handle = HANDLES[fdp.ConsumeIntInRange(0, len(HANDLES) - 1)]
    if choice == 0:
        return None
    if choice == 1:
        return handle
    if choice == 2:
        return StreamProtocol((0, handle))
    if choice == 3:     # a malformed protocol answer: refused before any driver call
        return StreamProtocol([(1, handle), (0,), (0, -1), (0, 2**64), None, (0, "1")][
            fdp.ConsumeIntInRange(0, 5)])
    if choice == 4:
        return TorchStyle(handle)
    if choice == 5:
        return fdp.ConsumeIntInRange(-2, 0)    # 0 and negative handles: refused
    # Not an int: any int in range is a handle to kernarg, and a made-up one is the caller's
    # error, which the driver may not survive (nor does the fake one).
    return [None, fdp.ConsumeFloat(), "s", b"b", object(), (1, 2), [handle]][
        fdp.ConsumeIntInRange(0, 6)]


def _dim(fdp):
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice <= 2:
        return fdp.ConsumeIntInRange(1, 1024)
    if choice == 3:
        return tuple(fdp.ConsumeIntInRange(-1, 70000) for _ in range(fdp.ConsumeIntInRange(0, 4)))
    if choice == 4:
        return fuzz_pack._int(fdp)
    return fuzz_pack._hostile(fdp)


def _event(fdp):
    # An event of this process's, or a value refused before any driver call (a made-up
    # handle is the caller's error, which the driver may not survive, nor the fake one).
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice <= 1:
        return EVENTS[choice]
    if choice == 2:
        return (EVENTS[0], fdp.ConsumeBool())
    return [0, -1, 2**64, "e", 1.5, (EVENTS[0], 1), (EVENTS[0],), None][
        fdp.ConsumeIntInRange(0, 7)]


def _attributes(fdp):
    """The hint, mode and event attributes, each given or not, valid or not."""
    out = {}
    if fdp.ConsumeBool():
        return out
    if fdp.ConsumeBool():
        out["cluster_scheduling"] = ["default", "spread", "load_balancing", "x", 1, None][
            fdp.ConsumeIntInRange(0, 5)]
    if fdp.ConsumeBool():
        out["preferred_cluster"] = [fdp.ConsumeIntInRange(0, 16), _dim(fdp)][
            fdp.ConsumeIntInRange(0, 1)]
    if fdp.ConsumeBool():
        out["mem_sync_domain"] = ["default", "remote", "far", True][fdp.ConsumeIntInRange(0, 3)]
    if fdp.ConsumeBool():
        # Domain ids past the device's 4 (fakecuda's, at compute capability 9.0) and past a
        # C unsigned char, as a pair, a dict, or neither.
        pair = [fdp.ConsumeIntInRange(-1, 300), fdp.ConsumeIntInRange(0, 5)]
        if fdp.ConsumeBool():
            pair[fdp.ConsumeIntInRange(0, 1)] = fuzz_pack._hostile(fdp)
        out["mem_sync_domain_map"] = [tuple(pair), {"default": pair[0], "remote": pair[1]},
                                      pair[:1], pair[0]][fdp.ConsumeIntInRange(0, 3)]
    if fdp.ConsumeBool():
        out["nvlink_util_centric"] = [True, False, 1, "yes", fuzz_pack._hostile(fdp)][
            fdp.ConsumeIntInRange(0, 4)]
    if fdp.ConsumeBool():
        out["cluster_size_mode"] = ["default", "require_portable", "allow_non_portable", "x",
                                    2][fdp.ConsumeIntInRange(0, 4)]
    if fdp.ConsumeBool():
        out["shmem_mode"] = ["default", "require_portable", "allow_non_portable",
                             "allow_oversized", "prefer_oversized", "oversized", 3][
            fdp.ConsumeIntInRange(0, 6)]
    if fdp.ConsumeBool():
        out["shmem_carveout"] = [fdp.ConsumeIntInRange(-5, 105), fuzz_pack._int(fdp),
                                 fuzz_pack._hostile(fdp)][fdp.ConsumeIntInRange(0, 2)]
    if fdp.ConsumeBool():
        window = [fdp.ConsumeIntInRange(0, 2**64 - 1), fdp.ConsumeIntInRange(-1, 2**28),
                  fdp.ConsumeFloat(), ["normal", "streaming", "persisting", "x"][
                      fdp.ConsumeIntInRange(0, 3)],
                  ["normal", "streaming", "persisting", 0][fdp.ConsumeIntInRange(0, 3)]]
        if fdp.ConsumeBool():
            window[0] = fuzz_pack.MAKERS[fdp.ConsumeIntInRange(0, len(fuzz_pack.MAKERS) - 1)](fdp)
        window = window[:fdp.ConsumeIntInRange(0, 6)]
        names = ("base", "num_bytes", "hit_ratio", "hit", "miss")[:len(window)]
        out["access_policy"] = (tuple(window) if fdp.ConsumeBool() else
                                dict(zip(names, window, strict=True)))
    if fdp.ConsumeBool():
        out["launch_completion_event"] = _event(fdp)
    if fdp.ConsumeBool():
        out["programmatic_event"] = _event(fdp)
    return out


def _args(fdp, kernel):
    if fdp.ConsumeBool():      # arguments that fit the signature, mostly
        typed = kernel is KERNELS[0]    # the PTX's float4 and S are opaque bytes
        args = [fdp.ConsumeIntInRange(0, 2**64 - 1), fdp.ConsumeIntInRange(-2**31, 2**31 - 1),
                fdp.ConsumeFloat(), (1.0, 2.0, 3.0, 4.0) if typed else bytes(16),
                (1, 2.5, 3) if typed else bytes(12), fdp.ConsumeIntInRange(0, 255)]
        for _ in range(max(0, fdp.ConsumeIntInRange(-4, 2))):
            i = fdp.ConsumeIntInRange(0, len(args) - 1)
            args[i] = fuzz_pack.MAKERS[fdp.ConsumeIntInRange(0, len(fuzz_pack.MAKERS) - 1)](fdp)
        return tuple(args[:fdp.ConsumeIntInRange(0, len(args))] if fdp.ConsumeIntInRange(0, 7)
                     == 0 else args)
    return tuple(fuzz_pack.MAKERS[fdp.ConsumeIntInRange(0, len(fuzz_pack.MAKERS) - 1)](fdp)
                 for _ in range(fdp.ConsumeIntInRange(0, 7)))


def _known_producer_streams(args):
    """Each CUDA Array Interface stream kernarg would take as a handle (an int in 1..2**64-1),
    made one of this process's: the launch waits on it, and a made-up handle is the caller's
    error, which the driver may not survive (nor does the fake one: a SEGV in cuStreamGetCtx,
    found by this fuzzer). Refused values (0, negative, too large, not ints) stay as made."""
    for a in args:
        if isinstance(a, fuzz_pack.producers.CAIObject):
            cai = a._interface
        elif isinstance(a, fuzz_pack.producers.InstanceCAI):   # the interface on the instance
            cai = a.__dict__.get("__cuda_array_interface__")
        else:
            continue
        if isinstance(cai, dict):
            stream = cai.get("stream")
            if type(stream) is int and 1 <= stream < 2**64:
                cai["stream"] = HANDLES[stream % len(HANDLES)]
    return args


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    grid, block = _dim(fdp), _dim(fdp)
    shmem = [0, 0, fdp.ConsumeIntInRange(0, 300000), fuzz_pack._int(fdp)][
        fdp.ConsumeIntInRange(0, 3)]
    cluster = None if fdp.ConsumeIntInRange(0, 3) else \
        [fdp.ConsumeIntInRange(1, 8), (fdp.ConsumeIntInRange(1, 4), 2), _dim(fdp)][
            fdp.ConsumeIntInRange(0, 2)]
    cooperative, pdl = fdp.ConsumeBool(), fdp.ConsumeBool()
    priority = None if fdp.ConsumeBool() else fdp.ConsumeIntInRange(-10, 10)
    attributes = _attributes(fdp)
    stream = _stream(fdp)
    form = fdp.ConsumeIntInRange(0, 6)
    kernel = KERNELS[fdp.ConsumeIntInRange(0, 1)]
    args = _known_producer_streams(_args(fdp, kernel))
    dlpacks = [a for a in args if isinstance(a, fuzz_pack.producers.DLPackProducer)]
    over_own = fdp.ConsumeBool()
    if over_own:
        from cuda.bindings import driver

        driver.cuCtxPushCurrent(OWN_CONTEXT)
    before = _current()
    try:
        if form == 0:
            kernel.launch(grid, block, *args, stream=stream, shmem=shmem, cluster=cluster,
                          cooperative=cooperative, pdl=pdl, priority=priority, **attributes)
        elif form == 1:
            kernel[grid, block, stream, shmem](*args)
        elif form == 2:
            kernel.prepare(grid, block, stream=stream, shmem=shmem, cluster=cluster,
                           cooperative=cooperative, pdl=pdl, priority=priority,
                           **attributes)(*args)
        elif form == 3:
            config = kernarg.LaunchConfig(grid, block, shmem=shmem, cluster=cluster,
                                          cooperative=cooperative, pdl=pdl, priority=priority,
                                          **attributes)
            kernarg.launch(stream, config, kernel, *args)
        elif form == 6:
            more = _known_producer_streams(_args(fdp, kernel))
            dlpacks += [a for a in more if isinstance(a, fuzz_pack.producers.DLPackProducer)]
            _captured(kernel, grid, block, shmem, args, more,
                      dict(attributes, cluster=cluster, cooperative=cooperative, pdl=pdl,
                           priority=priority))
        else:
            more = _known_producer_streams(_args(fdp, kernel))
            dlpacks += [a for a in more if isinstance(a, fuzz_pack.producers.DLPackProducer)]
            # A node takes the attributes but the events (and pdl, with no node before it).
            node_attributes = {key: value for key, value in attributes.items()
                               if not key.endswith("_event")}
            node_attributes.update(cluster=cluster, cooperative=cooperative, priority=priority)
            if fdp.ConsumeBool():
                node_attributes["device_updatable"] = [False, True, fuzz_pack._hostile(fdp)][
                    fdp.ConsumeIntInRange(0, 2)]
            reshape = {}
            for key in ("grid", "block", "shmem"):
                if fdp.ConsumeIntInRange(0, 3) == 0:
                    reshape[key] = (_dim(fdp) if key != "shmem" else
                                    [fdp.ConsumeIntInRange(0, 300000), fuzz_pack._int(fdp)][
                                        fdp.ConsumeIntInRange(0, 1)])
            enabled = None if fdp.ConsumeBool() else \
                [False, True, fuzz_pack._hostile(fdp)][fdp.ConsumeIntInRange(0, 2)]
            _graph_node(kernel, grid, block, shmem, stream, args, more, form == 5,
                        node_attributes, fdp.ConsumeIntInRange(0, 4), reshape, enabled)
    except ALLOWED as exc:
        assert str(exc), repr(exc)
    assert _current() == before, (hex(_current()), hex(before))
    if over_own:
        driver.cuCtxPopCurrent()
    for p in dlpacks:
        # A graph releases what it kept from the driver's thread, through a pending call: its
        # DLPack tensors may still be on their way back when the input ends.
        if form < 4:
            assert p.deleted == p.exported, (p.deleted, p.exported)
        else:
            assert p.deleted <= p.exported, (p.deleted, p.exported)


def _captured(kernel, grid, block, shmem, args, more, attributes):
    """A launch captured on a stream of this process's own; where it was captured, its graph's
    one node of ``kernel`` (Kernel.nodes_in) has the launch's grid, block, shared memory,
    cluster and cooperative flag, and takes ``more`` in a graph instantiated from it.
    Everything is destroyed again, whatever was refused."""
    from cuda.bindings import driver

    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    err, = driver.cuStreamBeginCapture(CAPTURE_STREAM, mode)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    graph = exe = None
    try:
        try:
            kernel.launch(grid, block, *args, stream=CAPTURE_STREAM, shmem=shmem, **attributes)
        finally:
            err, graph = driver.cuStreamEndCapture(CAPTURE_STREAM)
            if err != driver.CUresult.CUDA_SUCCESS:
                graph = None
        assert graph is not None, "a launch kernarg let through invalidated the capture"
        (node,) = kernel.nodes_in(graph)
        given = kernarg.LaunchConfig(grid, block, shmem=shmem, cluster=attributes["cluster"],
                                     cooperative=attributes["cooperative"])
        cluster = given.cluster if given.cluster not in (None, (1, 1, 1)) else None
        assert (node.config.grid, node.config.block, node.config.shmem, node.config.cluster,
                node.config.cooperative) == (given.grid, given.block, given.shmem, cluster,
                                             given.cooperative), (node.config, given)
        err, exe = driver.cuGraphInstantiate(graph, 0)
        assert err == driver.CUresult.CUDA_SUCCESS, err
        node.set_exec_args(exe, *more, stream=CAPTURE_STREAM)
    finally:
        if exe is not None:
            driver.cuGraphExecDestroy(exe)
        if graph is not None:
            driver.cuGraphDestroy(graph)


def _graph_node(kernel, grid, block, shmem, stream, args, more, in_exec, attributes, edges,
                reshape, enabled):
    """A kernel node of a graph of its own, given ``more`` (and the grid, block or shared
    memory in ``reshape``) afterwards: in the graph, or in a graph instantiated from it, which
    ``enabled`` (None: untouched) then enables or disables it in; everything is destroyed
    again, whatever was refused. ``edges``: 0, the node alone; else after a first node of the
    same launch, by an ordinary edge (1), a launch-order one (2), both (3, refused), or a
    programmatic one (4)."""
    from cuda.bindings import driver

    err, graph = driver.cuGraphCreate(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    exe = None
    try:
        if edges:
            first = kernel.graph_node(graph, grid, block, *args, shmem=shmem, stream=stream)
            attributes = dict(attributes)
            if edges in (1, 3, 4):
                attributes["after"] = [first]
            if edges in (2, 3):
                attributes["after_launch"] = first
            if edges == 4:
                attributes["pdl"] = True
        node = kernel.graph_node(graph, grid, block, *args, shmem=shmem, stream=stream,
                                 **attributes)
        assert node.graph == int(graph) and node.handle
        assert node.device_updatable == (attributes.get("device_updatable") is True)
        assert (node.device_node is None) != node.device_updatable, node.device_node
        if in_exec:
            err, exe = driver.cuGraphInstantiate(graph, 0)
            assert err == driver.CUresult.CUDA_SUCCESS, err
            config = node.config
            node.set_exec_args(exe, *more, stream=stream, **reshape)
            assert node.config is config        # an exec's grid is not the node's
            if enabled is not None:
                node.set_enabled(exe, enabled)
                assert node.is_enabled(exe) == enabled
        else:
            node.set_args(*more, stream=stream, **reshape)
            given = kernarg.LaunchConfig(reshape.get("grid", 1), reshape.get("block", 1),
                                         shmem=reshape.get("shmem", 0))
            assert all(getattr(node.config, key) == getattr(given, key) for key in reshape)
    finally:
        if exe is not None:
            driver.cuGraphExecDestroy(exe)
        driver.cuGraphDestroy(graph)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
