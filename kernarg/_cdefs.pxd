# C declarations shared by kernarg's Cython modules: the helpers in _cutils.h and the CPython
# internals the fast paths use. Internal: the embedding API (_capi.pxd) does not cimport this.
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8
from libc.stdint cimport uint8_t, uint16_t, uint32_t


cdef extern from *:
    bint kernarg_unlikely "unlikely"(bint) noexcept nogil     # Cython's __builtin_expect


cdef extern from "_cutils.h":
    bint kernarg_small_int(PyObject* x, long long* out) noexcept nogil
    int kernarg_int64_bits(PyObject* x, long long* out) noexcept
    Py_ssize_t kernarg_int_run(PyObject** items, Py_ssize_t i, Py_ssize_t n, char* data,
                               Py_ssize_t* cur, Py_ssize_t cap, void** argv,
                               uint16_t* sizes) noexcept nogil
    Py_ssize_t kernarg_typed_int_run(PyObject** items, Py_ssize_t i, Py_ssize_t n,
                                     uint8_t* codes, uint16_t* offsets, char* data,
                                     void** argv, int code_i32, int code_i64,
                                     uint32_t unsigned64) noexcept nogil
    Py_ssize_t kernarg_typed_int_run_call(PyObject** items, Py_ssize_t i, Py_ssize_t n,
                                          uint8_t* codes, uint16_t* offsets, char* data,
                                          void** argv, int code_i32, int code_i64,
                                          uint32_t unsigned64) noexcept nogil
    uint16_t kernarg_double_to_half(double x) noexcept nogil
    uint16_t kernarg_double_to_bfloat16(double x) noexcept nogil
    double kernarg_half_to_double(uint16_t h) noexcept nogil
    double kernarg_bfloat16_to_double(uint16_t h) noexcept nogil
    # A ctypes instance's bytes, read under its own critical section on a free-threaded build.
    void kernarg_ctypes_copy(char* dst, PyObject* obj, Py_ssize_t bptr_offset,
                             Py_ssize_t n) noexcept
    # What ctypes keeps alive for obj's pointers: its root's b_objects (obj a view: a field
    # or element read from another ctypes object), a new reference or NULL
    PyObject* kernarg_ctypes_root_kept(PyObject* obj, Py_ssize_t kept_offset,
                                       Py_ssize_t base_offset) noexcept
    Py_ssize_t kernarg_member_offset(PyObject* descr) noexcept
    # d[key] as a new reference in out: 1 found, 0 absent, -1 raised (PyDict_GetItemRef).
    int kernarg_dict_get_ref(PyObject* d, PyObject* key, PyObject** out) except -1
    bint kernarg_type_name_is(PyTypeObject* t, const char* name) noexcept
    bint kernarg_static_type_in(PyTypeObject* t, const char* prefix) noexcept
    ctypedef struct PyMethodDef:
        pass
    void kernarg_fastcall_def(PyMethodDef* d, const char* name, void* fn,
                              const char* doc) noexcept
    int kernarg_install_method(PyTypeObject* tp, PyMethodDef* d) except -1


cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject* ob_item[1]
    ctypedef struct PyVarObject:     # the head of a numpy.void (_interop's npvoid_data_offset)
        pass
    ctypedef struct kernarg_complex_value "Py_complex":
        double real
        double imag
    ctypedef struct PyComplexObject:     # an exact complex's value (Signature.pack's vectors)
        kernarg_complex_value cval
    PyTypeObject PyLong_Type
    PyTypeObject PyFloat_Type
    PyTypeObject PyBool_Type
    PyTypeObject PyTuple_Type
    PyTypeObject PyComplex_Type
    PyTypeObject PyDict_Type
    PyTypeObject PyUnicode_Type
    int PyDict_Next_P "PyDict_Next"(PyObject* d, Py_ssize_t* pos, PyObject** key,
                                    PyObject** value) noexcept
    int PyUnicode_Compare_P "PyUnicode_Compare"(PyObject* a, PyObject* b) noexcept
    Py_ssize_t PyTuple_GET_SIZE_P "PyTuple_GET_SIZE"(PyObject*) noexcept nogil
    PyObject* Py_True
    PyObject* Py_None
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    double PyFloat_AsDouble(object) except? -1.0
    double PyFloat_AS_DOUBLE_P "PyFloat_AS_DOUBLE"(PyObject*) noexcept nogil
    PyTypeObject* Py_TYPE_P "Py_TYPE"(PyObject*) noexcept nogil
    object PyCFunction_NewEx(PyMethodDef* ml, PyObject* self, object module)
    PyObject* PyTuple_GET_ITEM(object t, Py_ssize_t i)


cdef inline PyObject** tuple_items(tuple t) noexcept:
    """The item array of ``t``: what the packers read, as they read a vectorcall's arguments."""
    return <PyObject**>&(<PyTupleObject*>t).ob_item[0]


cdef inline tuple tuple_of(PyObject** items, Py_ssize_t n):
    """A new tuple of the ``n`` objects at ``items`` (a vectorcall's arguments, say)."""
    cdef tuple t = PyTuple_New(n)
    cdef Py_ssize_t i
    for i in range(n):
        Py_INCREF(<object>items[i])
        PyTuple_SET_ITEM(t, i, <object>items[i])
    return t


cdef inline bint is_numpy_bool(type t):
    """numpy's bool scalar type (numpy.bool_; named "bool" since numpy 2), which numpy 1.x lets
    through __index__ with a warning: a truth value is never a size or a stream handle. Read
    from the type object (tp_name "numpy.bool_" or "numpy.bool"; the type takes no subclasses),
    with no attribute built."""
    return kernarg_static_type_in(<PyTypeObject*>t, "numpy.bool")


cdef inline object mro_find(type t, str module_prefix, str name):
    """``t`` or the first of its bases that is the class ``name`` of a module under
    ``module_prefix``, else None: how kernarg recognises a library's types without importing
    the library. ``name`` is ASCII (a class name kernarg knows)."""
    cdef const char* cname = PyUnicode_AsUTF8(name)
    for base in t.__mro__:
        if kernarg_type_name_is(<PyTypeObject*>base, cname):
            module = base.__module__
            if isinstance(module, str) and (<str>module).startswith(module_prefix):
                return base
    return None


cdef inline bint mro_has(type t, str module_prefix, str name):
    return mro_find(t, module_prefix, name) is not None


cdef inline int parse_fastcall(str func, tuple names, Py_ssize_t npos, PyObject** args,
                               Py_ssize_t nargs, PyObject* kwnames, PyObject** given) except -1:
    """Put a fastcall's arguments (see kernarg_fastcall_def) by name into ``given``:
    ``given[j]`` is the value for ``names[j]``, or NULL where the call gave none. The first
    ``npos`` names are those of the positional parameters (``args[0:npos]``, also passable by
    keyword), the rest are keyword-only; positional arguments after them are the caller's to
    read (a launch's kernel arguments). Refuses, as a ``def`` would, a keyword not in
    ``names``, a value given twice and a missing positional one."""
    cdef Py_ssize_t i, j, m = len(names)
    cdef Py_ssize_t nkw = 0 if kwnames == NULL else PyTuple_GET_SIZE(<object>kwnames)
    for j in range(m):
        given[j] = args[j] if j < npos and j < nargs else NULL
    for i in range(nkw):
        name = <object>PyTuple_GET_ITEM(<object>kwnames, i)
        for j in range(m):              # CPython interns keyword names, as Cython its strs
            if <PyObject*>name == PyTuple_GET_ITEM(names, j):
                break
        else:
            for j in range(m):
                if name == names[j]:
                    break
            else:
                raise TypeError(f"{func}() got an unexpected keyword argument {name!r}")
        if given[j] != NULL:
            raise TypeError(f"{func}() got multiple values for argument {name!r}")
        given[j] = args[nargs + i]
    for j in range(npos):
        if given[j] == NULL:
            raise TypeError(f"{func}() missing required argument {names[j]!r} (pos {j + 1})")
    return 0


cdef inline object or_default(PyObject* value, object default):
    """``value`` (a fastcall argument parse_fastcall found), or ``default`` where NULL."""
    return <object>value if value != NULL else default


cdef inline int parse_pack_call(str func, PyObject** args, Py_ssize_t nargs, PyObject* kwnames,
                                PyObject** given) except -1:
    """parse_fastcall for ``func(args, *, stream=None, device=None)`` (kernarg.pack and
    Signature.pack), which takes no positional argument past ``args``."""
    if nargs > 1:
        raise TypeError(f"{func}() takes 1 positional argument but {nargs} were given")
    return parse_fastcall(func, ("args", "stream", "device"), 1, args, nargs, kwnames, given)


cdef inline str shown_value(object value, bint as_repr=False):
    """``value`` as an error message shows it: its str (its repr where ``as_repr``), but an int
    of over 256 bits is named by its size ("an int of 16,610 bits"), in a tuple or list as
    well. str() of an int of over 4,300 digits raises ValueError (sys.set_int_max_str_digits),
    which would replace the error being raised, and no one reads a wall of digits. A value
    whose str or repr raises is named by its type."""
    cdef Py_ssize_t bits
    if isinstance(value, int) and not isinstance(value, bool):
        bits = value.bit_length()
        if bits > 256:
            return f"{'a negative' if value < 0 else 'an'} int of {bits:,} bits"
    elif as_repr and type(value) is tuple:
        return "(" + ", ".join([shown_value(x, True) for x in <tuple>value]) + \
            ("," if len(<tuple>value) == 1 else "") + ")"
    elif as_repr and type(value) is list:
        return "[" + ", ".join([shown_value(x, True) for x in <list>value]) + "]"
    try:
        return repr(value) if as_repr else str(value)
    except Exception:
        return f"a {type(value).__name__} whose {'repr' if as_repr else 'str'} raised"


cdef inline str exc_text(object exc):
    """``str(exc)`` for a message that quotes another exception, or "(its str() raised)": an
    exception whose ``__str__`` raises (a hostile or broken library's) must not replace the
    error being raised with its own."""
    try:
        return str(exc)
    except Exception:
        return "(its str() raised)"


cdef inline str exc_quoted(object exc):
    """``exc`` as a message quotes it: its class and its text, as exc_text reads it."""
    return f"{type(exc).__name__}: {exc_text(exc)}"
