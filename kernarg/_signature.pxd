# Declarations other Cython modules (kernarg._capi) cimport from kernarg._signature. ABI.
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint8_t, uint16_t, uint64_t

from kernarg._handler cimport BlockState, ParamBlock
from kernarg._stream cimport LazySection


cdef struct Param:
    int code
    int elem            # C_VECTOR: scalar code of the elements
    int count           # C_VECTOR: number of elements
    Py_ssize_t size
    Py_ssize_t align
    Py_ssize_t offset
    char pointee_kind   # C_POINTER: numpy-style kind ('f','i','u','b','c', 'B' bfloat16), 0 = any
    int pointee_size    # C_POINTER: element size in bytes, 0 = any
    bint is_const       # C_POINTER: const pointee (read-only arrays allowed)
    bint any_sign       # an integer from PTX, which gives the width but not the sign
    # C_STRUCT given as a ctypes type (Signature._structs keeps it): the type, whose exact
    # instances Signature.pack copies in place; else NULL
    PyTypeObject* ctypes_type
    # C_STRUCT given as a numpy struct dtype (Signature._structs keeps it), where the numpy.void
    # layout is confirmed (_interop's npvoid_data_offset): the dtype, whose numpy.void scalars
    # Signature.pack copies in place; else NULL
    PyObject* np_dtype
    # C_VECTOR's lanes, and the fields of a C_STRUCT whose fields are all numbers
    # (_plain_fields): nfields pairs (code, offset), in order (in Signature._fields), for
    # Signature.pack to write a tuple (a struct's: or dict) of numbers in place
    # (_place_numbers); NULL, where the general path (_put_vector, _put_record) takes them.
    const uint16_t* fields
    Py_ssize_t nfields
    PyObject* field_names   # a struct's: the tuple of the fields' names (Signature._field_names)
    bint dict_fields        # a struct's: dicts too (no field has a default member initializer)
    bint zero_first         # a struct's fields leave bytes uncovered: zero the struct first


cdef class Signature:
    cdef Param* _params        # owns one allocation; the columns below point into it
    cdef uint16_t* _sizes      # the sizes column of _params, copied into each block at once
    cdef uint8_t* _codes       # columns of _params for kernarg_typed_int_run
    cdef uint16_t* _offsets
    cdef uint16_t* _gaps       # padding to zero in each block: (offset, length) pairs
    cdef uint16_t* _fields     # owns Param.fields' pairs (code, offset), all params' in one
    cdef Py_ssize_t _ngaps
    cdef Py_ssize_t _n
    cdef Py_ssize_t _nbytes
    cdef bint _fits_arena      # at most KERNARG_INLINE_ARGS params and KERNARG_INLINE_BYTES
    cdef tuple _names
    cdef tuple _types
    cdef tuple _structs        # per parameter: dtype/ctypes type for C_STRUCT, else None
    cdef tuple _records        # per parameter: C_STRUCT's dtype for dicts and tuples, or None
    cdef tuple _field_names    # per parameter: Param.field_names' tuple, or None
    cdef tuple _default_texts  # per parameter: its default argument as written, or None
    cdef tuple _defaults       # the values of the defaults of params _first_default.. _n-1
    cdef Py_ssize_t _first_default     # _n: no call may leave arguments out
    cdef bint _defaults_compiled      # from_source: NVRTC evaluated the non-literal ones
    # What the default before _first_default is, for the count refusal to say: _NOT_DECODED
    # (NVRTC's bytes that kernarg does not pass back as a value, see _small_float_lanes),
    # _ADDRESS (an address the module's loader fixes), _NOT_LITERAL, or None.
    cdef object _stop

    cdef _build(self, list specs, list names)
    cdef _set_defaults(self, list texts, dict evaluated=*)


cdef str ptx_text(object ptx, str who)
cdef int pack_typed_state(Signature sig, BlockState* st, tuple t, uint64_t stream) except -1
cdef int pack_typed_items(Signature sig, BlockState* st, PyObject** items, Py_ssize_t n,
                          uint64_t stream, LazySection* lazy) except -1
cdef tuple with_defaults(Signature sig, PyObject** items, Py_ssize_t n)
cdef ParamBlock typed_block_items(Signature sig, PyObject** items, Py_ssize_t n, object keep,
                                  uint64_t stream, int device, LazySection* lazy)
