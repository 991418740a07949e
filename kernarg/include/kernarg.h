/* kernarg C API: pack CUDA kernel arguments from C/C++ extensions.
 *
 *   #include <kernarg.h>            // include dir: kernarg.get_include()
 *
 *   static PyObject *launch(PyObject *self, PyObject *args) {
 *       double area[64];                      // caller-owned parameter area (any alignment
 *       void *argv[16];                       // works; 16-byte aligned is natural)
 *       kernarg_block block;
 *       kernarg_block_init(&block, area, sizeof(area), argv, 16);
 *       if (kernarg->pack(args, NULL, &block) < 0)
 *           return NULL;                      // a Python exception names the argument
 *       ... cuLaunchKernel(f, grid..., block..., shmem, stream, block.argv, NULL) ...
 *       kernarg->release(&block);             // drops references, runs DLPack deleters
 *       Py_RETURN_NONE;
 *   }
 *
 *   PyMODINIT_FUNC PyInit_mine(void) {
 *       if (import_kernarg() < 0) return NULL;
 *       ...
 *   }
 *
 * Every function needs the GIL, returns 0 on success and -1 with a Python exception set on
 * failure. ABI: kernarg_api and kernarg_block only ever grow by appending fields; callers pass
 * sizeof(kernarg_block) in block->struct_size and check api->struct_size before using a field
 * added after KERNARG_ABI_VERSION 1.
 */
#ifndef KERNARG_H
#define KERNARG_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KERNARG_ABI_VERSION 1
#define KERNARG_MAX_STREAMS 16      /* producer streams recorded per block */

typedef struct kernarg_block {
    size_t struct_size;         /* in: sizeof(kernarg_block) as the caller compiled it */
    void *data;                 /* in: parameter area (CU_LAUNCH_PARAM_BUFFER_POINTER) */
    size_t capacity;            /* in: bytes available at data */
    void **argv;                /* in: kernelParams array */
    size_t max_args;            /* in: entries available at argv */
    uint16_t *sizes;            /* in, optional: receives each argument's size, or NULL */
    size_t nargs;               /* out: number of arguments packed */
    size_t nbytes;              /* out: bytes used at data (CU_LAUNCH_PARAM_BUFFER_SIZE) */
    PyObject *keep;             /* out: strong reference release() drops (the argument tuple) */
    PyObject *capsules;         /* out: list of consumed DLPack capsules, or NULL */
    size_t nstreams;            /* out: CUDA Array Interface producer streams recorded */
    uint64_t streams[KERNARG_MAX_STREAMS];  /* out: wait on these before launching */
} kernarg_block;

typedef struct kernarg_api {
    uint32_t abi_version;       /* KERNARG_ABI_VERSION of the provider */
    uint32_t struct_size;       /* sizeof(kernarg_api) of the provider */
    /* Untyped packing, as kernarg.pack(args, stream=stream). args: a tuple or list.
       stream: NULL or None for the default stream, else anything kernarg.resolve_stream
       accepts; DLPack producers receive it. */
    int (*pack)(PyObject *args, PyObject *stream, kernarg_block *block);
    /* Typed packing, as signature.pack(args, stream=stream); signature: a kernarg.Signature. */
    int (*pack_signature)(PyObject *signature, PyObject *args, PyObject *stream,
                          kernarg_block *block);
    /* Drop the block's references and run DLPack deleters, exactly once (idempotent). */
    int (*release)(kernarg_block *block);
    /* kernarg.resolve_stream(stream) into *handle. */
    int (*resolve_stream)(PyObject *stream, uint64_t *handle);
    /* The kernarg version string, e.g. "0.1.0". */
    const char *(*version)(void);
    /* --- appended after the first release: check KERNARG_API_HAS(api, field) first --- */
    /* As pack and pack_signature, and arguments whose producer says they live on a CUDA
       device other than `device` (an ordinal; DLPack kDLCUDA device ids, torch and CuPy
       devices) are refused with a ValueError naming the argument, as kernarg.pack(...,
       device=device) does. device -1: no check. Pinned and managed memory is never refused. */
    int (*pack_device)(PyObject *args, PyObject *stream, int device, kernarg_block *block);
    int (*pack_signature_device)(PyObject *signature, PyObject *args, PyObject *stream,
                                 int device, kernarg_block *block);
} kernarg_api;

/* Whether the kernarg providing `api` has `field` (fields are only ever appended). */
#define KERNARG_API_HAS(api, field) \
    ((size_t)(api)->struct_size >= offsetof(kernarg_api, field) + sizeof((api)->field))

static inline void kernarg_block_init(kernarg_block *block, void *data, size_t capacity,
                                      void **argv, size_t max_args) {
    memset(block, 0, sizeof(*block));
    block->struct_size = sizeof(*block);
    block->data = data;
    block->capacity = capacity;
    block->argv = argv;
    block->max_args = max_args;
}

#ifndef KERNARG_NO_IMPORT
/* One pointer per translation unit that includes this header; import_kernarg() sets it. */
static const kernarg_api *kernarg = NULL;

static int import_kernarg(void) {
    const kernarg_api *api = (const kernarg_api *)PyCapsule_Import("kernarg._C_API", 0);
    if (api == NULL)
        return -1;
    if (api->abi_version != KERNARG_ABI_VERSION) {
        PyErr_Format(PyExc_ImportError,
                     "kernarg C API version %u does not match the %d this extension was "
                     "built for", (unsigned)api->abi_version, KERNARG_ABI_VERSION);
        return -1;
    }
    kernarg = api;
    return 0;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* KERNARG_H */
