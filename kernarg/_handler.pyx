# cython: language_level=3, embedsignature=True, binding=True
"""The packing fast path: a tuple of Python objects -> one aligned kernel parameter block.

Per argument the loop does an exact-type check (int, float, bool), else a probe of a small
cache keyed by the type pointer (sets of two slots); only the first object of a type goes to the
classifier in kernarg._interop. Values are written straight into the block: no Python object and
no allocation per argument. Everything that is not a hot-loop concern lives in _interop.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release
from cpython.buffer cimport PyObject_GetBuffer
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_SIZE

from libc.stdint cimport uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from kernarg._interop cimport (
    KIND_BOOL,
    KIND_BUFFER,
    KIND_COMPLEX,
    KIND_CTYPES,
    KIND_CTYPES_BUFFER,
    KIND_DRIVER_PTR,
    KIND_FLOAT,
    KIND_HANDLE,
    KIND_INLINE,
    KIND_INT,
    KIND_NONE,
    KIND_NPVOID,
    KIND_POINTER,
    KIND_TENSOR_MAP,
    SWAPPED_SCALAR,
    CTYPES_POINTER,
    CTYPES_HOLDS_POINTERS,
    MrCache,
    PtrResult,
    TypeInfo,
    _describe,
    _type_name,
    buffer_device,
    copy_ctypes_pointers,
    ctypes_target_refusal,
    confirm_device,
    getter_t,
    kernarg_seq_write_begin,
    kernarg_seq_write_end,
    mr_cache,
    classify,
    name_raised,
    handle_value,
    pointer_of,
    release_capsule,
    store_char,
    store_const_pointer,
    store_getter,
    store_int,
    store_object,
    store_pointer,
    store_ssize,
    store_type,
    tensor_map_value,
)

from kernarg._stream cimport (
    KERNARG_GUARDED_BUILD,
    LazySection,
    enter_lazily,
    guard_module,
    in_section,
    kernarg_object_lock,
    kernarg_object_unlock,
    kernarg_section,
    leave_lazily,
    stream_handle,
)
from kernarg._interop import record_alignment, record_problem
from kernarg._interop import register as _register

__all__ = ["MAX_PARAM_BYTES", "ParamBlock", "pack", "register"]

#: The CUDA driver's limit on the size of a kernel's parameter area, in bytes.
MAX_PARAM_BYTES = KERNARG_MAX_PARAM_BYTES

from kernarg._cdefs cimport (
    Py_TYPE_P,
    Py_True,
    PyCFunction_NewEx,
    PyMethodDef,
    PyBool_Type,
    PyFloat_AS_DOUBLE_P,
    PyFloat_AsDouble,
    PyFloat_Type,
    PyLong_AsLongLongAndOverflow,
    PyLong_Type,
    exc_text,
    is_numpy_bool,
    kernarg_ctypes_copy,
    kernarg_fastcall_def,
    kernarg_int_run,
    kernarg_small_int,
    kernarg_unlikely,
    or_default,
    parse_pack_call,
    shown_value,
    tuple_items,
)
from cpython.number cimport PyNumber_Index

cdef extern from "Python.h":
    ctypedef struct Py_complex:
        double real
        double imag
    Py_complex PyComplex_AsCComplex(object) except *
    PyTypeObject* Py_TYPE(object) noexcept


# ---------------------------------------------------------------------------------------------
# Per-type cache: sets of two slots on a multiplicative hash of the type pointer (_handler.pxd).
# A miss costs one dict lookup in _classified (which also holds a strong reference to every
# cached type, so a cached pointer can never be reused by a new type); only a type never seen
# is classified.

cdef enum:
    CLASSIFIED_LIMIT = 4096           # bound on remembered types (dynamic classes)

cdef CacheEntry _cache[KERNARG_CACHE_SIZE]
# Which slot of each set the next miss in it takes: the one stored first (the two take turns).
# Only the section reads or writes it.
cdef unsigned char _next_way[KERNARG_CACHE_SETS]
cdef const MrCache* _mrc = mr_cache()     # cuda.core Buffers: the last memory resource
cdef dict _classified = {}            # type -> (kind, size, align, offset)


cdef void _clear_cache() noexcept:
    cdef Py_ssize_t i
    for i in range(KERNARG_CACHE_SIZE):
        _cache_store(&_cache[i], NULL, NULL)
    memset(_next_way, 0, sizeof(_next_way))
    _classified.clear()


cdef void _cache_store(CacheEntry* entry, PyTypeObject* tp, const TypeInfo* info) noexcept:
    """Make ``entry`` say that instances of ``tp`` pack as ``info`` (NULL, NULL: empty it).
    Every field cache_view reads is stored whole, under the entry's sequence lock, as
    another thread may be reading it outside the section (a free-threaded build)."""
    kernarg_seq_write_begin(&entry.seq)
    store_type(entry.type, tp)
    if info != NULL:
        store_int(entry.info.kind, info.kind)
        store_ssize(entry.info.size, info.size)
        store_ssize(entry.info.align, info.align)
        store_ssize(entry.info.offset, info.offset)
        store_getter(entry.info.getter, info.getter)
        store_pointer(entry.info.closure, info.closure)
        store_getter(entry.info.mr_getter, info.mr_getter)
        store_pointer(entry.info.mr_closure, info.mr_closure)
        store_char(entry.info.num_kind, info.num_kind)
        store_const_pointer(entry.info.api, info.api)
        store_int(entry.info.torch_tensor, info.torch_tensor)
    kernarg_seq_write_end(&entry.seq)


cdef TypeInfo* _cache_miss(PyTypeObject* tp, CacheEntry* first, Py_ssize_t index) except NULL:
    """Look ``tp`` up (or classify it), store it in the slot of its set (``first``) that the
    set's turn gives, and return that slot's TypeInfo."""
    cdef TypeInfo info
    cdef CacheEntry* entry
    cdef Py_ssize_t set_index
    known = _classified.get(<object>tp)
    if known is not None:
        (info.kind, info.size, info.align, info.offset, getter, closure, mr_getter, mr_closure,
         info.num_kind, api, info.torch_tensor) = known
        info.getter = <getter_t><uintptr_t>getter
        info.closure = <void*><uintptr_t>closure
        info.mr_getter = <getter_t><uintptr_t>mr_getter
        info.mr_closure = <void*><uintptr_t>mr_closure
        info.api = <const void*><uintptr_t>api
    else:
        try:
            classify(<type>tp, &info)
        except TypeError as exc:
            raise TypeError(f"argument {index} ({_type_name(<type>tp)}): {exc_text(exc)}") from None
        if len(_classified) >= CLASSIFIED_LIMIT:
            _clear_cache()
        _classified[<type>tp] = (info.kind, info.size, info.align, info.offset,
                                 <uintptr_t>info.getter, <uintptr_t>info.closure,
                                 <uintptr_t>info.mr_getter, <uintptr_t>info.mr_closure,
                                 info.num_kind, <uintptr_t>info.api, info.torch_tensor)
    # (Chosen after classify, which may have run Python code, and _clear_cache with it.)
    set_index = (first - _cache) // KERNARG_CACHE_WAYS
    entry = first + _next_way[set_index]
    _next_way[set_index] = (_next_way[set_index] + 1) % KERNARG_CACHE_WAYS
    _cache_store(entry, tp, &info)
    return &entry.info


# The TypeInfo a lookup returns lives in a shared cache slot, which a later miss on that
# slot's set may overwrite, in this thread or (the GIL passing) another. Callers read what they
# need from it before running any Python code (a protocol property, __index__, an adapter):
# the packers read the kind and layout first, and pointer_of reads its fields before its first
# call out.
cdef inline TypeInfo* _lookup(object arg, Py_ssize_t index) except NULL:
    cdef PyTypeObject* tp = Py_TYPE(arg)
    cdef CacheEntry* first = cache_set(_cache, tp)
    cdef CacheEntry* entry = cache_find(first, tp)
    if entry != NULL:
        return &entry.info
    return _cache_miss(tp, first, index)


cdef CacheEntry* cache_table() noexcept:
    return _cache


cdef TypeInfo* lookup_type(object arg, Py_ssize_t index) except NULL:
    """How instances of type(arg) are packed (cached; see kernarg._interop.classify)."""
    return _lookup(arg, index)


def register(cls, fn):
    """Teach kernarg a pointer-like type: instances of ``cls`` pack as ``fn(obj)``.

    Parameters
    ----------
    cls : type
        The type (subclasses included) to pack as an 8-byte device pointer.
    fn : callable or None
        ``fn(obj) -> int`` returns the address; ``None`` removes the registration.
    """
    _register(cls, fn)
    _clear_cache()


def _cache_slot(obj):
    """For tests: the per-type cache's set for ``type(obj)``. Two types that share a set are
    both kept; a third takes the slot of the one stored first, which then, seen again, looks
    itself up in the section."""
    return (cache_set(_cache, Py_TYPE(obj)) - _cache) // KERNARG_CACHE_WAYS


def _cached(obj):
    """For tests: whether the per-type cache holds ``type(obj)`` now (a pack of ``obj`` would
    not look it up in the section)."""
    cdef PyTypeObject* tp = Py_TYPE(obj)
    return cache_find(cache_set(_cache, tp), tp) != NULL


def _forget_types():
    """For tests: drop every remembered classification, so the next argument of each type is
    classified afresh."""
    _clear_cache()


_KIND_NAMES = {KIND_INT: "int", KIND_FLOAT: "float", KIND_BOOL: "bool", KIND_COMPLEX: "complex",
               KIND_NONE: "none", KIND_INLINE: "inline", KIND_CTYPES: "ctypes",
               KIND_CTYPES_BUFFER: "ctypes_buffer", KIND_NPVOID: "buffer_protocol",
               KIND_HANDLE: "handle", KIND_TENSOR_MAP: "tensor_map"}


def _classification(obj):
    """For tests and debugging: how arguments of ``type(obj)`` are packed by value ("inline":
    read in place from a numpy scalar; "ctypes": through the object's data pointer;
    "ctypes_buffer" and "buffer_protocol": through the buffer protocol; "int", "float", ...),
    or "pointer" for every pointer kind."""
    cdef int kind = _lookup(obj, 0).kind
    return "pointer" if kind >= KIND_POINTER else _KIND_NAMES.get(kind, str(kind))


def _number_kind(obj):
    """For tests: the numpy dtype kind ("b", "f", "i", "u") by which Signature.pack reads
    ``obj``'s value in place (a numpy scalar, a ctypes number), or None where it takes the
    general converters (or the value is not a number read in place)."""
    cdef TypeInfo* info = _lookup(obj, 0)
    kind = chr(<int>info.num_kind)
    if (info.kind == KIND_INLINE or info.kind == KIND_CTYPES) and kind in ("b", "f", "i", "u"):
        return kind
    return None


# ---------------------------------------------------------------------------------------------
# Pools: LIFO stacks of recycled fixed-size blocks. One for Arenas (up to KERNARG_INLINE_ARGS
# arguments), one for large blocks (up to KERNARG_POOLED_ARGS: argv, area and sizes laid out as
# in block_init, sized for the largest n). A GIL build has one pair for the process (the GIL
# serialises access); a free-threaded one a pair per thread (_cutils.h says why), freed when the
# thread exits.

cdef extern from "_cutils.h":
    int kernarg_pools_init(void (*destroy)(void*) noexcept nogil) except -1
    void* kernarg_thread_pools(size_t size) noexcept nogil

cdef enum:
    POOL_CAPACITY = 64
    ARENA_POOL_KEEP = 64
    LARGE_POOL_KEEP = 4
    # argv (8 per arg) + alignment + area (8 per arg) + sizes (2 per arg)
    LARGE_BLOCK_BYTES = KERNARG_POOLED_ARGS * 18 + 16

cdef struct Pool:
    void* items[POOL_CAPACITY]
    Py_ssize_t count            # at most ARENA_POOL_KEEP / LARGE_POOL_KEEP; the rest are freed

# Zeroed is empty: the process's pair is static, a thread's is made by calloc.
cdef struct Pools:
    Pool arenas
    Pool large


cdef void _pools_free(void* p) noexcept nogil:
    """A thread's pools, as it exits: free every block they keep, then the pools."""
    cdef Pools* pools = <Pools*>p
    cdef Py_ssize_t i
    for i in range(pools.arenas.count):
        free(pools.arenas.items[i])
    for i in range(pools.large.count):
        free(pools.large.items[i])
    free(pools)


cdef Pools _process_pools
kernarg_pools_init(_pools_free)


cdef inline Pools* _pools() noexcept:
    """This thread's pools (a free-threaded build), or the process's; NULL if a thread's could
    not be made (no memory): blocks are then allocated and freed one by one."""
    if not KERNARG_GUARDED_BUILD:
        return &_process_pools
    return <Pools*>kernarg_thread_pools(sizeof(Pools))


cdef inline void* pool_get(bint large) noexcept:
    """A block from this thread's arena pool (or large-block pool), or a new one (NULL if out of
    memory)."""
    cdef Pools* pools = _pools()
    cdef Pool* pool
    if pools != NULL:
        pool = &pools.large if large else &pools.arenas
        if pool.count > 0:
            pool.count -= 1
            return pool.items[pool.count]
    return malloc(LARGE_BLOCK_BYTES if large else sizeof(Arena))


cdef inline void _pool_put(bint large, void* block) noexcept:
    cdef Pools* pools = _pools()
    cdef Pool* pool
    if pools != NULL:
        pool = &pools.large if large else &pools.arenas
        if pool.count < (LARGE_POOL_KEEP if large else ARENA_POOL_KEEP):
            pool.items[pool.count] = block
            pool.count += 1
            return
    free(block)


# ---------------------------------------------------------------------------------------------
# BlockState: what the packing core reads and writes, whoever owns the memory.

cdef int state_release(BlockState* st) except -1:
    """Run the deleters of the DLPack capsules st consumed, exactly once, and drop them."""
    cdef PyObject* capsules = st.capsules
    if capsules == NULL:
        return 0
    st.capsules = NULL
    try:
        for capsule in <list>capsules:
            release_capsule(capsule)
    finally:
        Py_XDECREF(capsules)
    return 0


cdef int _refuse_device(BlockState* st, Py_ssize_t index, object arg, int device) except -1:
    raise ValueError(f"{_describe(index, arg)}: its memory is on CUDA device {device}, "
                     f"but the kernel runs on device {st.device}; copy it over first (where "
                     "peer access is enabled, pass its address as an int, which kernarg takes "
                     "as the caller's)")


cdef int check_buffer(BlockState* st, getter_t mr_getter, void* mr_closure, object buf,
                      Py_ssize_t index) except -1:
    """Refuse a cuda.core Buffer whose memory resource says a kernel cannot reach its memory,
    or puts it on another device than the launch's (see buffer_device)."""
    cdef int device = buffer_device(mr_getter, mr_closure, buf, index)
    if elsewhere(st, device):
        _refuse_device(st, index, buf, device)
    return 0


cdef int state_take_pointer(BlockState* st, PtrResult* r, Py_ssize_t index,
                            object arg) except -1:
    """Record what pointer argument ``arg`` brought along: its DLPack capsule (the state now
    owns it and runs its deleter on release) and its CUDA Array Interface producer stream."""
    cdef Py_ssize_t k
    cdef list capsules
    cdef int device
    if r.capsule != NULL:
        if st.capsules == NULL:
            capsules = []
            Py_INCREF(capsules)
            st.capsules = <PyObject*>capsules
        # Hand r's reference to the list: append takes its own, then drop r's.
        (<list>st.capsules).append(<object>r.capsule)
        Py_DECREF(<object>r.capsule)
        r.capsule = NULL
    if elsewhere(st, r.device):
        device = confirm_device(arg) if r.device_unconfirmed else r.device
        if elsewhere(st, device):
            _refuse_device(st, index, arg, device)
    if r.has_stream:
        for k in range(st.nstreams):
            if st.producers.streams[k] == r.stream:
                return 0
        if st.nstreams == KERNARG_MAX_STREAMS:
            raise ValueError(f"argument {index}: its producer stream {r.stream:#x} would be the "
                             f"{KERNARG_MAX_STREAMS + 1}th distinct one; kernarg records at "
                             f"most {KERNARG_MAX_STREAMS} per argument list")
        st.producers.streams[st.nstreams] = r.stream
        st.producers.args[st.nstreams] = <uint32_t>index
        st.nstreams += 1
    return 0


cdef int put_tensor_map(BlockState* st, const TypeInfo* info, Py_ssize_t index, object arg,
                        void* out) except -1:
    """Write tensor map ``arg``'s 128 bytes to ``out``; where its library says which device it
    was made for, check that against the launch's."""
    cdef int device
    tensor_map_value(info, arg, index, out, &device)
    if elsewhere(st, device):
        raise ValueError(f"{_describe(index, arg)}: the tensor map was "
                         f"made on CUDA device {device}, but the kernel runs on device "
                         f"{st.device}; make one there")
    return 0


# ---------------------------------------------------------------------------------------------
# ParamBlock

@cython.no_gc   # holds only the argument tuple and capsules, which never refer back to it
@cython.freelist(16)
@cython.final
cdef class ParamBlock:
    """A packed kernel parameter block (create it with :func:`kernarg.pack`).

    ``bytes(block)`` is the parameter area with zeroed padding, valid as
    ``CU_LAUNCH_PARAM_BUFFER_POINTER`` with size ``block.nbytes``; ``block.ptr`` is the address of
    the ``void*[nargs]`` ``kernelParams`` array whose entries point into that same area.

    The block keeps the argument tuple, and DLPack tensors it consumed, alive until
    :meth:`release` (or until it is garbage collected); DLPack deleters run exactly once then.
    """

    def __init__(self):
        raise TypeError("ParamBlock cannot be created directly; use kernarg.pack(args)")

    def release(self):
        """Drop the references to the arguments and run DLPack deleters (idempotent).

        The parameter bytes stay readable, but pointers in them may dangle afterwards.
        """
        block_release(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        block_release(self)

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("ParamBlock is read-only")
        PyBuffer_FillInfo(view, self, self.st.data, self.st.nbytes, 1, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass

    @property
    def ptr(self):
        """Address (int) of the ``void*[nargs]`` array to pass as ``kernelParams``."""
        return <uintptr_t>self.st.argv

    @property
    def data_ptr(self):
        """Address (int) of the contiguous parameter area (``CU_LAUNCH_PARAM_BUFFER_POINTER``)."""
        return <uintptr_t>self.st.data

    @property
    def nargs(self):
        """Number of arguments."""
        return self.st.nargs

    @property
    def nbytes(self):
        """Size in bytes of the parameter area (``CU_LAUNCH_PARAM_BUFFER_SIZE``)."""
        return self.st.nbytes

    @property
    def offsets(self):
        """Byte offset of each argument inside the parameter area."""
        return tuple([<char*>self.st.argv[i] - self.st.data for i in range(self.st.nargs)])

    @property
    def sizes(self):
        """Size in bytes of each argument."""
        return tuple([self.st.sizes[i] for i in range(self.st.nargs)])

    @property
    def producer_streams(self):
        """Stream handles CUDA Array Interface producers exported; the launch must wait on them."""
        return tuple([self.st.producers.streams[i] for i in range(self.st.nstreams)])

    @property
    def args(self):
        """The argument tuple this block keeps alive (None after :meth:`release`)."""
        return self._args

    def __repr__(self):
        return (f"<kernarg.ParamBlock nargs={self.st.nargs} nbytes={self.st.nbytes} "
                f"offsets={self.offsets}>")

    def __reduce__(self):
        raise TypeError("a kernarg.ParamBlock cannot be pickled or copied: it holds addresses "
                        "that are valid in this process only, and the references that keep "
                        "them valid; pack the arguments again where they are needed")


cdef int block_release(ParamBlock blk) except -1:
    blk._args = None
    return state_release(&blk.st)


# ParamBlock's storage is freed by a tp_dealloc installed below rather than by __dealloc__:
# Cython wraps every __dealloc__ in a save/restore of the error state and a keep-alive
# refcount dance, which cost more than the rest of the deallocation. Here the error state is
# saved only when user code can run (DLPack deleters); freeing pool memory cannot fail.

cdef extern from "Python.h":
    ctypedef void (*destructor)(PyObject*)
    void PyErr_Fetch(PyObject** t, PyObject** v, PyObject** tb)
    void PyErr_Restore(PyObject* t, PyObject* v, PyObject* tb)

cdef destructor _cython_dealloc = NULL     # Cython's own tp_dealloc: drops _args, freelist


cdef void _run_deleters(BlockState* st) noexcept:
    # noexcept: should a deleter's wrapper raise, Cython reports it as unraisable, as Python
    # does for errors in destructors.
    state_release(st)


cdef void _free_storage(ParamBlock blk) noexcept:
    """Free blk's C storage. blk is dying (refcount 0): no reference may be taken to it, so
    this touches only C fields (it is called with a borrowed pointer and never stores it).
    On a free-threaded build ParamBlock's slots are not guarded (see the module's end): the
    pools are the thread's own, and the DLPack deleters need no section either, as packing
    them needs none: the capsules are the block's own (its list, which nothing else names),
    and what a deleter does is the producer's."""
    cdef PyObject *t
    cdef PyObject *v
    cdef PyObject *tb
    if blk.st.capsules != NULL:
        PyErr_Fetch(&t, &v, &tb)
        _run_deleters(&blk.st)
        PyErr_Restore(t, v, tb)
    if blk._arena != NULL:
        _pool_put(False, blk._arena)
    if blk.st.heap_data != NULL:
        free(blk.st.heap_data)
    if blk._heap_args != NULL:
        if blk._heap_args_pooled:
            _pool_put(True, blk._heap_args)
        else:
            free(blk._heap_args)


cdef void _block_dealloc(PyObject* o) noexcept:
    _free_storage(<ParamBlock>o)
    _cython_dealloc(o)


_cython_dealloc = (<PyTypeObject*>ParamBlock).tp_dealloc
(<PyTypeObject*>ParamBlock).tp_dealloc = _block_dealloc


# ---------------------------------------------------------------------------------------------
# Writing values

cdef int _grow(BlockState* st, Py_ssize_t needed, Py_ssize_t index) except -1:
    if needed > KERNARG_MAX_PARAM_BYTES:
        raise ValueError(f"argument {index}: the kernel parameters need at least {needed} bytes, "
                         f"more than CUDA's limit of {KERNARG_MAX_PARAM_BYTES} bytes")
    if st.fixed:
        raise ValueError(f"argument {index}: the kernel parameters need at least {needed} bytes, "
                         f"more than the {st.capacity} bytes the caller's block holds")
    cdef Py_ssize_t capacity = max(needed, 2 * st.capacity)
    capacity = min(capacity, KERNARG_MAX_PARAM_BYTES)
    cdef char* heap = <char*>malloc(capacity)     # malloc returns 16-byte aligned memory
    if heap == NULL:
        raise MemoryError()
    memcpy(heap, st.data, st.nbytes)
    # Entries 0 .. index-1 of argv already point into the old area: move them along.
    cdef Py_ssize_t i
    for i in range(index):
        st.argv[i] = heap + (<char*>st.argv[i] - st.data)
    free(st.heap_data)
    st.heap_data = heap
    st.data = heap
    st.capacity = capacity
    return 0


cdef inline bint _try_put(char* data, Py_ssize_t* cur, Py_ssize_t cap, void** slot,
                          uint16_t* size_slot, const void* src, Py_ssize_t size,
                          Py_ssize_t align) noexcept nogil:
    """Fast path of _reserve + copy on the caller's local cursor; False if the area is full."""
    cdef Py_ssize_t start = cur[0]
    cdef Py_ssize_t offset = (start + align - 1) & -align
    if offset + size > cap:
        return False
    if offset != start:
        memset(data + start, 0, offset - start)
    copy_fixed(data + offset, src, size)
    slot[0] = data + offset
    size_slot[0] = <uint16_t>size
    cur[0] = offset + size
    return True


cdef inline char* _try_place(char* data, Py_ssize_t* cur, Py_ssize_t cap, void** slot,
                             uint16_t* size_slot, Py_ssize_t size, Py_ssize_t align) noexcept nogil:
    """_try_put without the copy: where to write ``size`` bytes, or NULL if the area is full."""
    cdef Py_ssize_t start = cur[0]
    cdef Py_ssize_t offset = (start + align - 1) & -align
    if offset + size > cap:
        return NULL
    if offset != start:
        memset(data + start, 0, offset - start)
    slot[0] = data + offset
    size_slot[0] = <uint16_t>size
    cur[0] = offset + size
    return data + offset


cdef inline char* _reserve(BlockState* st, Py_ssize_t index, Py_ssize_t size,
                           Py_ssize_t align) except NULL:
    """Place argument ``index`` at the next ``align``-aligned offset; return where to write."""
    cdef Py_ssize_t start = st.nbytes
    cdef Py_ssize_t offset = (start + align - 1) & -align
    cdef Py_ssize_t end = offset + size
    if end > st.capacity:
        _grow(st, end, index)
    if offset != start:
        memset(st.data + start, 0, offset - start)
    st.argv[index] = st.data + offset
    st.sizes[index] = <uint16_t>size
    st.nbytes = end
    return st.data + offset


cdef int _put_big_int(BlockState* st, Py_ssize_t index, object arg) except -1:
    cdef uint64_t u
    if 0 <= arg < 2**64:
        u = arg
        memcpy(_reserve(st, index, 8, 8), &u, 8)
        return 0
    # (An int subclass, an IntEnum, is named as itself.)
    raise OverflowError(f"argument {index} ({_type_name(type(arg))}): {shown_value(arg)} "
                        "does not fit in 64 bits "
                        "(kernarg packs -2**63 .. 2**63-1 as long long, "
                        "2**63 .. 2**64-1 as unsigned long long)")


cdef int _put_int(BlockState* st, Py_ssize_t index, object arg) except -1:
    cdef int overflow
    cdef long long value = PyLong_AsLongLongAndOverflow(arg, &overflow)
    if overflow:
        return _put_big_int(st, index, arg)
    memcpy(_reserve(st, index, 8, 8), &value, 8)
    return 0


# The last few numpy scalar dtypes record_problem passed (a kernel's struct parameters are of
# a few dtypes), with the size and alignment each packs at: _place_npvoid reads them outside
# the section (a free-threaded build), under the table's sequence lock. _kept keeps each
# slot's dtype alive while the slot names it, so that no other dtype can have its address
# (see _remember_record).
cdef enum:
    RECORD_SLOTS = 4

cdef struct RecordCache:
    unsigned seq
    PyObject* dtype[RECORD_SLOTS]
    Py_ssize_t size[RECORD_SLOTS]
    Py_ssize_t align[RECORD_SLOTS]

cdef RecordCache _records     # a C static: zeroed, every slot NULL
cdef list _kept = [None] * RECORD_SLOTS
cdef int _next_slot = 0       # the slot _remember_record fills next (round robin)


cdef inline int _record_slot(PyObject* dtype) noexcept nogil:
    """The slot of ``dtype`` in the table, or -1: whole loads, as _place_npvoid reads it
    outside the section (under the table's sequence lock; the writers hold the section)."""
    cdef int k
    for k in range(RECORD_SLOTS):
        if load_object(_records.dtype[k]) == dtype:
            return k
    return -1


cdef int _remember_record(object dtype, Py_ssize_t size, Py_ssize_t align) except -1:
    """Put ``dtype`` (which passed record_problem) in the next slot: stored while the
    caller's reference keeps it alive, and the slot's dtype before released only once the
    table no longer names it."""
    global _next_slot
    cdef int k = _next_slot
    kernarg_seq_write_begin(&_records.seq)
    store_object(_records.dtype[k], <PyObject*>dtype)
    store_ssize(_records.size[k], size)
    store_ssize(_records.align[k], align)
    kernarg_seq_write_end(&_records.seq)
    _kept[k] = dtype
    _next_slot = (k + 1) % RECORD_SLOTS
    return 0


cdef bint _place_npvoid(char* data, Py_ssize_t* cur, Py_ssize_t cap, void** slot,
                        uint16_t* size_slot, PyObject* item, Py_ssize_t offset) noexcept:
    """pack_items' fast path for a numpy.void or numpy.record (``offset``: of its data
    pointer, its dtype's after it; _interop's npvoid_data_offset) whose dtype is one of the
    last few record_problem passed: its bytes copied in place, at that dtype's alignment.
    False for another dtype or where the area is full. ``item`` keeps its dtype alive, so a
    slot that names the same address names that dtype. numpy holds no lock over the bytes,
    nor does this."""
    cdef char** fields = <char**>(<char*>item + offset)
    cdef PyObject* dtype = (<PyObject**>(fields + 1))[0]
    cdef unsigned begun = kernarg_seq_begin(&_records.seq)
    cdef Py_ssize_t size, align
    cdef char* dst
    cdef int k = _record_slot(dtype)
    if k < 0:
        return False
    size = load_ssize(_records.size[k])
    align = load_ssize(_records.align[k])
    if not kernarg_seq_valid(&_records.seq, begun):
        return False
    dst = _try_place(data, cur, cap, slot, size_slot, size, align)
    if dst == NULL:
        return False
    memcpy(dst, fields[0], size)
    return True


cdef int _put_buffer(BlockState* st, Py_ssize_t index, object arg, Py_ssize_t size,
                     Py_ssize_t align) except -1:
    """By-value bytes read through the buffer protocol (structured numpy scalars and the
    fallback for layouts the fast paths could not confirm)."""
    cdef Py_buffer view
    cdef int k
    if size < 0:    # numpy scalar: size and alignment belong to the object's dtype
        dtype = arg.dtype
        k = _record_slot(<PyObject*>dtype)
        if k >= 0:      # a dtype checked before (structured scalars come in runs)
            size, align = _records.size[k], _records.align[k]
        else:
            size = dtype.itemsize
            align = size if dtype.kind == "c" else record_alignment(dtype)
            if size == 0:
                raise TypeError(f"{_describe(index, arg)}: a zero-size value "
                                "cannot be a kernel parameter")
            problem = record_problem(dtype, "its dtype")
            if problem is not None:
                raise TypeError(f"{_describe(index, arg)}: {problem}")
            _remember_record(dtype, size, align)
    PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)
    try:
        if view.len != size:
            raise TypeError(f"{_describe(index, arg)}: buffer has "
                            f"{view.len} bytes, expected {size}")
        memcpy(_reserve(st, index, size, align), view.buf, size)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int _put_pointer(BlockState* st, Py_ssize_t index, const TypeInfo* info, object arg,
                      uint64_t stream, LazySection* lazy) except -1:
    """``lazy``: as for pack_items. The protocols (CUDA Array Interface, DLPack, its C exchange
    API) and the library adapters are read, and the pointer, stream and capsule recorded, with
    no section (_interop's pointer_of enters ``lazy`` for the other kinds and for what is not
    usual): state_take_pointer touches only ``st``, but where a device check refuses the
    array (in the section, as every refusal)."""
    cdef PtrResult r
    pointer_of(info, arg, index, stream, &r, False, lazy)
    if elsewhere(st, r.device):
        enter_lazily(lazy)
    state_take_pointer(st, &r, index, arg)
    memcpy(_reserve(st, index, 8, 8), &r.ptr, 8)
    return 0


cdef int _refuse_ctypes_target(object arg, Py_ssize_t index) except -1:
    refusal = ctypes_target_refusal(arg)
    if refusal is not None:
        raise TypeError(f"{_describe(index, arg)}: {refusal}")
    return 0


cdef inline void _reverse(char* p, Py_ssize_t n) noexcept:
    """Reverse ``n`` bytes in place: a big-endian scalar's value in the GPU's byte order."""
    cdef Py_ssize_t k
    cdef char c
    for k in range(n // 2):
        c = p[k]
        p[k] = p[n - 1 - k]
        p[n - 1 - k] = c


cdef int _put_other(BlockState* st, Py_ssize_t index, object arg, uint64_t stream) except -1:
    cdef TypeInfo* info = _lookup(arg, index)
    cdef int kind = info.kind
    cdef double d
    cdef Py_complex c
    cdef char b
    cdef char* dst
    cdef Py_ssize_t size, align, offset
    cdef char num_kind
    cdef kernarg_section cs
    if kind == KIND_INLINE:
        memcpy(_reserve(st, index, info.size, info.align),
               <char*><PyObject*>arg + info.offset, info.size)
    elif kind == KIND_CTYPES or kind == KIND_CTYPES_BUFFER:
        # Read under the object's own lock (_cutils.h): info is not read after either that or
        # the Python code that checks a pointer's target.
        size, align, offset, num_kind = info.size, info.align, info.offset, info.num_kind
        if num_kind == CTYPES_POINTER or num_kind == CTYPES_HOLDS_POINTERS:
            _refuse_ctypes_target(arg, index)
        if kind == KIND_CTYPES:                 # the value behind the object's b_ptr
            dst = _reserve(st, index, size, align)
            kernarg_ctypes_copy(dst, <PyObject*>arg, offset, size)
        else:
            kernarg_object_lock(&cs, <PyObject*>arg)
            try:
                _put_buffer(st, index, arg, size, align)
            finally:
                kernarg_object_unlock(&cs)
        if num_kind == SWAPPED_SCALAR:
            _reverse(<char*>st.argv[index], size)
    elif kind == KIND_INT:
        _put_int(st, index, arg)
    elif kind == KIND_FLOAT:
        d = PyFloat_AsDouble(arg)
        memcpy(_reserve(st, index, 8, 8), &d, 8)
    elif kind == KIND_COMPLEX:
        c = PyComplex_AsCComplex(arg)
        memcpy(_reserve(st, index, 16, 16), &c, 16)
    elif kind == KIND_NONE:
        memset(_reserve(st, index, 8, 8), 0, 8)
    elif kind == KIND_BOOL:
        b = 1 if arg else 0
        _reserve(st, index, 1, 1)[0] = b
    elif kind == KIND_NPVOID:
        _put_buffer(st, index, arg, -1, 1)
    elif kind == KIND_HANDLE:
        handle_value(info, arg, index, _reserve(st, index, 8, 8))
    elif kind == KIND_TENSOR_MAP:
        put_tensor_map(st, info, index, arg, _reserve(st, index, info.size, info.align))
    else:
        _put_pointer(st, index, info, arg, stream, NULL)
    return 0


cdef inline void arena_block_init(ParamBlock blk, object keep, Py_ssize_t n,
                                  Arena* arena) noexcept:
    """Give a fresh block (every C field zero) an Arena's storage: up to KERNARG_INLINE_ARGS
    arguments and KERNARG_INLINE_BYTES bytes. The block returns the arena to the pool.
    ``keep``: the argument tuple the block keeps alive, or None (see untyped_block_items)."""
    cdef BlockState* st = &blk.st
    blk._args = keep
    blk._arena = arena
    st.nargs = n
    st.producers = &arena.producers
    st.data = <char*>(((<uintptr_t>arena.data) + 15) & ~(<uintptr_t>15))
    st.capacity = KERNARG_INLINE_BYTES
    st.argv = arena.argv
    st.sizes = arena.sizes


cdef int block_init(ParamBlock blk, object keep, Py_ssize_t n, Py_ssize_t nbytes) except -1:
    """Give a fresh block storage for n arguments and (at least) nbytes of parameters;
    ``keep`` as for arena_block_init."""
    # blk is fresh: every C field is zero (tp_new or the freelist cleared it).
    cdef void* mem
    cdef Py_ssize_t cap
    cdef BlockState* st = &blk.st
    cdef Arena* arena = <Arena*>pool_get(False)
    if arena == NULL:
        raise MemoryError()
    arena_block_init(blk, keep, n, arena)
    if n <= KERNARG_INLINE_ARGS:
        if nbytes > KERNARG_INLINE_BYTES:
            _grow(st, nbytes, 0)
    else:
        # One allocation: argv[n], then a parameter area (for untyped packing sized for n
        # 8-byte arguments, as most are; _grow moves it if not), then sizes[n].
        cap = min(max(nbytes, 16), KERNARG_MAX_PARAM_BYTES)
        if n <= KERNARG_POOLED_ARGS and cap <= 8 * KERNARG_POOLED_ARGS:
            mem = pool_get(True)
            blk._heap_args_pooled = True
        else:
            mem = malloc(n * sizeof(void*) + 16 + cap + n * sizeof(uint16_t))
        if mem == NULL:
            raise MemoryError()
        blk._heap_args = mem
        st.argv = <void**>mem
        st.data = <char*>(((<uintptr_t>(st.argv + n)) + 15) & ~(<uintptr_t>15))
        st.capacity = cap
        st.sizes = <uint16_t*>(st.data + cap)
    return 0


cdef int pack_state(BlockState* st, tuple args, uint64_t stream) except -1:
    """Pack ``args`` into ``st`` (fresh: nbytes 0). ``stream``: the launch stream's handle, which
    DLPack producers are given (as an int, made only for them)."""
    return pack_items(st, tuple_items(args), PyTuple_GET_SIZE(args), stream, NULL)


cdef bint _place_ctypes(char* data, Py_ssize_t* cur, Py_ssize_t cap, void** slot,
                        uint16_t* size_slot, PyObject* item, const TypeInfo* info) noexcept:
    """pack_items' fast path for a ctypes value: copied under the object's own lock
    (_cutils.h); a pointer, or a struct, union or array holding one, only where it keeps no
    object alive (an address given as an int) or only other pointers (ctypes.cast's), so that
    no target of it is host memory kernarg refuses (_interop's copy_ctypes_pointers). False
    where it keeps anything else (the slow path checks its targets) or the area is full.
    ``info``'s fields are read first: waiting for that lock lets other threads into kernarg's
    section, where this pack has entered it."""
    cdef Py_ssize_t size = info.size, offset = info.offset, start = cur[0]
    cdef char num_kind = info.num_kind
    cdef char* dst = _try_place(data, cur, cap, slot, size_slot, size, info.align)
    if dst == NULL:
        return False
    if num_kind == CTYPES_POINTER or num_kind == CTYPES_HOLDS_POINTERS:
        if copy_ctypes_pointers(dst, item, size):
            return True
        cur[0] = start              # placed by the slow path, which checks the targets
        return False
    kernarg_ctypes_copy(dst, item, offset, size)
    if num_kind == SWAPPED_SCALAR:
        _reverse(dst, size)
    return True


cdef int pack_items(BlockState* st, PyObject** items, Py_ssize_t n, uint64_t stream,
                    LazySection* lazy) except -1:
    """Pack the ``n`` objects at ``items`` into ``st`` (fresh: nbytes 0). The caller keeps
    them alive while this runs (a tuple's items, or a vectorcall's arguments). ``lazy``: NULL
    where the caller holds kernarg's section (or the GIL); else (kernarg.pack on a
    free-threaded build) the section to enter at the first argument that the fast paths below
    do not place: they touch nothing but ``st``, and read the per-type cache (a numpy scalar,
    a ctypes value, a cuda.core Buffer) and the last memory resource under their sequence
    locks, and the usual CUDA Array Interface and DLPack exports, tensors of the DLPack C
    exchange API and the library adapters' arrays (_put_pointer)."""
    cdef Py_ssize_t i = 0, j, cur = 0
    cdef double d
    cdef char b
    cdef long long value
    cdef TypeInfo* info
    cdef TypeInfo copy
    cdef PyObject* item
    cdef int found
    cdef PyTypeObject* tp
    cdef getter_t mr_getter
    cdef void* mr_closure
    # The cursor lives in locals (registers) for the by-value fast paths; the slow paths work
    # on the state itself, so sync before calling them and reload after (the area may move).
    # argv/sizes never move while packing; locals spare a reload per argument (writes through
    # char* may alias the state's fields, so the compiler cannot keep those in registers).
    cdef char* data = st.data
    cdef Py_ssize_t cap = st.capacity
    cdef void** argv = st.argv
    cdef uint16_t* sizes = st.sizes
    while i < n:
        # Borrowed reference: the caller's tuple or call owns the item; no refcounting.
        item = items[i]
        tp = Py_TYPE_P(item)
        if tp == &PyLong_Type:
            # A run of ints goes to a loop of its own (not inlined, so that it keeps its values
            # in registers); a lone int is placed here, without the call.
            if i + 1 < n and Py_TYPE_P(items[i + 1]) == &PyLong_Type:
                j = kernarg_int_run(items, i, n, data, &cur, cap, argv, sizes)
                if j != i:
                    i = j
                    continue
            if kernarg_small_int(item, &value):
                if _try_put(data, &cur, cap, argv + i, sizes + i, &value, 8, 8):
                    i += 1
                    continue
        elif tp == &PyFloat_Type:
            d = PyFloat_AS_DOUBLE_P(item)
            if _try_put(data, &cur, cap, argv + i, sizes + i, &d, 8, 8):
                i += 1
                continue
        elif tp == &PyBool_Type:
            b = 1 if item == Py_True else 0
            if _try_put(data, &cur, cap, argv + i, sizes + i, &b, 1, 1):
                i += 1
                continue
        else:
            # numpy scalars, ctypes values, cuda.core Buffers, CUDA Array Interfaces, DLPack
            # (its C exchange API too: torch's tensors from 2.10), the library adapters'
            # arrays, int and float subclasses: their fast paths need no section either, but
            # for a type not yet in the cache, a Buffer subclass whose handle Python code
            # reads, a memory resource not the last one read, or an unusual interface (a
            # free-threaded build).
            info = view_or_lookup(_cache, item, i, &copy, lazy)
            if info.kind == KIND_INLINE:
                if _try_put(data, &cur, cap, argv + i, sizes + i,
                            <char*>item + info.offset, info.size, info.align):
                    i += 1
                    continue
            elif info.kind == KIND_BUFFER:
                # cuda.core Buffer: read .handle here (the common case is an int) rather than
                # taking the generic pointer path.
                if info.getter == NULL:
                    enter_lazily(lazy)
                mr_getter, mr_closure = info.mr_getter, info.mr_closure
                found = buffer_address(item, info, &value)
                if found < 0:
                    enter_lazily(lazy)
                    name_raised(KIND_BUFFER, <object>item, i)
                if found and _try_put(data, &cur, cap, argv + i, sizes + i, &value, 8, 8):
                    if not buffer_known(st, mr_getter, mr_closure, item, _mrc):
                        enter_lazily(lazy)
                        check_buffer(st, mr_getter, mr_closure, <object>item, i)
                    i += 1
                    continue
            elif kernarg_unlikely(info.kind == KIND_CTYPES):
                # Last, and off the loop's straight line: placed before the kinds above, or
                # as likely as they are, it cost a numpy scalar 6 instructions and a Buffer 3
                # (the registers and branches the compiler gave it; callgrind, 3.11).
                if _place_ctypes(data, &cur, cap, argv + i, sizes + i, item, info):
                    i += 1
                    continue
            elif kernarg_unlikely(info.kind == KIND_NPVOID) and info.offset >= 0:
                if _place_npvoid(data, &cur, cap, argv + i, sizes + i, item, info.offset):
                    i += 1
                    continue
            elif kernarg_unlikely(info.kind >= KIND_DRIVER_PTR):
                # The pointer kinds but a Buffer's: _put_pointer (it enters the section for a
                # type probed per instance).
                st.nbytes = cur
                _put_pointer(st, i, info, <object>item, stream, lazy)
                data = st.data
                cur = st.nbytes
                cap = st.capacity
                i += 1
                continue
            elif kernarg_unlikely(info.kind == KIND_INT):
                # An int subclass (an IntEnum, an IntFlag): its own value, as an int's.
                if kernarg_small_int(item, &value) and \
                        _try_put(data, &cur, cap, argv + i, sizes + i, &value, 8, 8):
                    i += 1
                    continue
            elif kernarg_unlikely(info.kind == KIND_FLOAT):
                # A float subclass: its own value, as PyFloat_AsDouble reads it.
                d = PyFloat_AS_DOUBLE_P(item)
                if _try_put(data, &cur, cap, argv + i, sizes + i, &d, 8, 8):
                    i += 1
                    continue
        # Slow path: anything the fast paths could not place.
        enter_lazily(lazy)
        st.nbytes = cur
        _put_other(st, i, <object>item, stream)
        data = st.data
        cur = st.nbytes
        cap = st.capacity
        i += 1
    st.nbytes = cur
    return 0


# kernarg.pack is a C function of CPython's METH_FASTCALL | METH_KEYWORDS convention (as
# kernarg.launch is, see _launch.pyx), not a Cython def, whose keyword-only parameters send
# every call through Cython's generic argument wrapper: 3.5-5 ns of a ~45 ns pack of one int
# (timeit, the builds side by side). The usual call, pack(args), reads its one argument where
# the caller put it; keywords are sorted by name only when given.

cdef object _pack_fastcall(PyObject* module, PyObject** args, Py_ssize_t nargs,
                           PyObject* kwnames):
    """``pack(args, *, stream=None, device=None)``: ``args[0:nargs]`` by position, then the
    values of the keywords ``kwnames`` names (``module``: NULL, the function's self). On a
    free-threaded build it takes kernarg's critical section itself (the guard leaves it
    unwrapped: see the module's end); the usual call, pack(args), only once an argument needs
    it (pack_items), so that threads packing numbers (exact ints, floats and bools, numpy
    scalars) and cuda.core Buffers pack in parallel."""
    cdef LazySection lazy
    if KERNARG_GUARDED_BUILD and nargs == 1 and kwnames == NULL:
        lazy.held = False
        try:
            return _pack(<object>args[0], None, None, &lazy)
        finally:
            leave_lazily(&lazy)
    return in_section(_pack_call, module, args, nargs, kwnames)


cdef object _pack_call(PyObject* module, PyObject** args, Py_ssize_t nargs, PyObject* kwnames):
    cdef PyObject* given[3]
    if nargs == 1 and kwnames == NULL:
        return _pack(<object>args[0], None, None, NULL)
    parse_pack_call("pack", args, nargs, kwnames, given)
    return _pack(<object>given[0], or_default(given[1], None),
                 or_default(given[2], None), NULL)


cdef inline ParamBlock _pack(object args, object stream, object device, LazySection* lazy):
    """``lazy``: as for pack_items (``stream`` and ``device`` are then None: what None means
    as a stream needs no section, see _stream.pyx's _open_blocks)."""
    cdef tuple t = as_arg_tuple(args, "kernarg.pack")
    cdef uint64_t handle = stream_handle(stream)
    # untyped_block_items' body, inline: a call here costs more than these lines.
    cdef ParamBlock blk = ParamBlock.__new__(ParamBlock)
    block_init(blk, t, PyTuple_GET_SIZE(t), 8 * PyTuple_GET_SIZE(t))
    if device is not None:
        set_launch_device(&blk.st, device_ordinal(device))
    pack_items(&blk.st, tuple_items(t), PyTuple_GET_SIZE(t), handle, lazy)
    return blk


cdef const char* _PACK_DOC = b"""\
pack(args, *, stream=None, device=None)
--

Pack kernel arguments into one contiguous, C-aligned parameter block.

Parameters
----------
args : tuple or list
    The kernel arguments, in order. See the README's argument table for the C type each
    Python value becomes.
stream : optional
    The consumer stream (anything :func:`kernarg.resolve_stream` accepts; None means the
    default stream). DLPack producers receive it as ``__dlpack__(stream=...)``, but for
    pinned host memory (kDLCUDAHost), which gets None as the DLPack specification asks.
device : int, optional
    The CUDA device ordinal the kernel will run on. Arrays whose producer says they live
    on another device (DLPack ``kDLCUDA`` device id, torch, CuPy, JAX, a cuda.core
    Buffer's memory resource or StridedMemoryView) are refused.

Returns
-------
ParamBlock

Raises
------
TypeError
    An argument has no kernel parameter mapping (the message names its index and type).
OverflowError
    An int does not fit in 64 bits.
ValueError
    The parameters exceed CUDA's 32,764-byte limit, or an array interface is malformed.
"""
cdef PyMethodDef _pack_def
kernarg_fastcall_def(&_pack_def, "pack", <void*>_pack_fastcall, _PACK_DOC)
pack = PyCFunction_NewEx(&_pack_def, NULL, __name__)


cdef int device_ordinal(object device) except -2:
    """``device`` (None, a CUDA device ordinal: an int or numpy integer, a cuda.core or CuPy
    ``Device``, or a torch ``device`` of type cuda with an index) as an int; -1 for None."""
    if device is None:
        return -1
    if type(device) is not int:
        device = _library_device(device)
    if not isinstance(device, int) and not is_numpy_bool(type(device)) \
            and hasattr(type(device), "__index__"):
        try:
            device = PyNumber_Index(device)
        except TypeError:       # a numpy array that is not 0-d, say: refused below
            pass
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < 2**31:
        raise TypeError(f"device must be a CUDA device ordinal (an int >= 0, a cuda.core or "
                        f"CuPy Device, or a torch.device('cuda:N')), got "
                        f"{shown_value(device, True)}")
    return device


cdef object _library_device(object device):
    """The ordinal a library's device object stands for (recognised by its type's module and
    name, importing nothing), or ``device`` itself."""
    name = type(device).__name__
    module = getattr(type(device), "__module__", None)
    if not isinstance(module, str):     # a class may set anything there
        return device
    if name == "Device" and module.startswith("cuda.core"):
        return getattr(device, "device_id", device)
    if name == "Device" and module.startswith("cupy"):
        return getattr(device, "id", device)
    if name == "device" and module == "torch":
        kind, index = getattr(device, "type", None), getattr(device, "index", None)
        if kind != "cuda":
            raise TypeError(f"device must be a CUDA device; {device!r} is not one")
        if index is None:
            # torch reads it as its current device, which kernarg does not ask torch for.
            raise ValueError(f"device {device!r} names no GPU: give its index, as in "
                             "torch.device('cuda:0'), or pass the ordinal")
        return index
    return device


cdef ParamBlock block_from_state(BlockState* src, object keep):
    """A block holding what ``src`` packed, for a launch whose arguments must outlive it (a
    CUDA graph's): ``src`` is a state of at most KERNARG_INLINE_ARGS arguments (a launch's
    own, on the C stack) whose arguments all lie in its area. The DLPack capsules move over:
    ``src`` has none left to release. ``keep``: the argument tuple, as for arena_block."""
    cdef ParamBlock blk = ParamBlock.__new__(ParamBlock)
    block_init(blk, keep, src.nargs, src.nbytes)      # an Arena; its area grown if need be
    cdef BlockState* st = &blk.st
    cdef Py_ssize_t i
    memcpy(st.data, src.data, src.nbytes)
    for i in range(src.nargs):
        st.argv[i] = st.data + (<char*>src.argv[i] - src.data)
    memcpy(st.sizes, src.sizes, src.nargs * sizeof(uint16_t))
    st.producers[0] = src.producers[0]
    st.nstreams = src.nstreams
    st.nbytes = src.nbytes
    st.check_device = src.check_device
    st.device = src.device
    st.capsules = src.capsules
    src.capsules = NULL
    return blk


cdef ParamBlock arena_block(object keep, Py_ssize_t n):
    """A fresh block over an Arena, for n <= KERNARG_INLINE_ARGS arguments and at most
    KERNARG_INLINE_BYTES bytes, for packers that fill argv, sizes and the area themselves;
    ``keep`` as for arena_block_init."""
    cdef ParamBlock blk = ParamBlock.__new__(ParamBlock)
    cdef Arena* arena = <Arena*>pool_get(False)
    if arena == NULL:
        raise MemoryError()
    arena_block_init(blk, keep, n, arena)
    return blk


cdef ParamBlock untyped_block_items(PyObject** items, Py_ssize_t n, object keep,
                                    uint64_t stream, int device):
    """A new ParamBlock with the ``n`` objects at ``items`` packed untyped. ``keep`` is the
    tuple holding them (the block keeps it alive), or None where they are a call's arguments,
    alive only during the call: such a block must be released before the call returns, or
    given ``_args = tuple(items)`` first (a launch captured into a graph). ``stream``: the
    launch stream's handle; ``device``: the launch device's ordinal, or -1 for no device check."""
    cdef ParamBlock blk = ParamBlock.__new__(ParamBlock)
    block_init(blk, keep, n, 8 * n)
    set_launch_device(&blk.st, device)
    pack_items(&blk.st, items, n, stream, NULL)
    return blk


# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h);
# pack takes it itself, so that the interpreter calls it as a builtin, and only once an
# argument needs it. ParamBlock's slots are left as they are, so that a pack of ints neither
# makes nor frees its block inside the section: its tp_new sets the object's own fields, and
# its tp_dealloc returns storage to the thread's own pools and runs DLPack deleters, with no
# section either (_free_storage). Its methods and properties are guarded.
guard_module(globals(), __name__, (pack, ParamBlock))
