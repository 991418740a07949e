"""numpy arrays over pinned host memory: taken at their data address when the object their
memory comes from (down .base) is a page-locked allocation from CUDA's allocator, refused as
CPU memory otherwise."""
import ctypes
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kernarg

from producers import DLPackProducer, ptr_of


def address(arr):
    return arr.__array_interface__["data"][0]


def host_type(module, name, base=bytearray, **attrs):
    """A buffer-exporting class that kernarg recognises by module and name, as it does the
    library's own (it imports none of them)."""
    return type(name, (base,), {"__module__": module, **attrs})


class _NumpyProducer(DLPackProducer):
    # numpy.from_dlpack asks with dl_device and copy too (DLPack 1.0 keywords); this producer
    # takes them, so numpy gets a versioned capsule when the producer is versioned.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return super().__dlpack__(stream=stream, max_version=max_version)


def from_dlpack(memory, device, versioned=True):
    cls = _NumpyProducer if versioned else DLPackProducer
    arr = np.from_dlpack(cls(ctypes.addressof(memory), device=device,
                             shape=(len(memory),), versioned=versioned))
    # The capsule kernarg reads the device from: numpy >= 2.1 asks for a versioned tensor
    # ("numpy_dltensor_versioned"), older ones for a legacy one ("numpy_dltensor").
    assert repr(arr.base).startswith('<capsule object "numpy_dltensor')
    return arr


CUPY_PINNED = host_type("cupy.cuda.pinned_memory", "PinnedMemoryPointer")
PYCUDA_PAGELOCKED = host_type("pycuda._driver", "PagelockedHostAllocation")
PYCUDA_ALIGNED = host_type("pycuda._driver", "AlignedHostAllocation")     # malloc: pageable


def torch_tensor_type(pinned):
    """Stands in for torch.Tensor (buffer exporter, as .numpy() makes one the base); is_pinned()
    answers ``pinned``."""
    return host_type("torch", "Tensor", is_pinned=lambda self: pinned)


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("device", [(3, 0), (13, 0)], ids=["kDLCUDAHost", "kDLCUDAManaged"])
def test_numpy_from_dlpack_of_pinned_or_managed_memory_is_taken(device, versioned):
    memory = (ctypes.c_float * 8)()
    arr = from_dlpack(memory, device, versioned)
    assert address(arr) == ctypes.addressof(memory)
    block = kernarg.pack((arr, arr[3:], arr[::2], arr.reshape(2, 4).T, 7), device=1)
    base = ctypes.addressof(memory)
    assert [ptr_of(block, i) for i in range(4)] == [base, base + 12, base, base]
    assert block.producer_streams == ()                 # host memory: no stream to wait on
    # Views reached through memoryviews and numpy's own wrappers are the same memory.
    assert ptr_of(kernarg.pack((np.asarray(memoryview(arr[2:])),))) == base + 8
    assert ptr_of(kernarg.pack((np.frombuffer(memoryview(arr), np.uint8)[4:],))) == base + 4


@pytest.mark.parametrize("owner, library", [
    (CUPY_PINNED, "cupyx.empty_pinned"),
    (PYCUDA_PAGELOCKED, "pycuda.driver.pagelocked_empty"),
    (torch_tensor_type(True), "a pinned torch tensor's .numpy()"),
])
def test_numpy_array_over_a_pinned_allocation_is_taken(owner, library):
    memory = owner(64)
    arr = np.frombuffer(memory, np.float32)             # what each library's helper builds
    assert ptr_of(kernarg.pack((arr[4:],))) == address(arr) + 16, library
    assert ptr_of(kernarg.pack((np.ndarray((4,), np.float64, buffer=memory, offset=8),))) \
        == address(arr) + 8


def test_numba_pinned_array_and_mapped_buffer_are_taken():
    driver = pytest.importorskip("numba.cuda.cudadrv.driver", reason="numba-cuda not installed")
    memory = (ctypes.c_char * 64)()
    # What numba.cuda.pinned_array builds: numba's own PinnedMemory (no driver call is needed
    # to make one over memory that exists).
    pinned = driver.PinnedMemory(None, ctypes.addressof(memory), 64)
    arr = np.ndarray((8,), np.float64, buffer=pinned)
    assert ptr_of(kernarg.pack((arr[1:],))) == ctypes.addressof(memory) + 8
    # mempin's registered memory records the array it pinned: not taken (its device address
    # may differ from its host address).
    registered = driver.PinnedMemory(None, ctypes.addressof(memory), 64, owner=arr)
    with pytest.raises(TypeError, match=r"^argument 0 \(numpy\.ndarray\): the memory is on the "
                                        r"CPU.*numba\.cuda\.pinned_array"):
        kernarg.pack((np.ndarray((8,), np.float64, buffer=registered),))

    # A plain array over numba's mapped memory (np.asarray of a mapped_array): the buffer is a
    # MappedOwnedPointer; the MappedMemory behind it needs the driver, so a stand-in.
    class Mapped:
        refct = 1
        device_ctypes_pointer = ctypes.c_void_p(ctypes.addressof(memory))
        _bufptr_ = ctypes.addressof(memory)
        _buflen_ = 64

        def free(self):
            pass
    owned = driver.MappedOwnedPointer(Mapped())
    mapped = np.ndarray((8,), np.float64, buffer=owned)
    assert ptr_of(kernarg.pack((mapped[2:],))) == ctypes.addressof(memory) + 16


def test_ndarray_subclass_with_cuda_array_interface_keeps_its_interface():
    # numba's MappedNDArray and ManagedNDArray are ndarray subclasses with a CUDA Array
    # Interface, which gives the device address and stream: the interface decides, not .base.
    class MappedArray(np.ndarray):
        @property
        def __cuda_array_interface__(self):
            return {"version": 3, "data": (0x7F00_0000_2000, False), "shape": self.shape,
                    "typestr": self.dtype.str, "strides": None, "stream": 7}
    arr = np.zeros(4, np.float32).view(MappedArray)
    block = kernarg.pack((arr,))
    assert ptr_of(block) == 0x7F00_0000_2000 and block.producer_streams == (7,)


@pytest.mark.parametrize("make", [
    lambda: np.zeros(4),                                            # owns its memory
    lambda: np.zeros(8)[2:],
    lambda: np.frombuffer(bytearray(32), np.float32),
    lambda: np.frombuffer(PYCUDA_ALIGNED(32), np.float32),
    lambda: np.frombuffer(torch_tensor_type(False)(32), np.float32),      # a pageable torch tensor
    lambda: np.frombuffer(host_type("cupy.cuda.memory", "Unrelated")(32), np.float32),
    lambda: from_dlpack((ctypes.c_float * 4)(), (1, 0)),
    lambda: np.asarray(memoryview(bytearray(16))),
], ids=["owner", "view", "bytearray", "pycuda-aligned", "torch-pageable", "other-type",
        "from-dlpack-cpu", "memoryview"])
def test_numpy_array_over_pageable_memory_is_refused_with_a_pinned_hint(make):
    arr = make()        # held here: the test producer's deleter must not run mid-exception
    with pytest.raises(TypeError, match=r"^argument 1 \(numpy\.ndarray\): the memory is on the "
                                        r"CPU.*\(DLPack device kDLCPU\); a numpy array is taken "
                                        r"only over pinned memory .*cupyx\.empty_pinned"):
        kernarg.pack((1, arr))


def test_real_cpu_torch_tensor_numpy_is_refused():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    t = torch.arange(8, dtype=torch.float32)
    assert not t.is_pinned()
    for arr in (t.numpy(), t.numpy()[2:], np.from_dlpack(t)):
        with pytest.raises(TypeError, match=r"^argument 0 \(numpy\.ndarray\): the memory is on "
                                            r"the CPU.*pinned torch tensor"):
            kernarg.pack((arr,))


def test_from_dlpack_of_another_host_device_is_refused_naming_it():
    memory = (ctypes.c_float * 4)()
    arr = from_dlpack(memory, (11, 0))                  # kDLROCMHost: numpy takes it as host
    with pytest.raises(TypeError, match=r"^argument 0 \(numpy\.ndarray\): the memory is on "
                                        r"DLPack device kDLROCMHost \(11\)"):
        kernarg.pack((arr,))


def test_pinned_array_under_a_signature_checks_element_type_and_writability():
    memory = CUPY_PINNED(64)
    arr = np.frombuffer(memory, np.float32)
    sig = kernarg.Signature("float* out, const double* x")
    block = sig.pack((arr, np.frombuffer(memory, np.float64)))
    assert ptr_of(block, 0) == ptr_of(block, 1) == address(arr)
    with pytest.raises(TypeError, match=r"parameter 0 \('out'\) is float\* but the array's "
                                        r"element type is f8"):
        sig.pack((np.frombuffer(memory, np.float64), None))
    readonly = np.frombuffer(memory, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match=r"^parameter 0 \('out'\).*read-only"):
        sig.pack((readonly, None))
    assert ptr_of(kernarg.Signature("const float* x").pack((readonly,))) == address(arr)


def test_pinned_big_endian_or_datetime_array_is_refused_for_a_typed_pointer():
    # A kernel reads its pointee in the GPU's byte order: a '>f4' array passed to float* was
    # read byte-swapped without a word (numpy's kind and size matched). Datetimes and strings
    # have no C pointee either. Untyped packing and void* take both, as untyped memory.
    memory = CUPY_PINNED(64)
    swapped = np.frombuffer(memory, np.dtype(">f4"))
    dates = np.frombuffer(memory, np.dtype("<M8[ns]"))
    for array, pointee, what in ((swapped, "float", "big-endian"),
                                 (swapped, "unsigned char", "big-endian"),
                                 (dates, "long long", "one no C pointee names")):
        with pytest.raises(TypeError, match=rf"parameter 0 \('p'\) is {pointee}\* but the "
                                            rf"array's element type is {what}"):
            kernarg.Signature(f"{pointee}* p").pack((array,))
        assert ptr_of(kernarg.Signature("void* p").pack((array,))) == address(array)
        assert ptr_of(kernarg.pack((array,))) == address(array)
    # One-byte elements have no byte order: '>i1' is '|i1'.
    assert ptr_of(kernarg.Signature("signed char* p").pack(
        (np.frombuffer(memory, np.dtype(">i1")),))) == address(swapped)
    little = np.frombuffer(memory, np.dtype("<f4"))
    assert ptr_of(kernarg.Signature("float* p").pack((little,))) == address(swapped)


def test_pinned_0d_array_packs_as_a_pointer_and_pageable_one_hints_at_its_value():
    arr = np.frombuffer(CUPY_PINNED(4), np.float32).reshape(())
    assert ptr_of(kernarg.pack((arr,))) == address(arr)
    with pytest.raises(TypeError, match=r"on the CPU.*pass its value, e\.g\. arr\[\(\)\]$"):
        kernarg.pack((np.zeros((), np.float32),))


def test_exporter_verdicts_are_remembered_per_type_and_asked_per_instance():
    # What a type is (a pinned allocator, a torch tensor, pageable) is found once per type;
    # whether a torch tensor is pinned is asked of each one. Many exporter types, past what
    # kernarg remembers, keep their verdicts.
    tensor = host_type("torch", "Tensor", is_pinned=lambda self: self[0] == 1)
    pinned_memory, pageable_memory = tensor(b"\x01" * 8), tensor(b"\x00" * 8)
    for _ in range(2):
        arr = np.frombuffer(pinned_memory, np.uint8)
        assert ptr_of(kernarg.pack((arr,))) == address(arr)
        with pytest.raises(TypeError, match="on the CPU"):
            kernarg.pack((np.frombuffer(pageable_memory, np.uint8),))
    for i in range(200):
        pinned = i % 2 == 0
        owner = host_type("cupy.cuda.pinned_memory" if pinned else "mylib", "PinnedMemoryPointer")
        arr = np.frombuffer(owner(8), np.uint8)[1:]
        if pinned:
            assert ptr_of(kernarg.pack((arr,))) == address(arr)
        else:
            with pytest.raises(TypeError, match="on the CPU"):
                kernarg.pack((arr,))


def test_owner_whose_pinned_question_raises_is_named():
    def is_pinned(self):
        raise RuntimeError("no CUDA")
    owner = host_type("torch", "Tensor", is_pinned=is_pinned)(16)
    with pytest.raises(RuntimeError, match=r"^argument 0 \(numpy\.ndarray\): asking the "
                                           r"torch\.Tensor that holds the array's memory whether "
                                           r"it is pinned raised RuntimeError: no CUDA"):
        kernarg.pack((np.frombuffer(owner, np.uint8),))


def test_pinned_array_is_kept_alive_by_the_block_and_released_with_it():
    memory = CUPY_PINNED(16)
    arr = np.frombuffer(memory, np.float32)
    before = sys.getrefcount(arr)
    block = kernarg.pack((arr,))
    assert block.args[0] is arr                         # and so its memory, through .base
    del block
    assert sys.getrefcount(arr) == before


def test_masked_array_over_pinned_memory_is_refused():
    # A kernel would read the masked elements as data: not taken, whatever the memory.
    arr = np.ma.masked_array(np.frombuffer(CUPY_PINNED(16), np.float32), mask=[0, 1, 0, 0])
    for masked in (arr, np.ma.masked_array(np.zeros(4))):
        with pytest.raises(TypeError, match=r"^argument 0 \(numpy\.ma\.(core\.)?MaskedArray\): "
                                            r"a masked array is not taken: a kernel would "
                                            r"read the masked elements as data; pass "
                                            r"arr\.filled"):
            kernarg.pack((masked,))
    assert ptr_of(kernarg.pack((arr.data,))) == address(arr.data)


@pytest.mark.skipif(sys.version_info < (3, 12),
                    reason="a Python class can define __buffer__ only from Python 3.12")
def test_array_whose_buffer_cannot_be_read_is_named():
    class Unreadable(np.ndarray):
        def __buffer__(self, flags):
            raise BufferError("not today")
    arr = np.frombuffer(CUPY_PINNED(16), np.float32).view(Unreadable)
    with pytest.raises(BufferError, match=r"^argument 0 \(.*Unreadable\): the array's buffer "
                                          r"could not be read: BufferError: not today"):
        kernarg.pack((arr,))


def test_array_over_a_released_memoryview_is_refused_by_name():
    arr = np.asarray(memoryview(CUPY_PINNED(16)))
    assert type(arr.base) is memoryview
    arr.base.release()          # the memoryview numpy keeps lets go of the exporter
    with pytest.raises(ValueError, match=r"^argument 0 \(numpy\.ndarray\): the memoryview the "
                                         r"array's memory comes from has been released"):
        kernarg.pack((arr,))


# Property: after any chain of numpy operations that view (or, like reshape of a strided
# array, copy) an array over an exporter, an array still over pinned memory packs exactly its
# own data address; anything else -- pageable memory, or a copy -- is refused as CPU memory.
_VIEW_STEPS = st.lists(st.sampled_from([
    lambda a: a[1:], lambda a: a[::-1], lambda a: a[::2], lambda a: a.T,
    lambda a: a.reshape(-1),
    lambda a: a.view(np.uint8) if a.ndim and a.strides[-1] == a.itemsize else a,
    lambda a: a.view(np.float32) if a.ndim and a.strides[-1] == a.itemsize
    and a.shape[-1] * a.itemsize % 4 == 0 else a,
    lambda a: np.lib.stride_tricks.sliding_window_view(a, 1, axis=-1) if a.size else a,
    lambda a: np.broadcast_to(a, (2, *a.shape)),
    lambda a: np.asarray(memoryview(a)) if a.flags.c_contiguous else a,
    lambda a: np.lib.stride_tricks.as_strided(a, a.shape, a.strides),
    lambda a: a[None], lambda a: a[..., :1] if a.ndim else a,
]), max_size=6)


@settings(max_examples=300, deadline=None)
@given(steps=_VIEW_STEPS, pinned=st.booleans(), rows=st.integers(1, 4))
@example(steps=[lambda a: a[::-1], lambda a: a.reshape(-1), lambda a: a[None],
                lambda a: a[1:]], pinned=True, rows=2)     # an empty slice of a copy
def test_any_view_chain_keeps_the_exporters_verdict(steps, pinned, rows):
    owner = (CUPY_PINNED if pinned else bytearray)(rows * 64)
    root = np.frombuffer(owner, np.float64).reshape(rows, -1)
    arr = root
    for step in steps:
        arr = step(arr)
    # Over root's memory: sharing it, or, for an empty array (which shares nothing), a view
    # whose address lies in root's buffer; an empty copy (reshape of a strided array, then an
    # empty slice) has its own allocation and is pageable memory.
    start = address(root)
    over_root = np.shares_memory(arr, root) or (
        arr.size == 0 and start <= address(arr) <= start + root.nbytes)
    if pinned and over_root:
        assert ptr_of(kernarg.pack((arr,))) == address(arr)
    else:
        with pytest.raises(TypeError, match=r"^argument 0 \(numpy\.ndarray\): the memory is on "
                                            r"the CPU"):
            kernarg.pack((arr,))
