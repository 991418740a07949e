/* A plain C extension that packs kernel arguments with kernarg's C API (kernarg.h) and, when a
 * CUDA driver is present, launches a kernel with them. No build dependency beyond Python and
 * kernarg: the driver is opened at run time with dlopen.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <kernarg.h>

#define MAX_ARGS 1024

/* A block held across calls, to show (and test) that the references and DLPack tensors stay
   alive until release. */
static double held_area[4096];
static void *held_argv[MAX_ARGS];
static kernarg_block held;

/* kernarg's C API may be called from any thread: on a free-threaded CPython it guards
   kernarg's own state. This module's shared state is its own to guard: the held block (a
   lock around its use) and the driver's entry point (found once, read atomically). On a GIL
   build the GIL does both. */
#ifdef Py_GIL_DISABLED
static PyMutex held_lock;
#define HELD_LOCK() PyMutex_Lock(&held_lock)
#define HELD_UNLOCK() PyMutex_Unlock(&held_lock)
#else
#define HELD_LOCK()
#define HELD_UNLOCK()
#endif

static PyObject *block_result(kernarg_block *b) {
    PyObject *offsets = PyTuple_New((Py_ssize_t)b->nargs);
    PyObject *streams = PyTuple_New((Py_ssize_t)b->nstreams);
    if (offsets == NULL || streams == NULL)
        goto fail;
    for (size_t i = 0; i < b->nargs; i++) {
        PyObject *o = PyLong_FromSsize_t((char *)b->argv[i] - (char *)b->data);
        if (o == NULL)
            goto fail;
        PyTuple_SET_ITEM(offsets, (Py_ssize_t)i, o);
    }
    for (size_t i = 0; i < b->nstreams; i++) {
        PyObject *s = PyLong_FromUnsignedLongLong(b->streams[i]);
        if (s == NULL)
            goto fail;
        PyTuple_SET_ITEM(streams, (Py_ssize_t)i, s);
    }
    return Py_BuildValue("(y#NN)", (const char *)b->data, (Py_ssize_t)b->nbytes, offsets,
                         streams);
fail:
    Py_XDECREF(offsets);
    Py_XDECREF(streams);
    return NULL;
}

/* The (bytes, offsets, streams) of a packed block, which is then released. */
static PyObject *result_and_release(kernarg_block *b) {
    PyObject *result = block_result(b);
    if (kernarg->release(b) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

/* The device-checking entry points were appended to the API after its first release: an
   extension built against this header may meet an older kernarg, so it asks first. */
static int have_device_check(void) {
    if (KERNARG_API_HAS(kernarg, pack_device) && KERNARG_API_HAS(kernarg, pack_signature_device))
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "this kernarg's C API has no device check");
    return 0;
}

/* pack(args, stream=None, device=-1) -> (bytes, offsets, producer_streams) */
static PyObject *pack(PyObject *self, PyObject *args) {
    PyObject *kargs, *stream = NULL;
    int device = -1, rc;
    double area[4096];                 /* 32 KiB: CUDA's whole parameter limit */
    void *argv[MAX_ARGS];
    kernarg_block block;
    if (!PyArg_ParseTuple(args, "O|Oi", &kargs, &stream, &device))
        return NULL;
    kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS);
    if (device == -1)
        rc = kernarg->pack(kargs, stream, &block);
    else if (have_device_check())
        rc = kernarg->pack_device(kargs, stream, device, &block);
    else
        return NULL;
    if (rc < 0)
        return NULL;
    return result_and_release(&block);
}

/* pack_signature(signature, args, stream=None, device=-1) -> (bytes, offsets, streams) */
static PyObject *pack_signature(PyObject *self, PyObject *args) {
    PyObject *sig, *kargs, *stream = NULL;
    int device = -1, rc;
    double area[4096];
    void *argv[MAX_ARGS];
    kernarg_block block;
    if (!PyArg_ParseTuple(args, "OO|Oi", &sig, &kargs, &stream, &device))
        return NULL;
    kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS);
    if (device == -1)
        rc = kernarg->pack_signature(sig, kargs, stream, &block);
    else if (have_device_check())
        rc = kernarg->pack_signature_device(sig, kargs, stream, device, &block);
    else
        return NULL;
    if (rc < 0)
        return NULL;
    return result_and_release(&block);
}

/* pack_only(args): pack into the stack and release; the benchmark's unit of work. */
static PyObject *pack_only(PyObject *self, PyObject *kargs) {
    double area[64];                   /* 512 bytes: enough for the common case */
    void *argv[256];
    kernarg_block block;
    kernarg_block_init(&block, area, sizeof(area), argv, 256);
    if (kernarg->pack(kargs, NULL, &block) < 0)
        return NULL;
    if (kernarg->release(&block) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* hold(args): pack into the module's block and keep it until release_held(). */
static PyObject *hold_locked(PyObject *kargs) {
    if (held.keep != NULL && kernarg->release(&held) < 0)
        return NULL;
    kernarg_block_init(&held, held_area, sizeof(held_area), held_argv, MAX_ARGS);
    if (kernarg->pack(kargs, NULL, &held) < 0)
        return NULL;
    return block_result(&held);
}

static PyObject *hold(PyObject *self, PyObject *kargs) {
    PyObject *r;
    HELD_LOCK();
    r = hold_locked(kargs);
    HELD_UNLOCK();
    return r;
}

static PyObject *release_held(PyObject *self, PyObject *unused) {
    int rc;
    HELD_LOCK();
    rc = kernarg->release(&held);
    HELD_UNLOCK();
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *resolve_stream(PyObject *self, PyObject *stream) {
    uint64_t handle;
    if (kernarg->resolve_stream(stream, &handle) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(handle);
}

static PyObject *api_info(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(IIs)", kernarg->abi_version, kernarg->struct_size,
                         kernarg->version());
}

/* launch(function, grid, block, args, stream=0, shmem=0): cuLaunchKernel through the driver,
   opened with dlopen (CUfunction and CUstream are passed as integer handles). */
typedef int (*cuLaunchKernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, unsigned, void *, void **, void **);

static PyObject *launch(PyObject *self, PyObject *args) {
    unsigned long long function, stream = 0;
    unsigned gx, gy, gz, bx, by, bz, shmem = 0;
    PyObject *kargs;
    double area[4096];
    void *argv[MAX_ARGS];
    kernarg_block block;
    static cuLaunchKernel_t launch_kernel = NULL;
    if (!PyArg_ParseTuple(args, "K(III)(III)O|KI", &function, &gx, &gy, &gz, &bx, &by, &bz,
                          &kargs, &stream, &shmem))
        return NULL;
    cuLaunchKernel_t launch_fn = __atomic_load_n(&launch_kernel, __ATOMIC_ACQUIRE);
    if (launch_fn == NULL) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL)
            return PyErr_Format(PyExc_RuntimeError, "no CUDA driver found (%s)", dlerror());
        launch_fn = (cuLaunchKernel_t)dlsym(lib, "cuLaunchKernel");
        if (launch_fn == NULL)
            return PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel not found");
        __atomic_store_n(&launch_kernel, launch_fn, __ATOMIC_RELEASE);   /* the same value */
    }
    kernarg_block_init(&block, area, sizeof(area), argv, MAX_ARGS);
    PyObject *stream_obj = PyLong_FromUnsignedLongLong(stream);   /* DLPack producers get it */
    if (stream_obj == NULL)
        return NULL;
    int rc = kernarg->pack(kargs, stream_obj, &block);
    Py_DECREF(stream_obj);
    if (rc < 0)
        return NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = launch_fn((void *)(uintptr_t)function, gx, gy, gz, bx, by, bz, shmem,
                        (void *)(uintptr_t)stream, block.argv, NULL);
    Py_END_ALLOW_THREADS
    if (kernarg->release(&block) < 0)
        return NULL;
    if (err != 0)
        return PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed with CUresult %d", err);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"pack", pack, METH_VARARGS,
     "pack(args, stream=None, device=-1) -> (bytes, offsets, streams)"},
    {"pack_signature", pack_signature, METH_VARARGS,
     "pack_signature(signature, args, stream=None, device=-1) -> (bytes, offsets, streams)"},
    {"pack_only", pack_only, METH_O, "pack(args) into the stack and release it"},
    {"hold", hold, METH_O, "pack into a module-level block kept until release_held()"},
    {"release_held", release_held, METH_NOARGS, "release the held block"},
    {"resolve_stream", resolve_stream, METH_O, "kernarg's stream resolution through the C API"},
    {"api_info", api_info, METH_NOARGS, "(abi_version, struct_size, kernarg version)"},
    {"launch", launch, METH_VARARGS, "launch(function, grid, block, args, stream=0, shmem=0)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "kernarg_example", NULL, -1,
                                       methods};

PyMODINIT_FUNC PyInit_kernarg_example(void) {
    PyObject *m;
    if (import_kernarg() < 0)
        return NULL;
    m = PyModule_Create(&moduledef);
#ifdef Py_GIL_DISABLED
    /* Safe without the GIL (see held_lock): a free-threaded CPython keeps it off. */
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
