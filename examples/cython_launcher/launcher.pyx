# cython: language_level=3
"""A Cython launcher that packs kernel arguments with kernarg's Cython API (`cimport kernarg`):
no ParamBlock, no allocation per call; the block lives on the C stack."""
cimport kernarg
from libc.stdint cimport uintptr_t

cdef enum:
    MAX_ARGS = 1024


def pack(args, stream=None, int device=-1):
    """-> (bytes, offsets, producer_streams), packed into stack memory. With ``device``, arrays
    their producer places on another GPU are refused."""
    cdef double area[4096]
    cdef void* argv[MAX_ARGS]
    cdef kernarg.kernarg_block block
    cdef size_t i
    kernarg.kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS)
    kernarg.pack_into_block(args, stream, &block, device)
    try:
        data = (<char*>area)[:block.nbytes]
        offsets = tuple([<char*>argv[i] - <char*>area for i in range(block.nargs)])
        streams = tuple([block.streams[i] for i in range(block.nstreams)])
    finally:
        kernarg.release_block(&block)
    return data, offsets, streams


def pack_signature(signature, args, stream=None, int device=-1):
    cdef double area[4096]
    cdef void* argv[MAX_ARGS]
    cdef kernarg.kernarg_block block
    cdef size_t i
    kernarg.kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS)
    kernarg.pack_signature_into_block(signature, args, stream, &block, device)
    try:
        data = (<char*>area)[:block.nbytes]
        offsets = tuple([<char*>argv[i] - <char*>area for i in range(block.nargs)])
    finally:
        kernarg.release_block(&block)
    return data, offsets


def pack_only(args):
    """Pack into the stack and release: the benchmark's unit of work."""
    cdef double area[64]
    cdef void* argv[256]
    cdef kernarg.kernarg_block block
    kernarg.kernarg_block_init(&block, area, sizeof(area), argv, 256)
    kernarg.pack_into_block(args, None, &block)
    kernarg.release_block(&block)


def launch(function, grid, block_dim, args, stream=None):
    """Pack and launch with cuda.bindings' cuLaunchKernel (needs a CUDA GPU)."""
    from cuda.bindings import driver
    import kernarg as kernarg_py

    cdef double area[4096]
    cdef void* argv[MAX_ARGS]
    cdef kernarg.kernarg_block block
    handle = kernarg_py.resolve_stream(stream)
    kernarg.kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS)
    kernarg.pack_into_block(args, handle, &block)
    try:
        err, = driver.cuLaunchKernel(function, *grid, *block_dim, 0, driver.CUstream(handle),
                                     <uintptr_t>argv, 0)
    finally:
        kernarg.release_block(&block)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuLaunchKernel: {err.name}")
