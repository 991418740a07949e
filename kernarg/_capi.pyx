# cython: language_level=3, embedsignature=True, binding=True
"""The embedding API: pack into caller-owned memory, for Cython (_capi.pxd) and C (kernarg.h).

No ParamBlock and no allocation per call: the caller's kernarg_block holds the area, argv and
sizes; kernarg fills them and keeps one reference (the argument tuple) plus any DLPack capsules
until release_block.
"""
from cpython.object cimport PyObject
from cpython.pycapsule cimport PyCapsule_New
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport uint16_t, uint64_t
from libc.string cimport memcpy, memset

from kernarg._handler cimport (
    KERNARG_MAX_PARAM_BYTES,
    BlockState,
    Producers,
    as_arg_tuple,
    pack_state,
    set_launch_device,
    state_release,
)
from cpython.tuple cimport PyTuple_GET_SIZE

from kernarg._cdefs cimport tuple_items
from kernarg._signature cimport Signature, pack_typed_state, with_defaults
from kernarg._stream cimport (
    KERNARG_GUARDED_BUILD, guard_module, kernarg_section, state_enter, state_leave, stream_handle,
)

import os

__all__ = ["get_include"]

# sizes for callers that pass none: never read back (the GIL, or kernarg's critical section on
# a free-threaded build, serialises writers).
cdef uint16_t _scratch_sizes[KERNARG_MAX_PARAM_BYTES]


def get_include():
    """The directory holding ``kernarg.h``, for C/C++ and Cython extensions' include_dirs."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


cdef int _open(kernarg_block* block, BlockState* st, Producers* producers,
               Py_ssize_t n) except -1:
    """Begin a pack into the caller's ``block``: ``st`` over its memory, the producer streams
    (with the arguments that brought them) recorded in ``producers`` (_close copies the
    streams into the block)."""
    if block == NULL:
        raise ValueError("kernarg: block is NULL")
    if block.struct_size < sizeof(kernarg_block):
        raise ValueError(f"kernarg: block.struct_size is {block.struct_size}, expected at least "
                         f"{sizeof(kernarg_block)}; initialise it with kernarg_block_init")
    if block.keep != NULL or block.capsules != NULL:
        raise ValueError("kernarg: the block still holds a previous pack; release it first")
    if block.data == NULL or block.argv == NULL:
        raise ValueError("kernarg: block.data and block.argv must point at caller memory")
    if <size_t>n > block.max_args:
        raise ValueError(f"kernarg: {n} arguments, but the block's argv holds {block.max_args}")
    memset(st, 0, sizeof(BlockState))
    st.data = <char*>block.data
    st.argv = block.argv
    st.sizes = block.sizes if block.sizes != NULL else _scratch_sizes
    st.capacity = min(block.capacity, <size_t>KERNARG_MAX_PARAM_BYTES)
    st.fixed = True
    st.producers = producers
    st.nargs = n
    block.nargs = 0
    block.nbytes = 0
    block.nstreams = 0
    return 0


cdef int _close(kernarg_block* block, BlockState* st, tuple args) except -1:
    block.nargs = st.nargs
    block.nbytes = st.nbytes
    memcpy(block.streams, st.producers.streams, st.nstreams * sizeof(uint64_t))
    block.nstreams = st.nstreams
    Py_INCREF(args)
    block.keep = <PyObject*>args
    block.capsules = st.capsules      # ownership moves to the block
    return 0


cdef int _pack_block(object signature, object args, object stream, int device,
                     kernarg_block* block) except -1:
    """Pack into the caller's block, typed when ``signature`` is not None, refusing arrays
    known to live on another CUDA device than ``device`` (-1: no check). On error the block is
    left empty (capsules consumed so far are released). C callers come in here, not through a
    guarded Python entry point: on a free-threaded build this takes kernarg's critical
    section (_guard.h)."""
    cdef kernarg_section cs
    if not KERNARG_GUARDED_BUILD:       # (a C constant: a GIL build compiles only this)
        return _pack_block_held(signature, args, stream, device, block)
    state_enter(&cs)
    try:
        return _pack_block_held(signature, args, stream, device, block)
    finally:
        state_leave(&cs)


cdef int _pack_block_held(object signature, object args, object stream, int device,
                          kernarg_block* block) except -1:
    cdef tuple t = as_arg_tuple(args, "kernarg")
    cdef BlockState st
    cdef Producers producers
    if signature is not None:
        t = with_defaults(<Signature>signature, tuple_items(t), PyTuple_GET_SIZE(t)) or t
    cdef uint64_t handle = stream_handle(stream)
    _open(block, &st, &producers, len(t))
    set_launch_device(&st, device)
    try:
        if signature is None:
            pack_state(&st, t, handle)
        else:
            pack_typed_state(<Signature>signature, &st, t, handle)
    except BaseException:
        state_release(&st)
        raise
    return _close(block, &st, t)


cdef int _device(int device) except -2:
    if device < -1:
        raise ValueError(f"kernarg: device is {device}; pass a CUDA device ordinal (>= 0), or "
                         "-1 for no device check")
    return device


cdef int pack_into_block(object args, object stream, kernarg_block* block,
                         int device=-1) except -1:
    """kernarg.pack(args, stream=stream, device=device) into the caller's block; device -1
    checks no device. Raises like kernarg.pack; the block is then empty."""
    return _pack_block(None, args, stream, _device(device), block)


cdef int pack_signature_into_block(object signature, object args, object stream,
                                   kernarg_block* block, int device=-1) except -1:
    """Signature.pack into the caller's block (device as for pack_into_block)."""
    if not isinstance(signature, Signature):
        raise TypeError(f"kernarg: signature must be a kernarg.Signature, got "
                        f"{type(signature).__name__}")
    return _pack_block(signature, args, stream, _device(device), block)


cdef int release_block(kernarg_block* block) except -1:
    """Drop the block's references and run DLPack deleters, exactly once (idempotent)."""
    cdef kernarg_section cs
    if block == NULL:
        return 0
    if not KERNARG_GUARDED_BUILD:
        return _release_block_held(block)
    state_enter(&cs)
    try:
        return _release_block_held(block)
    finally:
        state_leave(&cs)


cdef int _release_block_held(kernarg_block* block) except -1:
    cdef BlockState st
    keep = block.keep
    block.keep = NULL
    memset(&st, 0, sizeof(BlockState))
    st.capsules = block.capsules
    block.capsules = NULL
    try:
        state_release(&st)
    finally:
        Py_XDECREF(keep)
    return 0


# ---------------------------------------------------------------------------------------------
# The C function table behind the kernarg._C_API capsule. C callers may pass NULL for optional
# objects, which Cython's `object` parameters cannot take: these wrappers translate.

cdef int _c_pack(PyObject* args, PyObject* stream, kernarg_block* block) except -1:
    if args == NULL:
        raise TypeError("kernarg: args is NULL")
    return pack_into_block(<object>args, None if stream == NULL else <object>stream, block)


cdef int _c_pack_signature(PyObject* signature, PyObject* args, PyObject* stream,
                           kernarg_block* block) except -1:
    if signature == NULL or args == NULL:
        raise TypeError("kernarg: signature and args must not be NULL")
    return pack_signature_into_block(<object>signature, <object>args,
                                     None if stream == NULL else <object>stream, block)


cdef int _c_pack_device(PyObject* args, PyObject* stream, int device,
                        kernarg_block* block) except -1:
    if args == NULL:
        raise TypeError("kernarg: args is NULL")
    return pack_into_block(<object>args, None if stream == NULL else <object>stream, block,
                           device)


cdef int _c_pack_signature_device(PyObject* signature, PyObject* args, PyObject* stream,
                                  int device, kernarg_block* block) except -1:
    if signature == NULL or args == NULL:
        raise TypeError("kernarg: signature and args must not be NULL")
    return pack_signature_into_block(<object>signature, <object>args,
                                     None if stream == NULL else <object>stream, block, device)


cdef int _c_release(kernarg_block* block) except -1:
    return release_block(block)


cdef int _c_resolve_stream(PyObject* stream, uint64_t* handle) except -1:
    cdef kernarg_section cs
    if handle == NULL:
        raise ValueError("kernarg: handle is NULL")
    if not KERNARG_GUARDED_BUILD:
        handle[0] = stream_handle(None if stream == NULL else <object>stream)
        return 0
    state_enter(&cs)
    try:
        handle[0] = stream_handle(None if stream == NULL else <object>stream)
    finally:
        state_leave(&cs)
    return 0


cdef bytes _VERSION = b"0.1.0"


cdef const char* _c_version() noexcept:
    return _VERSION


cdef kernarg_api _api
memset(&_api, 0, sizeof(kernarg_api))
_api.abi_version = KERNARG_ABI_VERSION
_api.struct_size = sizeof(kernarg_api)
_api.pack = _c_pack
_api.pack_signature = _c_pack_signature
_api.release = _c_release
_api.resolve_stream = _c_resolve_stream
_api.version = _c_version
_api.pack_device = _c_pack_device
_api.pack_signature_device = _c_pack_signature_device

#: The C API table (see kernarg.h); C code gets it with import_kernarg().
_C_API = PyCapsule_New(<void*>&_api, b"kernarg._C_API", NULL)

# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h).
guard_module(globals(), __name__)
