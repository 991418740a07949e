"""Packing from many threads at once. kernarg's state is shared between threads (the per-type
cache, the block pools, the classification table) and guarded by the GIL, or on a free-threaded
CPython by kernarg's critical section (_guard.h), which is suspended where the GIL would be
handed over. The interpreter hands the GIL to another thread whenever kernarg calls back into
Python: a CAI property, a ``__dlpack__`` method, a registered adapter, an ``__index__``. These
tests force such switches (a 1 µs switch interval, every argument list holding Python
callbacks) while other threads pack, drop the type cache and create new types, and check every
block byte for byte against the reference packer, every producer stream, and every DLPack
deleter run exactly once. On a free-threaded build (CI's free-threaded job) the threads run
at once, with the GIL off."""
import contextlib
import ctypes
import random
import struct
import sys
import threading

import numpy as np
import pytest

import kernarg
from kernarg import _handler

import reference
from producers import CAIObject, DLPackProducer, cai, double_deletes

THREADS = 6
ROUNDS = 250


class Index:
    """An int-like whose conversion runs Python code (a switch point inside the pack)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


class Handle:
    """A pointer-like type packed through a registered Python function, which logs the thread
    it runs on."""

    log = []

    def __init__(self, address):
        self.address = address

    def address_of(self):
        Handle.log.append(("call", threading.get_ident()))
        return self.address


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double)]


# numpy structured scalars of three alignments (1, 4, 8): threads picking among them rewrite
# the last-dtype cache that kernarg.pack reads outside its section on a free-threaded build.
_RECORDS = [np.arange(4 * dt.itemsize, dtype=np.uint8).view(dt) for dt in (
    np.dtype([("a", np.int8), ("b", np.uint8, (3,))]),
    np.dtype([("x", np.float32), ("n", np.int16)], align=True),
    np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int32)], align=True))]


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    kernarg.register(Handle, Handle.address_of)
    Handle.log.clear()
    try:
        yield
    finally:
        sys.setswitchinterval(old)
        kernarg.register(Handle, None)


def _run_threads(target, n=THREADS):
    errors = []
    start = threading.Barrier(n)

    def body(seed):
        # A line tracer (coverage of the debug build) runs Python code at every traced line
        # of kernarg, so the GIL could pass to another thread in the middle of a cache lookup,
        # which kernarg's release build never allows (see _handler._lookup); run untraced.
        sys.settrace(None)
        try:
            start.wait()
            target(seed)
        except BaseException as exc:   # re-raised in the main thread, below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(seed,)) for seed in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _arguments(rng, seed):
    """An argument list mixing every by-value kind with pointer producers that run Python
    code, and what the reference packer and the producer streams should make of it."""
    args, expected, streams, dlpacks = [], [], [], []
    for _ in range(rng.randint(1, 24)):
        k = rng.randrange(13)
        address = rng.randrange(1, 2**48) & ~0xF
        if k == 0:
            v = rng.randrange(-2**63, 2**64)
            args.append(v)
            expected.append(v)
        elif k == 1:
            v = rng.uniform(-1e6, 1e6)
            args.append(v)
            expected.append(v)
        elif k == 2:
            v = rng.choice((np.float32, np.float16, np.int8, np.uint64))(rng.randrange(100))
            args.append(v)
            expected.append(v)
        elif k == 3:
            v = Pair(rng.randrange(-128, 128), rng.random())
            args.append(v)
            expected.append(v)
        elif k == 4:
            v = complex(rng.random(), rng.random())
            args.append(v)
            expected.append(v)
        elif k == 5:
            stream = rng.choice((None, 0x1000 + seed, 0x2000 + seed))
            args.append(CAIObject(cai(address, stream=stream)))
            expected.append(reference.Pointer(address))
            if stream is not None and stream not in streams:
                streams.append(stream)
        elif k == 6:
            producer = DLPackProducer(address, versioned=rng.random() < 0.5,
                                      byte_offset=rng.choice((0, 16)))
            args.append(producer)
            expected.append(reference.Pointer(address + producer.byte_offset))
            dlpacks.append(producer)
        elif k == 7:
            args.append(Handle(address))
            expected.append(reference.Pointer(address))
        elif k == 8:
            args.append(None)
            expected.append(None)
        elif k == 9:
            v = rng.choice((True, False))
            args.append(np.bool_(v))
            expected.append(np.bool_(v))
        elif k == 10:
            v = ctypes.c_uint16(rng.randrange(2**16))
            args.append(v)
            expected.append(v)
        elif k == 11:
            v = rng.choice(_RECORDS)[rng.randrange(4)]
            args.append(v)
            expected.append(v)
        else:
            # A type seen for the first time: classified while other threads pack.
            t = type(f"Dyn{seed}", (ctypes.Structure,), {"_fields_": [("x", ctypes.c_int32)]})
            v = t(rng.randrange(-2**31, 2**31))
            args.append(v)
            expected.append(v)
    return args, expected, streams, dlpacks


def test_untyped_packing_from_many_threads(fast_switching):
    before = len(double_deletes())

    def work(seed):
        rng = random.Random(seed)
        for i in range(ROUNDS):
            args, expected, streams, dlpacks = _arguments(rng, seed)
            if seed == 0 and i % 7 == 0:
                _handler._forget_types()    # evict the cache other threads are reading
            Handle.log.append(("begin", threading.get_ident()))
            with kernarg.pack(args) as block:
                Handle.log.append(("end", threading.get_ident()))
                want, offsets, _ = reference.pack(expected)
                assert bytes(block) == want, (seed, i, args)
                assert block.offsets == offsets
                assert list(block.producer_streams) == streams
                assert all(p.deleted == 0 for p in dlpacks)
            assert all(p.deleted == 1 for p in dlpacks), (seed, i)

    _run_threads(work)
    assert double_deletes()[before:] == []
    # The test means something only if packs were interrupted: some thread's adapter call
    # ran while another thread was inside kernarg.pack.
    inside, interleaved = set(), 0
    for what, thread in Handle.log:
        if what == "begin":
            inside.add(thread)
        elif what == "end":
            inside.discard(thread)
        elif inside - {thread}:
            interleaved += 1
    assert interleaved > 0


def test_typed_packing_from_many_threads(fast_switching):
    sig = kernarg.Signature("float* out, const float* x, int n, double a, unsigned char c, "
                            "short2 v, void* h")

    def work(seed):
        rng = random.Random(100 + seed)
        for i in range(ROUNDS):
            out, x, h = (rng.randrange(1, 2**48) & ~0xF for _ in range(3))
            n, a, c = rng.randrange(-2**31, 2**31), rng.random(), rng.randrange(256)
            v = (rng.randrange(-2**15, 2**15), rng.randrange(-2**15, 2**15))
            stream = 0x3000 + seed
            producer = DLPackProducer(x)
            args = (CAIObject(cai(out, stream=stream)), producer, Index(n), a, Index(c),
                    v, Handle(h))
            if seed == 0 and i % 5 == 0:
                _handler._forget_types()
            block = sig.pack(args)
            try:
                want = (out.to_bytes(8, "little") + x.to_bytes(8, "little")
                        + n.to_bytes(4, "little", signed=True) + bytes(4)
                        + np.float64(a).tobytes() + bytes((c,)) + bytes(3)   # short2: 4-aligned
                        + np.array(v, np.int16).tobytes() + h.to_bytes(8, "little"))
                assert bytes(block) == want, (seed, i)
                assert list(block.producer_streams) == [stream]
            finally:
                block.release()
            assert producer.deleted == 1
            # Numbers first: on a free-threaded build the section is entered mid-pack, at the
            # first value that is not an exact int, float or bool (or never).
            last = CAIObject(cai(out)) if i % 2 else out
            block = numbers.pack((n, a, bool(i % 3), Index(c) if i % 4 else c, last))
            assert bytes(block) == (struct.pack("<i4xd?B6x", n, a, bool(i % 3), c)
                                    + out.to_bytes(8, "little")), (seed, i)

    numbers = kernarg.Signature("int n, double a, bool b, unsigned char c, float* out")
    _run_threads(work)


def test_errors_in_one_thread_leave_the_others_packing(fast_switching):
    """Refusals raised mid-pack (after Python callbacks ran) release what the failed pack
    took, while other threads keep packing correctly."""
    def work(seed):
        rng = random.Random(200 + seed)
        for i in range(ROUNDS):
            args, expected, streams, dlpacks = _arguments(rng, seed)
            if seed % 2:
                bad = rng.randrange(len(args) + 1)
                args.insert(bad, np.zeros(3))          # host memory: refused
                with pytest.raises(TypeError, match=rf"^argument {bad} "):
                    kernarg.pack(args)
                assert all(p.deleted == 1 for p in dlpacks if p.exported)
                continue
            with kernarg.pack(args) as block:
                assert bytes(block) == reference.pack(expected)[0], (seed, i)

    _run_threads(work)


def test_launch_finds_each_threads_kernels_and_configs(fast_switching):
    """kernarg.launch remembers the last few foreign kernels and cuda.core configs it saw, in
    state every thread shares. Threads that each launch their own kernels and configs in turn
    (more than it remembers, all told), while kernel objects die and their weak-reference
    callbacks clear slots, always get their own: a kernel's handle, a config's grid."""
    from kernarg._launch import _config_from, _kernel_for_launch

    core = pytest.importorskip("cuda.core")
    try:
        core.LaunchConfig(grid=1, block=1)
    except Exception as exc:                # cuda.core 0.5 asks the driver for its version
        pytest.skip(f"this cuda.core needs a CUDA driver to build a LaunchConfig: {exc!r}")

    class Kernel:
        __module__ = "cuda.core._module"

        def __init__(self, handle):
            self.handle = handle

        @property
        def _handle(self):          # Python code: a switch point inside the lookup
            return self.handle

    def work(seed):
        rng = random.Random(300 + seed)
        configs = [core.LaunchConfig(grid=100 * seed + g, block=32) for g in range(1, 4)]
        kernels = [Kernel((seed + 1 << 32) + (i << 24)) for i in range(3)]
        for _ in range(ROUNDS * 4):
            j = rng.randrange(3)
            assert _config_from(configs[j]).grid == (100 * seed + j + 1, 1, 1)
            assert _kernel_for_launch(kernels[j]).handle == kernels[j].handle
            if rng.random() < 0.05:     # a kernel goes (its slot is cleared), another comes
                kernels[j] = Kernel(kernels[j].handle + 8)
            if rng.random() < 0.05:     # a config changes: read again, not the kept one
                configs[j].block = (rng.choice((32, 64)), 1, 1)
                assert _config_from(configs[j]).block == (configs[j].block[0], 1, 1)

    _run_threads(work)


@pytest.mark.parametrize("how", ["b_ptr", "buffer protocol", "typed"])
def test_ctypes_values_set_by_another_thread_pack_whole(how):
    """Threads set a ctypes array's 64 items in one slice assignment (which CPython makes
    under the array's own lock on a free-threaded build, as it does every ctypes set) while
    others pack it: every block holds one whole value, all 64 items from one set, never some
    from each. kernarg copies a ctypes value under that lock (_cutils.h); its own section
    keeps out kernarg's code, not ctypes'. Untyped, also through the buffer protocol (the
    path for a ctypes layout kernarg could not confirm); and as a Signature's struct."""
    from test_handler import _layout_fallbacks

    n = 64
    shared = (ctypes.c_int32 * n)()
    pack = kernarg.Signature([np.int8, type(shared)]).pack if how == "typed" else kernarg.pack
    values = [[k] * n for k in range(1, 9)]
    done = threading.Event()

    def work(seed):
        if seed < 2:                    # two setters
            rng = random.Random(seed)
            while not done.is_set():
                shared[:] = rng.choice(values)
            return
        try:
            for _ in range(ROUNDS * 40):
                raw = bytes(pack((np.int8(seed), shared)))
                items = struct.unpack(f"<{n}i", raw[4:])
                assert items.count(items[0]) == n and 0 <= items[0] <= 8, items
        finally:
            done.set()

    with _layout_fallbacks() if how == "buffer protocol" else contextlib.nullcontext():
        _run_threads(work, n=4)


# Threads packing the library adapters' arrays (test_adapters' stand-ins, in a subprocess: they
# take the libraries' module names) of more element types and JAX shardings than kernarg keeps
# (four of each kind of dtype, one sharding), so that they replace each other's entries while
# others read them. Run by the test below with TESTS, the tests' directory, set.
ADAPTERS_THREADS = """
import random, struct
sys.path.insert(0, TESTS)
import kernarg
from test_threads import _run_threads

C_TYPES = {"float32": "float", "int32": "int", "float64": "double", "int16": "short",
           "uint8": "unsigned char", "float16": "__half"}
DTYPES = list(C_TYPES)
TORCH_DTYPES = {name: TorchDtype(name) for name in DTYPES}  # one object per dtype, as torch's
SIGS = {name: kernarg.Signature(f"{c}* a, const {c}* j, {c}* n, {c}* t")
        for name, c in C_TYPES.items()}
SHARDINGS = [SingleDeviceSharding(Device(0)), SingleDeviceSharding(Device(1)),
             NamedSharding(Device(2), memory_kind="pinned_host"),
             SingleDeviceSharding(Device(0, platform="cpu"))]      # refused: CPU memory
nb_stream = ns(handle=ctypes.c_void_p(0x990))


def arrays(rng, name, sharding):
    base = rng.randrange(1, 2**40) * 16
    tensor = Tensor(base + 0x30, 0)
    tensor.dtype = TORCH_DTYPES[name]
    args = (ndarray(base, 0, name), ArrayImpl(base + 0x10, sharding, name),
            DeviceNDArray(base + 0x20, nb_stream, name), tensor)
    return args, [base + 0x10 * n for n in range(4)]


def work(seed):
    rng = random.Random(seed)
    for _ in range(400):
        name = rng.choice(DTYPES)
        sharding = rng.choice(SHARDINGS)
        args, want = arrays(rng, name, sharding)
        for pack in (SIGS[name].pack, kernarg.pack):
            try:
                block = pack(args)
            except TypeError as exc:
                assert sharding is SHARDINGS[3], (name, exc)
                assert "argument 1 (jaxlib._jax.ArrayImpl): the memory is on the CPU" in str(exc) \\
                    or "parameter 1 ('j')" in str(exc) and "on the CPU" in str(exc), exc
                continue
            assert sharding is not SHARDINGS[3], name
            assert list(struct.unpack_from("<4Q", bytes(block))) == want
            assert block.producer_streams == (0x880, 0x990, 0x770), block.producer_streams
        other = rng.choice([d for d in DTYPES if d != name])
        try:
            SIGS[other].pack(args)
        except TypeError as exc:
            assert "parameter 0 ('a') is " in str(exc) and "element type is" in str(exc) \\
                or "on the CPU" in str(exc), exc
        else:
            raise AssertionError(f"{name} array packed as {other}")


_run_threads(work, n=6)
print("ok")
"""


def test_threads_pack_adapters_arrays_of_many_element_types_and_shardings():
    """Threads pack CuPy, JAX, numba and torch (before 2.10) arrays typed and untyped, of six
    element types and four JAX shardings (one on the CPU), more than kernarg remembers of each,
    so that entries are replaced while other threads read them (outside kernarg's section on a
    free-threaded build): every block holds the right pointers and producer streams, every
    array of the wrong element type is refused, and every CPU array."""
    from test_adapters import run_with_stand_ins

    run_with_stand_ins(ADAPTERS_THREADS, timeout=600)
