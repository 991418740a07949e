"""kernarg.resolve_stream / use_stream / default-stream policy."""
import threading

import numpy as np
import pytest

import kernarg
from kernarg import _stream


class ProtocolStream:
    def __init__(self, result):
        self.result = result

    def __cuda_stream__(self):
        return self.result


class TorchLike:
    cuda_stream = 0x1000


class CupyLike:
    ptr = 0x2000


def test_int_and_protocols():
    assert kernarg.resolve_stream(0x77) == 0x77
    assert kernarg.resolve_stream(0) == 0
    assert kernarg.resolve_stream(ProtocolStream((0, 0x88))) == 0x88
    assert kernarg.resolve_stream(TorchLike()) == 0x1000
    assert kernarg.resolve_stream(CupyLike()) == 0x2000


def test_cuda_stream_attribute_of_cuda_core_before_0_2():
    # cuda.core 0.1's Stream held the pair in an attribute; 0.2 made __cuda_stream__ a method.
    class AttributeStream:
        __cuda_stream__ = (0, 0x89)

    class PropertyStream:
        @property
        def __cuda_stream__(self):
            return (0, 0x8a)

    assert kernarg.resolve_stream(AttributeStream()) == 0x89
    assert kernarg.resolve_stream(PropertyStream()) == 0x8a
    # The same checks as for the method's result, with messages naming the attribute.
    for held, error, message in [((1, 5), ValueError, r"__cuda_stream__ version 1 is not"),
                                 ((0, 1, 2), ValueError, r"__cuda_stream__ returned \(0, 1, 2\)"),
                                 ((0, -1), ValueError, r"from __cuda_stream__ is -1, outside"),
                                 ((0, "s"), TypeError, "__cuda_stream__")]:
        with pytest.raises(error, match=message):
            kernarg.resolve_stream(type("Old", (), {"__cuda_stream__": held})())
    # Something neither a pair nor callable is still refused, naming what it raised.
    with pytest.raises(TypeError, match=r"__cuda_stream__\(\) raised TypeError"):
        kernarg.resolve_stream(type("Odd", (), {"__cuda_stream__": [0, 5]})())


class CountingStream:
    """A __cuda_stream__ method that counts its calls and answers what it is told to."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    def __cuda_stream__(self):
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _method_call_way():
    # kernarg remembers the last type whose __cuda_stream__ was a method and calls the next
    # object's without a bound method; a first resolve of a CountingStream sets that up.
    kernarg.resolve_stream(CountingStream((0, 1)))


def test_a_method_is_called_once_per_resolve_whatever_it_does():
    _method_call_way()
    for answer, error, message in [
            ((0, 0x77), None, None),
            ((0, 2**64 - 1), None, None),                  # past kernarg's small-int read
            ((0, True), TypeError, "gave bool"),
            ((1, 5), ValueError, r"__cuda_stream__\(\) version 1 is not supported"),
            ([0, 5], ValueError, r"returned \[0, 5\], expected \(0, handle\)"),
            ((0, -1), ValueError, "outside"),
            # Raised inside the method, not a missing attribute: said so, never taken for one.
            (AttributeError("inside"), TypeError, r"__cuda_stream__\(\) raised AttributeError"),
            (TypeError("inside"), TypeError, r"__cuda_stream__\(\) raised TypeError"),
            (RuntimeError("inside"), TypeError, r"__cuda_stream__\(\) raised RuntimeError")]:
        s = CountingStream(answer)
        if error is None:
            assert kernarg.resolve_stream(s) == answer[1]
        else:
            with pytest.raises(error, match=message):
                kernarg.resolve_stream(s)
        assert s.calls == 1, answer
    # An int subclass handle is read as its value, without running its methods.
    class Handle(int):
        def __index__(self):
            raise AssertionError("not called")
    assert kernarg.resolve_stream(CountingStream((0, Handle(0x99)))) == 0x99
    # Interrupts are not wrapped.
    with pytest.raises(KeyboardInterrupt):
        kernarg.resolve_stream(CountingStream(KeyboardInterrupt()))


def test_a_static_types_method_is_called_as_its_function():
    """A type whose attributes cannot change (a C extension's, as cuda.core's Stream, with no
    instance dict) has its __cuda_stream__ function called with the object, with no lookup
    of the attribute; the results are read as ever, and the method runs once a resolve."""
    from kernarg._stream import _FixedStream, _method_way, _stream_method

    assert _stream_method(_FixedStream) is _FixedStream.__dict__["__cuda_stream__"]
    assert _stream_method(CountingStream) is None       # a Python class: may change
    assert _stream_method(int) is None                  # no such method
    core = pytest.importorskip("cuda.core")
    assert _stream_method(core.Stream) is core.Stream.__dict__["__cuda_stream__"]
    for answer, error, message in [
            ((0, 0x77), None, None),
            ((0, 2**64 - 1), None, None),
            ((1, 5), ValueError, r"__cuda_stream__\(\) version 1 is not supported"),
            ((0, -1), ValueError, "outside"),
            (AttributeError("inside"), TypeError, r"__cuda_stream__\(\) raised AttributeError"),
            (RuntimeError("inside"), TypeError, r"__cuda_stream__\(\) raised RuntimeError")]:
        for _ in range(2):          # the first sets the way up, the second takes it
            s = _FixedStream(answer)
            if error is None:
                assert kernarg.resolve_stream(s) == answer[1]
            else:
                with pytest.raises(error, match=message):
                    kernarg.resolve_stream(s)
            assert s.calls == 1, answer
    # Another type takes the way over (twice in a row: the second takes it), and hands it
    # back: each object's own method runs, never the other type's function.
    for i in range(3):
        streams = [_FixedStream((0, 0x100 + i)), CountingStream((0, 0x200 + i)),
                   CountingStream((0, 0x300 + i)), _FixedStream((0, 0x400 + i))]
        ways = []
        for s in streams:
            ways.append((kernarg.resolve_stream(s), _method_way()))
        function = _FixedStream.__dict__["__cuda_stream__"]
        assert ways == [(0x100 + i, (_FixedStream, function)),
                        (0x200 + i, (CountingStream, None)),
                        (0x300 + i, (CountingStream, None)),
                        (0x400 + i, (_FixedStream, function))]
        assert [s.calls for s in streams] == [1, 1, 1, 1]


def test_a_type_whose_method_changes_is_read_as_it_now_is():
    class Changing:
        def __cuda_stream__(self):
            return (0, 0x10)

    assert kernarg.resolve_stream(Changing()) == 0x10
    assert kernarg.resolve_stream(Changing()) == 0x10          # the method-call way
    Changing.__cuda_stream__ = lambda self: (0, 0x11)
    assert kernarg.resolve_stream(Changing()) == 0x11
    Changing.__cuda_stream__ = (0, 0x12)                       # a held pair, as cuda.core 0.1
    assert kernarg.resolve_stream(Changing()) == 0x12
    Changing.__cuda_stream__ = property(lambda self: (0, 0x13))
    assert kernarg.resolve_stream(Changing()) == 0x13
    Changing.__cuda_stream__ = None
    Changing.ptr = 0x14                                         # None: no protocol at all
    assert kernarg.resolve_stream(Changing()) == 0x14
    del Changing.__cuda_stream__, Changing.ptr
    with pytest.raises(TypeError, match="cannot use .*Changing as a CUDA stream"):
        kernarg.resolve_stream(Changing())
    # An instance's own attribute is what getattr reads, so what kernarg reads.
    Changing.__cuda_stream__ = lambda self: (0, 0x15)
    assert kernarg.resolve_stream(Changing()) == 0x15
    s = Changing()
    s.__cuda_stream__ = lambda: (0, 0x16)
    assert kernarg.resolve_stream(s) == 0x16
    s.__cuda_stream__ = (0, 0x17)
    assert kernarg.resolve_stream(s) == 0x17


def test_streams_of_several_types_in_turn():
    class A:
        def __cuda_stream__(self):
            return (0, 0xA)

    class B(A):
        def __cuda_stream__(self):
            return (0, 0xB)

    objects = [A(), B(), TorchLike(), A(), A(), CupyLike(), B(), 5, None, B()]
    expected = [0xA, 0xB, 0x1000, 0xA, 0xA, 0x2000, 0xB, 5, kernarg.default_stream(), 0xB]
    assert [kernarg.resolve_stream(o) for o in objects] == expected


def test_numpy_integer_handles():
    # A handle kept in a numpy integer (an array of handles, say) is that handle.
    assert kernarg.resolve_stream(np.uint64(2**64 - 1)) == 2**64 - 1
    assert kernarg.resolve_stream(np.int32(0x77)) == 0x77
    assert kernarg.resolve_stream(np.array(0x99, np.uint64)) == 0x99
    assert type(kernarg.resolve_stream(np.uint64(5))) is int
    assert kernarg.pack((1,), stream=np.uint64(0x1234)).nargs == 1


def test_numpy_subclasses_are_read_by_the_stream_protocols():
    # numpy's own types are answered from the type object, before any attribute is read; a
    # subclass of them is a Python class like any other and may carry a stream protocol.
    class HandleArray(np.ndarray):
        def __cuda_stream__(self):
            return (0, int(self[0]))

    class TorchLikeScalar(np.uint64):
        cuda_stream = 0x3000

    assert kernarg.resolve_stream(np.array([0x7a, 5], np.uint64).view(HandleArray)) == 0x7a
    assert kernarg.resolve_stream(TorchLikeScalar(9)) == 0x3000
    # A Python class's tp_name is its __name__, whatever that says.
    assert kernarg.resolve_stream(type("numpy.Stream", (), {"cuda_stream": 0x44})()) == 0x44
    with pytest.raises(TypeError, match="cannot use numpy.ndarray as a CUDA stream"):
        kernarg.resolve_stream(np.array([0x7a, 5], np.uint64))


def test_cuda_bindings_custream():
    from cuda.bindings import driver

    assert kernarg.resolve_stream(driver.CUstream(0x99)) == 0x99


def test_custream_is_read_only_from_cuda_bindings():
    # A class named CUstream is read by int() only where cuda.bindings defines it; the name is
    # read from the type object, the module compared as a string.
    def custream(module):
        return type("CUstream", (), {"__module__": module, "__int__": lambda self: 0x9a})()

    assert kernarg.resolve_stream(custream("cuda.bindings.driver")) == 0x9a
    for module in ("mylib", "cuda", None, 5):
        with pytest.raises(TypeError, match="as a CUDA stream; accepted"):
            kernarg.resolve_stream(custream(module))


def _pycuda_stream_type(module="pycuda._driver"):
    # pycuda.driver.Stream as PyCUDA's extension module defines it (a Boost.Python class whose
    # read-only property `handle` is the CUstream as an int).
    class Stream:
        def __init__(self, handle):
            self._handle = handle

        @property
        def handle(self):
            return self._handle

    Stream.__module__ = module
    return Stream


def test_pycuda_stream_handle():
    Stream = _pycuda_stream_type()
    assert kernarg.resolve_stream(Stream(0x5000)) == 0x5000

    class Subclass(Stream):
        pass

    assert kernarg.resolve_stream(Subclass(0x5008)) == 0x5008
    assert kernarg.pack((1,), stream=Stream(0x5010)).nargs == 1
    # Not a handle: the error names PyCUDA's property.
    with pytest.raises(TypeError, match=r"stream Stream: PyCUDA Stream.handle gave str, "
                                        r"expected an int handle"):
        kernarg.resolve_stream(Stream("x"))
    with pytest.raises(ValueError, match=r"from PyCUDA Stream.handle is -3, outside"):
        kernarg.resolve_stream(Stream(-3))


def test_handle_of_another_library_is_not_a_stream():
    # `.handle` means many things (cuda.core's is a CUstream object, PyCUDA's Context and Module
    # have one too): only PyCUDA's Stream class is read through it.
    for module, name in (("mylib", "Stream"), ("pycuda._driver", "Context")):
        cls = _pycuda_stream_type(module)
        cls.__name__ = cls.__qualname__ = name
        with pytest.raises(TypeError, match="PyCUDA Stream"):   # the accepted list
            kernarg.resolve_stream(cls(0x5000))


@pytest.mark.parametrize("bad, exc, fragment", [
    (ProtocolStream((1, 5)), ValueError, "version"),
    (ProtocolStream((0,)), ValueError, "(0, handle)"),
    (ProtocolStream((0, "x")), TypeError, "int handle"),
    (True, TypeError, "bool"), (-1, ValueError, "outside"), (2**64, ValueError, "outside"),
    ("stream", TypeError, "accepted"), (object(), TypeError, "accepted"),
    (1.0, TypeError, "accepted"),
    (np.True_, TypeError, "accepted"), (np.float64(1), TypeError, "accepted"),
    (np.array([1, 2], np.uint64), TypeError, "accepted"),
    (np.int64(-1), ValueError, "stream handle from numpy.int64 is -1, outside"),
])
def test_bad_streams(bad, exc, fragment):
    with pytest.raises(exc, match=None) as info:
        kernarg.resolve_stream(bad)
    assert fragment in str(info.value)


def test_default_policy(monkeypatch):
    try:
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 5, 0))
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
        assert _stream._reload_policy() == kernarg.PER_THREAD_DEFAULT_STREAM == 2
        assert kernarg.resolve_stream(None) == 2
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
        assert _stream._reload_policy() == kernarg.LEGACY_DEFAULT_STREAM == 1
        assert kernarg.resolve_stream(None) == 1
        monkeypatch.delenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM")
        assert _stream._reload_policy() == 1
    finally:
        monkeypatch.undo()
        _stream._reload_policy()


# cuda-bindings from 12.9.7 / 13.3.0 read the variable with int(); 12.8.0 - 12.9.6 and
# 13.0.0 - 13.2.x only whether it was set (NVIDIA/cuda-python#2076). (policy, null stream).
_READS = {
    None: {"int": (1, 1), "presence": (1, 1)},
    "0": {"int": (1, 1), "presence": (1, 2)},
    " 00 ": {"int": (1, 1), "presence": (1, 2)},
    "1": {"int": (2, 2), "presence": (2, 2)},
    "-3": {"int": (2, 2), "presence": (2, 2)},
    "yes": {"int": None, "presence": (2, 2)},
    "": {"int": None, "presence": (1, 1)},
}


@pytest.mark.parametrize("version, reads", [
    ((12, 8, 0), "presence"), ((12, 9, 6), "presence"), ((12, 9, 7), "int"),
    ((12, 9, 10), "int"), ((13, 0, 0), "presence"), ((13, 2, 0), "presence"),
    ((13, 3, 0), "int"), ((13, 5, 0), "int"), ((14, 0, 0), "int"), (None, "int"),
])
@pytest.mark.parametrize("value", list(_READS))
def test_the_variable_is_read_as_the_running_cuda_bindings_reads_it(version, reads, value):
    policy, null, problem = _stream._env_reading(value, version)
    expected = _READS[value][reads]
    if expected is None:       # cuda.bindings' int() refuses it: no driver call can work
        assert (policy, null) == (1, 1)
        shown = ".".join(map(str, version)) if version else "?"
        assert problem == (f"CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM={value!r} is not an "
                           f"integer: cuda-bindings {shown} reads it with int() and so cannot "
                           "load the CUDA driver; set it to 1 for the per-thread default "
                           "stream, or to 0 (or unset it) for the legacy one")
    else:
        assert (policy, null, problem) == (*expected, None)


def test_the_null_stream_follows_cuda_bindings_and_none_the_value(monkeypatch):
    # Under a cuda-bindings that loads the per-thread functions for "0", a launch on handle 0
    # runs on the per-thread stream: DLPack producers are told 2 for it. None stays the
    # legacy stream the value asks for (and that cuda.core's default stream is).
    class Producer:
        def __init__(self):
            self.streams = []

        def __dlpack__(self, *, stream=None, max_version=None):
            self.streams.append(stream)
            raise BufferError("recorded")

        def __dlpack_device__(self):
            return (2, 0)

    try:
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 2, 0))
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
        assert _stream._reload_policy() == 1
        assert (_stream._NULL_STREAM, _stream._ENV_PROBLEM) == (2, None)
        assert kernarg.resolve_stream(None) == kernarg.default_stream() == 1
        assert kernarg.resolve_stream(0) == 0       # passed on: the driver reads it
        prod = Producer()
        for stream in (0, None, 5):
            with pytest.raises(BufferError):
                kernarg.pack((prod,), stream=stream)
        assert prod.streams == [2, 1, 5]
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 3, 0))
        assert _stream._reload_policy() == 1 and _stream._NULL_STREAM == 1
        with pytest.raises(BufferError):
            kernarg.pack((prod,), stream=0)
        assert prod.streams[-1] == 1
    finally:
        monkeypatch.undo()
        _stream._reload_policy()


def test_a_value_cuda_bindings_refuses_is_named_where_the_driver_would_load(monkeypatch):
    # cuda.bindings' own error is int()'s ValueError, which names neither the variable nor the
    # fact that a driver is there: kernarg says which variable, and it is no NoDriverError
    # (a suite would skip its GPU tests as if there were no GPU).
    from kernarg import _launch

    try:
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 5, 0))
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "true")
        _stream._reload_policy()
        err = _launch._driver_load_error(ValueError("invalid literal for int() with base 10: "
                                                    "'true'"))
        assert type(err) is kernarg.CudaError
        assert str(err).startswith("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM='true' is not "
                                   "an integer: cuda-bindings 13.5.0 reads it with int()")
        # A library that cannot be loaded is still no driver, whatever the variable says.
        err = _launch._driver_load_error(RuntimeError("Failed to dlopen libcuda.so.1"))
        assert type(err) is kernarg.NoDriverError
        assert str(err) == "no CUDA driver/GPU found: Failed to dlopen libcuda.so.1"
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
        _stream._reload_policy()
        assert type(_launch._driver_load_error(ValueError("x"))) is kernarg.NoDriverError
    finally:
        monkeypatch.undo()
        _stream._reload_policy()


def test_use_stream_is_per_thread_and_nests():
    seen = {}
    with kernarg.use_stream(0x10):
        assert kernarg.resolve_stream(None) == 0x10
        with kernarg.use_stream(TorchLike()):
            assert kernarg.default_stream() == 0x1000
        assert kernarg.default_stream() == 0x10
        t = threading.Thread(target=lambda: seen.setdefault("other", kernarg.default_stream()))
        t.start()
        t.join()
    assert seen["other"] == _stream._POLICY_DEFAULT
    assert kernarg.default_stream() == _stream._POLICY_DEFAULT


def test_pack_rejects_bad_stream():
    with pytest.raises(TypeError, match="stream"):
        kernarg.pack((1,), stream="nope")


def test_use_stream_block_cannot_be_entered_twice_and_unwinds_on_errors():
    block = kernarg.use_stream(0x20)
    with block as handle:
        assert handle == 0x20
        with pytest.raises(RuntimeError, match="already open"):
            block.__enter__()
        assert kernarg.default_stream() == 0x20
    with pytest.raises(KeyError):
        with kernarg.use_stream(0x30):
            assert kernarg.resolve_stream(None) == 0x30
            raise KeyError("boom")
    assert kernarg.default_stream() == _stream._POLICY_DEFAULT
    with pytest.raises(TypeError, match="stream"):
        with kernarg.use_stream("nope"):
            pass
    assert kernarg.default_stream() == _stream._POLICY_DEFAULT


def test_a_copy_of_a_use_stream_block_is_a_new_block_not_yet_open():
    # Cython's own copy of an open block shared its stack: leaving the copy popped the
    # block's entry (the outer stream became the default inside the block), and leaving
    # the block itself then raised IndexError.
    import copy
    import pickle

    block = kernarg.use_stream(0x50)
    with kernarg.use_stream(0x40):
        with block:
            copies = [copy.copy(block), copy.deepcopy(block), pickle.loads(pickle.dumps(block))]
            for c in copies:
                assert type(c) is kernarg.use_stream and c is not block
                c.__exit__(None, None, None)          # not open: leaves nothing
                assert kernarg.default_stream() == 0x50
                with c as handle:                     # a block of its own, for the stream
                    assert handle == 0x50 and kernarg.default_stream() == 0x50
                assert kernarg.default_stream() == 0x50
        assert kernarg.default_stream() == 0x40
    assert kernarg.default_stream() == _stream._POLICY_DEFAULT
    torch_like = copy.copy(kernarg.use_stream(TorchLike()))
    with torch_like as handle:
        assert handle == 0x1000


def test_a_method_result_whose_reading_raises_is_said_so_either_way():
    # A tuple subclass whose len() raises: the same TypeError whether the method is called the
    # general way (first) or the method-call way (second).
    class Odd(tuple):
        def __len__(self):
            raise RuntimeError("len of an odd tuple")

    messages = []
    for _ in range(2):
        with pytest.raises(TypeError, match="reading it raised RuntimeError") as info:
            kernarg.resolve_stream(CountingStream(Odd((0, 5, 6))))
        messages.append(str(info.value))
    assert messages[0] == messages[1]



def test_info_says_what_stream_0_is_and_what_stops_cuda_bindings(monkeypatch):
    from kernarg.__main__ import _default_stream_line

    var = "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM"
    try:
        monkeypatch.setenv(var, "0")
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 2, 0))
        _stream._reload_policy()
        assert _default_stream_line(_stream) == (
            f"default stream: legacy (1); {var}='0'\n"
            "  stream 0 (the NULL stream) is the per-thread (2) one: this cuda-bindings loads "
            "the driver's per-thread functions for any value set (fixed in 12.9.7 and 13.3.0, "
            "NVIDIA/cuda-python#2076)")
        monkeypatch.setattr(_stream, "_bindings_version", lambda: (13, 3, 0))
        _stream._reload_policy()
        assert _default_stream_line(_stream) == f"default stream: legacy (1); {var}='0'"
        monkeypatch.setenv(var, "on")
        _stream._reload_policy()
        assert _default_stream_line(_stream) == (
            f"default stream: legacy (1); {var}='on'\n  {_stream._ENV_PROBLEM}")
        monkeypatch.delenv(var)
        _stream._reload_policy()
        assert _default_stream_line(_stream) == f"default stream: legacy (1); {var}=<unset>"
    finally:
        monkeypatch.undo()
        _stream._reload_policy()


def test_the_running_cuda_bindings_version_is_read():
    from importlib.metadata import version

    import cuda.bindings

    parts = version("cuda-bindings").split(".")
    found = _stream._bindings_version()
    assert found[:2] == (int(parts[0]), int(parts[1])) and len(found) == 3
    assert cuda.bindings.__version__.startswith(".".join(map(str, found[:2])))
