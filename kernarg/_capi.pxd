# The Cython-level embedding API, re-exported by kernarg/__init__.pxd:
#
#     cimport kernarg
#     cdef double area[64]
#     cdef void* argv[16]
#     cdef kernarg.kernarg_block block
#     kernarg.kernarg_block_init(&block, area, sizeof(area), argv, 16)
#     kernarg.pack_into_block(args, None, &block)       # except -1: raises like kernarg.pack
#     # or pack_into_block(args, None, &block, device): arrays on another GPU are refused
#     ... launch with block.argv ...
#     kernarg.release_block(&block)
#
# Compile with include_dirs=[kernarg.get_include()] (for kernarg.h). This file is ABI.
from cpython.object cimport PyObject
from libc.stdint cimport uint16_t, uint32_t, uint64_t

cdef extern from *:
    """
    #define KERNARG_NO_IMPORT
    #include "kernarg.h"
    """
    ctypedef struct kernarg_block:
        size_t struct_size
        void* data
        size_t capacity
        void** argv
        size_t max_args
        uint16_t* sizes
        size_t nargs
        size_t nbytes
        PyObject* keep
        PyObject* capsules
        size_t nstreams
        uint64_t streams[16]

    ctypedef struct kernarg_api:
        uint32_t abi_version
        uint32_t struct_size
        int (*pack)(PyObject*, PyObject*, kernarg_block*) except -1
        int (*pack_signature)(PyObject*, PyObject*, PyObject*, kernarg_block*) except -1
        int (*release)(kernarg_block*) except -1
        int (*resolve_stream)(PyObject*, uint64_t*) except -1
        const char* (*version)() noexcept
        int (*pack_device)(PyObject*, PyObject*, int, kernarg_block*) except -1
        int (*pack_signature_device)(PyObject*, PyObject*, PyObject*, int,
                                     kernarg_block*) except -1

    int KERNARG_ABI_VERSION
    void kernarg_block_init(kernarg_block* block, void* data, size_t capacity, void** argv,
                            size_t max_args) noexcept


cdef int pack_into_block(object args, object stream, kernarg_block* block,
                         int device=*) except -1
cdef int pack_signature_into_block(object signature, object args, object stream,
                                   kernarg_block* block, int device=*) except -1
cdef int release_block(kernarg_block* block) except -1
