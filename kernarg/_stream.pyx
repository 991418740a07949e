# cython: language_level=3, embedsignature=True, binding=True
"""Resolve any stream object to a CUstream handle (an int).

This module is a leaf: it imports nothing from kernarg, so the packer can use it for the
DLPack consumer stream without a layering cycle. Compiled, because every launch resolves a
stream: ``None`` and int handles take a few nanoseconds (stream_handle, cimported by the
launcher), the protocols cost what their Python calls cost.
"""
cimport cython
from libc.stdint cimport uint64_t
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.number cimport PyIndex_Check, PyNumber_Index
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from kernarg._cdefs cimport (
    is_numpy_bool, kernarg_small_int, kernarg_static_type_in, kernarg_type_name_is, mro_has,
    shown_value,
)

cdef extern from "Python.h":
    # Declared without Cython's error check: _int_handle checks the -1 itself.
    unsigned long long _as_u64 "PyLong_AsUnsignedLongLong"(object) noexcept
    # obj.name(*args[1:]) with obj = args[0], without making a bound method where the type's
    # attribute is a function or method descriptor (CPython 3.9+).
    object PyObject_VectorcallMethod(object name, PyObject** args, size_t nargsf,
                                     PyObject* kwnames)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf,
                               PyObject* kwnames)

cdef extern from *:
    """
    /* Whether every instance of t finds each attribute where t's MRO has it: a static type
       (its dict and its bases' cannot change), with the generic attribute lookup and no
       instance dict. */
    static int kernarg_fixed_attrs(PyTypeObject *t) {
        return !PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE)
            && t->tp_getattro == PyObject_GenericGetAttr && t->tp_dictoffset == 0;
    }

    /* Whether f, found on a type, is a method descriptor: f(obj, ...) is obj.f(...). */
    static int kernarg_is_method_descriptor(PyObject *f) {
        return PyType_HasFeature(Py_TYPE(f), Py_TPFLAGS_METHOD_DESCRIPTOR);
    }
    """
    bint kernarg_fixed_attrs(PyTypeObject* t) noexcept
    bint kernarg_is_method_descriptor(PyObject* f) noexcept

import os
import re
import threading

__all__ = [
    "LEGACY_DEFAULT_STREAM",
    "PER_THREAD_DEFAULT_STREAM",
    "default_stream",
    "resolve_stream",
    "use_stream",
]

#: The CUDA legacy default stream handle (``CU_STREAM_LEGACY``).
LEGACY_DEFAULT_STREAM = 1
#: The CUDA per-thread default stream handle (``CU_STREAM_PER_THREAD``).
PER_THREAD_DEFAULT_STREAM = 2

_ENV_PER_THREAD = "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM"
_ACCEPTED = (
    "None, an int handle (or numpy integer), an object with __cuda_stream__() returning "
    "(0, handle), "
    "a torch-style .cuda_stream int, a CuPy-style .ptr int, cuda.bindings.driver.CUstream, or a "
    "PyCUDA Stream"
)


class _Local(threading.local):
    # A class-level default: reading `stack` in a thread that never set it finds this instead of
    # raising (and formatting) an AttributeError on every default-stream lookup.
    stack = ()


_local = _Local()
# use_stream blocks open in all threads together: while none is, `None` means the policy
# default without a look at the thread-local stack. Changed only with the GIL held (kernarg's
# section, on a free-threaded build); this count and the policy are read and written whole
# (relaxed atomics), as kernarg.pack reads them outside the section there (stream_handle(None):
# besides them it reads only this thread's own stack).
cdef extern from "_cutils.h":
    Py_ssize_t load_count "KERNARG_LOAD_RELAXED"(Py_ssize_t)
    uint64_t load_handle "KERNARG_LOAD_RELAXED"(uint64_t)
    void store_count "KERNARG_STORE_RELAXED"(Py_ssize_t, Py_ssize_t)
    void store_handle "KERNARG_STORE_RELAXED"(uint64_t, uint64_t)

# The sequence lock of _cutils.h, for the pair _MethodWay holds.
cdef extern from "_cutils.h":
    unsigned kernarg_seq_begin(const unsigned* seq) noexcept nogil
    bint kernarg_seq_valid(const unsigned* seq, unsigned begun) noexcept nogil
    void kernarg_seq_write_begin(unsigned* seq) noexcept nogil
    void kernarg_seq_write_end(unsigned* seq) noexcept nogil
    PyObject* load_object "KERNARG_LOAD_RELAXED"(PyObject*) noexcept nogil
    void store_object "KERNARG_STORE_RELAXED"(PyObject*, PyObject*) noexcept nogil

cdef Py_ssize_t _open_blocks = 0
cdef uint64_t _policy = 1
# What stream handle 0 (the NULL stream) means to the driver functions cuda.bindings loaded:
# what DLPack producers are told for a launch on 0. Equal to the policy except where the running
# cuda-bindings misreads the variable (_env_reading).
cdef uint64_t _null = 1


def _bindings_version():
    """The running cuda-bindings' (major, minor, patch), or None where it cannot be read: the
    imported package's own, which kernarg's launcher imports anyway (importlib.metadata alone
    took 23 ms to import, and could name another installation)."""
    try:
        from cuda.bindings import __version__ as text
    except ImportError:
        return None
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    return tuple(int(part or 0) for part in found.groups()) if found else None


def _reads_presence(bindings_version):
    """Whether cuda-bindings ``bindings_version`` loads the per-thread driver functions for any
    non-empty value of CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM, "0" included: 12.8.0 to
    12.9.6 and 13.0.0 to 13.2.x tested only whether it was set (NVIDIA/cuda-python#2076,
    fixed in 12.9.7 and 13.3.0; measured against tools/fakecuda, development.md)."""
    v = bindings_version
    return v is not None and (v < (12, 9, 7) or (13, 0, 0) <= v < (13, 3, 0))


def _env_reading(value, bindings_version):
    """``(policy, null, problem)`` for CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=``value``
    (None: unset) under cuda-bindings ``bindings_version``.

    ``policy`` is what ``None`` means to kernarg: the per-thread default stream (2) for a
    non-zero integer, else the legacy one (1), as cuda.bindings documents the variable (and
    cuda.core's default stream reads it). ``null`` is what handle 0 means to the driver
    functions cuda.bindings loaded: the same, except that a cuda-bindings which reads only
    whether the variable is set (_reads_presence) takes "0" as per-thread. ``problem`` is why
    cuda.bindings cannot load the driver at all (a value int() refuses, where it reads the
    value with int()), else None."""
    if value is None:
        return LEGACY_DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, None
    try:
        number = int(value)
    except ValueError:
        number = None
    if _reads_presence(bindings_version):
        null = PER_THREAD_DEFAULT_STREAM if value else LEGACY_DEFAULT_STREAM
    elif number is None:
        shown = ".".join(map(str, bindings_version)) if bindings_version else "?"
        return LEGACY_DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, (
            f"{_ENV_PER_THREAD}={value!r} is not an integer: cuda-bindings {shown} reads it "
            "with int() and so cannot load the CUDA driver; set it to 1 for the per-thread "
            "default stream, or to 0 (or unset it) for the legacy one")
    else:
        null = PER_THREAD_DEFAULT_STREAM if number else LEGACY_DEFAULT_STREAM
    if number is None:      # no integer, but cuda.bindings takes it as set: None is its stream 0
        return null, null, None
    return PER_THREAD_DEFAULT_STREAM if number else LEGACY_DEFAULT_STREAM, null, None


def _read_env():
    value = os.environ.get(_ENV_PER_THREAD)
    return _env_reading(value, _bindings_version() if value is not None else None)


_POLICY_DEFAULT, _NULL_STREAM, _ENV_PROBLEM = _read_env()
store_handle(_policy, _POLICY_DEFAULT)
_null = _NULL_STREAM


def _env_stopped(exc):
    """Whether ``exc``, raised by cuda.bindings as it loaded the driver, is its int() refusing
    CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM (then ``_ENV_PROBLEM`` says so)."""
    return isinstance(exc, ValueError) and _ENV_PROBLEM is not None


def _reload_policy():
    """Re-read CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM (it is read once at import) and
    return the policy."""
    global _POLICY_DEFAULT, _NULL_STREAM, _ENV_PROBLEM, _null
    _POLICY_DEFAULT, _NULL_STREAM, _ENV_PROBLEM = _read_env()
    store_handle(_policy, _POLICY_DEFAULT)
    _null = _NULL_STREAM
    return _POLICY_DEFAULT


cdef inline uint64_t _default_stream() except? 0:
    if load_count(_open_blocks):
        stack = _local.stack
        if stack:
            return stack[-1]
    return load_handle(_policy)


cdef uint64_t dlpack_stream(uint64_t handle) noexcept:
    """Stream ``handle`` as DLPack's ``__dlpack__(stream=...)`` names it. Handle 0 is the NULL
    stream, which the driver calls of cuda.bindings (and so kernarg's launches) take as the
    legacy stream (1), or the per-thread one (2) where cuda.bindings loaded the per-thread
    functions (CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM; _env_reading). The DLPack
    specification forbids 0 for CUDA as ambiguous, and producers refuse it (or read it as they
    please)."""
    return _null if handle == 0 else handle


def default_stream():
    """Return the stream handle that ``None`` means on this thread.

    The innermost :func:`use_stream` of this thread, else the process policy: the legacy default
    stream (1), or the per-thread default stream (2) when
    ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM`` is a non-zero integer (a value that is no
    integer: as the running cuda-bindings reads it, docs/launching.md).
    """
    return _default_stream()


cdef uint64_t stream_handle(object obj) except? 0:
    """resolve_stream(obj) for Cython callers, without a Python call."""
    cdef long long small
    # The two usual cases (every pack and every launch resolves its stream here) take no
    # register saves and no error-handling frame: the rest is a function of its own, called
    # through a pointer so that the compiler does not inline it back. None: 34 -> 9
    # instructions (callgrind).
    if obj is None and not load_count(_open_blocks):
        return load_handle(_policy)
    if type(obj) is int and kernarg_small_int(<PyObject*>obj, &small) and small >= 0:
        return <uint64_t>small
    return _other_handle_fn(obj)


ctypedef uint64_t (*_handle_fn_t)(object) except? 0


cdef uint64_t _other_handle(object obj) except? 0:
    cdef uint64_t handle = 0         # set where _method_handle gives 1
    if obj is None:
        return _default_stream()
    if type(obj) is int:
        return _int_handle(obj, "int")
    if type(obj) is _method_type:
        fn = _method_fn                 # held while it runs, whatever the call resolves
        if _method_handle(obj, NULL if fn is None else <PyObject*>fn, &handle, NULL):
            return handle
    try:
        return _resolve(obj)
    except (TypeError, ValueError):
        raise
    except Exception as exc:
        _reading_raised(obj, exc)


cdef _handle_fn_t _other_handle_fn = _other_handle


cdef int _reading_raised(object obj, object exc) except -1:
    # A stream object's property (or comparison) that raises is its fault, not a crash of
    # ours: say what happened and what is accepted.
    raise TypeError(f"stream {type(obj).__name__}: reading it raised {exc!r}; accepted: "
                    f"{_ACCEPTED}") from exc


cdef int _method_raised(object obj, object exc) except -1:
    # obj's __cuda_stream__() method raised exc: its fault, said so (both call paths).
    raise TypeError(f"stream {type(obj).__name__}: __cuda_stream__() raised {exc!r}") from exc


cdef inline uint64_t _int_handle(object handle, object source) except? 0:
    # An exact int from `source` as a handle: 0 .. 2**64-1, else a ValueError saying so.
    # `source` is a str, or the numpy type that held the handle (named only for the error).
    cdef unsigned long long value = _as_u64(handle)
    if value == <unsigned long long>-1 and PyErr_Occurred() != NULL:
        PyErr_Clear()       # OverflowError: negative, or 2**64 or more
        if isinstance(source, type):
            source = f"{source.__module__}.{source.__name__}"
        raise ValueError(f"stream handle from {source} is {shown_value(handle)}, outside "
                         "0 .. 2**64-1")
    return value


cdef uint64_t _handle_of(object handle, str source, object obj) except? 0:
    # The handle an int (or int-like) from `source` stands for, checked to be one.
    if type(handle) is not int:
        if type(handle) is bool or not isinstance(handle, int):
            raise TypeError(
                f"stream {type(obj).__name__}: {source} gave {type(handle).__name__}, "
                "expected an int handle"
            )
        # An int subclass becomes a plain int without running any of its methods
        # (PyNumber_Index copies the value of int subclasses): it cannot raise or lie.
        handle = PyNumber_Index(handle)
    return _int_handle(handle, source)


def resolve_stream(obj):
    """Return the CUstream handle (int) for ``obj``.

    Parameters
    ----------
    obj
        ``None`` (see :func:`default_stream`), an int handle (or a numpy integer scalar), an
        object implementing the ``__cuda_stream__`` protocol (returns ``(0, handle)``), a
        torch-style stream with ``.cuda_stream``, a CuPy-style stream with ``.ptr``, a
        ``cuda.bindings.driver.CUstream``, a cuda.core ``Stream`` or a PyCUDA ``Stream``
        (its ``.handle``).

    Raises
    ------
    TypeError
        ``obj`` is none of the accepted kinds.
    ValueError
        The handle is out of range or ``__cuda_stream__`` returned an unknown version.
    """
    return stream_handle(obj)


# The type whose __cuda_stream__ the last resolution found to be a method (a cuda.core Stream's,
# say), or None. Only a hint of which objects to try _method_handle on: that checks the
# attribute is still a method whenever the call fails, and hands back to _resolve if not.
# Where the type's attributes are fixed (see _fixed_method; cuda.core's Stream's are),
# _method_fn is the function itself, called with the object: the type's attribute lookup
# (~80 instructions a call) is then skipped. Both change together (_resolve), with no code
# run between.
cdef object _method_type = None
cdef object _method_fn = None


# The same pair as a free-threaded build's launches read it outside kernarg's section
# (stream_handle_lazily): the two pointers, borrowed from the objects above, under a sequence
# lock, written with them (_set_method_way, in the section). A reader never follows the type
# pointer, only compares it with its own object's type, which that object keeps alive. Where
# they are the same it calls the function, which is set only for a static type (_fixed_method):
# the type's own, in dicts that cannot change, of a type never freed. Else it calls the
# object's method by name. So a reader that holds a pointer the objects above no longer
# reference, or that code run while they changed left here, follows nothing freed.
cdef struct _MethodWay:
    unsigned seq
    PyObject* type
    PyObject* fn


cdef _MethodWay _way


cdef void _set_method_way(object t, object fn):
    global _method_type, _method_fn
    kernarg_seq_write_begin(&_way.seq)
    store_object(_way.type, <PyObject*>t)
    store_object(_way.fn, NULL if fn is None else <PyObject*>fn)
    kernarg_seq_write_end(&_way.seq)
    # Dropping the old references can run code: _method_handle never sees the pair half
    # changed (a type with another type's function).
    _method_type = None
    _method_fn = fn
    _method_type = t


cdef object _fixed_method(type t, str name):
    """The function ``name`` of t that ``obj.name`` always binds for an instance obj of t
    (kernarg_fixed_attrs), where it is a method descriptor; else None."""
    if not kernarg_fixed_attrs(<PyTypeObject*>t):
        return None
    for base in t.__mro__:
        fn = (<type>base).__dict__.get(name)
        if fn is not None:
            return fn if kernarg_is_method_descriptor(<PyObject*>fn) else None
    return None


def _method_way():
    """(_method_type, _method_fn): the type whose objects' __cuda_stream__ is called as a
    method, and the function called for it where its attributes are fixed (for tests: a
    function left from another type would be called with objects it does not know)."""
    return _method_type, _method_fn


def _stream_method(t):
    """The function stream resolution calls for objects of type ``t`` in place of their
    ``__cuda_stream__`` attribute, or None where it looks the attribute up (for tests)."""
    return _fixed_method(t, "__cuda_stream__")


@cython.auto_pickle(False)  # a test helper: no pickling, and no __pyx_unpickle function, which
cdef class _FixedStream:    # Cython would define after the module's end, past its guard
    """A stream type whose attributes are fixed, as cuda.core's ``Stream`` (a static type with
    no instance dict): resolving one calls its ``__cuda_stream__`` function directly. Its
    method counts its calls and answers ``answer`` (raises it, if an exception) (for tests)."""

    cdef public object answer
    cdef public int calls

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    def __cuda_stream__(self):
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


cdef int _method_handle(object obj, PyObject* fn, uint64_t* out, LazySection* lazy) except -1:
    """Call ``obj.__cuda_stream__()`` -- ``fn`` with obj where it is not NULL (a reference the
    caller holds, or the function of obj's own static type), else the way CPython calls a
    method (no bound method made) -- and check its ``(0, handle)``: 1 with ``*out`` set. 0,
    having run no code of obj's, when its attribute turns out not to be a method after all
    (gone, or a pair): _resolve decides. ``lazy``: NULL in kernarg's section; else the section
    to enter for what is not the usual answer, before a refusal."""
    cdef PyObject* args[1]
    cdef long long small
    args[0] = <PyObject*>obj
    try:
        if fn != NULL:
            result = PyObject_Vectorcall(<object>fn, args, 1, NULL)
        else:
            result = PyObject_VectorcallMethod("__cuda_stream__", args, 1, NULL)
    except Exception as exc:
        # The name was missing, or not callable (a pair), or the method itself raised: only
        # the last ran obj's code, and only the last leaves a callable attribute behind.
        protocol = getattr(obj, "__cuda_stream__", None)
        if protocol is None or isinstance(protocol, tuple):
            return 0
        enter_lazily(lazy)
        _method_raised(obj, exc)
    if type(result) is tuple and PyTuple_GET_SIZE(result) == 2:
        version = <object>PyTuple_GET_ITEM(result, 0)
        handle = <object>PyTuple_GET_ITEM(result, 1)
        if type(version) is int and type(handle) is int \
                and kernarg_small_int(<PyObject*>version, &small) and small == 0 \
                and kernarg_small_int(<PyObject*>handle, &small) and small >= 0:
            out[0] = <uint64_t>small            # the usual (0, handle below 2**60)
            return 1
    enter_lazily(lazy)
    try:                        # anything else, as _resolve reads it (and as it fails)
        out[0] = _protocol_result(result, "__cuda_stream__()", obj)
    except (TypeError, ValueError):
        raise
    except Exception as exc:    # a tuple subclass's __len__, say
        _reading_raised(obj, exc)
    return 1


cdef uint64_t stream_handle_lazily(object obj, LazySection* lazy) except? 0:
    """stream_handle for a caller that has not entered kernarg's section but holds ``lazy``
    (NULL, or already held: stream_handle). None and exact ints read nothing of kernarg's but
    relaxed words (see _open_blocks); an object of the type whose ``__cuda_stream__`` the last
    resolution in the section called as a method (cuda.core's Stream, say: code that launches
    on one stream object launches on others of its type) is called so, with no section, and its
    usual answer taken. Everything else enters the section first: another type (resolved, and
    remembered, there), an answer of another shape, a method that raised."""
    cdef uint64_t handle = 0
    cdef unsigned begun
    cdef PyObject* way_type
    cdef PyObject* fn
    if obj is None or type(obj) is int:
        return stream_handle(obj)
    if KERNARG_GUARDED_BUILD and lazy != NULL and not lazy.held:
        begun = kernarg_seq_begin(&_way.seq)
        way_type = load_object(_way.type)
        fn = load_object(_way.fn)
        if way_type == <PyObject*>Py_TYPE(obj) and kernarg_seq_valid(&_way.seq, begun):
            if _method_handle(obj, fn, &handle, lazy):
                return handle
    enter_lazily(lazy)
    return stream_handle(obj)


cdef uint64_t _protocol_result(object result, str what, object obj) except? 0:
    # The handle in what obj's `what` (its __cuda_stream__, called or held) gave: (0, handle).
    if not isinstance(result, tuple) or len(result) != 2:
        raise ValueError(
            f"stream {type(obj).__name__}: {what} returned {shown_value(result, True)}, "
            "expected (0, handle)"
        )
    version = result[0]
    if type(version) is not int or version != 0:
        raise ValueError(
            f"stream {type(obj).__name__}: {what} version {shown_value(version, True)} is not "
            "supported (expected 0)"
        )
    return _handle_of(result[1], what, obj)


cdef uint64_t _resolve(object obj) except? 0:
    # stream_handle's body for everything but None and exact ints.
    t = type(obj)
    if t is bool:
        raise TypeError(f"stream must not be a bool; accepted: {_ACCEPTED}")
    if kernarg_static_type_in(<PyTypeObject*>t, "numpy."):
        # numpy's own types (not subclasses) have none of the stream attributes below, and
        # reading each of those from a numpy scalar raises and clears an AttributeError: ask
        # first. A numpy integer is a handle kept in one (an array of handles, say); not
        # numpy's bool, floats, or an array of several values.
        if PyIndex_Check(obj) and not is_numpy_bool(t):
            try:
                handle = PyNumber_Index(obj)    # an exact int
            except TypeError:
                pass
            else:
                return _int_handle(handle, t)
        raise _not_a_stream(t)
    protocol = getattr(obj, "__cuda_stream__", None)
    if protocol is not None:
        if isinstance(protocol, tuple):
            # cuda.core before 0.2 made __cuda_stream__ an attribute holding the pair; the
            # protocol has made it a method since. A pair held so says the same thing.
            result, what = protocol, "__cuda_stream__"
        else:
            what = "__cuda_stream__()"
            # The next object of this type tries _method_handle.
            _set_method_way(t, _fixed_method(t, "__cuda_stream__"))
            try:
                result = protocol()
            except Exception as exc:
                _method_raised(obj, exc)
        return _protocol_result(result, what, obj)
    if isinstance(obj, int):
        return _handle_of(obj, "int", obj)
    if kernarg_type_name_is(<PyTypeObject*>t, "CUstream"):
        module = t.__module__
        if isinstance(module, str) and (<str>module).startswith("cuda.bindings"):
            return _handle_of(int(obj), "CUstream", obj)
    if mro_has(t, "pycuda", "Stream"):
        # PyCUDA's Stream keeps its CUstream in the int property `.handle`. Other libraries'
        # `.handle` is an object, a context or a module: only PyCUDA's class is read so.
        return _handle_of(obj.handle, "PyCUDA Stream.handle", obj)
    handle = getattr(obj, "cuda_stream", None)
    if handle is not None:
        return _handle_of(handle, ".cuda_stream", obj)
    handle = getattr(obj, "ptr", None)
    if handle is not None:
        return _handle_of(handle, ".ptr", obj)
    raise _not_a_stream(t)


cdef object _not_a_stream(type t):
    return TypeError(f"cannot use {t.__module__}.{t.__qualname__} as a CUDA stream; accepted: "
                     f"{_ACCEPTED}")


cdef class use_stream:
    """Make ``stream`` what ``None`` means for this thread inside the ``with`` block; the
    ``with`` target is the resolved handle. Blocks nest, and each thread has its own.

    >>> with kernarg.use_stream(my_stream):
    ...     kernel.launch(grid, block, x, n)      # launches on my_stream
    """

    cdef object _stream
    cdef uint64_t _handle
    cdef list _stack

    def __init__(self, stream):
        self._stream = stream
        self._stack = None

    def __enter__(self):
        if self._stack is not None:
            raise RuntimeError("this use_stream block is already open; make a new one")
        self._handle = resolve_stream(self._stream)
        stack = _local.stack
        if not isinstance(stack, list):
            stack = _local.stack = []
        stack.append(self._handle)
        self._stack = stack
        store_count(_open_blocks, _open_blocks + 1)
        return self._handle

    def __exit__(self, *exc_info):
        if self._stack is not None:
            self._stack.pop()
            self._stack = None
            store_count(_open_blocks, _open_blocks - 1)
        return False

    def __reduce__(self):
        # A copy (or pickle) is a new block for the same stream object, not yet open: Cython's
        # own copy shared the open block's stack, so leaving the copy left the block itself.
        return (use_stream, (self._stream,))


# ---------------------------------------------------------------------------------------------
# Free-threaded CPython: kernarg's state guard (_guard.h), defined here because every other
# kernarg module cimports this one.

cdef extern from "_guard.h":
    int kernarg_guard_init() except -1
    int kernarg_guard_namespace(object ns, object module_name, object unwrapped) except -1
    void kernarg_guard_enter(kernarg_section* cs) noexcept
    void kernarg_guard_leave(kernarg_section* cs) noexcept
    bint kernarg_guard_active() noexcept
    int kernarg_guard_held() noexcept
    tuple kernarg_guard_unwrapped()


cdef int guard_module(dict namespace, str name, tuple unwrapped=()) except -1:
    """Guard what module ``name`` defined in ``namespace`` (free-threaded builds only), but
    the functions and methods in ``unwrapped``: they take the section themselves
    (in_section)."""
    return kernarg_guard_namespace(namespace, name, unwrapped)


cdef void state_enter(kernarg_section* cs) noexcept:
    kernarg_guard_enter(cs)


cdef void state_leave(kernarg_section* cs) noexcept:
    kernarg_guard_leave(cs)


#: Whether kernarg guards its state with a critical section (a free-threaded build).
GUARDED = kernarg_guard_active()


def _holds_section():
    """Whether the calling thread is inside kernarg's critical section (False on a GIL
    build; None where kernarg does not read the thread state: _guard.h): for the tests, from
    Python code that kernarg's code calls."""
    cdef int held = kernarg_guard_held()
    return None if held < 0 else held == 1


def _unwrapped():
    """The functions and methods the guard left as they are (empty on a GIL build): the hot
    entry points, which take the section themselves, and _holds_section."""
    return kernarg_guard_unwrapped()


kernarg_guard_init()
guard_module(globals(), __name__, (_holds_section,))    # (it must not take the section)
