# The C-level stream resolution that kernarg's other modules cimport (resolve_stream without a
# Python call). This file is ABI between kernarg's own modules.
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t


cdef uint64_t stream_handle(object obj) except? 0
cdef uint64_t dlpack_stream(uint64_t handle) noexcept

# kernarg's state guard on free-threaded CPython (_guard.h): each module guards its namespace at
# the end of its initialisation; C entry points (the C API, PreparedLaunch's vectorcall) and
# the hot entry points the guard leaves unwrapped (in_section) enter and leave.
cdef extern from "_cutils.h":
    ctypedef struct kernarg_section:
        pass
    # 1 where the guard is compiled (a free-threaded 3.14+), else 0: a C constant.
    bint KERNARG_GUARDED_BUILD
    # An object's own critical section (a ctypes instance's, read by the packer), on a
    # free-threaded build; nothing on a GIL build.
    void kernarg_object_lock(kernarg_section* cs, PyObject* obj) noexcept
    void kernarg_object_unlock(kernarg_section* cs) noexcept
    # Whether the caller's reference to obj is the only one (then no other thread can reach
    # it); always 1 on a GIL build.
    bint kernarg_unshared(PyObject* obj) noexcept

cdef int guard_module(dict namespace, str name, tuple unwrapped=*) except -1
cdef void state_enter(kernarg_section* cs) noexcept
cdef void state_leave(kernarg_section* cs) noexcept

# A C function of CPython's METH_FASTCALL | METH_KEYWORDS convention (kernarg_fastcall_def).
ctypedef object (*fastcall)(PyObject* self, PyObject** args, Py_ssize_t nargs,
                            PyObject* kwnames)


cdef inline object in_section(fastcall call, PyObject* self, PyObject** args, Py_ssize_t nargs,
                              PyObject* kwnames):
    """``call(self, args, nargs, kwnames)`` inside kernarg's critical section: the body of a
    hot entry point that the module's guard leaves unwrapped (guard_module's ``unwrapped``),
    so that the interpreter calls it as a builtin. A GIL build compiles only the call."""
    cdef kernarg_section cs
    if not KERNARG_GUARDED_BUILD:
        return call(self, args, nargs, kwnames)
    state_enter(&cs)
    try:
        return call(self, args, nargs, kwnames)
    finally:
        state_leave(&cs)


# kernarg's section entered only once it is needed: kernarg.pack on a free-threaded build packs
# exact ints, floats and bools (which touch no state but the block's own), and numpy scalars
# and cuda.core Buffers whose types the per-type cache knows (read without the section:
# _handler.pxd's cache_view), outside the section, and enters it at the first argument that
# needs more (a type lookup, a slow path), until the end of the call. `held` starts False;
# leave_lazily leaves the section if it was entered. A GIL build compiles neither.
cdef struct LazySection:
    kernarg_section cs
    bint held


cdef inline void enter_lazily(LazySection* s) noexcept:
    if KERNARG_GUARDED_BUILD and s != NULL and not s.held:
        state_enter(&s.cs)
        s.held = True


cdef inline void leave_lazily(LazySection* s) noexcept:
    if KERNARG_GUARDED_BUILD and s.held:
        s.held = False
        state_leave(&s.cs)


# stream_handle for a caller that has not entered kernarg's section but holds ``lazy`` (a
# free-threaded build's Kernel.launch): what it reads outside the section, and when it enters
# it, in _stream.pyx.
cdef uint64_t stream_handle_lazily(object obj, LazySection* lazy) except? 0
