"""CUDA Array Interface and DLPack consumption, as the specifications describe them."""
import gc
import struct
import sys
import types
import warnings

import numpy as np
import pytest

import kernarg

from producers import (
    CAIObject,
    DLDevice,
    DLPackProducer,
    NoKeywordProducer,
    StreamOnlyProducer,
    cai,
    double_deletes,
    exchange_type,
    ptr_of,
)

PTR = 0x7F00_0000_1000


# ------------------------------------------------------------------------------------------
# CUDA Array Interface


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_cai_versions(version):
    b = kernarg.pack((CAIObject(cai(PTR, version=version)),))
    assert ptr_of(b) == PTR and b.sizes == (8,)


def test_cai_missing_or_none_strides_is_c_contiguous():
    d = cai(PTR)
    assert "strides" not in d
    assert ptr_of(kernarg.pack((CAIObject(d),))) == PTR
    assert ptr_of(kernarg.pack((CAIObject(cai(PTR, strides=None)),))) == PTR
    assert ptr_of(kernarg.pack((CAIObject(cai(PTR, strides=(4,))),))) == PTR


def test_cai_zero_size_array_may_have_null_pointer():
    assert ptr_of(kernarg.pack((CAIObject(cai(0, shape=(0, 3))),))) == 0
    with pytest.raises(ValueError, match="argument 0.*null data pointer"):
        kernarg.pack((CAIObject(cai(0, shape=(2,))),))


@pytest.mark.parametrize("ptr", [2**30, 2**60, 2**63 + 16, 2**64 - 16])
def test_cai_pointer_of_any_width(ptr):
    assert ptr_of(kernarg.pack((CAIObject(cai(ptr)),))) == ptr
    with pytest.raises(OverflowError, match=r"argument 1.*\['data'\]\[0\].*outside"):
        kernarg.pack((1, CAIObject(cai(ptr + 2**64))))


# Handles below 2**60 take a fast path (one machine word read); the rest the general one.
@pytest.mark.parametrize("stream, recorded", [(None, ()), (1, (1,)), (2, (2,)),
                                              (0xABCDEF, (0xABCDEF,)),
                                              (2**60 - 1, (2**60 - 1,)), (2**60, (2**60,)),
                                              (2**64 - 1, (2**64 - 1,))])
def test_cai_stream_rules(stream, recorded):
    b = kernarg.pack((CAIObject(cai(PTR, stream=stream)),))
    assert b.producer_streams == recorded


def test_cai_stream_missing_means_no_sync():
    assert kernarg.pack((CAIObject(cai(PTR)),)).producer_streams == ()


def test_cai_streams_deduplicated_in_order():
    args = (CAIObject(cai(PTR, stream=7)), CAIObject(cai(PTR, stream=5)),
            CAIObject(cai(PTR, stream=7)), CAIObject(cai(PTR, stream=None)))
    assert kernarg.pack(args).producer_streams == (7, 5)


def test_cai_stream_zero_is_forbidden():
    with pytest.raises(ValueError, match="argument 1.*stream.*0.*forbids"):
        kernarg.pack((1, CAIObject(cai(PTR, stream=0))))


def test_producer_streams_beyond_the_limit_are_an_error_naming_the_argument():
    # A block records at most KERNARG_MAX_STREAMS (16) distinct producer streams (the C API's
    # kernarg_block has room for that many); repeats of a recorded one cost nothing.
    ok = [CAIObject(cai(PTR, stream=0x100 + i)) for i in range(16)]
    b = kernarg.pack(ok + ok)
    assert b.producer_streams == tuple(0x100 + i for i in range(16))
    with pytest.raises(ValueError, match=r"argument 17: its producer stream 0x999 would be the "
                                         r"17th distinct one.*at most 16"):
        kernarg.pack([*ok, 5, CAIObject(cai(PTR, stream=0x999))])
    sig = kernarg.Signature(["float*"] * 17)
    with pytest.raises(ValueError, match=r"argument 16: its producer stream 0x999"):
        sig.pack([*ok, CAIObject(cai(PTR, stream=0x999))])


class _CollidingKey:
    """A dict key whose hash equals that of "version" and whose comparison deletes the dict's
    other fields: looking "version" up runs it."""

    def __init__(self, d):
        self.d = d

    def __hash__(self):
        return hash("version")

    def __eq__(self, other):
        self.d.pop("data", None)
        self.d.pop("shape", None)
        return False


def test_cai_dict_changed_while_it_is_read():
    # The dict is read in one pass, then the fields that pass did not find are looked up. The
    # lookup of "version" runs the colliding key's __eq__, which deletes "data" and "shape",
    # freeing their values. kernarg must own what the pass found first: it used to read the
    # freed "data" tuple (a garbage error message, then a crash at exit).
    d = {"data": (int(str(PTR)), False), "shape": (4,), "typestr": "<f4"}
    d[_CollidingKey(d)] = 1
    assert ptr_of(kernarg.pack((CAIObject(d),))) == PTR
    assert "data" not in d      # the lookup did run the key's __eq__


class _NeedsArgs(Exception):
    def __init__(self, code, detail):
        super().__init__(code, detail)


class _RaisingCAI:
    def __init__(self, exc):
        self.exc = exc

    @property
    def __cuda_array_interface__(self):
        raise self.exc


class _RaisingDLPack:
    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, stream=None):
        raise AssertionError("__dlpack__ must not be called when __dlpack_device__ fails")

    def __dlpack_device__(self):
        raise self.exc


@pytest.mark.parametrize("exc", [KeyError("gone"), _NeedsArgs(7, "detail"),
                                 UnicodeDecodeError("utf-8", b"", 0, 1, "bad")],
                         ids=lambda e: type(e).__name__)
def test_protocol_errors_name_the_argument_whatever_the_exception_class(exc):
    # The error keeps the producer's exception class where it can be built from one message,
    # else becomes a TypeError; either way it names the argument and chains the original.
    same = type(exc) if type(exc) is KeyError else TypeError
    for obj, fragment in [(_RaisingCAI(exc), "reading __cuda_array_interface__ raised"),
                          (_RaisingDLPack(exc), r"__dlpack_device__\(\) raised")]:
        with pytest.raises(same, match=rf"argument 1 \(.*\): {fragment} {type(exc).__name__}") \
                as info:
            kernarg.pack((1, obj))
        assert info.value.__cause__ is exc


class _NoInterfaceHere(DLPackProducer):
    """A producer whose CUDA Array Interface property raises AttributeError for this array
    (as JAX's and torch's do for CPU arrays) but whose DLPack export says where it lives."""

    @property
    def __cuda_array_interface__(self):
        raise AttributeError("no CUDA Array Interface for this array")


def test_cai_attribute_error_defers_to_the_dlpack_device():
    # hasattr() semantics: an AttributeError means the object has no interface, so the DLPack
    # device query decides. On the CPU, that is the CPU message, not "reading ... raised".
    with pytest.raises(TypeError, match=r"argument 1 \(.*_NoInterfaceHere\): the memory is on "
                                        r"the CPU.*kDLCPU"):
        kernarg.pack((1, _NoInterfaceHere(PTR, device=(1, 0))))
    with pytest.raises(TypeError, match=r"argument 0 .*DLPack device kDLROCM"):
        kernarg.pack((_NoInterfaceHere(PTR, device=(10, 0)),))
    # On a CUDA device, the pointer comes from the DLPack export, its deleter run on release.
    deletes = len(double_deletes())
    producer = _NoInterfaceHere(PTR, byte_offset=64)
    block = kernarg.pack((producer,), stream=0x1234)
    assert ptr_of(block) == PTR + 64
    assert producer.streams == [0x1234] and producer.exported == 1
    del block
    gc.collect()
    assert producer.deleted == 1 and len(double_deletes()) == deletes


def test_cai_attribute_error_without_dlpack_names_the_argument():
    with pytest.raises(AttributeError, match=r"argument 0 .*reading __cuda_array_interface__ "
                                             r"raised AttributeError: gone") as info:
        kernarg.pack((CAIObject(AttributeError("gone")),))
    assert isinstance(info.value.__cause__, AttributeError)


class _Untruthful:
    def __bool__(self):
        raise ZeroDivisionError("no truth value")


def test_cai_value_that_raises_when_read():
    with pytest.raises(ZeroDivisionError, match=r"argument 0 .*__cuda_array_interface__ could "
                                                r"not be read: ZeroDivisionError: no truth"):
        kernarg.pack((CAIObject(cai(PTR, readonly=_Untruthful())),))


def test_cai_shape_may_be_a_list_of_ints():
    assert ptr_of(kernarg.pack((CAIObject(cai(PTR, shape=[2, 3])),))) == PTR
    with pytest.raises(TypeError, match=r"argument 0 .*\['shape'\] must be a tuple of ints"):
        kernarg.pack((CAIObject(cai(PTR, shape=[2, "3"])),))


@pytest.mark.parametrize("shape", [(-1,), (2, -3), [4, -1], (0, -1)])
def test_cai_negative_extent_is_refused(shape):
    # No array has a negative extent: the interface is malformed, whatever the pointer.
    with pytest.raises(ValueError, match=r"argument 0 .*\['shape'\] \(.*-\d.*\) has a "
                                         r"negative extent"):
        kernarg.pack((CAIObject(cai(PTR, shape=shape)),))
    with pytest.raises(ValueError, match=r"parameter 0 \('x'\).*negative extent"):
        kernarg.Signature("const float* x").pack((CAIObject(cai(PTR, shape=shape)),))


class _HostileInt(int):
    def __lt__(self, other):
        raise ArithmeticError("no order")


def test_cai_shape_extent_whose_comparison_raises():
    with pytest.raises(ArithmeticError, match="argument 0 .*no order"):
        kernarg.pack((CAIObject(cai(PTR, shape=(_HostileInt(2),))),))


@pytest.mark.parametrize("interface, exc, fragment", [
    (cai(PTR, mask=object()), ValueError, "mask"),
    ({"shape": (1,), "typestr": "<f4", "version": 3}, TypeError, "data"),
    (cai(PTR) | {"data": PTR}, TypeError, "data"),
    (cai(PTR) | {"data": ("x", False)}, TypeError, "data"),
    (cai(PTR) | {"shape": None}, TypeError, "shape"),
    (cai(PTR) | {"typestr": 4}, TypeError, "typestr"),
    (cai(PTR, version=4), ValueError, "version"),
    (cai(PTR, stream="s"), TypeError, "stream"),
    (cai(PTR, stream=-5), ValueError, "stream"),
    (cai(PTR, stream=-2**62), ValueError, "stream"),
    (cai(PTR, stream=2**64), ValueError, "stream"),
    (cai(PTR, stream=True), TypeError, "stream"),
    (cai(PTR) | {"data": [PTR, False], "stream": 3.0}, TypeError, "stream"),
    (cai(-8), OverflowError, "address"),
    ([1, 2], TypeError, "not a dict"),
    (RuntimeError("device lost"), RuntimeError, "device lost"),
])
def test_cai_malformed(interface, exc, fragment):
    with pytest.raises(exc) as info:
        kernarg.pack((np.int8(0), CAIObject(interface)))
    msg = str(info.value)
    assert "argument 1" in msg and fragment in msg


@pytest.mark.parametrize("readonly", [False, True])
def test_cai_data_may_be_a_list(readonly):
    # The spec says a tuple; a list is read the same way, flag included.
    interface = cai(PTR) | {"data": [PTR, readonly]}
    assert ptr_of(kernarg.pack((CAIObject(interface),))) == PTR
    sig = kernarg.Signature("float* x")
    if readonly:
        with pytest.raises(ValueError, match=r"parameter 0 \('x'\).*read-only"):
            sig.pack((CAIObject(interface),))
    else:
        assert ptr_of(sig.pack((CAIObject(interface),))) == PTR


def test_cai_as_instance_attribute():
    obj = types.SimpleNamespace(__cuda_array_interface__=cai(PTR, readonly=True))
    assert ptr_of(kernarg.pack((obj,))) == PTR


def test_cai_object_kept_alive_by_block():
    obj = CAIObject(cai(PTR))
    before = sys.getrefcount(obj)
    b = kernarg.pack((obj,))
    assert b.args[0] is obj
    del b
    assert sys.getrefcount(obj) == before


# ------------------------------------------------------------------------------------------
# DLPack


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("device", [(2, 0), (3, 0), (13, 0), (2, 1)])
def test_dlpack_devices_and_capsule_kinds(versioned, device):
    prod = DLPackProducer(PTR, device=device, versioned=versioned, byte_offset=64)
    b = kernarg.pack((1, prod))
    assert ptr_of(b, 1) == PTR + 64
    assert prod.exported == 1 and prod.deleted == 0
    b.release()
    assert prod.deleted == 1
    b.release()
    del b
    gc.collect()
    assert prod.deleted == 1 and not double_deletes()


def test_dlpack_deleter_runs_once_on_garbage_collection():
    prod = DLPackProducer(PTR)
    b = kernarg.pack((prod, prod))
    assert prod.exported == 2 and prod.deleted == 0
    del b
    assert prod.deleted == 2 and not double_deletes()


def test_dlpack_context_manager_releases():
    prod = DLPackProducer(PTR)
    with kernarg.pack((prod,)) as b:
        assert b.args == (prod,)
        assert prod.deleted == 0
    assert prod.deleted == 1 and b.args is None


def test_dlpack_consumer_stream_is_passed():
    prod = DLPackProducer(PTR)
    kernarg.pack((prod,), stream=0x1234)
    kernarg.pack((prod,))
    assert prod.streams == [0x1234, kernarg.default_stream()]
    assert prod.max_versions[0] == kernarg.DLPACK_MAX_VERSION


def test_dlpack_consumer_stream_is_never_0(monkeypatch):
    # Handle 0 is the NULL stream, which cuda.bindings' driver calls take as the default
    # stream of its policy; the DLPack specification forbids stream=0 for CUDA as ambiguous.
    from kernarg import _stream

    class RefusesZero(DLPackProducer):
        def __dlpack__(self, *, stream=None, max_version=None):
            if stream == 0:
                raise ValueError("stream=0 is ambiguous")
            return super().__dlpack__(stream=stream, max_version=max_version)

    sig = kernarg.Signature("float* p")
    try:
        # A cuda-bindings that reads the variable with int() (test_stream has the others).
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 5, 0))
        for policy, expected in (("0", 1), ("1", 2)):
            monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", policy)
            assert _stream._reload_policy() == expected
            prod = RefusesZero(PTR)
            kernarg.pack((prod,), stream=0)
            sig.pack((prod,), stream=0)
            with kernarg.use_stream(0):                 # None means 0 here
                kernarg.pack((prod,))
            with kernarg.use_stream(0x77):              # and the policy does not touch others
                kernarg.pack((prod,), stream=0x1234)
                kernarg.pack((prod,))
            assert prod.streams == [expected] * 3 + [0x1234, 0x77]
            assert prod.exported == 5
    finally:
        monkeypatch.undo()
        _stream._reload_policy()


def test_dlpack_stream_object_is_resolved():
    class S:
        def __cuda_stream__(self):
            return (0, 0x55)

    prod = DLPackProducer(PTR)
    kernarg.pack((prod,), stream=S())
    assert prod.streams == [0x55]


@pytest.mark.parametrize("cls, seen", [(StreamOnlyProducer, 1), (NoKeywordProducer, "<none>")])
def test_dlpack_older_producers(cls, seen):
    prod = cls(PTR, versioned=False)
    b = kernarg.pack((prod,), stream=1)
    assert ptr_of(b) == PTR and prod.streams == [seen]
    del b
    assert prod.deleted == 1


def test_dlpack_unsupported_major_version_deletes_then_raises():
    prod = DLPackProducer(PTR, version=(2, 0))
    with pytest.raises(BufferError, match="argument 0.*version 2.0"):
        kernarg.pack((prod,))
    assert prod.exported == 1 and prod.deleted == 1


def test_dlpack_cpu_memory_refused_with_cpu_message():
    prod = DLPackProducer(PTR, device=(1, 0))
    with pytest.raises(TypeError, match="argument 2.*on the CPU"):
        kernarg.pack((1, 2, prod))
    assert prod.exported == 0   # refused from __dlpack_device__, nothing exported


@pytest.mark.parametrize("device, name", [((10, 0), "kDLROCM"), ((18, 0), r"kDLTrn \(18\)"),
                                          ((99, 0), r"unknown \(99\)")])
def test_dlpack_other_devices_refused(device, name):
    with pytest.raises(TypeError, match=f"argument 0.*{name}"):
        kernarg.pack((DLPackProducer(PTR, device=device),))


def test_dlpack_device_type_inside_tensor_is_not_trusted():
    # A producer that forgot to set the device type in the tensor: __dlpack_device__ decides.
    prod = DLPackProducer(PTR, device=(2, 0))
    orig = prod._fill

    def fill(t, shape):
        orig(t, shape)
        t.device.device_type = 1

    prod._fill = fill
    assert ptr_of(kernarg.pack((prod,))) == PTR


def test_numpy_array_refused_as_cpu_memory():
    with pytest.raises(TypeError, match="argument 0.*on the CPU"):
        kernarg.pack((np.arange(4),))


def test_zero_d_numpy_array_refused_with_a_hint_to_pass_its_value():
    with pytest.raises(TypeError, match=r"^argument 1 .*on the CPU.*pass its value, e\.g\. "
                                        r"arr\[\(\)\]$"):
        kernarg.pack((1, np.array(2.0, np.float32)))
    assert bytes(kernarg.pack((np.array(2.0, np.float32)[()],))) == np.float32(2.0).tobytes()
    with pytest.raises(TypeError, match="on the CPU") as info:
        kernarg.pack((np.zeros(3),))
    assert "arr[()]" not in str(info.value)


def test_torch_cpu_tensor_refused():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    with pytest.raises(TypeError, match="argument 0.*on the CPU"):
        kernarg.pack((torch.zeros(3),))


def test_jax_cpu_array_refused():
    # Before kernarg's JAX adapter, this reached JAX's __cuda_array_interface__, which raises
    # AttributeError for CPU arrays: the error named the argument but not the CPU.
    jax = pytest.importorskip("jax", reason="jax is not installed")
    # Put on JAX's CPU device by name: where JAX has a GPU, its arrays go there by default (the
    # H100 run of the CPU suite found this test assuming otherwise).
    x = jax.device_put(jax.numpy.zeros(3, jax.numpy.float32), jax.devices("cpu")[0])
    with pytest.raises(TypeError, match=r"argument 1 \(jaxlib\..*ArrayImpl\): the memory is on "
                                        r"the CPU.*\(JAX device .*\)"):
        kernarg.pack((1, x))
    with pytest.raises(TypeError, match="'x'.*on the CPU"):
        kernarg.Signature("const float* x").pack((x,))


def test_cuda_core_strided_memory_view_of_host_memory_refused():
    # cuda.core >= 1.x views carry the DLPack C exchange API, older ones take kernarg's adapter:
    # either way a view of host memory is refused, and the view of any argument is named.
    utils = pytest.importorskip("cuda.core.utils")
    host = np.arange(4, dtype=np.float32)
    make = getattr(utils.StridedMemoryView, "from_dlpack", None)
    view = make(host, stream_ptr=-1) if make else utils.StridedMemoryView(host, stream_ptr=-1)
    assert not view.is_device_accessible
    with pytest.raises(TypeError, match="argument 1 .*StridedMemoryView.*on the CPU"):
        kernarg.pack((1, view))


def test_cuda_core_strided_memory_view_on_another_gpu_refused():
    # Either route (the C exchange API, or the adapter's device_id confirmed by the exporter's
    # __dlpack_device__) refuses a view of device memory on another GPU than the launch's, and
    # passes pinned and managed views, whose DLPack device id is 0 whatever the launch's.
    utils = pytest.importorskip("cuda.core.utils")
    make = getattr(utils.StridedMemoryView, "from_dlpack", None)

    def view(device):
        producer = DLPackProducer(PTR, device=device)
        return make(producer, stream_ptr=-1) if make else utils.StridedMemoryView(
            producer, stream_ptr=-1)

    # The view is a variable, not a temporary of the call: a temporary is freed while the error
    # is in flight, and so is its capsule, whose destructor here is Python code (ctypes) that
    # cannot run then. (A C destructor saves and restores the error, as the DLPack spec asks.)
    on_gpu1 = view((2, 1))                          # kDLCUDA, device 1
    with pytest.raises(ValueError, match=r"argument 1 \(cuda\.core\..*StridedMemoryView\): its "
                                         r"memory is on CUDA device 1, but the kernel runs on "
                                         r"device 0; copy it over first"):
        kernarg.pack((1, on_gpu1), device=0)
    assert ptr_of(kernarg.pack((on_gpu1,), device=1)) == PTR
    for device in ((3, 0), (13, 0)):                   # kDLCUDAHost, kDLCUDAManaged
        assert ptr_of(kernarg.pack((view(device),), device=1)) == PTR


def test_raw_capsule_refused():
    prod = DLPackProducer(PTR)
    capsule = prod.__dlpack__(stream=None, max_version=(1, 0))
    with pytest.raises(TypeError, match="argument 0.*raw PyCapsule"):
        kernarg.pack((capsule,))
    del capsule
    gc.collect()
    assert prod.deleted == 1   # the producer's own capsule destructor freed it


def test_dlpack_errors_from_producer_name_the_argument():
    class Broken(DLPackProducer):
        def __dlpack__(self, *, stream=None, max_version=None):
            raise BufferError("cannot export")

    with pytest.raises(BufferError, match="argument 0.*cannot export"):
        kernarg.pack((Broken(PTR),))

    class BadDevice(DLPackProducer):
        def __dlpack_device__(self):
            return "gpu"

    with pytest.raises(TypeError, match="argument 0.*__dlpack_device__"):
        kernarg.pack((BadDevice(PTR),))

    class NotCapsule(DLPackProducer):
        def __dlpack__(self, *, stream=None, max_version=None):
            return 42

    with pytest.raises(TypeError, match="argument 0.*not a PyCapsule"):
        kernarg.pack((NotCapsule(PTR),))


def test_dlpack_used_capsule_rejected():
    prod = DLPackProducer(PTR)
    capsule = prod.__dlpack__(stream=None, max_version=(1, 0))
    kernarg.pack((types.SimpleNamespace(__dlpack__=lambda **kw: capsule,
                                        __dlpack_device__=lambda: (2, 0)),)).release()
    with pytest.raises(TypeError, match="capsule named 'used_dltensor_versioned'"):
        kernarg.pack((types.SimpleNamespace(__dlpack__=lambda **kw: capsule,
                                            __dlpack_device__=lambda: (2, 0)),))


class NumpyAsCuda:
    """numpy's real DLPack capsules, reported as CUDA memory (packing never dereferences)."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None):
        return self.array.__dlpack__(max_version=max_version)


NUMPY_VERSIONED_DLPACK = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("max_version", [True, False])
def test_real_producer_capsules_are_released_cleanly(max_version, monkeypatch):
    if max_version and not NUMPY_VERSIONED_DLPACK:
        pytest.skip(f"numpy {np.__version__} makes no versioned DLPack capsules (2.1 does)")
    # numpy's capsule destructor checks for exactly the `used_` name; anything else makes it
    # raise from the destructor (a bug kernarg once had).
    arr = np.arange(8, dtype=np.float32)
    obj = NumpyAsCuda(arr[2:])
    if not max_version:
        monkeypatch.setattr(obj, "__dlpack__", lambda stream=None: arr[2:].__dlpack__())
    before = sys.getrefcount(arr)
    for _ in range(100):
        b = kernarg.pack((obj,))
        assert ptr_of(b) == arr.ctypes.data + 8
        del b
    gc.collect()
    assert sys.getrefcount(arr) == before     # numpy's deleter dropped its reference


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("malformed, fault", [
    ({"shape": (2, -1)}, "a negative extent in its shape"),
    ({"ndim": -1}, "a negative ndim"),
    ({"null_shape": True}, "ndim > 0 but no shape"),
])
def test_dlpack_malformed_shape_is_refused_and_released(versioned, malformed, fault):
    deletes = len(double_deletes())
    prod = DLPackProducer(PTR, versioned=versioned, shape=malformed.get("shape", (4,)))
    prod.ndim = malformed.get("ndim")
    prod.null_shape = malformed.get("null_shape", False)
    with pytest.raises(ValueError, match=f"argument 0 .*DLPack tensor has {fault}"):
        kernarg.pack((prod,))
    assert prod.deleted == 1
    assert len(double_deletes()) == deletes


@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_byte_offset_past_2_64_is_refused_and_released(versioned):
    # data + byte_offset would wrap to a small, wrong address (0x6000 here): never packed.
    prod = DLPackProducer(0x7000, versioned=versioned, byte_offset=2**64 - 0x1000)
    with pytest.raises(ValueError, match="argument 0 .*DLPack tensor has a byte_offset that "
                                         "carries its data pointer past 2\\*\\*64"):
        kernarg.pack((prod,))
    assert prod.deleted == 1
    # The last address there is stays packable.
    prod = DLPackProducer(0x7000, versioned=versioned, byte_offset=2**64 - 1 - 0x7000)
    assert ptr_of(kernarg.pack((prod,))) == 2**64 - 1


def test_dlpack_zero_dim_tensor_needs_no_shape():
    # A 0-d tensor (ndim 0) may carry a null shape pointer: there is nothing to read.
    prod = DLPackProducer(PTR, shape=())
    prod.null_shape = True
    assert ptr_of(kernarg.pack((prod,))) == PTR


def test_dlpack_null_data_for_nonempty_tensor():
    prod = DLPackProducer(0, shape=(3,))
    with pytest.raises(ValueError, match="argument 0.*null data pointer"):
        kernarg.pack((prod,))
    assert prod.deleted == 1
    assert ptr_of(kernarg.pack((DLPackProducer(0, shape=(0,)),))) == 0


def test_failure_midway_releases_earlier_capsules():
    prod = DLPackProducer(PTR)
    with pytest.raises(TypeError):
        kernarg.pack((prod, object()))
    gc.collect()
    assert prod.exported == 1 and prod.deleted == 1


# ------------------------------------------------------------------------------------------
# The launch device: arrays a producer places on another GPU are refused before any launch.

@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_array_on_another_device_is_refused(versioned):
    p = DLPackProducer(PTR, device=(2, 1), versioned=versioned)
    with pytest.raises(ValueError, match=r"argument 1 \(producers.DLPackProducer\): its memory is "
                                         r"on CUDA device 1, but the kernel runs on device 0"):
        kernarg.pack((7, p), device=0)
    assert p.deleted == p.exported == 1     # the consumed tensor was still released, once
    assert ptr_of(kernarg.pack((p,), device=1)) == PTR
    assert ptr_of(kernarg.pack((p,))) == PTR                 # no device given: no check


@pytest.mark.parametrize("device_type", [3, 13])     # pinned host and managed memory
def test_memory_every_device_can_reach_is_not_device_checked(device_type):
    p = DLPackProducer(PTR, device=(device_type, 1))
    assert ptr_of(kernarg.pack((p,), device=0)) == PTR


def test_typed_packing_checks_the_device_too():
    sig = kernarg.Signature("float* out, int n")
    with pytest.raises(ValueError, match=r"parameter 0 \('out'\): argument 0 "
                                         r"\(producers.DLPackProducer\): its memory is on CUDA "
                                         r"device 3"):
        sig.pack((DLPackProducer(PTR, device=(2, 3)), 4), device=2)
    assert ptr_of(sig.pack((DLPackProducer(PTR, device=(2, 2)), 4), device=2)) == PTR
    many = kernarg.Signature(", ".join(["float*"] * 20))     # past the inline arena
    with pytest.raises(ValueError, match="argument 19"):
        many.pack([None] * 19 + [DLPackProducer(PTR, device=(2, 1))], device=0)


@pytest.mark.parametrize("bad", [-1, True, np.True_, 1.0, "0", 2**31, np.arange(2)])
def test_device_must_be_an_ordinal(bad):
    with pytest.raises(TypeError, match="device must be a CUDA device ordinal"):
        kernarg.pack((1,), device=bad)
    with pytest.raises(TypeError, match="device must be a CUDA device ordinal"):
        kernarg.Signature("int").pack((1,), device=bad)


class TorchDevice:
    """Stands for torch.device: recognised, as kernarg recognises it, by module and name."""
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index

    def __repr__(self):
        return f"device(type={self.type!r}" + (f", index={self.index})" if self.index is not
                                               None else ")")


TorchDevice.__module__, TorchDevice.__name__ = "torch", "device"


def test_device_may_be_a_numpy_integer_or_a_library_device():
    core_device = type("Device", (), {"__module__": "cuda.core._device", "device_id": 2})()
    cupy_device = type("Device", (), {"__module__": "cupy.cuda.device", "id": 2})()
    for device in (np.int64(2), np.array(2), core_device, cupy_device, TorchDevice("cuda", 2)):
        assert ptr_of(kernarg.pack((DLPackProducer(PTR, device=(2, 2)),), device=device)) == PTR
        with pytest.raises(ValueError, match="on CUDA device 3, but the kernel runs on device 2"):
            kernarg.pack((DLPackProducer(PTR, device=(2, 3)),), device=device)


def test_a_torch_device_must_name_one_gpu():
    # torch.device('cuda') means torch's current device, which kernarg does not ask torch for.
    with pytest.raises(ValueError, match=r"device device\(type='cuda'\) names no GPU: give its "
                                         r"index, as in torch.device\('cuda:0'\)"):
        kernarg.pack((1,), device=TorchDevice("cuda"))
    with pytest.raises(TypeError, match=r"device must be a CUDA device; "
                                        r"device\(type='cpu'\) is not one"):
        kernarg.Signature("int").pack((1,), device=TorchDevice("cpu"))
    with pytest.raises(TypeError, match="device must be a CUDA device"):
        kernarg.Kernel.from_source('extern "C" __global__ void k() {}', "k",
                                   device=TorchDevice("meta"))


def test_a_real_torch_device_is_read_as_its_index():
    torch = pytest.importorskip("torch")
    for device in ("cpu", "cuda"):
        with pytest.raises((TypeError, ValueError), match="device"):
            kernarg.pack((1,), device=torch.device(device))
    assert kernarg.pack((1,), device=torch.device("cuda:1")) is not None


# ------------------------------------------------------------------------------------------
# DLPack 1.3 C exchange API (type(x).__dlpack_c_exchange_api__)

@pytest.mark.parametrize("device_id", [0, 3])
def test_exchange_api_reads_pointer_device_and_work_stream(device_id):
    cls = exchange_type(work_stream=0x5000)
    x = cls(PTR, device=(2, device_id), byte_offset=64)
    b = kernarg.pack((1, x))
    assert ptr_of(b, 1) == PTR + 64
    assert b.producer_streams == (0x5000,)             # NoSync: the launch must wait on it
    assert cls.tensor_calls == 1 and cls.stream_queries == [(2, device_id)]
    assert x.exported == 0                             # __dlpack__ was never called
    assert b.args[1] is x                              # the object keeps the memory alive


def test_exchange_api_null_work_stream_is_the_legacy_default_stream():
    x = exchange_type(work_stream=None)(PTR)
    assert kernarg.pack((x,)).producer_streams == (1,)


def test_exchange_api_work_stream_equal_to_launch_stream_is_recorded_once():
    cls = exchange_type(work_stream=0x5000)
    b = kernarg.pack((cls(PTR), cls(PTR + 8)))
    assert b.producer_streams == (0x5000,)


@pytest.mark.parametrize("device_type", [3, 13])     # pinned host and managed memory
def test_exchange_api_pinned_and_managed_memory(device_type):
    cls = exchange_type()
    b = kernarg.pack((cls(PTR, device=(device_type, 1)),), device=0)
    assert ptr_of(b) == PTR
    assert cls.stream_queries == [] and b.producer_streams == ()


def test_exchange_api_device_checked_against_launch_device():
    cls = exchange_type()
    with pytest.raises(ValueError, match=r"argument 0 \(producers.ExchangeProducer\): its memory "
                                         r"is on CUDA device 1, but the kernel runs on device 0"):
        kernarg.pack((cls(PTR, device=(2, 1)),), device=0)
    assert ptr_of(kernarg.pack((cls(PTR, device=(2, 1)),), device=1)) == PTR


def test_exchange_api_cpu_and_other_devices_refused():
    cls = exchange_type()
    with pytest.raises(TypeError, match=r"argument 0 \(.*ExchangeProducer\).*on the CPU"):
        kernarg.pack((cls(PTR, device=(1, 0)),))
    with pytest.raises(TypeError, match="argument 0.*kDLROCM"):
        kernarg.pack((cls(PTR, device=(10, 0)),))


def test_exchange_api_cpu_answer_checked_against_a_pinned_dlpack_device():
    # torch's C exchange API says kDLCPU for a pinned CPU tensor, its __dlpack_device__ says
    # kDLCUDAHost: pinned host memory a kernel can use, so it is taken (no stream to wait on).
    cls = exchange_type()
    pinned = type("PinnedTensor", (cls,), {"__dlpack_device__": lambda self: (3, 0)})
    b = kernarg.pack((pinned(PTR, device=(1, 0), byte_offset=16),), device=2)
    assert ptr_of(b) == PTR + 16
    assert b.producer_streams == () and cls.stream_queries == []
    sig = kernarg.Signature("const float* x, double* y")
    assert ptr_of(sig.pack((pinned(PTR, device=(1, 0)), None))) == PTR
    with pytest.raises(TypeError, match=r"\('y'\) is double\* but the array's element type is f4"):
        sig.pack((None, pinned(PTR, device=(1, 0))))
    assert pinned(PTR).exported == 0                   # __dlpack__ was never called

    def broken(self):
        raise RuntimeError("no device")
    for answer in (broken, lambda self: (1, 0), lambda self: [3, 0], lambda self: (3,)):
        odd = type("OddTensor", (cls,), {"__dlpack_device__": answer})
        with pytest.raises(TypeError, match=r"argument 0 \(.*OddTensor\).*on the CPU.*kDLCPU"):
            kernarg.pack((odd(PTR, device=(1, 0)),))


def _torch_exchange_type(module="torch"):
    """A stand-in for torch.Tensor (2.10+) over the C exchange API, whose table exports a lazily
    conjugated or negated view as if it were resolved: is_conj() and is_neg() say which, and
    each instance lists what kernarg asked."""
    base = exchange_type()

    class Tensor(base):
        conj_bit = neg_bit = False

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.asked = []

        def is_conj(self):
            self.asked.append("conj")
            return self.conj_bit

        def is_neg(self):
            self.asked.append("neg")
            return self.neg_bit

    Tensor.__module__, Tensor.__qualname__ = module, "Tensor"
    return Tensor


def test_exchange_api_torch_asks_is_pinned_not_dlpack_device():
    # For a torch tensor the C answer kDLCPU is checked with is_pinned(), the question torch's
    # __dlpack_device__ asks, without the rest of that Python method (~1.1 us on torch 2.13).
    Tensor = _torch_exchange_type()

    def slow(self):
        raise AssertionError("__dlpack_device__ asked")

    answers = []

    def make(answer):
        def is_pinned(self):
            answers.append(answer)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return type("Tensor", (Tensor,), {"is_pinned": is_pinned, "__dlpack_device__": slow,
                                          "__module__": "torch"})

    b = kernarg.pack((make(True)(PTR, device=(1, 0), byte_offset=8),), device=1)
    assert ptr_of(b) == PTR + 8 and b.producer_streams == () and Tensor.stream_queries == []
    for answer in (False, RuntimeError("no CUDA"), 1, None):
        with pytest.raises(TypeError, match=r"argument 0 \(torch.Tensor\): .*on the CPU"):
            kernarg.pack((make(answer)(PTR, device=(1, 0)),))
    assert answers[0] is True and answers[1:3] == [False, answers[2]] and len(answers) == 5
    # A device tensor is not asked.
    answers.clear()
    assert ptr_of(kernarg.pack((make(True)(PTR, device=(2, 0)),))) == PTR
    assert answers == []


REAL = (2, 32, 1)           # kDLFloat float32
COMPLEX = (5, 64, 1)        # kDLComplex complex64


@pytest.mark.parametrize("dtype,shape,strides,asked", [
    (REAL, (4,), None, []),                 # dense, two or more elements: nothing to ask
    (REAL, (2, 3), (3, 1), []),
    (REAL, (1, 4), (9, 1), []),             # an extent of 1 may have any stride
    (REAL, (4,), (2,), ["neg"]),            # strided like .imag of a conjugated tensor
    (REAL, (3, 2), (1, 3), ["neg"]),        # transposed
    (REAL, (1,), None, ["neg"]),            # one element: any layout is dense
    (REAL, (), None, ["neg"]),
    (REAL, (0, 4), None, ["neg"]),
    (COMPLEX, (4,), None, ["conj", "neg"]),  # a complex tensor may carry either bit
])
def test_exchange_api_torch_asks_about_lazy_views_only_where_one_can_be(dtype, shape, strides,
                                                                           asked):
    Tensor = _torch_exchange_type()
    t = Tensor(PTR, dtype=dtype, shape=shape)
    t.strides = strides
    assert ptr_of(kernarg.pack((t,))) == PTR
    assert t.asked == asked
    assert t.exported == 0


@pytest.mark.parametrize("bit,word,fix", [("conj_bit", "conjugated", "resolve_conj"),
                                          ("neg_bit", "negated", "resolve_neg")])
@pytest.mark.parametrize("device", [(2, 0), (3, 0), (1, 0)])     # device, pinned, even the CPU
def test_exchange_api_torch_lazy_views_are_refused(bit, word, fix, device):
    Tensor = _torch_exchange_type()
    t = Tensor(PTR, dtype=COMPLEX, device=device)
    setattr(t, bit, True)
    message = (rf"argument 1 \(torch.Tensor\): the tensor is a lazily {word} view \(is_"
               rf"{bit[:-4]}\(\).*its memory holds the .*pass tensor.{fix}\(\)")
    with pytest.raises(ValueError, match=message):
        kernarg.pack((3, t))
    with pytest.raises(ValueError, match=r"parameter 0 \('z'\): " + message.replace("1", "0", 1)):
        kernarg.Signature("float2* z").pack((t,))
    assert Tensor.stream_queries == []      # refused before anything is recorded


def test_exchange_api_torch_bit_query_that_raises_names_the_argument():
    Tensor = _torch_exchange_type()
    t = Tensor(PTR, dtype=COMPLEX)
    t.conj_bit = RuntimeError("no bits here")

    def is_conj(self):
        raise self.conj_bit
    Tensor.is_conj = is_conj
    with pytest.raises(RuntimeError, match=r"argument 2 \(torch.Tensor\): is_conj\(\) raised "
                                           r"RuntimeError: no bits here"):
        kernarg.pack((1, 2, t))


def test_exchange_api_lazy_view_check_is_for_torch_only():
    # Another producer's is_conj() is its own business: only torch.Tensor's bits are read.
    t = _torch_exchange_type(module="mylib")(PTR, dtype=COMPLEX)
    t.conj_bit = True
    assert ptr_of(kernarg.pack((t,))) == PTR and t.asked == []


def test_real_torch_lazy_views_are_refused():
    torch = pytest.importorskip("torch")
    z = torch.tensor([[1 + 2j, 3 + 4j], [5 + 6j, 7 + 8j]])
    im = z.conj().imag                      # torch reads it as -2, -4 ...; its memory says 2, 4
    views = {"conjugated": [z.conj(), z.conj().detach(), z.conj()[0],
                            torch.tensor([1j]).conj()],
             "negated": [im, im.T, im[0, 0], im.detach(), im.reshape(4), im.unsqueeze(0),
                         torch.tensor([1 + 2j]).conj().imag]}
    for word, tensors in views.items():
        for t in tensors:
            with pytest.raises(ValueError, match=rf"argument 0 \(torch.Tensor\): the tensor is "
                                                 rf"a lazily {word} view"):
                kernarg.pack((t,))
    # Resolved, and plain: past the check, refused only for being CPU memory.
    for t in (z, z.conj().resolve_conj(), im.resolve_neg(), torch.ones(2, 3).T, z.real):
        with pytest.raises(TypeError, match=r"argument 0 \(torch.Tensor\): the memory is on "
                                            r"the CPU"):
            kernarg.pack((t,))


def test_exchange_api_failures_name_the_argument_and_function():
    cls = exchange_type()
    x = cls(PTR)
    x.fail_tensor = True
    with pytest.raises(RuntimeError, match=r"argument 1 .*dltensor_from_py_object_no_sync\) "
                                           r"failed without setting an exception"):
        kernarg.pack((0, x))
    y = exchange_type(fail_stream=True)(PTR)
    with pytest.raises(RuntimeError, match=r"argument 0 .*current_work_stream"):
        kernarg.pack((y,))


def test_exchange_api_null_data():
    cls = exchange_type()
    assert ptr_of(kernarg.pack((cls(0, shape=(0, 4)),))) == 0
    with pytest.raises(ValueError, match="argument 0.*null data pointer"):
        kernarg.pack((cls(0, shape=(2,)),))
    y = cls(PTR, shape=(3, -2))
    with pytest.raises(ValueError, match="argument 0.*exchange API gave a tensor with a "
                                         "negative extent"):
        kernarg.pack((y,))
    y = cls(PTR)
    y.null_shape = True
    with pytest.raises(ValueError, match="argument 0.*with ndim > 0 but no shape"):
        kernarg.pack((y,))


def test_exchange_api_byte_offset_past_2_64_is_refused():
    cls = exchange_type()
    with pytest.raises(ValueError, match="argument 0.*exchange API gave a tensor with a "
                                         "byte_offset that carries its data pointer past"):
        kernarg.pack((cls(0x7000, byte_offset=2**64 - 0x1000),))
    assert ptr_of(kernarg.pack((cls(0x7000, byte_offset=2**64 - 1 - 0x7000),))) == 2**64 - 1


@pytest.mark.parametrize("kwargs", [
    {"version": (1, 2)},                      # before the exchange API existed
    {"version": (2, 0)},                      # a major version kernarg does not read
    {"capsule_name": b"something_else"},
    {"has_tensor_fn": False},                 # the function is optional in the table
])
def test_unusable_exchange_api_falls_back_to_dlpack(kwargs):
    cls = exchange_type(**kwargs)
    x = cls(PTR, byte_offset=8)
    assert ptr_of(kernarg.pack((x,))) == PTR + 8
    assert cls.tensor_calls == 0 and x.exported == 1


def test_exchange_api_newer_major_walks_prev_api_chain():
    old = exchange_type(version=(1, 3), work_stream=0x77)
    new = exchange_type(version=(2, 0), prev=old)
    b = kernarg.pack((new(PTR),))
    assert ptr_of(b) == PTR and b.producer_streams == (0x77,)
    assert old.stream_queries == [(2, 0)]     # the 1.3 table in the chain answered


def test_exchange_api_typed_pointee_check():
    cls = exchange_type()
    sig = kernarg.Signature("const float* p, int n")
    assert ptr_of(sig.pack((cls(PTR, dtype=(2, 32, 1)), 3))) == PTR
    with pytest.raises(TypeError, match="'p'.*i4"):
        sig.pack((cls(PTR, dtype=(0, 32, 1)), 3))


def test_exchange_api_holds_no_extra_references():
    cls = exchange_type()
    x = cls(PTR)
    before = sys.getrefcount(x)
    for _ in range(100):
        kernarg.pack((x, 1.0)).release()
    assert sys.getrefcount(x) == before


def test_jax_tracers_are_refused_as_tracers():
    # Inside jax.jit (vmap, grad) a function's arrays are tracers: they have __dlpack__ by name
    # and no memory. The refusal says what they are and where the launch belongs.
    jax = pytest.importorskip("jax", reason="jax is not installed")
    seen = []

    def traced(x):
        for wrap in (lambda a: kernarg.pack((1, a)),
                     lambda a: kernarg.Signature("int n, const float* p").pack((1, a))):
            with pytest.raises(TypeError, match=r"argument 1 \(jax\._src\..*Tracer\): a JAX "
                                                r"tracer, not an array: inside jax.jit"):
                wrap(x)
        seen.append(type(x).__name__)
        return x

    x = jax.numpy.zeros(3, jax.numpy.float32)
    jax.jit(traced)(x)
    jax.vmap(traced)(x)
    jax.grad(lambda a: traced(a).sum())(x)
    assert len(seen) == 3 and all(name.endswith("Tracer") for name in seen)


def test_torch_exchange_api_errors_name_the_argument():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack C exchange API")
    sparse = torch.zeros(2, 2).to_sparse()    # no strided storage: the producer refuses
    with pytest.raises(RuntimeError, match=r"argument 2 \(torch.Tensor\): the producer's DLPack "
                                           r"C exchange API"):
        kernarg.pack((1, 2, sparse))


def _real_torch_cases(torch):
    """Real torch tensors (CPU build) of each layout, dtype and view kind a user may pass, with
    the refusal each must get: host memory is refused with the CPU message, lazily
    conjugated or negated views as such, and tensors with no strided memory by the producer's
    own error, named."""
    cpu = (TypeError, r"the memory is on the CPU")
    producer = (RuntimeError, r"the producer's DLPack C exchange API "
                              r"\(dltensor_from_py_object_no_sync\) raised RuntimeError: ")
    z = torch.zeros(2, 3, dtype=torch.complex64)

    class Sub(torch.Tensor):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # sparse CSR's and nested tensors' "beta"/"prototype"
        return {
            "float32": (torch.zeros(3), cpu),
            "bool": (torch.zeros(3, dtype=torch.bool), cpu),
            "bfloat16": (torch.zeros(3, dtype=torch.bfloat16), cpu),
            "float8_e4m3fn": (torch.zeros(3, dtype=torch.float8_e4m3fn), cpu),
            "uint16": (torch.zeros(3, dtype=torch.uint16), cpu),
            "complex64": (z, cpu),
            "empty": (torch.zeros(0), cpu),
            "0-d": (torch.tensor(3.0), cpu),
            "transposed": (torch.zeros(2, 3).T, cpu),
            "channels_last": (torch.zeros(1, 2, 3, 3).to(memory_format=torch.channels_last), cpu),
            "requires_grad": (torch.zeros(3, requires_grad=True), cpu),
            "Parameter": (torch.nn.Parameter(torch.zeros(3)), cpu),
            "subclass": (torch.zeros(3).as_subclass(Sub), cpu),
            "conj": (z.conj(), (ValueError, r"lazily conjugated view")),
            "neg": (z.conj().imag, (ValueError, r"lazily negated view")),
            "meta": (torch.empty(3, device="meta"),
                     (TypeError, r"the tensor is on torch device meta, not on a CUDA device")),
            "sparse_coo": (torch.zeros(2, 2).to_sparse(), producer),
            "sparse_csr": (torch.zeros(2, 2).to_sparse_csr(), producer),
            "nested": (torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]), producer),
        }


def test_real_torch_tensors_that_a_kernel_cannot_take_are_refused_by_name():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack C exchange API")
    sig = kernarg.Signature("int n, float* p")
    for label, (t, (kind, message)) in _real_torch_cases(torch).items():
        before = sys.getrefcount(t)
        for pack, prefix in ((lambda a: kernarg.pack([7, a]), ""),
                             (lambda a: sig.pack((7, a)), r"parameter 1 \('p'\): "),
                             (lambda a: kernarg.pack((7, a), stream=2), "")):
            with pytest.raises(kind, match=rf"^{prefix}argument 1 \([\w.<>]*"
                                           rf"{type(t).__name__}\): .*{message}") as info:
                pack(t)
            assert not isinstance(info.value, SystemError), label
        del info
        assert sys.getrefcount(t) == before, label     # nothing kept by a refused pack


def _handle_stand_in(module, name, **attrs):
    t = type(name, (), {"__init__": lambda self, **kw: self.__dict__.update(kw)})
    t.__module__ = module
    return t


def test_texture_and_surface_objects_pack_as_their_handles():
    """By value, 8 bytes: cuda.bindings' driver and runtime classes as int(obj), CuPy's
    cupy.cuda.texture classes as .ptr, cuda.core's as .handle (0 once closed: refused)."""
    from cuda.bindings import driver, runtime

    CupyTex = _handle_stand_in("cupy.cuda.texture", "TextureObject")
    CupySurf = _handle_stand_in("cupy.cuda.texture", "SurfaceObject")
    CoreTex = _handle_stand_in("cuda.core._texture", "TextureObject")
    args = (driver.CUtexObject(1), driver.CUsurfObject(2), runtime.cudaTextureObject_t(3),
            runtime.cudaSurfaceObject_t(4), CupyTex(ptr=5), CupySurf(ptr=6),
            CoreTex(handle=7), True)
    block = kernarg.pack(args)
    assert block.sizes == (8,) * 7 + (1,)
    assert bytes(block) == struct.pack("<7Q?", 1, 2, 3, 4, 5, 6, 7, True)
    assert block.producer_streams == ()

    with pytest.raises(ValueError, match=r"argument 1 \(cuda.core._texture.TextureObject\): "
                                         "the texture/surface object is closed"):
        kernarg.pack((1, CoreTex(handle=0)))
    with pytest.raises(OverflowError, match=r"argument 0 .*\.ptr of the texture/surface "
                                            "object gave -1"):
        kernarg.pack((CupyTex(ptr=-1),))
    with pytest.raises(TypeError, match=r"argument 0 .*\.ptr of the texture/surface object "
                                        "raised TypeError"):
        kernarg.pack((CupyTex(ptr="0x10"),))
    with pytest.raises(AttributeError, match=r"argument 0 .*\.handle of the texture/surface "
                                             "object raised AttributeError"):
        kernarg.pack((CoreTex(),))
    # Same names elsewhere are not these libraries' classes.
    with pytest.raises(TypeError, match="unsupported kernel argument"):
        kernarg.pack((_handle_stand_in("mylib", "TextureObject")(ptr=5),))


class _TensorDeviceProducer(DLPackProducer):
    """Exports a DLTensor whose own device is ``tensor_device``, whatever __dlpack_device__
    says: a producer that never set it (0), or set it to the CPU, as one library's GPU arrays
    once were exported."""

    tensor_device = (0, 0)

    def _fill(self, t, shape_arr):
        super()._fill(t, shape_arr)
        t.device = DLDevice(*self.tensor_device)


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("tensor_device", [(0, 0), (1, 0), (2, 1)],
                         ids=["unset", "cpu", "other-gpu"])
def test_dlpack_device_decides_not_the_tensors_own(versioned, tensor_device):
    """__dlpack_device__ says where the memory is (the DLPack Python specification); the device
    written inside the exported tensor is not trusted. A CUDA array whose exporter left the
    tensor's device unset, or wrote the CPU there, packs as the CUDA pointer it is, checked
    against the launch device by what __dlpack_device__ said; its deleter runs once."""
    p = _TensorDeviceProducer(0x7000, device=(2, 0), versioned=versioned, byte_offset=16)
    p.tensor_device = tensor_device
    block = kernarg.pack((p,), device=0)
    assert ptr_of(block) == 0x7010
    assert p.exported == 1 and p.deleted == 0
    block.release()
    assert p.deleted == 1
    with pytest.raises(ValueError, match="device"):
        kernarg.pack((_TensorDeviceProducer(0x7000, device=(2, 1)),), device=0)


def test_a_cpu_dlpack_device_is_refused_before_any_export():
    """The other way round: __dlpack_device__ says the CPU, the tensor says CUDA. Refused with
    the CPU message, and nothing is exported (no capsule to consume and release)."""
    p = _TensorDeviceProducer(0x7000, device=(1, 0))
    p.tensor_device = (2, 0)
    with pytest.raises(TypeError, match="memory is on the CPU"):
        kernarg.pack((p,))
    assert p.exported == 0


class _TorchLikePinned(DLPackProducer):
    """__dlpack__ as torch's is for a pinned tensor: its device is the CPU, so any stream but
    None (or -1) is refused."""

    def __dlpack__(self, *, stream=None, max_version=None):
        if self.device[0] == 3 and stream not in (None, -1):
            raise AssertionError("stream should be None on cpu.")
        return super().__dlpack__(stream=stream, max_version=max_version)


@pytest.mark.parametrize("device, expected", [((3, 0), None), ((2, 0), 0x77),
                                              ((13, 0), 0x77)],
                         ids=["pinned", "device", "managed"])
def test_the_consumer_stream_goes_to_cuda_devices_not_to_pinned_memory(device, expected):
    """DLPack's Python specification accepts only stream=None for device types without
    streams; a pinned (kDLCUDAHost) producer gets None, a CUDA or managed one the launch
    stream."""
    p = _TorchLikePinned(PTR, device=device)
    block = kernarg.pack((p,), stream=0x77)
    assert ptr_of(block) == PTR and p.streams == [expected]
    block.release()
    assert p.deleted == 1
