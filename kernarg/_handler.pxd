# Declarations other Cython modules cimport from kernarg._handler. This file is ABI.
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy

from kernarg._cdefs cimport PyLong_Type, Py_TYPE_P, kernarg_small_int
from kernarg._interop cimport (
    MrCache,
    PtrResult,
    TypeInfo,
    getter_t,
    kernarg_seq_begin,
    kernarg_seq_valid,
    load_char,
    load_const_pointer,
    load_getter,
    load_int,
    load_object,
    load_pointer,
    load_ssize,
    load_type,
    mr_cache,
)
from kernarg._stream cimport KERNARG_GUARDED_BUILD, LazySection, enter_lazily


cdef enum:
    KERNARG_MAX_PARAM_BYTES = 32764   # cuLaunchKernel's limit on the parameter area
    KERNARG_INLINE_ARGS = 16          # argument slots stored inside the ParamBlock object
    KERNARG_INLINE_BYTES = 256        # parameter bytes stored without a heap allocation
    KERNARG_INLINE_WORDS = 34         # KERNARG_INLINE_BYTES / 8 + 2 (room to align to 16)
    # Past the inline slots, blocks of up to this many arguments come from a second pool.
    KERNARG_POOLED_ARGS = 512
    KERNARG_MAX_STREAMS = 16          # distinct producer streams recorded per argument list


# The producer streams a block recorded, and for each the argument that first brought it (for
# errors that name it).
cdef struct Producers:
    uint64_t streams[KERNARG_MAX_STREAMS]
    uint32_t args[KERNARG_MAX_STREAMS]


# Storage for the common case, recycled through a C-level pool (per thread on a free-threaded
# build) so that a pack allocates nothing but the ParamBlock object itself (which Cython's
# freelist recycles on a GIL build).
cdef struct Arena:
    double data[KERNARG_INLINE_WORDS]
    void* argv[KERNARG_INLINE_ARGS]
    uint16_t sizes[KERNARG_INLINE_ARGS]
    Producers producers


# Everything the packing core reads and writes. A ParamBlock embeds one; the C API builds one
# over the caller's memory (fixed: it never grows).
cdef struct BlockState:
    char* data              # parameter area
    void** argv             # kernelParams: entry i -> data + offsets[i]
    uint16_t* sizes         # size of each argument
    Py_ssize_t nargs
    Py_ssize_t nbytes
    Py_ssize_t capacity     # bytes available at data
    char* heap_data         # area moved to the heap by growth (owned), or NULL
    bint fixed              # caller-owned area: never grows
    PyObject* capsules      # owned list of consumed DLPack capsules, or NULL
    Producers* producers    # producers.streams[:nstreams]: the producer stream handles
    Py_ssize_t nstreams
    bint check_device       # refuse arrays known to live on a device other than `device`
    int device              # the launch device's ordinal, when check_device


# The per-type cache: 128 sets of two slots, a type's set picked by a multiplicative hash of
# its pointer, so that any two types can be in use at once whatever their addresses (a third in
# the set takes the slot of the one stored first). Exposed so other modules can probe it
# inline; on a miss they call lookup_type. Only kernarg's section writes it (_handler.pyx's
# _cache_miss and _clear_cache), bracketing each entry's stores with its ``seq`` (_cutils.h's
# sequence lock), so that a free-threaded build can read it outside the section (cache_view).
cdef enum:
    KERNARG_CACHE_SET_BITS = 7
    KERNARG_CACHE_SETS = 128          # 1 << KERNARG_CACHE_SET_BITS
    KERNARG_CACHE_WAYS = 2            # cache_find looks at two slots
    KERNARG_CACHE_SIZE = 256          # KERNARG_CACHE_SETS * KERNARG_CACHE_WAYS

cdef struct CacheEntry:
    unsigned seq
    PyTypeObject* type
    TypeInfo info


cdef inline CacheEntry* cache_set(CacheEntry* cache, PyTypeObject* tp) noexcept:
    """The first of the KERNARG_CACHE_WAYS slots of ``tp``'s set (the rest follow it). Types
    are few and their addresses far apart: Fibonacci hashing spreads them as well as random
    keys (session 102 measured it on runs of classes made one after another; _launch.pyx's
    sets of kernels, keyed by addresses 48 or 144 bytes apart, need the mixer it has)."""
    cdef uint64_t h = (<uint64_t><uintptr_t>tp) * <uint64_t>0x9E3779B97F4A7C15ULL
    return &cache[(h >> (64 - KERNARG_CACHE_SET_BITS)) * KERNARG_CACHE_WAYS]


cdef inline CacheEntry* cache_find(CacheEntry* first, PyTypeObject* tp) noexcept:
    """The slot of the set that begins at ``first`` (cache_set) holding ``tp``, or NULL. On a
    free-threaded build the loads are relaxed atomics and the answer only a candidate, for the
    caller to read under the slot's sequence lock (cache_view) or in the section. On a GIL
    build they are plain loads: relaxed atomics cost an instruction an argument in
    kernarg.pack there (callgrind, 3.11)."""
    if not KERNARG_GUARDED_BUILD:
        if first[0].type == tp:
            return first
        if first[1].type == tp:
            return first + 1
        return NULL
    if load_type(first[0].type) == tp:
        return first
    if load_type(first[1].type) == tp:
        return first + 1
    return NULL


cdef inline TypeInfo* cache_view(CacheEntry* cache, PyObject* arg, TypeInfo* copy) noexcept:
    """The cached TypeInfo of type(arg), or NULL on a miss; needs no section. On a GIL build
    the entry's own (read it before running Python code: a miss on its set may rewrite it). On
    a free-threaded build ``copy``, filled with a copy of the entry read whole, field by field,
    under the entry's sequence lock: NULL also when a writer was busy with the entry, for the
    caller to enter the section and look the type up there (lookup_type)."""
    cdef PyTypeObject* tp = Py_TYPE_P(arg)
    cdef CacheEntry* entry = cache_find(cache_set(cache, tp), tp)
    cdef unsigned begun
    if entry == NULL:
        return NULL
    if not KERNARG_GUARDED_BUILD:
        return &entry.info
    # The type again, under the lock: a writer may have taken the slot since cache_find.
    begun = kernarg_seq_begin(&entry.seq)
    if load_type(entry.type) != tp:
        return NULL
    copy.kind = load_int(entry.info.kind)
    copy.size = load_ssize(entry.info.size)
    copy.align = load_ssize(entry.info.align)
    copy.offset = load_ssize(entry.info.offset)
    copy.getter = load_getter(entry.info.getter)
    copy.closure = load_pointer(entry.info.closure)
    copy.mr_getter = load_getter(entry.info.mr_getter)
    copy.mr_closure = load_pointer(entry.info.mr_closure)
    copy.num_kind = load_char(entry.info.num_kind)
    copy.api = load_const_pointer(entry.info.api)
    copy.torch_tensor = load_int(entry.info.torch_tensor)
    return copy if kernarg_seq_valid(&entry.seq, begun) else NULL


cdef inline void copy_fixed(char* dst, const void* src, Py_ssize_t size) noexcept nogil:
    """memcpy for the common sizes as plain moves (a runtime-sized memcpy is a libc call).
    Copying the low bytes of a wider integer truncates it: hosts are little-endian."""
    if size == 8:
        memcpy(dst, src, 8)
    elif size == 4:
        memcpy(dst, src, 4)
    elif size == 2:
        memcpy(dst, src, 2)
    elif size == 1:
        dst[0] = (<const char*>src)[0]
    elif size == 16:
        memcpy(dst, src, 16)
    else:
        memcpy(dst, src, size)


cdef class ParamBlock:
    cdef BlockState st
    cdef Arena* _arena          # from the pool; returned on dealloc
    cdef void* _heap_args       # argv + area + sizes past KERNARG_INLINE_ARGS
    cdef bint _heap_args_pooled  # _heap_args came from the large-block pool
    # The keep-alive reference to the argument tuple, or None (see untyped_block_items).
    cdef object _args


cdef inline void set_launch_device(BlockState* st, int device) noexcept:
    """Refuse pointer arguments known to live on a device other than ``device`` (a CUDA
    ordinal); -1 turns the check off."""
    st.device = device
    st.check_device = device >= 0


cdef inline tuple as_arg_tuple(object args, str who):
    """The argument tuple a packer keeps: ``args`` itself, or a tuple copy of a list."""
    if type(args) is tuple:
        return <tuple>args
    if isinstance(args, (tuple, list)):
        return tuple(args)
    raise TypeError(f"{who}: args must be a tuple or list of kernel arguments, got "
                    f"{type(args).__name__}")
cdef int pack_state(BlockState* st, tuple args, uint64_t stream) except -1
cdef int pack_items(BlockState* st, PyObject** items, Py_ssize_t n, uint64_t stream,
                    LazySection* lazy) except -1
cdef int state_release(BlockState* st) except -1
cdef int block_release(ParamBlock blk) except -1
cdef int device_ordinal(object device) except -2
cdef int state_take_pointer(BlockState* st, PtrResult* r, Py_ssize_t index,
                            object arg) except -1
# Refuse a cuda.core Buffer whose memory a kernel cannot reach or that is on another device.
cdef int check_buffer(BlockState* st, getter_t mr_getter, void* mr_closure, object buf,
                      Py_ssize_t index) except -1


cdef inline bint elsewhere(const BlockState* st, int device) noexcept:
    """Whether memory (or a tensor map) on CUDA ``device`` (-1: reachable from any) is on
    another device than the launch's, where the launch has one."""
    return st.check_device and device >= 0 and device != st.device


cdef inline int buffer_known(BlockState* st, getter_t mr_getter, void* mr_closure,
                             PyObject* buf, const MrCache* last) except -1:
    """1 when check_buffer would pass a cuda.core Buffer without reading anything: it has no
    memory resource, or ``last`` (mr_cache(), which the caller keeps), whose device passes the
    launch's check; else 0."""
    cdef unsigned begun
    cdef int device
    if mr_getter == NULL:
        return 0
    mr = mr_getter(<object>buf, mr_closure)
    if mr is None:
        return 1
    # (The lock and the whole loads compile to the plain loads on a GIL build.) ``mr`` is
    # alive, so no other resource can have its address.
    begun = kernarg_seq_begin(&last.seq)
    if <PyObject*>mr != load_object(last.mr):
        return 0
    device = load_int(last.device)
    return kernarg_seq_valid(&last.seq, begun) and not elsewhere(st, device)


cdef int put_tensor_map(BlockState* st, const TypeInfo* info, Py_ssize_t index, object arg,
                        void* out) except -1
cdef int block_init(ParamBlock blk, object keep, Py_ssize_t n, Py_ssize_t nbytes) except -1
cdef ParamBlock untyped_block_items(PyObject** items, Py_ssize_t n, object keep,
                                    uint64_t stream, int device)
cdef ParamBlock arena_block(object keep, Py_ssize_t n)
cdef ParamBlock block_from_state(BlockState* src, object keep)
cdef TypeInfo* lookup_type(object arg, Py_ssize_t index) except NULL


cdef inline TypeInfo* view_or_lookup(CacheEntry* cache, PyObject* item, Py_ssize_t index,
                                     TypeInfo* copy, LazySection* lazy) except NULL:
    """How ``item`` packs, for the packers' fast paths: cache_view (no section), or on a miss
    lookup_type, in kernarg's section, entered through ``lazy`` (NULL: already held)."""
    cdef TypeInfo* info = cache_view(cache, item, copy)
    if info != NULL:
        return info
    enter_lazily(lazy)
    return lookup_type(<object>item, index)
cdef CacheEntry* cache_table() noexcept


cdef extern from "Python.h":
    PyObject* PyObject_GetAttrString(PyObject* o, const char* name) noexcept
    void Py_DECREF_P "Py_DECREF"(PyObject* o) noexcept

# A C getter called without Cython's error check: a new reference, or NULL with the exception
# set. (getter_t's `object` return is the same C function; Cython would check it.)
ctypedef PyObject* (*unchecked_getter_t)(PyObject*, void*) noexcept


cdef inline int buffer_address(PyObject* buf, const TypeInfo* info, long long* out) noexcept:
    """The address ``buf.handle`` gives, for a KIND_BUFFER object's fast path: 1 with ``out``
    set when it is a positive int below 2**60 (the common case); 0 when it is anything else,
    for the slow path to decide; -1 with the exception set when reading it raised, for the
    caller to name (name_raised). The handle is read through the C getter of the type's
    `handle` getset descriptor where classify found one (what the attribute would run, minus
    the lookup), and without Cython's error check: a try block would cost every Buffer
    argument a save and restore of the thread's exception state."""
    cdef PyObject* handle
    out[0] = 0
    if info.getter != NULL:
        handle = (<unchecked_getter_t>info.getter)(buf, info.closure)
    else:
        handle = PyObject_GetAttrString(buf, "handle")
    if handle == NULL:
        return -1
    cdef int found = (Py_TYPE_P(handle) == &PyLong_Type and kernarg_small_int(handle, out)
                      and out[0] > 0)
    Py_DECREF_P(handle)
    return found
