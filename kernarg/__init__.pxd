# `cimport kernarg` gives downstream Cython modules the embedding API (see kernarg/_capi.pxd).
from kernarg._capi cimport (
    kernarg_block,
    kernarg_block_init,
    pack_into_block,
    pack_signature_into_block,
    release_block,
)
