# cython: language_level=3, boundscheck=False, wraparound=False
"""Benchmark floor: the least work any packer of Python ints must do.

``copy_ints(args)`` converts each int and copies it into a static buffer and fills a static
``void*[]``: no type dispatch, no alignment, no result object. ``python -m kernarg bench``
compares kernarg.pack against it.
"""
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.string cimport memcpy

from kernarg._stream cimport guard_module

__all__ = ["copy_ints"]

cdef long long _buf[4096]
cdef void* _argv[4096]


def copy_ints(tuple args):
    """Copy up to 4096 Python ints into a static parameter buffer."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(args)
    cdef long long value
    if n > 4096:
        raise ValueError("copy_ints handles at most 4096 arguments")
    for i in range(n):
        value = <long long><object>PyTuple_GET_ITEM(args, i)   # Cython's inline coercion
        memcpy(&_buf[i], &value, 8)
        _argv[i] = &_buf[i]


# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h).
guard_module(globals(), __name__)
