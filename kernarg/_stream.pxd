# The C-level stream resolution that kernarg's other modules cimport (resolve_stream without a
# Python call). This file is ABI between kernarg's own modules.
from libc.stdint cimport uint64_t


cdef uint64_t stream_handle(object obj) except? 0
cdef uint64_t dlpack_stream(uint64_t handle) noexcept
