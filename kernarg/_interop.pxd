# Declarations that kernarg._handler cimports from kernarg._interop. This file is ABI:
# change it only together with _handler.pyx.
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint64_t

from kernarg._stream cimport LazySection


cdef enum ArgKind:
    KIND_PROBE = 0      # nothing known about the type: probe each instance (slow path)
    KIND_INT            # Python int or subclass: long long / unsigned long long
    KIND_FLOAT          # Python float or subclass: double
    KIND_BOOL           # bool, numpy.bool_ via KIND_INLINE, ctypes.c_bool via KIND_CTYPES
    KIND_COMPLEX        # Python complex or subclass: double2
    KIND_NONE           # None: null pointer
    KIND_INLINE         # fixed-size value stored inside the object (numpy / ml_dtypes scalars)
    KIND_CTYPES         # ctypes instance: the value lives behind the object's b_ptr
    KIND_CTYPES_BUFFER  # ctypes instance read through the buffer protocol (ABI check failed)
    KIND_NPVOID         # numpy structured scalar: size and alignment come from each object's dtype
    KIND_HANDLE         # texture/surface object handle (cuda.bindings, CuPy): unsigned long long
    KIND_TENSOR_MAP     # TMA tensor map (cuda.bindings CUtensorMap, cuda.core TensorMapDescriptor)
    KIND_POINTER        # first pointer kind: everything from here on packs as an 8-byte address
    KIND_BUFFER         # cuda.core Buffer (device, pinned or managed memory resource)
    KIND_DRIVER_PTR     # cuda.bindings driver.CUdeviceptr: int(obj)
    KIND_REGISTERED     # a type taught to kernarg with kernarg.register()
    KIND_TORCH          # torch.Tensor: data_ptr()
    KIND_CUPY           # cupy.ndarray: data.ptr
    KIND_CUPY_MEMPTR    # cupy.cuda.MemoryPointer (device or managed memory): ptr
    KIND_CUPY_PINNED    # cupy.cuda.PinnedMemoryPointer (page-locked host memory): ptr
    KIND_NUMBA          # numba DeviceNDArray: device_ctypes_pointer
    KIND_SMV            # cuda.core StridedMemoryView: ptr
    KIND_PYCUDA         # PyCUDA (Pooled)DeviceAllocation, PointerHolderBase: int(obj)
    KIND_JAX            # jax.Array (jaxlib ArrayImpl): unsafe_buffer_pointer()
    KIND_NDARRAY        # numpy.ndarray: taken only over pinned host memory (its base says)
    KIND_DLPACK_C       # type with a DLPack 1.3 C exchange API (__dlpack_c_exchange_api__)
    KIND_CAI            # __cuda_array_interface__ on the type
    KIND_DLPACK         # __dlpack__ on the type


ctypedef object (*getter_t)(object, void*)

cdef enum:
    SWAPPED_SCALAR = 83     # TypeInfo.num_kind ('S') of a byte-swapped ctypes scalar type
    CTYPES_POINTER = 80     # TypeInfo.num_kind ('P') of c_void_p, c_char_p, c_wchar_p, POINTER(T)
    CTYPES_HOLDS_POINTERS = 72  # num_kind ('H') of ctypes structs, unions, arrays holding those
    NUM_BFLOAT16 = 66       # num_kind ('B') of ml_dtypes.bfloat16 (numpy's kinds are lower case)


# A type's entry in _handler.pyx's per-type cache. A field added here is added to what
# _handler.pyx's _cache_store writes and _handler.pxd's cache_view copies, and to _cache_miss's
# tuple in _classified.
cdef struct TypeInfo:
    int kind
    Py_ssize_t size     # by-value kinds: bytes in the parameter block
    Py_ssize_t align
    # KIND_INLINE: value offset in the object; KIND_CTYPES: offset of b_ptr; KIND_NPVOID: of
    # the data pointer (npvoid_data_offset), -1 where not confirmed or a user's subclass;
    # KIND_HANDLE: where the handle is read (HANDLE_* in _interop.pyx); KIND_TENSOR_MAP: where
    # its bytes are (TMAP_* in _interop.pyx)
    Py_ssize_t offset
    getter_t getter     # KIND_BUFFER: C getter of the type's `handle` descriptor, or NULL
    void* closure       # ... and its closure; KIND_TENSOR_MAP (cuda.core): _get_data_ptr
    getter_t mr_getter  # KIND_BUFFER: C getter of `memory_resource`, or NULL
    void* mr_closure    # ... and its closure
    # KIND_INLINE numpy scalars: dtype kind ('b','i','u','f','c'); KIND_CTYPES(_BUFFER):
    # SWAPPED_SCALAR for a byte-swapped scalar type (c_int32.__ctype_be__), CTYPES_POINTER for
    # the pointer types, CTYPES_HOLDS_POINTERS for types with pointer fields or elements, the
    # numpy dtype kind ('b','i','u','f') for ctypes' own number types (_interop.pyx's
    # CTYPES_NUMBER_KINDS); else 0
    char num_kind
    # KIND_DLPACK_C: the type's DLPackExchangeAPI table (which the DLPack specification keeps
    # alive as long as the process), else NULL
    const void* api
    # KIND_DLPACK_C: the type is torch.Tensor (or a subclass), whose lazily conjugated and
    # negated views the exchange API exports as if they were resolved: kernarg refuses them
    bint torch_tensor


cdef enum:
    DTYPE_BIG_ENDIAN = 62   # '>'
    DTYPE_OTHER = 63        # '?'


cdef struct PtrResult:
    uint64_t ptr
    bint readonly
    # The producer exported a copy (DLPack's IS_COPIED flag): the kernel may read it, but what
    # it writes there never reaches the producer's array.
    bint copied
    bint has_stream     # a CUDA Array Interface producer exported a stream to wait on
    uint64_t stream
    PyObject* capsule   # new reference to a consumed ("used_") DLPack capsule, or NULL
    # Element type if the producer said: numpy kind ('f','i','u','b','c'; 'B' bfloat16; the
    # small float formats' letters, SMALL_FLOAT_KINDS) and size in bytes; kind 0 when unknown.
    # DTYPE_BIG_ENDIAN: multi-byte elements in big-endian order, which no kernel reads as its
    # pointee; DTYPE_OTHER: a type no pointee names (datetime, strings, objects, or a CUDA
    # Array Interface typestr kernarg cannot read). Both match only pointers that take any
    # memory (void*, structs).
    char dtype_kind
    int dtype_size
    # CUDA device ordinal the memory lives on, where the producer said so cheaply (DLPack
    # kDLCUDA, torch, CuPy, JAX, a cuda.core Buffer's memory resource, a StridedMemoryView's
    # device_id); -1 when unknown or accessible from every device (pinned, managed).
    int device
    # ``device`` is a device_id that pinned and managed memory carry too (cuda.core's
    # StridedMemoryView): confirm it with confirm_device before refusing the argument.
    bint device_unconfirmed


cdef int classify(type t, TypeInfo* info) except -1
cdef Py_ssize_t npvoid_data_offset() except -2
# Called with the exception a reader of argument ``index`` left set: raises it, named (see
# _interop.pyx). ``kind`` says what was being read.
cdef int name_raised(int kind, object obj, Py_ssize_t index) except -1
# The address of a pointer argument (info.kind > KIND_POINTER) into ``result``, and its element
# type when ``want_dtype``. ``lazy``: NULL where the caller holds kernarg's section; else the
# section, which it enters before anything but the usual is read (see _interop.pyx).
cdef int pointer_of(const TypeInfo* info, object obj, Py_ssize_t index, uint64_t stream,
                    PtrResult* result, bint want_dtype, LazySection* lazy) except -1
# For a KIND_PROBE argument: KIND_CAI or KIND_DLPACK where the object itself answers that
# protocol (an instance attribute, a __getattr__), else KIND_PROBE. An exception other than
# AttributeError names the argument, as pointer_of's do.
cdef int probed_kind(object obj, Py_ssize_t index) except -1
cdef int release_capsule(object capsule) except -1
# The 64-bit value of a KIND_HANDLE object (a texture or surface object), into out[0:8].
cdef int handle_value(const TypeInfo* info, object obj, Py_ssize_t index,
                      void* out) except -1
# Whether instances of ``t`` are TMA tensor maps (nonzero: where their bytes are).
cdef int tensor_map_source(type t)
# The 128 bytes of a KIND_TENSOR_MAP object into out[0:128]; device: the CUDA device it was
# made for where its library says (cuda.core), else -1.
cdef int tensor_map_value(const TypeInfo* info, object obj, Py_ssize_t index, void* out,
                          int* device) except -1
# The CUDA device ordinal a cuda.core Buffer's memory is on, as its memory resource says (read
# with the type's TypeInfo.mr_getter, copied before any Python code runs); -1
# where there is none to check (pinned or managed memory, or no memory resource). Refuses
# (TypeError) the buffer of a resource whose memory a kernel cannot reach.
cdef int buffer_device(getter_t mr_getter, void* mr_closure, object buf,
                       Py_ssize_t index) except -2
# The CUDA device ordinal of an argument whose PtrResult.device_unconfirmed is set, when its
# DLPack device (the object's or its exporter's __dlpack_device__) says kDLCUDA; -1 otherwise:
# pinned, managed, or no answer. Only the refusal path calls it.
cdef int confirm_device(object obj) except -2
# Why a ctypes pointer that points into memory it keeps alive (host memory) is refused, or None
# (also for the pointers in a ctypes struct, union or array's fields and elements)
cdef str ctypes_target_refusal(object value)
# The address a ctypes pointer holds (read behind its b_ptr, not through ctypes.cast, which
# makes the pointer keep one more object)
cdef uint64_t ctypes_pointer_value(object value) except? 0
# isinstance(value, CTYPES_POINTER_TYPES), by the type's bases (no __instancecheck__ asked)
cdef bint is_ctypes_pointer(object value) noexcept
# A ctypes pointer, or a struct, union or array holding pointers, of size bytes, that keeps
# nothing alive (an address given as an int) or only other pointers (ctypes.cast's): its bytes
# copied to dst and True, in C with no section; False (dst's bytes then unspecified) for the
# slow path's check
cdef bint copy_ctypes_pointers(char* dst, PyObject* value, Py_ssize_t size) noexcept


# buffer_device's memory of the resource it read last: its address (NULL for none; a weak
# reference's callback clears it when the resource goes) and its answer. The packers' fast
# paths compare against it inline (kernarg._handler.buffer_known) and call buffer_device only
# when it differs. On a free-threaded build they read it outside kernarg's section, so its
# writers (in the section) bracket their stores with ``seq`` (_cutils.h's sequence lock).
cdef struct MrCache:
    unsigned seq
    PyObject* mr
    int device


# Whole loads and stores of the fields that a free-threaded build reads outside kernarg's
# section (the per-type cache, MrCache): _cutils.h's KERNARG_LOAD_RELAXED, one name per type,
# as Cython checks each call's types. Give each the field itself (an lvalue).
cdef extern from "_cutils.h":
    int load_int "KERNARG_LOAD_RELAXED"(int) noexcept nogil
    char load_char "KERNARG_LOAD_RELAXED"(char) noexcept nogil
    Py_ssize_t load_ssize "KERNARG_LOAD_RELAXED"(Py_ssize_t) noexcept nogil
    PyObject* load_object "KERNARG_LOAD_RELAXED"(PyObject*) noexcept nogil
    PyTypeObject* load_type "KERNARG_LOAD_RELAXED"(PyTypeObject*) noexcept nogil
    void store_type "KERNARG_STORE_RELAXED"(PyTypeObject*, PyTypeObject*) noexcept nogil
    void* load_pointer "KERNARG_LOAD_RELAXED"(void*) noexcept nogil
    const void* load_const_pointer "KERNARG_LOAD_RELAXED"(const void*) noexcept nogil
    getter_t load_getter "KERNARG_LOAD_RELAXED"(getter_t) noexcept nogil
    void store_int "KERNARG_STORE_RELAXED"(int, int) noexcept nogil
    void store_char "KERNARG_STORE_RELAXED"(char, char) noexcept nogil
    void store_ssize "KERNARG_STORE_RELAXED"(Py_ssize_t, Py_ssize_t) noexcept nogil
    void store_pointer "KERNARG_STORE_RELAXED"(void*, void*) noexcept nogil
    void store_const_pointer "KERNARG_STORE_RELAXED"(const void*, const void*) noexcept nogil
    void store_getter "KERNARG_STORE_RELAXED"(getter_t, getter_t) noexcept nogil
    void store_object "KERNARG_STORE_RELAXED"(PyObject*, PyObject*) noexcept nogil
    int load_acquire_int "KERNARG_LOAD_ACQUIRE"(int) noexcept nogil
    void store_release_int "KERNARG_STORE_RELEASE"(int, int) noexcept nogil
    unsigned kernarg_seq_begin(const unsigned* seq) noexcept nogil
    bint kernarg_seq_valid(const unsigned* seq, unsigned begun) noexcept nogil
    void kernarg_seq_write_begin(unsigned* seq) noexcept nogil
    void kernarg_seq_write_end(unsigned* seq) noexcept nogil


cdef MrCache* mr_cache() noexcept
# Raise ``message`` with the exception class of ``exc`` (TypeError if it cannot be built).
cdef _reraise(object exc, str message)
cdef str _describe(Py_ssize_t index, object obj)
cdef str _type_name(type t)       # "module.QualName" ("QualName" for builtins)
