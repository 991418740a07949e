/* A recording stand-in for libcuda.so.1, for running kernarg's GPU-only code paths on a
 * machine without a GPU. It is NOT a GPU and runs no kernel code (the few small kernels of
 * tests/gpu are emulated by name, in run_kernel): nothing it reports is a GPU result. What it
 * does is check every call kernarg (and the tests around it) makes the way the driver would,
 * as far as this file models it:
 *
 *   - contexts (primary and created, current per thread, push/pop), streams (0, legacy 0x1,
 *     per-thread 0x2, created), events, stream capture (begin/end, capture info, joining a capture by
 *     waiting on an event recorded in it, refusing a wait on an event from outside it; capture
 *     modes, and the module loads and unloads a capture prohibits), graphs,
 *     graph execs and user objects (destroy callbacks run on a thread of their own, as the
 *     driver runs them);
 *   - "device" memory (host memory, so memcpy/memset work), pinned and managed memory;
 *   - the JIT linker, for PTX (concatenated) or one CUBIN;
 *   - modules from PTX text or a CUBIN: the kernels' parameter layouts (PTX .param lists, or
 *     the CUBIN's EIATTR_KPARAM_INFO), launch bounds and static shared memory;
 *   - launches (cuLaunchKernelEx, cuLaunchKernel): grid, block, shared memory, cluster and
 *     cooperative attributes against the device's and the kernel's limits, the stream and the
 *     context, and every kernelParams[i] readable for the parameter's size.
 *
 * Limits: 64 kernels a module, 512 parameters and a 4 KiB name a kernel (a module over them is
 * refused, not truncated), 4 KiB of parameters a launch, 16 captured launches a graph.
 * cuda.bindings finds every function through cuGetProcAddress_v2; a few names C programs dlsym
 * are exported directly too. Functions not modelled here are reported as not found, which
 * cuda.bindings turns into "function not found" at the call. FAKECUDA_TRACE=1 prints every
 * lookup and launch to stderr. FAKECUDA_CC=90 (default) sets the compute capability,
 * FAKECUDA_DEVICES=1 the number of devices.
 *
 * Build and use: tools/fakecuda/run.sh.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8
#define MAX_PARAMS 512
#define MAX_FUNCS 64         /* kernels per module */
#define MAX_GLOBALS 1024     /* __device__ and __constant__ variables per module
                                (libcu++'s headers define hundreds) */

static int trace_on = -1;
static void trace(const char* fmt, ...) {
    if (trace_on < 0) trace_on = getenv("FAKECUDA_TRACE") && atoi(getenv("FAKECUDA_TRACE"));
    if (!trace_on) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[fakecuda] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* Why the last call failed, for cuGetErrorString and the trace. */
static __thread char last_error[512];
static CUresult fail(CUresult err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    trace("error %d: %s", (int)err, last_error);
    return err;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised = 0;
static int n_devices = 1;
static int cc = 90;

/* ------------------------------------------------------------------ objects */
enum { M_CTX = 0x43545831, M_STREAM, M_EVENT, M_MODULE, M_FUNC, M_GRAPH, M_EXEC, M_UOBJ, M_LINK,
       M_KERNEL, M_NODE };

typedef struct { int magic; int device; int retained; unsigned long long id; } Ctx;
static Ctx primary[MAX_DEVICES];
static Ctx* last_destroyed = NULL;    /* (FAKECUDA_REUSE_CONTEXTS: ctx_create) */

typedef struct Graph Graph;
typedef struct {
    int magic;
    Ctx* ctx;
    Graph* capture;
    unsigned long long capture_id;
    int refuses_waits;      /* made with FAKECUDA_REFUSE_STREAM_WAIT set: fk_StreamWaitEvent */
} Stream;
typedef struct { int magic; Ctx* ctx; Graph* capture; unsigned long long capture_id;
                 unsigned int flags; unsigned long long ctx_id; } Event;

typedef struct { int magic; void* func; } KernelHandle;     /* see Func's `kernel` */

typedef struct {
    int magic;
    char name[4096];        /* numba's mangled names grow with the argument list */
    int nparams;
    size_t offset[MAX_PARAMS], size[MAX_PARAMS];
    int max_threads;        /* launch bounds, else 1024 */
    int static_shared;
    int max_dynamic_shared;
    int non_portable_cluster;
    unsigned int cluster[3];    /* its __cluster_dims__ (.reqnctapercluster), 0s where none */
    void* module;
    /* The function's CUkernel handle (the library API's, which cuda.core uses): a handle of
     * its own, as the driver's is. The driver launches it, and its occupancy calculator takes
     * it, as a CUfunction; the cuFunc* calls refuse it (CUDA_ERROR_INVALID_HANDLE), and
     * cuKernelGetFunction gives the CUfunction (tools/probes/cukernel_handles.py, on an H100). */
    KernelHandle kernel;
} Func;

/* A module's __device__ or __constant__ variable, in "device" memory of its own. */
typedef struct { char name[256]; uintptr_t ptr; size_t size; } Global;

typedef struct { int magic; Ctx* ctx; int nfuncs; Func* funcs; int nglobals; Global* globals; } Module;

typedef struct {
    int magic;
    void* ptr;
    CUhostFn destroy;
    int refs;
} UserObject;

typedef struct { UserObject* obj; unsigned int count; } Retained;
/* A captured launch, or a kernel node added to a graph: the driver copies the parameter values
 * into the node. A node of a graph has magic M_NODE and its graph, and its handle is its
 * address in the graph's array. */
typedef struct Node {
    int magic;
    struct Graph* graph;
    Func* func;
    unsigned int grid[3], block[3], shmem;
    int pdl;                /* launched with programmatic stream serialization allowed */
    int launch_order;       /* after a launch-order edge (from a kernel's LAUNCH_ORDER port) */
    unsigned char params[4096];
    unsigned int nattrs;    /* a kernel node's attributes (cuGraphKernelNodeSetAttribute) */
    CUlaunchAttribute attrs[16];
    int device_updatable;   /* CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE set: for good */
    int disabled;           /* in an executable graph: cuGraphNodeSetEnabled(..., 0) */
} Node;
#define MAX_NODES 16
#define MAX_EDGES 64
/* An edge between two nodes added to a graph (by index), with its data. */
typedef struct { int from, to; CUgraphEdgeData data; } Edge;
struct Graph {
    int magic;
    int invalidated;        /* a capture into it met a prohibited call (see unsafe_call) */
    int nnodes;
    Node nodes[MAX_NODES];
    int nedges;             /* the edges of added nodes (captured launches have none here) */
    Edge edges[MAX_EDGES];
    Retained retained[64];
    int nretained;
};
/* An instantiated graph: a snapshot of its nodes, holding its own references to the
 * graph's user objects. */
typedef struct { int magic; unsigned int id; Graph* source; Graph snapshot; } Exec;

static __thread Ctx* ctx_stack[32];
static __thread int ctx_depth = 0;
static Ctx* current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

static unsigned long long next_capture_id = 1;

/* Capture modes (cuStreamBeginCapture's, and each thread's own, cuThreadExchangeStreamCaptureMode):
 * while a capture begun in GLOBAL mode is under way in any thread, or one not begun RELAXED in
 * this thread, a thread of GLOBAL mode may make no "potentially unsafe" call (THREAD_LOCAL: only
 * this thread's capture counts; RELAXED: none do). Such a call fails, and invalidates the
 * captures it would have disturbed: cuStreamEndCapture then reports
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Of the calls the driver counts as unsafe, the fake
 * models cuModuleLoadData(Ex)'s and cuModuleUnload's (Warp's users met both: rewarped#24,
 * mujoco_warp#425). */
#define MAX_CAPTURES 64
static Graph* active_captures[MAX_CAPTURES];    /* under `lock` */
static int active_modes[MAX_CAPTURES];
static __thread int own_captures = 0;           /* this thread's, not begun RELAXED */
static __thread int thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static void release_retained(Graph* g);
static CUresult fk_ThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
    if (!mode) return fail(CUDA_ERROR_INVALID_VALUE, "cuThreadExchangeStreamCaptureMode(NULL)");
    int previous = thread_mode;
    thread_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)previous;
    return CUDA_SUCCESS;
}
/* CUDA_SUCCESS if this thread may make a potentially unsafe call now; else fail, invalidating
 * the captures in the way. */
static CUresult unsafe_call(const char* what) {
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    int prohibited = own_captures > 0, global = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (active_captures[i] && active_modes[i] == CU_STREAM_CAPTURE_MODE_GLOBAL) global = 1;
    if (thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && global) prohibited = 1;
    if (prohibited)
        for (int i = 0; i < MAX_CAPTURES; i++)
            if (active_captures[i]) active_captures[i]->invalidated = 1;
    pthread_mutex_unlock(&lock);
    if (!prohibited) return CUDA_SUCCESS;
    return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                "%s during a stream capture, in capture mode %d", what, thread_mode);
}

/* ------------------------------------------------------------------ memory */
typedef struct Alloc { uintptr_t base; size_t size; int type; int device; struct Alloc* next; } Alloc;
static Alloc* allocs = NULL;

/* cuMemAlloc's memory holds whatever was there before, not zeros (a test on an H100 read an
 * earlier test's values from it): fresh allocations are filled with FRESH_BYTE, so that a test
 * relying on zeros it never wrote fails here too. Module variables start zeroed, as in the
 * driver. */
#define FRESH_BYTE 0xA5
static void* alloc_mem_filled(size_t size, int type, int fill) {
    size_t rounded = (size + 255) / 256 * 256;
    void* p = aligned_alloc(256, rounded ? rounded : 256);
    if (!p) return NULL;
    memset(p, fill, rounded ? rounded : 256);
    Alloc* a = malloc(sizeof *a);
    a->base = (uintptr_t)p;
    a->size = size;
    a->type = type;
    a->device = current() ? current()->device : 0;
    pthread_mutex_lock(&lock);
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&lock);
    return p;
}
static void* alloc_mem(size_t size, int type) { return alloc_mem_filled(size, type, FRESH_BYTE); }

static Alloc* find_alloc(uintptr_t p) {
    Alloc* a;
    pthread_mutex_lock(&lock);
    for (a = allocs; a; a = a->next)
        if (p >= a->base && p < a->base + (a->size ? a->size : 1)) break;
    pthread_mutex_unlock(&lock);
    return a;
}

static CUresult free_mem(uintptr_t p) {
    Alloc **pp, *a;
    pthread_mutex_lock(&lock);
    for (pp = &allocs; (a = *pp); pp = &a->next)
        if (a->base == p) { *pp = a->next; break; }
    pthread_mutex_unlock(&lock);
    if (!a) return fail(CUDA_ERROR_INVALID_VALUE, "free of 0x%lx, not an allocation", p);
    free((void*)a->base);
    free(a);
    return CUDA_SUCCESS;
}

/* A range [p, p+n) the fake may touch as "device" memory. */
static CUresult check_range(uintptr_t p, size_t n, const char* what) {
    Alloc* a = find_alloc(p);
    if (!a || p + n > a->base + a->size)
        return fail(CUDA_ERROR_INVALID_VALUE, "%s: [0x%lx, +%zu) is not inside an allocation",
                    what, p, n);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ init, devices */
static CUresult need_init(void) {
    return initialised ? CUDA_SUCCESS : fail(CUDA_ERROR_NOT_INITIALIZED, "cuInit not called");
}

static CUresult fk_Init(unsigned int flags) {
    if (flags) return fail(CUDA_ERROR_INVALID_VALUE, "cuInit flags must be 0");
    const char* s = getenv("FAKECUDA_CC");
    if (s) cc = atoi(s);
    s = getenv("FAKECUDA_DEVICES");
    if (s) n_devices = atoi(s);
    if (n_devices > MAX_DEVICES) n_devices = MAX_DEVICES;
    for (int i = 0; i < n_devices; i++) {
        primary[i].magic = M_CTX;
        primary[i].device = i;
        primary[i].id = (unsigned long long)i + 1;
    }
    initialised = 1;
    return CUDA_SUCCESS;
}

/* The driver's CUDA version: 13.2, which knows every launch attribute kernarg passes, or
 * FAKECUDA_DRIVER_VERSION's (13000, 12080, ...: an older driver refuses the attributes it
 * does not know, see check_attrs). */
static int driver_version(void) {
    const char* s = getenv("FAKECUDA_DRIVER_VERSION");
    return s && *s ? atoi(s) : 13020;
}
static CUresult fk_DriverGetVersion(int* v) { *v = driver_version(); return CUDA_SUCCESS; }
static CUresult fk_DeviceGetCount(int* n) {
    CUresult e = need_init();
    if (e) return e;
    *n = n_devices;
    return CUDA_SUCCESS;
}
static CUresult fk_DeviceGet(CUdevice* d, int ordinal) {
    CUresult e = need_init();
    if (e) return e;
    if (ordinal < 0 || ordinal >= n_devices)
        return fail(CUDA_ERROR_INVALID_DEVICE, "device %d of %d", ordinal, n_devices);
    *d = ordinal;
    return CUDA_SUCCESS;
}
static CUresult check_device(CUdevice d) {
    CUresult e = need_init();
    if (e) return e;
    if (d < 0 || d >= n_devices) return fail(CUDA_ERROR_INVALID_DEVICE, "device %d", d);
    return CUDA_SUCCESS;
}
static CUresult fk_DeviceGetName(char* name, int len, CUdevice d) {
    CUresult e = check_device(d);
    if (e) return e;
    snprintf(name, len, "fakecuda device %d (not a GPU)", d);
    return CUDA_SUCCESS;
}
static CUresult fk_DeviceTotalMem(size_t* b, CUdevice d) { *b = (size_t)80 << 30; return check_device(d); }
static CUresult fk_DeviceGetUuid(CUuuid* u, CUdevice d) {
    memset(u, 0, sizeof *u);
    u->bytes[0] = (char)d;
    return check_device(d);
}

/* Shared memory an SM has, by compute capability (the CUDA C++ Programming Guide's table of
 * technical specifications): 228 KiB on 9.0 and 10.x, 164 KiB on 8.0 and 8.7, 100 KiB on 8.6,
 * 8.9 and 12.x, 64 KiB on 7.5. From 8.0 on the system reserves 1 KiB of it for each block; a
 * block may opt into the rest. */
static int smem_per_sm(void) {
    if (cc == 80 || cc == 87) return 167936;
    if (cc < 80) return 65536;
    if (cc >= 90 && cc < 120) return 233472;
    return 102400;
}
static int smem_reserved(void) { return cc >= 80 ? 1024 : 0; }

static int device_attribute(CUdevice_attribute a) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return smem_per_sm() - smem_reserved();
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return smem_per_sm();
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return smem_reserved();
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return cc / 10;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return cc % 10;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return cc >= 90;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;   /* an H100's */
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return cc >= 90 ? 4 : 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 1;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1755000;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    default: return 0;
    }
}
static CUresult fk_DeviceGetAttribute(int* pi, CUdevice_attribute a, CUdevice d) {
    CUresult e = check_device(d);
    if (e) return e;
    *pi = device_attribute(a);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ contexts */
static CUresult check_ctx(CUcontext c) {
    Ctx* x = (Ctx*)c;
    if (!x || x->magic != M_CTX) return fail(CUDA_ERROR_INVALID_CONTEXT, "context %p", (void*)c);
    return CUDA_SUCCESS;
}
static CUresult fk_DevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
    CUresult e = check_device(d);
    if (e) return e;
    __atomic_add_fetch(&primary[d].retained, 1, __ATOMIC_SEQ_CST);
    *c = (CUcontext)&primary[d];
    return CUDA_SUCCESS;
}
static CUresult fk_DevicePrimaryCtxRelease(CUdevice d) {
    CUresult e = check_device(d);
    if (e) return e;
    __atomic_sub_fetch(&primary[d].retained, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}
static CUresult fk_DevicePrimaryCtxGetState(CUdevice d, unsigned int* flags, int* active) {
    CUresult e = check_device(d);
    if (e) return e;
    *flags = 0;
    *active = primary[d].retained > 0;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxGetCurrent(CUcontext* c) {
    CUresult e = need_init();
    if (e) return e;
    *c = (CUcontext)current();
    return CUDA_SUCCESS;
}
static CUresult fk_CtxSetCurrent(CUcontext c) {
    CUresult e = need_init();
    if (e) return e;
    if (c && (e = check_ctx(c))) return e;
    if (!c) { if (ctx_depth) ctx_depth--; return CUDA_SUCCESS; }
    if (!ctx_depth) ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = (Ctx*)c;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxPushCurrent(CUcontext c) {
    CUresult e = check_ctx(c);
    if (e) return e;
    if (ctx_depth == 32) return fail(CUDA_ERROR_INVALID_VALUE, "context stack full");
    ctx_stack[ctx_depth++] = (Ctx*)c;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxPopCurrent(CUcontext* c) {
    if (!ctx_depth) return fail(CUDA_ERROR_INVALID_CONTEXT, "pop of an empty context stack");
    Ctx* x = ctx_stack[--ctx_depth];
    if (c) *c = (CUcontext)x;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxGetDevice(CUdevice* d) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxGetDevice without a context");
    *d = current()->device;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxSynchronize(void) {
    return current() ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_CONTEXT, "no current context");
}
static CUresult fk_CtxGetApiVersion(CUcontext c, unsigned int* v) { *v = 13000; (void)c; return CUDA_SUCCESS; }
static CUresult fk_CtxGetStreamPriorityRange(int* least, int* greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxGetFlags(unsigned int* f) { *f = 0; return CUDA_SUCCESS; }
static CUresult fk_CtxGetId(CUcontext c, unsigned long long* id) {
    Ctx* x = c ? (Ctx*)c : current();
    if (!x) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxGetId without a context");
    *id = x->id;
    return CUDA_SUCCESS;
}
/* A context of its own (cuCtxCreate), pushed on this thread's stack as the driver does.
 * Destroyed contexts are leaked (magic 0), as modules are. */
static unsigned long long next_ctx_id = 1000;
static CUresult ctx_create(CUcontext* out, CUdevice d) {
    CUresult e = need_init();
    if (e || (e = check_device(d))) return e;
    if (ctx_depth == 32) return fail(CUDA_ERROR_INVALID_VALUE, "context stack full");
    /* FAKECUDA_REUSE_CONTEXTS=1: the last context destroyed gives its handle to the next one
     * made, as a driver may (kernarg's per-context caches must tell them apart). Off by
     * default: the streams of a destroyed context are not invalidated here. */
    const char* reuse = getenv("FAKECUDA_REUSE_CONTEXTS");
    Ctx* x = NULL;
    if (reuse && atoi(reuse) && last_destroyed) {
        x = last_destroyed;
        memset(x, 0, sizeof *x);
    } else {
        x = calloc(1, sizeof *x);
    }
    last_destroyed = NULL;
    if (!x) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuCtxCreate");
    x->magic = M_CTX;
    x->device = d;
    x->id = __atomic_fetch_add(&next_ctx_id, 1, __ATOMIC_SEQ_CST);
    ctx_stack[ctx_depth++] = x;
    *out = (CUcontext)x;
    return CUDA_SUCCESS;
}
static CUresult fk_CtxCreate_v2(CUcontext* out, unsigned int flags, CUdevice d) {
    return ctx_create(out, d);
}
static CUresult fk_CtxCreate_v4(CUcontext* out, void* params, unsigned int flags, CUdevice d) {
    if (params) return fail(CUDA_ERROR_INVALID_VALUE, "cuCtxCreate: ctxCreateParams not modelled");
    return ctx_create(out, d);
}
static CUresult fk_CtxDestroy(CUcontext c) {
    CUresult e = check_ctx(c);
    if (e) return e;
    Ctx* x = (Ctx*)c;
    if (x >= primary && x < primary + MAX_DEVICES)
        return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxDestroy of a primary context");
    int kept = 0;                 /* off this thread's stack wherever it is */
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] != x) ctx_stack[kept++] = ctx_stack[i];
    ctx_depth = kept;
    x->magic = 0;
    last_destroyed = x;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ streams and events */
static Stream legacy_stream[MAX_DEVICES], per_thread_stream[MAX_DEVICES];

/* The Stream a handle names (the special handles resolve in the current context). */
static CUresult get_stream(CUstream h, Stream** out, const char* what) {
    uintptr_t v = (uintptr_t)h;
    if (v == 0 || v == 1 || v == 2) {
        Ctx* c = current();
        if (!c) return fail(CUDA_ERROR_INVALID_CONTEXT, "%s: stream 0x%lx with no context", what, v);
        Stream* s = (v == 2 ? per_thread_stream : legacy_stream) + c->device;
        s->magic = M_STREAM;
        s->ctx = c;
        *out = s;
        return CUDA_SUCCESS;
    }
    Stream* s = (Stream*)h;
    if (s->magic != M_STREAM) return fail(CUDA_ERROR_INVALID_HANDLE, "%s: stream %p", what, (void*)h);
    *out = s;
    return CUDA_SUCCESS;
}
static CUresult fk_StreamCreate(CUstream* h, unsigned int flags) {
    (void)flags;
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuStreamCreate without a context");
    Stream* s = calloc(1, sizeof *s);
    s->magic = M_STREAM;
    s->ctx = current();
    /* Read here, not per wait: a getenv in every cuStreamWaitEvent would put the size of the
     * environment into tools/probes/cold_launch.py's counts of a waiting launch. */
    const char* refuse = getenv("FAKECUDA_REFUSE_STREAM_WAIT");
    s->refuses_waits = refuse && *refuse && atoi(refuse);
    *h = (CUstream)s;
    return CUDA_SUCCESS;
}
static CUresult fk_StreamCreateWithPriority(CUstream* h, unsigned int flags, int prio) {
    (void)prio;
    return fk_StreamCreate(h, flags);
}
static CUresult fk_StreamDestroy(CUstream h) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamDestroy");
    if (e) return e;
    if ((uintptr_t)h > 2) { s->magic = 0; free(s); }
    return CUDA_SUCCESS;
}
static CUresult fk_StreamGetCtx(CUstream h, CUcontext* c) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamGetCtx");
    if (e) return e;
    *c = (CUcontext)s->ctx;
    return CUDA_SUCCESS;
}
static CUresult fk_StreamSynchronize(CUstream h) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamSynchronize");
    if (e) return e;
    if (s->capture) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "synchronize while capturing");
    return CUDA_SUCCESS;
}
static CUresult fk_StreamQuery(CUstream h) { Stream* s; return get_stream(h, &s, "cuStreamQuery"); }
static CUresult fk_StreamGetPriority(CUstream h, int* p) { *p = 0; Stream* s; return get_stream(h, &s, "cuStreamGetPriority"); }
static CUresult fk_StreamGetFlags(CUstream h, unsigned int* f) { *f = 0; Stream* s; return get_stream(h, &s, "cuStreamGetFlags"); }
static CUresult fk_StreamGetId(CUstream h, unsigned long long* id) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamGetId");
    *id = (uintptr_t)s;
    return e;
}
/* What cuGetProcAddress gives for cuStreamGetId with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
   (cuStreamGetId_ptsz): there the NULL stream is the per-thread one. The one function where
   fakecuda models the flag, so a test can see how cuda.bindings loaded the driver. */
static CUresult fk_StreamGetId_ptsz(CUstream h, unsigned long long* id) {
    return fk_StreamGetId(h ? h : CU_STREAM_PER_THREAD, id);
}

static CUresult fk_StreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamBeginCapture");
    if (e) return e;
    if ((uintptr_t)h <= 2) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capture on a default stream");
    if (s->capture) return fail(CUDA_ERROR_ILLEGAL_STATE, "already capturing");
    s->capture = calloc(1, sizeof(Graph));
    s->capture->magic = M_GRAPH;
    s->capture_id = __atomic_fetch_add(&next_capture_id, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (!active_captures[i]) {
            active_captures[i] = s->capture;
            active_modes[i] = (int)mode;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) own_captures++;
    return CUDA_SUCCESS;
}
static CUresult fk_StreamEndCapture(CUstream h, CUgraph* g) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamEndCapture");
    if (e) return e;
    if (!s->capture) return fail(CUDA_ERROR_ILLEGAL_STATE, "not capturing");
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (active_captures[i] == s->capture) {
            active_captures[i] = NULL;
            mode = active_modes[i];
        }
    pthread_mutex_unlock(&lock);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED && own_captures > 0) own_captures--;
    if (s->capture->invalidated) {
        Graph* dead = s->capture;
        s->capture = NULL;
        release_retained(dead);
        free(dead);
        *g = NULL;
        return fail(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated by a "
                    "prohibited call made while it was under way");
    }
    *g = (CUgraph)s->capture;
    /* Streams that joined this capture leave it too (the driver requires them rejoined; the
     * fake does not model unjoined streams). */
    s->capture = NULL;
    return CUDA_SUCCESS;
}
static CUresult capture_info(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                             const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
    Stream* s;
    CUresult e = get_stream(h, &s, "cuStreamGetCaptureInfo");
    if (e) return e;
    if (s->capture && s->capture->magic != M_GRAPH) s->capture = NULL;  /* ended elsewhere */
    *st = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id) *id = s->capture ? s->capture_id : 0;
    if (g) *g = (CUgraph)s->capture;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (n) *n = 0;
    return CUDA_SUCCESS;
}
static CUresult fk_StreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                           CUgraph* g, const CUgraphNode** deps,
                                           const CUgraphEdgeData** edges, size_t* n) {
    return capture_info(h, st, id, g, deps, edges, n);
}
static CUresult fk_StreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                           CUgraph* g, const CUgraphNode** deps, size_t* n) {
    return capture_info(h, st, id, g, deps, NULL, n);
}
static CUresult fk_StreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) {
    return capture_info(h, st, NULL, NULL, NULL, NULL, NULL);
}

static CUresult fk_EventCreate(CUevent* h, unsigned int flags) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuEventCreate without a context");
    Event* ev = calloc(1, sizeof *ev);
    ev->magic = M_EVENT;
    ev->ctx = current();
    ev->ctx_id = ev->ctx->id;
    ev->flags = flags;
    *h = (CUevent)ev;
    return CUDA_SUCCESS;
}
static CUresult get_event(CUevent h, Event** out, const char* what) {
    Event* ev = (Event*)h;
    if (!ev || ev->magic != M_EVENT) return fail(CUDA_ERROR_INVALID_HANDLE, "%s: event %p", what, (void*)h);
    /* An event of a destroyed context (its handle perhaps another context's now). */
    if (ev->ctx->magic != M_CTX || ev->ctx->id != ev->ctx_id)
        return fail(CUDA_ERROR_CONTEXT_IS_DESTROYED, "%s: event %p of a destroyed context", what, (void*)h);
    *out = ev;
    return CUDA_SUCCESS;
}
static CUresult fk_EventDestroy(CUevent h) {
    Event* ev;
    CUresult e = get_event(h, &ev, "cuEventDestroy");
    if (e) return e;
    ev->magic = 0;
    free(ev);
    return CUDA_SUCCESS;
}
static CUresult fk_EventRecord(CUevent h, CUstream sh) {
    Event* ev;
    Stream* s;
    CUresult e = get_event(h, &ev, "cuEventRecord");
    if (e || (e = get_stream(sh, &s, "cuEventRecord"))) return e;
    if (ev->ctx != s->ctx) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord: event and stream in different contexts");
    ev->capture = s->capture;
    ev->capture_id = s->capture_id;
    return CUDA_SUCCESS;
}
static CUresult fk_EventRecordWithFlags(CUevent h, CUstream sh, unsigned int f) { (void)f; return fk_EventRecord(h, sh); }
static CUresult fk_EventSynchronize(CUevent h) { Event* ev; return get_event(h, &ev, "cuEventSynchronize"); }
static CUresult fk_EventQuery(CUevent h) { Event* ev; return get_event(h, &ev, "cuEventQuery"); }
static CUresult fk_StreamWaitEvent(CUstream sh, CUevent h, unsigned int flags) {
    Event* ev;
    Stream* s;
    CUresult e = get_event(h, &ev, "cuStreamWaitEvent");
    if (e || (e = get_stream(sh, &s, "cuStreamWaitEvent"))) return e;
    (void)flags;
    /* A stream made while FAKECUDA_REFUSE_STREAM_WAIT=1 refuses every wait, as a driver would
     * for a stream gone bad (for tests of what a failed producer-stream wait reports). */
    if (s->refuses_waits)
        return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent: refused (FAKECUDA_REFUSE_STREAM_WAIT)");
    if (ev->capture && ev->capture->magic == M_GRAPH) {
        if (!s->capture) {                  /* joins the capture the event was recorded in */
            if ((uintptr_t)sh <= 2)
                return fail(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "a default stream cannot join a capture");
            s->capture = ev->capture;
            s->capture_id = ev->capture_id;
        } else if (s->capture != ev->capture) {
            return fail(CUDA_ERROR_STREAM_CAPTURE_MERGE, "wait across two captures");
        }
    } else if (s->capture) {
        return fail(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
                    "a capturing stream waited on an event recorded outside the capture");
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ user objects, graphs */
static CUresult run_kernel(const Node* n);
/* User-object destructors run on a thread of their own, as the driver's do, each
 * FAKECUDA_DESTROY_DELAY_MS (default 0) after the last reference went: CU_USER_OBJECT_NO_
 * DESTRUCTOR_SYNC lets the driver run them late. The process's exit waits for those in flight
 * (up to 5 s), so a delayed one runs after the interpreter has finalized, as a driver that
 * ran its queue at exit would (NVIDIA/cuda-python#2042). */
static int destroys_in_flight = 0;
static void wait_for_destroys(void) {
    for (int i = 0; i < 5000 && __atomic_load_n(&destroys_in_flight, __ATOMIC_SEQ_CST); i++)
        usleep(1000);
}
static void* run_destroy(void* arg) {
    UserObject* u = arg;
    const char* delay = getenv("FAKECUDA_DESTROY_DELAY_MS");
    if (delay && atoi(delay) > 0) usleep(1000 * (useconds_t)atoi(delay));
    u->destroy(u->ptr);
    u->magic = 0;
    free(u);
    __atomic_sub_fetch(&destroys_in_flight, 1, __ATOMIC_SEQ_CST);
    return NULL;
}
static void release_uobj(UserObject* u, unsigned int count) {
    static int registered = 0;
    if (__atomic_sub_fetch(&u->refs, (int)count, __ATOMIC_SEQ_CST) == 0) {
        pthread_t t;
        if (!__atomic_exchange_n(&registered, 1, __ATOMIC_SEQ_CST)) atexit(wait_for_destroys);
        __atomic_add_fetch(&destroys_in_flight, 1, __ATOMIC_SEQ_CST);
        pthread_create(&t, NULL, run_destroy, u);   /* the driver calls it on its own thread */
        pthread_detach(t);
    }
}
static CUresult fk_UserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy,
                                    unsigned int refs, unsigned int flags) {
    if (!destroy || !refs || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuUserObjectCreate(destroy=%p, refs=%u, flags=%u)",
                    (void*)destroy, refs, flags);
    UserObject* u = calloc(1, sizeof *u);
    u->magic = M_UOBJ;
    u->ptr = ptr;
    u->destroy = destroy;
    u->refs = (int)refs;
    *out = (CUuserObject)u;
    return CUDA_SUCCESS;
}
static CUresult fk_UserObjectRelease(CUuserObject h, unsigned int count) {
    UserObject* u = (UserObject*)h;
    if (!u || u->magic != M_UOBJ || !count || (int)count > u->refs)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuUserObjectRelease(%p, %u)", (void*)h, count);
    release_uobj(u, count);
    return CUDA_SUCCESS;
}
static CUresult fk_GraphRetainUserObject(CUgraph gh, CUuserObject h, unsigned int count,
                                         unsigned int flags) {
    Graph* g = (Graph*)gh;
    UserObject* u = (UserObject*)h;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "graph %p", (void*)gh);
    int slot = 0;       /* a slot released to 0 is taken again (a node's arguments set anew) */
    while (slot < g->nretained && g->retained[slot].count) slot++;
    if (!u || u->magic != M_UOBJ || !count || slot == 64)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphRetainUserObject(%p, %u)", (void*)h, count);
    if (flags != CU_GRAPH_USER_OBJECT_MOVE) __atomic_add_fetch(&u->refs, (int)count, __ATOMIC_SEQ_CST);
    g->retained[slot].obj = u;
    g->retained[slot].count = count;
    if (slot == g->nretained) g->nretained++;
    return CUDA_SUCCESS;
}
/* The executable graphs not destroyed yet: a graph with device-updatable nodes has at most one,
 * which the device updates its nodes in. */
#define MAX_EXECS 256
static Exec* live_execs[MAX_EXECS];
static Exec* exec_of(const Graph* g) {
    for (int i = 0; i < MAX_EXECS; i++)
        if (live_execs[i] && live_execs[i]->source == g) return live_execs[i];
    return NULL;
}
static CUresult fk_GraphInstantiate(CUgraphExec* out, CUgraph gh, unsigned long long flags) {
    Graph* g = (Graph*)gh;
    (void)flags;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "graph %p", (void*)gh);
    int updatable = 0, slot = -1;
    for (int i = 0; i < g->nnodes; i++) updatable |= g->nodes[i].device_updatable;
    pthread_mutex_lock(&lock);
    for (int i = MAX_EXECS - 1; i >= 0; i--) if (!live_execs[i]) slot = i;
    /* cuda.h: a graph with device-updatable kernel nodes is instantiated once at a time. */
    int again = updatable && exec_of(g);
    pthread_mutex_unlock(&lock);
    if (again) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate: graph %p has "
                           "device-updatable nodes and an executable graph already", (void*)g);
    /* Past MAX_EXECS alive, only a graph with device-updatable nodes needs a slot. */
    if (slot < 0 && updatable)
        return fail(CUDA_ERROR_OUT_OF_MEMORY, "over %d executable graphs not modelled", MAX_EXECS);
    static unsigned int next_exec_id = 1;
    Exec* x = malloc(sizeof *x);
    x->magic = M_EXEC;
    x->id = __atomic_fetch_add(&next_exec_id, 1, __ATOMIC_SEQ_CST);
    x->source = g;
    x->snapshot = *g;
    for (int i = 0; i < g->nretained; i++)
        if (g->retained[i].count)
            __atomic_add_fetch(&g->retained[i].obj->refs, (int)g->retained[i].count,
                               __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&lock);
    if (slot >= 0) live_execs[slot] = x;
    pthread_mutex_unlock(&lock);
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}
static CUresult fk_GraphInstantiateWithParams(CUgraphExec* out, CUgraph gh,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    /* What cuda.core's GraphBuilder.complete() calls. No flag changes what this driver does. */
    if (!params) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiateWithParams: no params");
    CUresult e = fk_GraphInstantiate(out, gh, params->flags);
    params->result_out = e ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
    params->hErrNode_out = NULL;
    return e;
}
static CUresult fk_GraphExecGetId(CUgraphExec h, unsigned int* id) {
    /* CUDA 13.1; cuda.core 1.2 asks it of every graph it completes. */
    Exec* x = (Exec*)h;
    if (!x || x->magic != M_EXEC || !id)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphExecGetId(%p)", (void*)h);
    *id = x->id;
    return CUDA_SUCCESS;
}
static CUresult fk_GraphReleaseUserObject(CUgraph gh, CUuserObject h, unsigned int count) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "graph %p", (void*)gh);
    for (int i = 0; count && i < g->nretained; i++)
        if (g->retained[i].obj == (UserObject*)h && g->retained[i].count >= count) {
            g->retained[i].count -= count;
            release_uobj((UserObject*)h, count);
            return CUDA_SUCCESS;
        }
    return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphReleaseUserObject(%p, %u)", (void*)h, count);
}
/* Nothing to upload here: the exec and the stream are checked. */
static CUresult fk_GraphUpload(CUgraphExec h, CUstream sh) {
    Exec* x = (Exec*)h;
    Stream* s;
    if (!x || x->magic != M_EXEC) return fail(CUDA_ERROR_INVALID_VALUE, "graph exec %p", (void*)h);
    return get_stream(sh, &s, "cuGraphUpload");
}
static CUresult fk_GraphLaunch(CUgraphExec h, CUstream sh) {
    Exec* x = (Exec*)h;
    Stream* s;
    if (!x || x->magic != M_EXEC) return fail(CUDA_ERROR_INVALID_VALUE, "graph exec %p", (void*)h);
    CUresult e = get_stream(sh, &s, "cuGraphLaunch");
    for (int i = 0; !e && i < x->snapshot.nnodes; i++)
        /* An empty or a disabled node runs nothing. A node whose module has been unloaded
         * since: the kernel's code is gone. */
        e = !x->snapshot.nodes[i].func || x->snapshot.nodes[i].disabled ? CUDA_SUCCESS
            : x->snapshot.nodes[i].func->magic != M_FUNC
            ? fail(CUDA_ERROR_INVALID_HANDLE, "cuGraphLaunch: node %d's kernel %s was unloaded "
                   "with its module", i, x->snapshot.nodes[i].func->name)
            : run_kernel(&x->snapshot.nodes[i]);
    return e;
}
static void release_retained(Graph* g) {
    for (int i = 0; i < g->nretained; i++)      /* count 0: released already, maybe freed */
        if (g->retained[i].count) release_uobj(g->retained[i].obj, g->retained[i].count);
    g->magic = 0;
}
static CUresult fk_GraphExecDestroy(CUgraphExec h) {
    Exec* x = (Exec*)h;
    if (!x || x->magic != M_EXEC) return fail(CUDA_ERROR_INVALID_VALUE, "graph exec %p", (void*)h);
    release_retained(&x->snapshot);
    x->magic = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_EXECS; i++) if (live_execs[i] == x) live_execs[i] = NULL;
    pthread_mutex_unlock(&lock);
    free(x);
    return CUDA_SUCCESS;
}
static CUresult fk_GraphDestroy(CUgraph gh) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "graph %p", (void*)gh);
    release_retained(g);
    pthread_mutex_lock(&lock);      /* its execs live on, with no graph to name */
    for (int i = 0; i < MAX_EXECS; i++)
        if (live_execs[i] && live_execs[i]->source == g) live_execs[i]->source = NULL;
    pthread_mutex_unlock(&lock);
    free(g);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ modules */
static int ptx_type_size(const char* t) {
    static const struct { const char* name; int size; } types[] = {
        {"b8", 1}, {"u8", 1}, {"s8", 1}, {"b16", 2}, {"u16", 2}, {"s16", 2}, {"f16", 2},
        {"bf16", 2}, {"b32", 4}, {"u32", 4}, {"s32", 4}, {"f32", 4}, {"b64", 8}, {"u64", 8},
        {"s64", 8}, {"f64", 8}, {"b128", 16}, {"f16x2", 4}, {"bf16x2", 4}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(t, types[i].name)) return types[i].size;
    return 0;
}

/* A new variable of the module, zeroed, or NULL where there are too many. */
static Global* add_global(Module* m, const char* name, size_t len, size_t size) {
    if (m->nglobals == MAX_GLOBALS || len >= sizeof m->globals->name || !size) return NULL;
    Global* g = &m->globals[m->nglobals++];
    snprintf(g->name, sizeof g->name, "%.*s", (int)len, name);
    g->size = size;
    g->ptr = (uintptr_t)alloc_mem_filled(size, CU_MEMORYTYPE_DEVICE, 0);
    return g;
}

/* Module-scope variables of a PTX text ("[.visible] .global|.const [.align N] .type name[[n]]
 * [= value | = {values}];"), with their integer and 0f/0d (float/double bits) initial values;
 * declarations inside a kernel's braces and .extern ones are not the module's. */
static int parse_ptx_globals(const char* ptx, Module* m) {
    int depth = 0;
    for (const char* line = ptx; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char* p = line + strspn(line, " \t");
        size_t n = strcspn(line, "\n");
        if (depth == 0) {
            while (!strncmp(p, ".visible ", 9) || !strncmp(p, ".weak ", 6))
                p += strcspn(p, " ") + 1;
            int is_var = !strncmp(p, ".global ", 8) || !strncmp(p, ".const ", 7);
            if (is_var) {
                char decl[4096];
                snprintf(decl, sizeof decl, "%.*s", (int)(n - (size_t)(p - line)), p);
                char* init = strchr(decl, '=');
                if (init) *init++ = 0;
                int elsize = 0, count = 1;
                const char* name = NULL;
                size_t len = 0;
                for (char* tok = strtok(decl, " \t;"); tok; tok = strtok(NULL, " \t;")) {
                    if (!strcmp(tok, ".align")) strtok(NULL, " \t;");
                    else if (tok[0] == '.' && ptx_type_size(tok + 1)) elsize = ptx_type_size(tok + 1);
                    else if (tok[0] != '.') {
                        name = tok;
                        len = strcspn(tok, "[");
                        if (tok[len] == '[') count = atoi(tok + len + 1);
                    }
                }
                if (!name || !elsize) return -1;
                Global* g = add_global(m, name, len, (size_t)elsize * count);
                if (!g) return -1;
                /* Initial values, element by element, little-endian. */
                const char* v = init ? init + strspn(init, " \t{") : NULL;
                for (int i = 0; v && *v && *v != '}' && *v != ';' && i < count; i++) {
                    uint64_t bits = 0;
                    char* end;
                    if (v[0] == '0' && (v[1] == 'f' || v[1] == 'd')) bits = strtoull(v + 2, &end, 16);
                    else bits = (uint64_t)strtoll(v, &end, 0);
                    if (end == v) break;                 /* generic(x) and the like: left 0 */
                    memcpy((void*)(g->ptr + (size_t)i * elsize), &bits, (size_t)elsize);
                    v = end + strspn(end, " \t,");
                }
                continue;
            }
        }
        for (size_t i = 0; i < n; i++) depth += line[i] == '{' ? 1 : line[i] == '}' ? -1 : 0;
    }
    return 0;
}

/* Kernels of a PTX text: each .entry's .param list, .maxntid and .shared declarations. */
static int parse_ptx(const char* ptx, Module* m) {
    const char* p = ptx;
    while ((p = strstr(p, ".entry "))) {
        if (m->nfuncs == MAX_FUNCS) return -1;
        Func* f = &m->funcs[m->nfuncs];
        memset(f, 0, sizeof *f);
        p += 7;
        size_t n = strcspn(p, "( \t\n");
        if (n >= sizeof f->name) return -1;
        snprintf(f->name, sizeof f->name, "%.*s", (int)n, p);
        p += n;
        const char* close = strchr(p, ')');
        const char* body = strchr(p, '{');
        if (!close || !body) return -1;
        size_t at = 0;
        for (const char* q = strstr(p, ".param"); q && q < close; q = strstr(q + 6, ".param")) {
            const char* end = strpbrk(q, ",)");
            if (!end || f->nparams == MAX_PARAMS) return -1;
            char decl[512];
            snprintf(decl, sizeof decl, "%.*s", (int)(end - q), q);
            int align = 0, size = 0, count = 1, is_ptr = 0;
            for (char* tok = strtok(decl, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
                if (!strcmp(tok, ".ptr")) is_ptr = 1;
                else if (!strcmp(tok, ".align")) {
                    tok = strtok(NULL, " \t\n");
                    if (!is_ptr) align = atoi(tok);     /* after .ptr: the pointee's */
                } else if (tok[0] == '.' && ptx_type_size(tok + 1)) size = ptx_type_size(tok + 1);
                else if (strchr(tok, '[')) count = atoi(strchr(tok, '[') + 1);
            }
            if (!align) align = size;
            at = (at + align - 1) / align * align;
            f->offset[f->nparams] = at;
            f->size[f->nparams++] = (size_t)size * count;
            at += (size_t)size * count;
        }
        f->max_threads = 1024;
        const char* next = strstr(body, ".entry ");
        const char* mt = strstr(close, ".maxntid");
        if (mt && mt < body) {
            int x = 1, y = 1, z = 1;
            sscanf(mt, ".maxntid %d, %d, %d", &x, &y, &z);
            f->max_threads = x * y * z;
        }
        const char* rc = strstr(close, ".reqnctapercluster");
        if (rc && rc < body) {
            f->cluster[1] = f->cluster[2] = 1;
            sscanf(rc, ".reqnctapercluster %u, %u, %u", &f->cluster[0], &f->cluster[1], &f->cluster[2]);
        }
        for (const char* s = strstr(body, ".shared "); s && (!next || s < next); s = strstr(s + 8, ".shared ")) {
            const char* br = strchr(s, '[');
            const char* nl = strchr(s, '\n');
            if (br && (!nl || br < nl)) f->static_shared += atoi(br + 1);
        }
        m->nfuncs++;
        p = body;
    }
    return 0;
}

/* Kernels of a CUBIN: .nv.info.<name> sections (EIATTR_KPARAM_INFO 0x17: ordinal, offset,
 * size in bits 18..31; EIATTR_MAX_THREADS 0x05) and .nv.shared.<name> sizes. */
static int parse_cubin(const unsigned char* elf, Module* m) {
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3a, 2);
    memcpy(&shnum, elf + 0x3c, 2);
    memcpy(&shstrndx, elf + 0x3e, 2);
    const unsigned char* strsec = elf + shoff + (size_t)shstrndx * shentsize;
    uint64_t stroff;
    memcpy(&stroff, strsec + 0x18, 8);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < shnum; i++) {
            const unsigned char* sh = elf + shoff + (size_t)i * shentsize;
            uint32_t name;
            uint64_t off, size;
            memcpy(&name, sh, 4);
            memcpy(&off, sh + 0x18, 8);
            memcpy(&size, sh + 0x20, 8);
            const char* sname = (const char*)elf + stroff + name;
            if (pass == 0 && !strncmp(sname, ".text.", 6)) {
                if (m->nfuncs == MAX_FUNCS) return -1;
                Func* f = &m->funcs[m->nfuncs++];
                memset(f, 0, sizeof *f);
                if (strlen(sname + 6) >= sizeof f->name) return -1;
                snprintf(f->name, sizeof f->name, "%s", sname + 6);
                f->max_threads = 1024;
            }
            if (pass == 0) continue;
            Func* f = NULL;
            const char* kname = !strncmp(sname, ".nv.info.", 9) ? sname + 9
                              : !strncmp(sname, ".nv.shared.", 11) ? sname + 11 : NULL;
            for (int k = 0; kname && k < m->nfuncs; k++)
                if (!strcmp(m->funcs[k].name, kname)) f = &m->funcs[k];
            if (!f) continue;
            if (sname[4] == 's') {
                /* .nv.shared.<name>: from sm_90 on, the section also counts the 1 KiB the
                 * system reserves (a kernel of 40 KiB static has 41 KiB, one of none 1 KiB);
                 * before sm_90 it does not (NVRTC 13's cubins). The driver reports the
                 * kernel's own, as CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES. */
                f->static_shared = (int)size - (cc >= 90 && size >= 1024 ? 1024 : 0);
                continue;
            }
            for (uint64_t p = off; p < off + size;) {
                unsigned char fmt = elf[p], attr = elf[p + 1];
                uint16_t len = 0;
                if (fmt == 4) memcpy(&len, elf + p + 2, 2);
                const unsigned char* v = elf + p + 4;
                if (attr == 0x17 && len >= 12) {
                    uint16_t ordinal, offset;
                    uint32_t bits;
                    memcpy(&ordinal, v + 4, 2);
                    memcpy(&offset, v + 6, 2);
                    memcpy(&bits, v + 8, 4);
                    if (ordinal >= MAX_PARAMS) return -1;
                    f->offset[ordinal] = offset;
                    f->size[ordinal] = (bits >> 18) & 0x3fff;
                    if (ordinal + 1 > f->nparams) f->nparams = ordinal + 1;
                } else if (attr == 0x05 && len >= 12) {
                    uint32_t x, y, z;
                    memcpy(&x, v, 4);
                    memcpy(&y, v + 4, 4);
                    memcpy(&z, v + 8, 4);
                    f->max_threads = (int)(x * y * z);
                } else if (attr == 0x3d && len >= 12) {     /* EIATTR_CTA_PER_CLUSTER */
                    memcpy(f->cluster, v, 12);
                }
                p += 4 + (fmt == 4 ? len : 0);
            }
        }
    }
    return 0;
}

/* Variables of a CUBIN: its .symtab's objects in .nv.global* (device) and .nv.constant*
 * sections, with the bytes of initialised ones (sections other than NOBITS). */
static int parse_cubin_globals(const unsigned char* elf, Module* m) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3a, 2);
    memcpy(&shnum, elf + 0x3c, 2);
    uint16_t shstrndx;
    memcpy(&shstrndx, elf + 0x3e, 2);
    uint64_t shstroff;
    memcpy(&shstroff, elf + shoff + (size_t)shstrndx * shentsize + 0x18, 8);
    for (int i = 0; i < shnum; i++) {
        const unsigned char* sh = elf + shoff + (size_t)i * shentsize;
        uint32_t type, link;
        uint64_t off, size, entsize;
        memcpy(&type, sh + 4, 4);
        if (type != 2) continue;                            /* SHT_SYMTAB */
        memcpy(&off, sh + 0x18, 8);
        memcpy(&size, sh + 0x20, 8);
        memcpy(&link, sh + 0x28, 4);
        memcpy(&entsize, sh + 0x38, 8);
        uint64_t stroff;
        memcpy(&stroff, elf + shoff + (size_t)link * shentsize + 0x18, 8);
        for (uint64_t at = off; entsize && at + entsize <= off + size; at += entsize) {
            uint32_t name;
            uint16_t shndx;
            uint64_t value, sym_size;
            memcpy(&name, elf + at, 4);
            memcpy(&shndx, elf + at + 6, 2);
            memcpy(&value, elf + at + 8, 8);
            memcpy(&sym_size, elf + at + 16, 8);
            if ((elf[at + 4] & 0xf) != 1 || shndx == 0 || shndx >= shnum) continue;  /* STT_OBJECT */
            const unsigned char* sec = elf + shoff + (size_t)shndx * shentsize;
            uint32_t sec_name, sec_type;
            uint64_t sec_off;
            memcpy(&sec_name, sec, 4);
            memcpy(&sec_type, sec + 4, 4);
            memcpy(&sec_off, sec + 0x18, 8);
            const char* sname = (const char*)elf + shstroff + sec_name;
            if (strncmp(sname, ".nv.global", 10) && strncmp(sname, ".nv.constant", 12)) continue;
            const char* vname = (const char*)elf + stroff + name;
            Global* g = add_global(m, vname, strlen(vname), sym_size);
            if (!g) return -1;
            if (sec_type != 8) memcpy((void*)g->ptr, elf + sec_off + value, sym_size);  /* NOBITS */
        }
    }
    return 0;
}

static CUresult fk_ModuleLoadData(CUmodule* out, const void* image) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuModuleLoadData without a context");
    /* The CUDA 13.0 driver loads code during a capture in every mode (an H100, 2026-11-27,
     * tools/probes/capture_calls.py); older ones refused it as a potentially unsafe call
     * (rewarped#24), which FAKECUDA_REFUSE_LOADS_IN_CAPTURE=1 models, read on each load. */
    const char* refuse = getenv("FAKECUDA_REFUSE_LOADS_IN_CAPTURE");
    if (refuse && atoi(refuse)) {
        CUresult e = unsafe_call("cuModuleLoadData");
        if (e) return e;
    }
    const unsigned char* img = image;
    int is_elf = memcmp(img, "\x7f" "ELF", 4) == 0;
    /* A relocatable cubin (ET_REL: -rdc=true, -dc) must be linked first: the driver refuses
     * it as an image (CUDA_ERROR_INVALID_IMAGE, as intel/llvm#8690 met with ptxas -c output). */
    if (is_elf && img[16] == 1 && img[17] == 0)
        return fail(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: a relocatable cubin (ET_REL) "
                    "is loaded only once linked");
    Module* m = calloc(1, sizeof *m);
    m->magic = M_MODULE;
    m->ctx = current();
    m->funcs = calloc(MAX_FUNCS, sizeof(Func));
    m->globals = calloc(MAX_GLOBALS, sizeof(Global));
    int rc = is_elf ? parse_cubin(img, m) : parse_ptx(image, m);
    if (!rc) rc = is_elf ? parse_cubin_globals(img, m) : parse_ptx_globals(image, m);
    if (rc || !m->nfuncs) {
        for (int i = 0; i < m->nglobals; i++) free_mem(m->globals[i].ptr);
        free(m->globals);
        free(m->funcs);
        free(m);
        return fail(CUDA_ERROR_INVALID_IMAGE, "no kernels found in the image (or over %d, a "
                    "name over %d characters, over %d parameters or over %d variables)",
                    MAX_FUNCS, (int)sizeof m->funcs->name - 1, MAX_PARAMS, MAX_GLOBALS);
    }
    for (int i = 0; i < m->nfuncs; i++) {
        Func* f = &m->funcs[i];
        f->magic = M_FUNC;
        f->module = m;
        f->kernel.magic = M_KERNEL;
        f->kernel.func = f;
        f->max_dynamic_shared = 49152 - f->static_shared;
        trace("module %p: kernel %s, %d params, max threads %d, static shared %d", (void*)m,
              f->name, f->nparams, f->max_threads, f->static_shared);
    }
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}
static CUresult fk_ModuleLoadDataEx(CUmodule* out, const void* image, unsigned int n,
                                    CUjit_option* o, void** v) {
    (void)n; (void)o; (void)v;
    return fk_ModuleLoadData(out, image);
}
/* The JIT linker (numba-cuda links its PTX through it): PTX inputs are concatenated, and the
 * "cubin" cuLinkComplete hands back is that text, which cuModuleLoadData parses as PTX. A CUBIN
 * input must come alone and is handed back as it is. Other input kinds are refused. */
typedef struct { int magic; char* data; size_t size; int cubin; char* log; size_t log_size;
                 int devrt; } Link;
#define MAX_LINK_BYTES ((size_t)64 << 20)
static CUresult get_link(CUlinkState h, Link** out, const char* what) {
    Link* l = (Link*)h;
    if (!l || l->magic != M_LINK) return fail(CUDA_ERROR_INVALID_HANDLE, "%s: link state %p", what, (void*)h);
    *out = l;
    return CUDA_SUCCESS;
}
static CUresult fk_LinkCreate(unsigned int n, CUjit_option* o, void** v, CUlinkState* out) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuLinkCreate without a context");
    Link* l = calloc(1, sizeof *l);
    l->magic = M_LINK;
    for (unsigned int i = 0; i < n; i++) {      /* where the error log goes, if anywhere */
        if (o[i] == CU_JIT_ERROR_LOG_BUFFER) l->log = v[i];
        else if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) l->log_size = (size_t)(uintptr_t)v[i];
    }
    *out = (CUlinkState)l;
    return CUDA_SUCCESS;
}
static CUresult fk_LinkAddData(CUlinkState h, CUjitInputType type, void* data, size_t size,
                               const char* name, unsigned int n, CUjit_option* o, void** v) {
    (void)n; (void)o; (void)v;
    Link* l;
    CUresult e = get_link(h, &l, "cuLinkAddData");
    if (e) return e;
    /* A library: only the CUDA device runtime's (an ar archive) is modelled, as defining the
     * __cudaCDP* functions a kernel that launches kernels calls. */
    if (type == CU_JIT_INPUT_LIBRARY && size >= 8 && !memcmp(data, "!<arch>\n", 8) && name &&
            strstr(name, "cudadevrt")) {
        l->devrt = 1;
        trace("link %p: %s (the device runtime) added", (void*)l, name);
        return CUDA_SUCCESS;
    }
    if (type != CU_JIT_INPUT_PTX && type != CU_JIT_INPUT_CUBIN)
        return fail(CUDA_ERROR_NOT_SUPPORTED, "cuLinkAddData: input kind %d of %s (PTX and CUBIN only)",
                    (int)type, name ? name : "?");
    if (type == CU_JIT_INPUT_PTX) size = strnlen(data, size);
    if (l->cubin || (type == CU_JIT_INPUT_CUBIN && l->size))
        return fail(CUDA_ERROR_NOT_SUPPORTED, "cuLinkAddData: a CUBIN can only be linked alone here");
    if (size > MAX_LINK_BYTES - l->size) return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuLinkAddData: over 64 MiB");
    l->data = realloc(l->data, l->size + size + 2);
    memcpy(l->data + l->size, data, size);
    l->size += size;
    if (type == CU_JIT_INPUT_PTX) l->data[l->size++] = '\n';
    l->data[l->size] = 0;
    l->cubin = type == CU_JIT_INPUT_CUBIN;
    trace("link %p: %s (%zu bytes) added", (void*)l, name ? name : "?", size);
    return CUDA_SUCCESS;
}
static CUresult fk_LinkAddFile(CUlinkState h, CUjitInputType type, const char* path,
                               unsigned int n, CUjit_option* o, void** v) {
    FILE* f = fopen(path, "rb");
    if (!f) return fail(CUDA_ERROR_FILE_NOT_FOUND, "cuLinkAddFile: cannot open %s", path);
    char* buf = NULL;
    size_t size = 0, got;
    char chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && size < MAX_LINK_BYTES) {
        buf = realloc(buf, size + got);
        memcpy(buf + size, chunk, got);
        size += got;
    }
    fclose(f);
    CUresult e = fk_LinkAddData(h, type, buf, size, path, n, o, v);
    free(buf);
    return e;
}
static CUresult fk_LinkComplete(CUlinkState h, void** image, size_t* size) {
    Link* l;
    CUresult e = get_link(h, &l, "cuLinkComplete");
    if (e) return e;
    if (!l->size) return fail(CUDA_ERROR_INVALID_VALUE, "cuLinkComplete: nothing was added");
    /* Linked, a relocatable cubin is an executable one (ET_EXEC), whose variables are plain
     * data symbols (STT_OBJECT) where the relocatable one marks them 13 (STT_LOPROC). */
    if (l->cubin && l->size > 0x40 && !memcmp(l->data, "\x7f" "ELF", 4) && l->data[16] == 1) {
        unsigned char* elf = (unsigned char*)l->data;
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, elf + 0x28, 8);
        memcpy(&shentsize, elf + 0x3a, 2);
        memcpy(&shnum, elf + 0x3c, 2);
        for (int i = 0; shentsize >= 0x40 && i < shnum; i++) {
            uint64_t sh = shoff + (uint64_t)i * shentsize, off, size, entsize;
            uint32_t type;
            if (sh + 0x40 > l->size) break;
            memcpy(&type, elf + sh + 4, 4);
            memcpy(&off, elf + sh + 0x18, 8);
            memcpy(&size, elf + sh + 0x20, 8);
            memcpy(&entsize, elf + sh + 0x38, 8);
            if (type != 2 || entsize < 24 || off > l->size || size > l->size - off) continue;
            uint32_t link;
            uint64_t stroff = 0;
            memcpy(&link, elf + sh + 0x28, 4);
            if (link < shnum && shoff + (uint64_t)link * shentsize + 0x20 <= l->size)
                memcpy(&stroff, elf + shoff + (uint64_t)link * shentsize + 0x18, 8);
            for (uint64_t at = off; at + entsize <= off + size; at += entsize) {
                uint16_t shndx;
                uint32_t name;
                memcpy(&shndx, elf + at + 6, 2);
                memcpy(&name, elf + at, 4);
                if ((elf[at + 4] & 0xf) == 13 && shndx != 0) elf[at + 4] = (elf[at + 4] & 0xf0) | 1;
                /* A global symbol defined nowhere (the only input is this cubin): nvlink's
                 * "Undefined reference". Which CUresult the driver gives is not known here. */
                if (shndx == 0 && elf[at + 4] >> 4 == 1 && name && stroff + name < l->size) {
                    const char* sym = (const char*)elf + stroff + name;
                    /* The device runtime's: dynamic parallelism, and the device-side updates
                     * of device-updatable graph nodes. */
                    if (l->devrt && (!strncmp(sym, "__cudaCDP", 9)
                                     || !strncmp(sym, "cudaGraphKernelNode", 19))) continue;
                    if (l->log && l->log_size)
                        snprintf(l->log, l->log_size, "error   : Undefined reference to '%.*s' "
                                 "in 'relocatable cubin'", (int)strnlen(sym, 256), sym);
                    return fail(CUDA_ERROR_INVALID_IMAGE, "cuLinkComplete: undefined %s", sym);
                }
            }
        }
        elf[16] = 2;
    }
    *image = l->data;
    *size = l->size + !l->cubin;     /* PTX text with its NUL, as a loader expects */
    return CUDA_SUCCESS;
}
static CUresult fk_LinkDestroy(CUlinkState h) {
    Link* l;
    CUresult e = get_link(h, &l, "cuLinkDestroy");
    if (e) return e;
    l->magic = 0;
    free(l->data);
    free(l);
    return CUDA_SUCCESS;
}
static CUresult fk_ModuleUnload(CUmodule h) {
    Module* m = (Module*)h;
    if (!m || m->magic != M_MODULE) return fail(CUDA_ERROR_INVALID_HANDLE, "module %p", (void*)h);
    /* The driver "unloads a module from the current context"; a library (ctx NULL) is any one's */
    if (m->ctx && m->ctx != current())
        return fail(CUDA_ERROR_INVALID_CONTEXT, "cuModuleUnload of a module of another context");
    /* Refused in global and thread-local capture modes by the 13.0 driver as well (same probe). */
    CUresult e = unsafe_call("cuModuleUnload");
    if (e) return e;
    for (int i = 0; i < m->nfuncs; i++) m->funcs[i].magic = 0;
    /* Its variables go (an address kept past the unload is no allocation any more). */
    for (int i = 0; i < m->nglobals; i++) free_mem(m->globals[i].ptr);
    m->nglobals = 0;
    m->magic = 0;
    return CUDA_SUCCESS;          /* leaked on purpose: a use after unload still finds magic 0 */
}
static CUresult fk_ModuleGetFunction(CUfunction* out, CUmodule h, const char* name) {
    Module* m = (Module*)h;
    if (!m || m->magic != M_MODULE) return fail(CUDA_ERROR_INVALID_HANDLE, "module %p", (void*)h);
    for (int i = 0; i < m->nfuncs; i++)
        if (!strcmp(m->funcs[i].name, name)) { *out = (CUfunction)&m->funcs[i]; return CUDA_SUCCESS; }
    return fail(CUDA_ERROR_NOT_FOUND, "no kernel named %s", name);
}
static CUresult fk_ModuleGetGlobal(CUdeviceptr* ptr, size_t* size, CUmodule h, const char* name) {
    Module* m = (Module*)h;
    if (!m || m->magic != M_MODULE) return fail(CUDA_ERROR_INVALID_HANDLE, "module %p", (void*)h);
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuModuleGetGlobal without a context");
    for (int i = 0; i < m->nglobals; i++)
        if (!strcmp(m->globals[i].name, name)) {
            if (ptr) *ptr = (CUdeviceptr)m->globals[i].ptr;
            if (size) *size = m->globals[i].size;
            return CUDA_SUCCESS;
        }
    return fail(CUDA_ERROR_NOT_FOUND, "no variable named %s", name);
}
static const Global* find_global(const Func* f, const char* name) {
    const Module* m = f->module;
    for (int i = 0; i < m->nglobals; i++)
        if (!strcmp(m->globals[i].name, name)) return &m->globals[i];
    return NULL;
}
static CUresult get_func(CUfunction h, Func** out, const char* what) {
    Func* f = (Func*)h;
    if (!f || f->magic != M_FUNC) return fail(CUDA_ERROR_INVALID_HANDLE, "%s: function %p", what, (void*)h);
    *out = f;
    return CUDA_SUCCESS;
}
/* A CUkernel handle's function. */
static CUresult get_kernel(CUkernel h, Func** out, const char* what) {
    KernelHandle* k = (KernelHandle*)h;
    if (!k || k->magic != M_KERNEL)
        return fail(CUDA_ERROR_INVALID_HANDLE, "%s: kernel %p", what, (void*)h);
    *out = (Func*)k->func;
    return CUDA_SUCCESS;
}
/* What launches and the occupancy calculator take: a CUfunction, or a CUkernel cast to one. */
static CUresult get_launchable(CUfunction h, Func** out, const char* what) {
    if (h && ((KernelHandle*)h)->magic == M_KERNEL) return get_kernel((CUkernel)h, out, what);
    return get_func(h, out, what);
}
static CUresult fk_FuncGetAttribute(int* pi, CUfunction_attribute a, CUfunction h) {
    Func* f;
    CUresult e = get_func(h, &f, "cuFuncGetAttribute");
    if (e) return e;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = f->static_shared; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = f->max_dynamic_shared; break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *pi = f->non_portable_cluster; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = (int)f->cluster[0]; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = (int)f->cluster[1]; break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = (int)f->cluster[2]; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = cc; break;
    default: *pi = 0;
    }
    return CUDA_SUCCESS;
}
/* Resident blocks per multiprocessor: 2048 threads, 32 blocks and the SM's shared memory
 * (smem_per_sm: an H100's 228 KiB by default), the model the cooperative-launch check below
 * uses too. */
static int blocks_per_sm(const Func* f, unsigned long long threads, size_t dynamic_shared) {
    if (!threads || threads > (unsigned long long)f->max_threads) return 0;
    unsigned long long n = 2048 / threads;
    if (n > 32) n = 32;
    size_t shared = dynamic_shared + (size_t)f->static_shared;
    if (shared && n > (size_t)smem_per_sm() / shared) n = (size_t)smem_per_sm() / shared;
    return (int)n;
}
static CUresult fk_OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction h, int threads,
                                                             size_t dynamic_shared) {
    Func* f;
    CUresult e = get_launchable(h, &f, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (e) return e;
    if (threads <= 0) return fail(CUDA_ERROR_INVALID_VALUE, "block size %d", threads);
    *n = blocks_per_sm(f, (unsigned long long)threads, dynamic_shared);
    return CUDA_SUCCESS;
}
/* The dynamic shared memory a block may have for `blocks` of them to be resident on an SM: the
 * SM's shared memory shared out, less each block's reserved 1 KiB and static shared memory,
 * up to the opt-in limit; 0 where the threads or the block count do not fit at all. */
static CUresult fk_OccupancyAvailableDynamicSMemPerBlock(size_t* out, CUfunction h, int blocks,
                                                         int threads) {
    Func* f;
    CUresult e = get_launchable(h, &f, "cuOccupancyAvailableDynamicSMemPerBlock");
    if (e) return e;
    if (!out || blocks <= 0 || threads <= 0)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuOccupancyAvailableDynamicSMemPerBlock(%d, %d)", blocks, threads);
    long long each = smem_per_sm() / blocks - smem_reserved() - f->static_shared;
    long long most = device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) - f->static_shared;
    if (threads > f->max_threads || (long long)blocks * threads > 2048 || blocks > 32) each = 0;
    *out = (size_t)(each < 0 ? 0 : each < most ? each : most);
    return CUDA_SUCCESS;
}
/* Cluster occupancy (cuda.h 12.0), modelled on GPCs of 16 SMs (132 SMs: 8 of them): a cluster's
 * blocks share a GPC, at blocks_per_sm a multiprocessor. Clusters need cc 9.0; a config's
 * dynamic shared memory is checked against the kernel's limit, as a launch's is. */
#define GPC_SMS 16
/* How many clusters of `size` blocks are resident at once, at `per_sm` blocks a multiprocessor:
 * what cuOccupancyMaxActiveClusters answers, and (a model: cuda.h does not say) the most a
 * cooperative launch of such clusters may have. */
static int active_clusters(int per_sm, unsigned int size) {
    return per_sm * GPC_SMS / (int)size * (device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) / GPC_SMS);
}
static CUresult cluster_occupancy(CUfunction h, const CUlaunchConfig* c, Func** f, int* per_sm,
                                  unsigned int* cluster, const char* what) {
    CUresult e = get_launchable(h, f, what);
    if (e) return e;
    if (!c) return fail(CUDA_ERROR_INVALID_VALUE, "%s: config NULL", what);
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "%s without a context", what);
    if (cc < 90) return fail(CUDA_ERROR_NOT_SUPPORTED, "%s: clusters need cc 9.0", what);
    if (c->numAttrs && !c->attrs) return fail(CUDA_ERROR_INVALID_VALUE, "%s: attrs NULL", what);
    if (c->sharedMemBytes > (unsigned int)(*f)->max_dynamic_shared)
        return fail(CUDA_ERROR_INVALID_VALUE, "%s: %u bytes of dynamic shared memory, kernel %s "
                    "allows %d", what, c->sharedMemBytes, (*f)->name, (*f)->max_dynamic_shared);
    *per_sm = blocks_per_sm(*f, (unsigned long long)c->blockDimX * c->blockDimY * c->blockDimZ,
                            c->sharedMemBytes);
    *cluster = (*f)->cluster[0] * (*f)->cluster[1] * (*f)->cluster[2];   /* required, or 0 */
    for (unsigned int i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            unsigned int given = c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y
                                 * c->attrs[i].value.clusterDim.z;
            if (*cluster && given != *cluster)      /* cuda.h: unspecified, or the same */
                return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, "%s: a cluster of %u blocks, kernel "
                            "%s requires %u", what, given, (*f)->name, *cluster);
            *cluster = given;
        }
    return CUDA_SUCCESS;
}
/* The config's cluster dimensions are ignored: 8 blocks, 16 where the kernel allows
 * non-portable sizes, fewer where a GPC holds fewer. */
static CUresult fk_OccupancyMaxPotentialClusterSize(int* size, CUfunction h, const CUlaunchConfig* c) {
    Func* f;
    int per_sm;
    unsigned int given;
    CUresult e = cluster_occupancy(h, c, &f, &per_sm, &given, "cuOccupancyMaxPotentialClusterSize");
    if (e) return e;
    if (!size) return fail(CUDA_ERROR_INVALID_VALUE, "cuOccupancyMaxPotentialClusterSize: size NULL");
    int most = f->non_portable_cluster ? 16 : 8;
    /* A kernel's own cluster size (f->cluster) is not the answer, though cuda.h says it is:
     * the 13.0 driver answered 8 for a kernel of __cluster_dims__(2, 1, 1) (an H200). */
    *size = per_sm * GPC_SMS < most ? per_sm * GPC_SMS : most;
    return CUDA_SUCCESS;
}
/* The config must give a cluster or the kernel require one, within the kernel's portable (8)
 * or non-portable (16) limit. */
static CUresult fk_OccupancyMaxActiveClusters(int* n, CUfunction h, const CUlaunchConfig* c) {
    Func* f;
    int per_sm;
    unsigned int given;
    CUresult e = cluster_occupancy(h, c, &f, &per_sm, &given, "cuOccupancyMaxActiveClusters");
    if (e) return e;
    if (!n) return fail(CUDA_ERROR_INVALID_VALUE, "cuOccupancyMaxActiveClusters: numClusters NULL");
    if (!given) return fail(CUDA_ERROR_INVALID_VALUE, "cuOccupancyMaxActiveClusters: no cluster "
                            "dimension in the config, and kernel %s has no required size", f->name);
    if (given > (f->non_portable_cluster ? 16u : 8u))
        return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, "cuOccupancyMaxActiveClusters: a cluster "
                    "of %u blocks", given);
    *n = active_clusters(per_sm, given);
    return CUDA_SUCCESS;
}
/* The block size (a multiple of 32, the largest of those with the most resident threads) and
 * the grid that fills the device with it, as the CUDA occupancy calculator does. */
static CUresult fk_OccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction h,
                                                  CUoccupancyB2DSize shmem_of, size_t dynamic_shared,
                                                  int limit) {
    Func* f;
    CUresult e = get_launchable(h, &f, "cuOccupancyMaxPotentialBlockSize");
    if (e) return e;
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "occupancy without a context");
    int most = f->max_threads;
    if (limit > 0 && limit < most) most = limit;
    int best = 0, best_threads = 0, best_blocks = 0;
    for (int t = most / 32 * 32; t >= 32; t -= 32) {
        int n = blocks_per_sm(f, (unsigned long long)t, shmem_of ? shmem_of(t) : dynamic_shared);
        if (n * t > best) { best = n * t; best_threads = t; best_blocks = n; }
    }
    *block = best_threads;
    *min_grid = best_blocks * device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    return CUDA_SUCCESS;
}
static CUresult fk_FuncSetAttribute(CUfunction h, CUfunction_attribute a, int value) {
    Func* f;
    CUresult e = get_func(h, &f, "cuFuncSetAttribute");
    if (e) return e;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        int optin = device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
        if (value < 0 || value + f->static_shared > optin)
            return fail(CUDA_ERROR_INVALID_VALUE, "dynamic shared %d + static %d > opt-in %d",
                        value, f->static_shared, optin);
        f->max_dynamic_shared = value;
    } else if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
        if (cc < 90) return fail(CUDA_ERROR_NOT_SUPPORTED, "clusters need cc 9.0");
        f->non_portable_cluster = value != 0;
    } else {
        return fail(CUDA_ERROR_INVALID_VALUE, "function attribute %d not modelled", (int)a);
    }
    return CUDA_SUCCESS;
}
static CUresult fk_FuncGetParamInfo(CUfunction h, size_t i, size_t* offset, size_t* size) {
    Func* f;
    CUresult e = get_func(h, &f, "cuFuncGetParamInfo");
    if (e) return e;
    if (i >= (size_t)f->nparams) return fail(CUDA_ERROR_INVALID_VALUE, "parameter %zu of %d", i, f->nparams);
    if (offset) *offset = f->offset[i];
    if (size) *size = f->size[i];
    return CUDA_SUCCESS;
}
static CUresult fk_FuncGetName(const char** name, CUfunction h) {
    Func* f;
    CUresult e = get_func(h, &f, "cuFuncGetName");
    if (!e) *name = f->name;
    return e;
}

/* The library API (cuda.core loads code with it): a library is a module not tied to a
 * context, and its CUkernel handles serve as CUfunctions. */
static CUresult fk_LibraryLoadData(CUlibrary* out, const void* code, CUjit_option* o, void** v,
                                   unsigned int n, CUlibraryOption* lo, void** lv, unsigned int ln) {
    (void)o; (void)v; (void)n; (void)lo; (void)lv; (void)ln;
    CUmodule m;
    CUresult e = fk_ModuleLoadData(&m, code);
    if (!e) { ((Module*)m)->ctx = NULL; *out = (CUlibrary)m; }
    return e;
}
static CUresult fk_LibraryUnload(CUlibrary h) { return fk_ModuleUnload((CUmodule)h); }
static CUresult fk_LibraryGetKernel(CUkernel* out, CUlibrary h, const char* name) {
    CUfunction fn;
    CUresult e = fk_ModuleGetFunction(&fn, (CUmodule)h, name);
    if (!e) *out = (CUkernel)&((Func*)fn)->kernel;
    return e;
}
static CUresult fk_LibraryGetModule(CUmodule* out, CUlibrary h) { *out = (CUmodule)h; return CUDA_SUCCESS; }
static CUresult fk_KernelGetFunction(CUfunction* out, CUkernel k) {
    Func* f;
    CUresult e = get_kernel(k, &f, "cuKernelGetFunction");
    if (e) return e;
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuKernelGetFunction without a context");
    *out = (CUfunction)f;
    return CUDA_SUCCESS;
}
static CUresult fk_KernelGetAttribute(int* pi, CUfunction_attribute a, CUkernel k, CUdevice d) {
    Func* f;
    CUresult e = get_kernel(k, &f, "cuKernelGetAttribute");
    (void)d;
    return e ? e : fk_FuncGetAttribute(pi, a, (CUfunction)f);
}
static CUresult fk_KernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) {
    Func* f;
    CUresult e = get_kernel(k, &f, "cuKernelSetAttribute");
    (void)d;
    return e ? e : fk_FuncSetAttribute((CUfunction)f, a, v);
}
static CUresult fk_KernelGetParamInfo(CUkernel k, size_t i, size_t* off, size_t* size) {
    Func* f;
    CUresult e = get_kernel(k, &f, "cuKernelGetParamInfo");
    return e ? e : fk_FuncGetParamInfo((CUfunction)f, i, off, size);
}
static CUresult fk_KernelGetName(const char** name, CUkernel k) {
    Func* f;
    CUresult e = get_kernel(k, &f, "cuKernelGetName");
    return e ? e : fk_FuncGetName(name, (CUfunction)f);
}
static CUresult fk_FuncGetModule(CUmodule* out, CUfunction h) {
    Func* f;
    CUresult e = get_func(h, &f, "cuFuncGetModule");
    if (!e) *out = (CUmodule)f->module;
    return e;
}

/* ------------------------------------------------------------------ texture objects */
/* Over linear memory only: what tests/gpu's tex_copy kernel reads (tex1Dfetch<float>). The
 * handle is a small positive int, as the driver's are. */
#define MAX_TEXTURES 64
static struct { uintptr_t ptr; size_t size; int live; } textures[MAX_TEXTURES];
static CUresult fk_TexObjectCreate(CUtexObject* out, const CUDA_RESOURCE_DESC* r,
                                   const CUDA_TEXTURE_DESC* t, const CUDA_RESOURCE_VIEW_DESC* v) {
    (void)t; (void)v;
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuTexObjectCreate without a context");
    if (!r || r->resType != CU_RESOURCE_TYPE_LINEAR)
        return fail(CUDA_ERROR_NOT_SUPPORTED, "texture objects over linear memory only");
    CUresult e = check_range((uintptr_t)r->res.linear.devPtr, r->res.linear.sizeInBytes,
                             "cuTexObjectCreate");
    if (e) return e;
    if (r->res.linear.devPtr % device_attribute(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT))
        return fail(CUDA_ERROR_INVALID_VALUE, "cuTexObjectCreate: 0x%llx is not aligned to the "
                    "device's TEXTURE_ALIGNMENT", (unsigned long long)r->res.linear.devPtr);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_TEXTURES; i++)
        if (!textures[i].live) {
            textures[i].ptr = (uintptr_t)r->res.linear.devPtr;
            textures[i].size = r->res.linear.sizeInBytes;
            textures[i].live = 1;
            pthread_mutex_unlock(&lock);
            *out = (CUtexObject)(i + 1);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&lock);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "over %d texture objects", MAX_TEXTURES);
}
static CUresult fk_TexObjectDestroy(CUtexObject h) {
    if (h == 0 || h > MAX_TEXTURES || !textures[h - 1].live)
        return fail(CUDA_ERROR_INVALID_VALUE, "texture object %llu", (unsigned long long)h);
    textures[h - 1].live = 0;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ tensor maps */
/* cuTensorMapEncodeTiled, checked as the driver documents it, writes this stand-in's own
 * encoding into the 128 opaque bytes: what tests/gpu's tmap_echo kernel copies out and its
 * tma_tile kernel decodes to copy a box (the real encoding is the GPU's business). */
#define TMAP_MAGIC 0x6b617267746d6170ULL           /* "kargtmap" */
typedef struct {
    uint64_t magic, address;
    uint32_t elem, rank;
    uint64_t dims[5], strides[4];                  /* strides in bytes, of dims 1 .. rank-1 */
    uint32_t box[5];
} FakeTensorMap;
_Static_assert(sizeof(FakeTensorMap) <= sizeof(CUtensorMap), "fits the 128 opaque bytes");
static CUresult fk_TensorMapEncodeTiled(CUtensorMap* m, CUtensorMapDataType type, cuuint32_t rank,
        void* address, const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
        const cuuint32_t* elem_strides, CUtensorMapInterleave interleave,
        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    (void)interleave; (void)swizzle; (void)l2; (void)oob;
    static const int sizes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    if (!m || !dims || !box || !elem_strides || rank < 1 || rank > 5 || (rank > 1 && !strides))
        return fail(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: rank %u or a NULL array", rank);
    if ((int)type < 0 || (size_t)type >= sizeof sizes / sizeof *sizes)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: data type %d", (int)type);
    if ((uintptr_t)address % 16)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: address %p is not "
                    "16-byte aligned", address);
    FakeTensorMap f = {TMAP_MAGIC, (uintptr_t)address, (uint32_t)sizes[type], rank, {0}, {0}, {0}};
    for (cuuint32_t i = 0; i < rank; i++) {
        if (box[i] < 1 || box[i] > 256 || elem_strides[i] < 1 || elem_strides[i] > 8)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: box or element "
                        "stride %u of dimension %u", box[i], i);
        f.dims[i] = dims[i];
        f.box[i] = box[i];
        if (i + 1 < rank) {
            if (strides[i] % 16) return fail(CUDA_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled: "
                                             "stride %llu is not a multiple of 16",
                                             (unsigned long long)strides[i]);
            f.strides[i] = strides[i];
        }
    }
    memset(m, 0, sizeof *m);
    memcpy(m, &f, sizeof f);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ launches */

/* FAKECUDA_EVICT=<bytes>: each launch first evicts the caches, as a real driver's launch does
 * to the code that runs after it -- a model for tools/probes/cold_launch.py, which counts under
 * callgrind's cache simulator the cache lines kernarg's launch path brings back per launch. Data:
 * one write per 64-byte line of a buffer of that many bytes; code: 64 KiB of 64-byte blocks, each
 * entered by one jump (more than an L1 instruction cache holds). */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((noinline)) static void evict_code(void) {
    __asm__ volatile(".rept 1024\n\tjmp 1f\n\t.skip 62, 0x90\n1:\n\t.endr" ::: "memory");
}
#else
static void evict_code(void) {}
#endif
static long evict_bytes;
static volatile char* evict_buf;
static void evict_init(void) {
    const char* e = getenv("FAKECUDA_EVICT");
    evict_bytes = e ? atol(e) : 0;
    if (evict_bytes > 0 && !(evict_buf = calloc(1, (size_t)evict_bytes))) evict_bytes = 0;
}
static void evict_caches(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, evict_init);
    long bytes = evict_bytes;
    volatile char* buf = evict_buf;
    if (bytes <= 0) return;
    for (long i = 0; i < bytes; i += 64) buf[i]++;
    evict_code();
}
/* The launch attributes of cuda.h 13 (a CUDA 12 cuda.h does not name them), by number: each
 * value the union's first 4 bytes, and the driver version that first knows it. */
enum { ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING = 16, ATTR_PORTABLE_CLUSTER_SIZE_MODE = 17,
       ATTR_SHARED_MEMORY_MODE = 18 };
static unsigned int attr_uint(const CUlaunchAttribute* a) {
    unsigned int v;
    memcpy(&v, &a->value, sizeof v);
    return v;
}
/* The shared memory mode among `attrs` (CUsharedMemoryMode; 0, the default, if none). */
static unsigned int shmem_mode(const CUlaunchAttribute* attrs, unsigned int nattrs) {
    for (unsigned int i = 0; i < nattrs; i++)
        if ((int)attrs[i].id == ATTR_SHARED_MEMORY_MODE) return attr_uint(&attrs[i]);
    return 0;
}
/* The launch attributes `attrs` of a launch (or kernel node) of `f` with grid `g`, checked as the
 * driver checks them; *pdl says whether programmatic stream serialization is allowed. */
static CUresult check_attrs(const CUlaunchAttribute* attrs, unsigned int nattrs,
                            const unsigned int g[3], unsigned long long threads,
                            unsigned int shmem, Func* f, int* pdl) {
    int cooperative = 0;
    *pdl = 0;
    const unsigned int* cluster = NULL;     /* the cluster attribute's dimensions, if given */
    const unsigned int* preferred = NULL;   /* the preferred cluster's, if given */
    unsigned int cluster_blocks = 0, cluster_mode = 0;
    for (unsigned int i = 0; i < nattrs; i++) {
        const CUlaunchAttribute* a = &attrs[i];
        switch ((int)a->id) {
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
            unsigned int d[3] = {a->value.clusterDim.x, a->value.clusterDim.y, a->value.clusterDim.z};
            if (cc < 90) return fail(CUDA_ERROR_NOT_SUPPORTED, "cluster launch needs cc 9.0");
            unsigned int n = 1;
            for (int k = 0; k < 3; k++) {
                if (!d[k] || g[k] % d[k]) return fail(CUDA_ERROR_INVALID_VALUE, "cluster dimension %d (%u) does not divide grid (%u)", k, d[k], g[k]);
                n *= d[k];
            }
            cluster_blocks = n;
            cluster = &a->value.clusterDim.x;
            break;
        }
        /* cuda.h 13: a hint of 0 or 1 (13.0); a cluster size mode, of 0-2, and a shared memory
         * mode, of 0-4 (13.2). An older driver does not know them: an invalid value. */
        case ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING:
        case ATTR_PORTABLE_CLUSTER_SIZE_MODE:
        case ATTR_SHARED_MEMORY_MODE: {
            int id = (int)a->id;
            unsigned int v = attr_uint(a), most = id == ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING ? 1
                : id == ATTR_PORTABLE_CLUSTER_SIZE_MODE ? 2 : 4;
            if (driver_version() < (id == ATTR_NVLINK_UTIL_CENTRIC_SCHEDULING ? 13000 : 13020))
                return fail(CUDA_ERROR_INVALID_VALUE, "launch attribute %d is newer than driver %d",
                            id, driver_version());
            if (v > most) return fail(CUDA_ERROR_INVALID_VALUE, "launch attribute %d value %u", id, v);
            if (id == ATTR_PORTABLE_CLUSTER_SIZE_MODE) cluster_mode = v;
            break;
        }
        /* The rules cuda.h states for each (what a real driver does past them, on a device
         * without the feature, is not modelled). */
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
            preferred = &a->value.preferredClusterDim.x;
            break;
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
            if ((unsigned)a->value.clusterSchedulingPolicyPreference > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
                return fail(CUDA_ERROR_INVALID_VALUE, "cluster scheduling policy %d", (int)a->value.clusterSchedulingPolicyPreference);
            break;
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
            if ((unsigned)a->value.memSyncDomain > CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE)
                return fail(CUDA_ERROR_INVALID_VALUE, "memory sync domain %d", (int)a->value.memSyncDomain);
            break;
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: {
            /* A modelled rule: each physical domain below the device's count. */
            int count = device_attribute(CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT);
            if (a->value.memSyncDomainMap.default_ >= count || a->value.memSyncDomainMap.remote >= count)
                return fail(CUDA_ERROR_INVALID_VALUE, "memory sync domain map (%u, %u) past %d domains",
                            a->value.memSyncDomainMap.default_, a->value.memSyncDomainMap.remote, count);
            break;
        }
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
            if (a->value.sharedMemCarveout > 100)
                return fail(CUDA_ERROR_INVALID_VALUE, "shared memory carveout %u%%", a->value.sharedMemCarveout);
            break;
        case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: {
            /* cuda.h: not an interprocess or interop event, created without timing; record
             * flags as cuEventRecordWithFlags takes them, but CU_EVENT_RECORD_EXTERNAL. */
            int programmatic = a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT;
            CUevent eh = programmatic ? a->value.programmaticEvent.event : a->value.launchCompletionEvent.event;
            int flags = programmatic ? a->value.programmaticEvent.flags : a->value.launchCompletionEvent.flags;
            Event* ev;
            CUresult e = get_event(eh, &ev, programmatic ? "programmatic event" : "launch completion event");
            if (e) return e;
            if (!(ev->flags & CU_EVENT_DISABLE_TIMING) || (ev->flags & CU_EVENT_INTERPROCESS))
                return fail(CUDA_ERROR_INVALID_VALUE, "an event with flags %#x (timing, or interprocess)", ev->flags);
            if (flags & ~CU_EVENT_RECORD_DEFAULT) return fail(CUDA_ERROR_INVALID_VALUE, "event record flags %#x", flags);
            if (programmatic && cc < 90) return fail(CUDA_ERROR_NOT_SUPPORTED, "programmatic events need cc 9.0");
            break;
        }
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
            const CUaccessPolicyWindow* w = &a->value.accessPolicyWindow;
            if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f))
                return fail(CUDA_ERROR_INVALID_VALUE, "access policy hit ratio %g", (double)w->hitRatio);
            if ((unsigned)w->hitProp > CU_ACCESS_PROPERTY_PERSISTING
                || (unsigned)w->missProp > CU_ACCESS_PROPERTY_STREAMING)
                return fail(CUDA_ERROR_INVALID_VALUE, "access policy properties %d, %d", (int)w->hitProp, (int)w->missProp);
            if (w->num_bytes > (size_t)device_attribute(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE))
                return fail(CUDA_ERROR_INVALID_VALUE, "access policy window of %zu bytes", w->num_bytes);
            break;
        }
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            cooperative = a->value.cooperative != 0;
            break;
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
            *pdl = a->value.programmaticStreamSerializationAllowed != 0;
            break;
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
            break;
        default:
            return fail(CUDA_ERROR_INVALID_VALUE, "launch attribute %d not modelled", (int)a->id);
        }
    }
    /* A kernel's own cluster dimensions (__cluster_dims__): a launch gives none or the same,
     * and its grid is a multiple of them. */
    if (f->cluster[0]) {
        for (int k = 0; k < 3; k++)
            if ((cluster && cluster[k] != f->cluster[k]) || g[k] % f->cluster[k])
                return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, "kernel %s requires clusters of "
                            "(%u, %u, %u)", f->name, f->cluster[0], f->cluster[1], f->cluster[2]);
        if (!cluster) cluster_blocks = f->cluster[0] * f->cluster[1] * f->cluster[2];
    }
    /* A portable cluster has up to 8 blocks; a non-portable one 16, where the launch's mode
     * allows it, or the kernel's NON_PORTABLE_CLUSTER_SIZE_ALLOWED under the default mode. */
    if (cluster_blocks > (cluster_mode == 1 ? 8u : cluster_mode == 2 || f->non_portable_cluster ? 16u : 8u))
        return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, "cluster of %u blocks (cluster size mode %u)",
                    cluster_blocks, cluster_mode);
    if (preferred) {
        if (!cluster) return fail(CUDA_ERROR_INVALID_VALUE, "a preferred cluster without a cluster");
        for (int k = 0; k < 3; k++)
            if (!preferred[k] || preferred[k] % cluster[k] || (k == 2 && preferred[k] != cluster[k])
                || g[k] % preferred[k])
                return fail(CUDA_ERROR_INVALID_VALUE, "preferred cluster dimension %d (%u)", k, preferred[k]);
    }
    unsigned long long blocks = (unsigned long long)g[0] * g[1] * g[2];
    if (cooperative && (cluster_blocks
            ? blocks / cluster_blocks > (unsigned long long)active_clusters(blocks_per_sm(f, threads, shmem), cluster_blocks)
            : blocks > 132ull * blocks_per_sm(f, threads, shmem)))
        return fail(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cooperative grid too large");
    return CUDA_SUCCESS;
}
/* The node a launch of `f` with config `c` (its stream aside) and `params` makes, checked as a
 * launch is: what a launch runs or a capture records, and what a kernel node holds. */
static CUresult make_node(const CUlaunchConfig* c, Func* f, void** params, void** extra,
                          Node* out) {
    unsigned int g[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    unsigned int b[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    static const CUdevice_attribute glim[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
    static const CUdevice_attribute blim[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
    for (int i = 0; i < 3; i++) {
        if (g[i] == 0 || g[i] > (unsigned)device_attribute(glim[i]))
            return fail(CUDA_ERROR_INVALID_VALUE, "grid dimension %d is %u", i, g[i]);
        if (b[i] == 0 || b[i] > (unsigned)device_attribute(blim[i]))
            return fail(CUDA_ERROR_INVALID_VALUE, "block dimension %d is %u", i, b[i]);
    }
    unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    if (threads > (unsigned long long)f->max_threads)
        return fail(CUDA_ERROR_INVALID_VALUE, "%llu threads, kernel %s allows %d", threads, f->name, f->max_threads);
    if (c->numAttrs && !c->attrs) return fail(CUDA_ERROR_INVALID_VALUE, "numAttrs %u, attrs NULL", c->numAttrs);
    /* The dynamic shared memory the launch may have: the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES,
     * unless a shared memory mode (cuda.h 13.2) overrides it: the portable 48 KiB, or the
     * device's opt-in limit (this device has no oversized shared memory: modes 3 and 4 allow
     * no more than 2 does). */
    unsigned int mode = c->numAttrs ? shmem_mode(c->attrs, c->numAttrs) : 0;
    long long allowed = mode == 0 ? f->max_dynamic_shared
        : (long long)device_attribute(mode == 1 ? CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
                                                : CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
          - f->static_shared;
    if ((long long)c->sharedMemBytes > allowed)
        return fail(CUDA_ERROR_INVALID_VALUE, "dynamic shared %u > %lld allowed for %s (shared "
                    "memory mode %u)", c->sharedMemBytes, allowed, f->name, mode);
    int pdl = 0;
    CUresult e = check_attrs(c->attrs, c->numAttrs, g, threads, c->sharedMemBytes, f, &pdl);
    if (e) return e;
    if (extra) return fail(CUDA_ERROR_INVALID_VALUE, "extra is not modelled");
    if (f->nparams && !params) return fail(CUDA_ERROR_INVALID_VALUE, "kernelParams NULL for %d parameters", f->nparams);
    Node* node = out;
    for (int i = 0; i < f->nparams; i++) {
        if (!params[i]) return fail(CUDA_ERROR_INVALID_VALUE, "kernelParams[%d] is NULL", i);
        if (f->offset[i] + f->size[i] > sizeof node->params)
            return fail(CUDA_ERROR_INVALID_VALUE, "parameters over 4 KiB not modelled");
        memcpy(node->params + f->offset[i], params[i], f->size[i]);   /* reads every byte */
    }
    node->func = f;
    memcpy(node->grid, g, sizeof g);
    memcpy(node->block, b, sizeof b);
    node->shmem = c->sharedMemBytes;
    node->pdl = pdl;
    node->launch_order = 0;
    node->nattrs = 0;
    node->device_updatable = 0;
    node->disabled = 0;
    return CUDA_SUCCESS;
}
static CUresult launch(const CUlaunchConfig* c, CUfunction h, void** params, void** extra) {
    Func* f;
    Stream* s;
    evict_caches();
    CUresult e = get_launchable(h, &f, "launch");
    if (e) return e;
    Ctx* ctx = current();
    if (!ctx) return fail(CUDA_ERROR_INVALID_CONTEXT, "launch without a current context");
    if (((Module*)f->module)->ctx && ((Module*)f->module)->ctx != ctx)
        return fail(CUDA_ERROR_INVALID_HANDLE, "kernel %s belongs to another context", f->name);
    if ((e = get_stream(c->hStream, &s, "launch"))) return e;
    if (s->ctx != ctx) return fail(CUDA_ERROR_INVALID_HANDLE, "the stream belongs to another context");
    static __thread Node node;
    if ((e = make_node(c, f, params, extra, &node))) return e;
    node.magic = 0;
    node.graph = NULL;
    if (s->capture) {
        /* A captured launch is a kernel node of the graph, with its launch's attributes but
         * those a capture makes edges of (cuGraphKernelNodeSetAttribute refuses them too). */
        node.magic = M_NODE;
        node.graph = s->capture;
        for (unsigned int i = 0; i < c->numAttrs && node.nattrs < 16; i++) {
            int id = (int)c->attrs[i].id;
            if (id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                && id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
                && id != CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
                node.attrs[node.nattrs++] = c->attrs[i];
        }
    }
    const unsigned int* g = node.grid;
    const unsigned int* b = node.block;
    size_t total = f->nparams ? (size_t)f->offset[f->nparams - 1] + f->size[f->nparams - 1] : 0;
    if (s->capture) {
        if (s->capture->nnodes == MAX_NODES)
            return fail(CUDA_ERROR_INVALID_VALUE, "over %d captured launches not modelled", MAX_NODES);
        s->capture->nodes[s->capture->nnodes++] = node;
    } else if ((e = run_kernel(&node))) {
        return e;
    }
    trace("launch %s grid (%u,%u,%u) block (%u,%u,%u) shmem %u stream %p%s, %d params, %zu bytes",
          f->name, g[0], g[1], g[2], b[0], b[1], b[2], c->sharedMemBytes, (void*)c->hStream,
          s->capture ? " (captured)" : "", f->nparams, total);
    return CUDA_SUCCESS;
}
/* Kernels are not run, but the test suite's are emulated by name, so that the tests get past
 * their read-backs and exercise what follows. Every write goes through check_range: a pointer
 * that is not live device memory (say, an argument freed while a graph still uses it) fails
 * the launch with CUDA_ERROR_ILLEGAL_ADDRESS, as the GPU would (there, stickily). */
#define P(type, i) (*(type*)(n->params + f->offset[i]))
#define PTR(type, i, count) ((type*)(uintptr_t)P(uint64_t, i))
static CUresult store(uintptr_t p, const void* v, size_t size, const char* kernel) {
    if (check_range(p, size, kernel)) return fail(CUDA_ERROR_ILLEGAL_ADDRESS,
        "kernel %s wrote to 0x%lx, which is not live device memory", kernel, p);
    memcpy((void*)p, v, size);
    return CUDA_SUCCESS;
}
static CUresult load(uintptr_t p, void* v, size_t size, const char* kernel) {
    if (check_range(p, size, kernel)) return fail(CUDA_ERROR_ILLEGAL_ADDRESS,
        "kernel %s read 0x%lx, which is not live device memory", kernel, p);
    memcpy(v, (void*)p, size);
    return CUDA_SUCCESS;
}
/* A kernel's own name: its symbol, or for a C++ kernel in a namespace (a nested mangled
 * name, _ZN2ns4fillEPffi) its name within it ("fill"), which `fill` is emulated by. */
static const char* emulated_name(const char* sym, char* buf, size_t cap) {
    if (strncmp(sym, "_ZN", 3)) return sym;
    const char* p = sym + 3;
    const char* last = NULL;
    long len = 0;
    while (*p >= '0' && *p <= '9') {
        char* end;
        len = strtol(p, &end, 10);
        if (len <= 0 || (size_t)len >= cap || strlen(end) < (size_t)len) return sym;
        last = end;
        p = end + len;
    }
    if (!last || (*p != 'E' && *p != 'I')) return sym;
    snprintf(buf, cap, "%.*s", (int)len, last);
    return buf;
}
static CUresult run_kernel(const Node* n) {
    const Func* f = n->func;
    const char* k = f->name;
    char buf[sizeof f->name];
    const char* own = emulated_name(k, buf, sizeof buf);
    /* The emulated kernels index by blockIdx.x * blockDim.x + threadIdx.x (lb: threadIdx.x)
     * alone, so the threads of a block's y and z write the same elements as its x row: the
     * elements written are grid.x * block.x, whatever the other dimensions. */
    unsigned long long span = (unsigned long long)n->grid[0] * n->block[0];
    uintptr_t out = f->nparams ? (uintptr_t)P(uint64_t, 0) : 0;
    CUresult e = CUDA_SUCCESS;
    if (!strcmp(own, "fill")) {               /* (float* x, float v, int n), ns::fill too */
        float v = P(float, 1);
        for (long long i = 0; !e && i < P(int, 2) && i < (long long)span; i++)
            e = store(out + 4 * i, &v, 4, k);
    } else if (!strcmp(k, "put") || !strcmp(k, "add")) {   /* (long long*, long long, double[, bool]) */
        long long v = P(long long, 1) + (long long)P(double, 2) + (f->nparams > 3 && P(char, 3));
        e = store(out, &v, 8, k);
    } else if (!strcmp(k, "echo") || !strcmp(k, "echo_more") || !strcmp(k, "echo_small")) {
        for (int i = 1; !e && i < f->nparams; i++)     /* each parameter to its block offset */
            e = store(out + f->offset[i], n->params + f->offset[i], f->size[i], k);
    } else if (!strncmp(k, "_Z6scaledI", 10)) {        /* scaled<T, SCALE>(T*, T, int) */
        char t = k[10];
        int scale = 2;
        sscanf(k + 11, "Li%dE", &scale);
        for (long long i = 0; !e && i < P(int, 2) && i < (long long)span; i++) {
            if (t == 'f') { float v = P(float, 1) * scale; e = store(out + 4 * i, &v, 4, k); }
            else { double v = P(double, 1) * scale; e = store(out + 8 * i, &v, 8, k); }
        }
    } else if (!strcmp(k, "job_axpy")) {   /* (Job{const float* x; float* y; int n; Scale{float a; int shift} s}) */
        const char* job = (const char*)n->params + f->offset[0];     /* x, y, n, s.a, s.shift */
        uintptr_t x = (uintptr_t)*(const uint64_t*)job, y = (uintptr_t)*(const uint64_t*)(job + 8);
        int count = *(const int*)(job + 16), shift = *(const int*)(job + 24);
        float a = *(const float*)(job + 20);
        for (long long i = 0; !e && i < count && i < (long long)span; i++) {
            float xv, yv;
            e = load(x + 4 * i, &xv, 4, k);
            if (!e) e = load(y + 4 * i, &yv, 4, k);
            yv = a * xv + yv + shift;
            if (!e) e = store(y + 4 * i, &yv, 4, k);
        }
    } else if (!strcmp(k, "axpy_methods")) {  /* (Axpy{const float* x; float* y; int n; float a}) */
        const char* p = (const char*)n->params + f->offset[0];       /* y[i] += a * x[i], i < n */
        uintptr_t x = (uintptr_t)*(const uint64_t*)p, y = (uintptr_t)*(const uint64_t*)(p + 8);
        int count = *(const int*)(p + 16);
        float a = *(const float*)(p + 20);
        for (long long i = 0; !e && i < count && i < (long long)span; i++) {
            float xv, yv;
            e = load(x + 4 * i, &xv, 4, k);
            if (!e) e = load(y + 4 * i, &yv, 4, k);
            yv += a * xv;
            if (!e) e = store(y + 4 * i, &yv, 4, k);
        }
    } else if (!strcmp(k, "mode_of")) {  /* (Mode{unsigned relu : 1, scale : 4; int bias : 5}, int* out) */
        uint32_t w = *(const uint32_t*)((const char*)n->params + f->offset[0]);
        int v[3] = {(int)(w & 1), (int)((w >> 1) & 15), (int)((w >> 5) & 31)};
        if (v[2] & 16) v[2] -= 32;                                  /* bias: signed, 5 bits */
        e = store((uintptr_t)P(uint64_t, 1), v, 12, k);
    } else if (!strcmp(k, "twice_shape")) {  /* (Twice{}, const float* x, float* out, Shape) */
        const char* sh = (const char*)n->params + f->offset[3];     /* int dims; long long[4] */
        long long count = 1;
        for (int d = 0; d < *(const int*)sh && d < 4; d++) count *= ((const long long*)(sh + 8))[d];
        for (long long i = 0; !e && i < count && i < 64; i++) {     /* (one thread: all) */
            float v;
            e = load((uintptr_t)P(uint64_t, 1) + 4 * i, &v, 4, k);
            v *= 2;
            if (!e) e = store((uintptr_t)P(uint64_t, 2) + 4 * i, &v, 4, k);
        }
    } else if (!strcmp(k, "span_sum")) {    /* (cuda::std::span<const float> x, float* out) */
        uintptr_t x = (uintptr_t)P(uint64_t, 0);
        unsigned long long count = *(const uint64_t*)((const char*)n->params + f->offset[0] + 8);
        float v[2] = {0, (float)count}, xv;
        for (unsigned long long i = 0; !e && i < count && i < 64; i++) {
            e = load(x + 4 * i, &xv, 4, k);
            v[0] += xv;
        }
        if (!e) e = store((uintptr_t)P(uint64_t, 1), v, 8, k);
    } else if (!strcmp(k, "tagged")) {   /* (Op{float* out; int kind; union { float f; int i; }}) */
        const char* p = (const char*)n->params + f->offset[0];       /* out[0] = kind ? i : f */
        float v = *(const int*)(p + 8) == 0 ? *(const float*)(p + 12) : (float)*(const int*)(p + 12);
        e = store((uintptr_t)*(const uint64_t*)p, &v, 4, k);
    } else if (!strcmp(k, "refs")) {   /* (const float& x, float& out, const Pair& p, float*& q) */
        float x, b;
        int a;
        uint64_t q;
        e = load((uintptr_t)P(uint64_t, 0), &x, 4, k);
        if (!e) e = load((uintptr_t)P(uint64_t, 2), &a, 4, k);
        if (!e) e = load((uintptr_t)P(uint64_t, 2) + 4, &b, 4, k);
        if (!e) e = load((uintptr_t)P(uint64_t, 3), &q, 8, k);
        float v = 2.0f * x + b, w = (float)a;
        if (!e) e = store((uintptr_t)P(uint64_t, 1), &v, 4, k);
        if (!e) e = store((uintptr_t)q, &w, 4, k);
    } else if (!strcmp(k, "array_refs")) {   /* (const float (&v)[3], float (*rows)[2], int (&out)[2]) */
        float v[3], sum;
        int o[2];
        uintptr_t vp = (uintptr_t)P(uint64_t, 0);
        for (int i = 0; !e && i < 3; i++) e = load(vp + 4 * i, &v[i], 4, k);
        sum = v[0] + v[1] + v[2];
        o[0] = (int)v[2];
        o[1] = 5;
        if (!e) e = store((uintptr_t)P(uint64_t, 1) + 8, &sum, 4, k);     /* rows[1][0] */
        if (!e) e = store((uintptr_t)P(uint64_t, 2), o, 8, k);
    } else if (!strcmp(k, "_ZN2ns5sevenEPx")) {
        long long v = 7;
        e = store(out, &v, 8, k);
    } else if (!strcmp(k, "slow_write")) {
        int v = 1234;
        e = store(out, &v, 4, k);
    } else if (!strcmp(k, "copy")) {
        int v;
        e = load((uintptr_t)P(uint64_t, 1), &v, 4, k);
        if (!e) e = store(out, &v, 4, k);
    } else if (!strcmp(k, "ids") || !strcmp(k, "paired")) {    /* paired: ids of 1 thread */
        for (unsigned long long b = 0; !e && b < n->grid[0]; b++)
            for (unsigned long long t = 0; !e && t < n->block[0]; t++) {
                int v = (int)b;
                e = store(out + 4 * (b * n->block[0] + t), &v, 4, k);
            }
    } else if (!strcmp(k, "dyn") || !strcmp(k, "both") || !strcmp(k, "big")) {  /* (float* out, int n) */
        int m = P(int, 1);
        if ((unsigned long long)m * 4 > n->shmem) return fail(CUDA_ERROR_ILLEGAL_ADDRESS,
            "kernel %s: %d floats of shared memory, %u bytes given", k, m, n->shmem);
        float v = (float)(m - 1) + !strcmp(k, "both");
        e = store(out, &v, 4, k);
    } else if (!strcmp(k, "use_globals")) {    /* (int* out, int n), see tests/gpu GLOBALS */
        const Global *coeffs = find_global(f, "coeffs"), *table = find_global(f, "table"),
                     *bias = find_global(f, "_ZN2ns4biasE"), *count = find_global(f, "launches");
        if (!coeffs || !table || !bias || !count)
            return fail(CUDA_ERROR_INVALID_IMAGE, "kernel %s: a variable is missing", k);
        for (long long i = 0; !e && i < P(int, 1) && i < (long long)span; i++) {
            int v = ((int*)table->ptr)[i % 3] * (int)((float*)coeffs->ptr)[i % 3] + *(int*)bias->ptr;
            e = store(out + 4 * i, &v, 4, k);
        }
        if (!e) *(unsigned int*)count->ptr += 1;
    } else if (!strcmp(k, "tex_copy")) {      /* (cudaTextureObject_t t, float* out, int n) */
        unsigned long long t = (unsigned long long)P(uint64_t, 0);
        out = (uintptr_t)P(uint64_t, 1);
        if (t == 0 || t > MAX_TEXTURES || !textures[t - 1].live)
            return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: texture object %llu", k, t);
        for (long long i = 0; !e && i < P(int, 2) && i < (long long)span; i++) {
            float v = 0;        /* tex1Dfetch: 0 past the end */
            if ((size_t)(4 * i + 4) <= textures[t - 1].size) e = load(textures[t - 1].ptr + 4 * i, &v, 4, k);
            if (!e) e = store(out + 4 * i, &v, 4, k);
        }
    } else if (!strcmp(k, "tmap_echo")) {    /* (unsigned long long* out, CUtensorMap m) */
        e = store(out, n->params + f->offset[1], 128, k);
    } else if (!strcmp(k, "tma_tile")) {     /* (float* out, CUtensorMap m, int x, int y) */
        FakeTensorMap m;
        memcpy(&m, n->params + f->offset[1], sizeof m);
        if (m.magic != TMAP_MAGIC || m.rank != 2 || m.elem != 4)
            return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: not a 2-D float tensor map "
                        "made by cuTensorMapEncodeTiled", k);
        long long x = P(int, 2), y = P(int, 3);
        for (uint64_t r = 0; !e && r < m.box[1]; r++)
            for (uint64_t c = 0; !e && c < m.box[0]; c++) {
                float v = 0;        /* out of bounds: zero, as the TMA fills */
                if ((uint64_t)(y + r) < m.dims[1] && (uint64_t)(x + c) < m.dims[0])
                    e = load(m.address + (y + r) * m.strides[0] + 4 * (x + c), &v, 4, k);
                if (!e) e = store(out + 4 * (r * m.box[0] + c), &v, 4, k);
            }
    } else if (!strcmp(k, "pdl_first")) {    /* (int* x, int* flag, long long spin) */
        int v[2] = {41, 0};                   /* x[1]: it saw no dependent start */
        e = store(out, v, 8, k);
    } else if (!strcmp(k, "pdl_second")) {   /* (const int* x, int* flag, int* y) */
        int one = 1, x;
        e = store((uintptr_t)P(uint64_t, 1), &one, 4, k);
        if (!e) e = load(out, &x, 4, k);
        x += 1;
        if (!e) e = store((uintptr_t)P(uint64_t, 2), &x, 4, k);
        /* A programmatic dependent launch starts while its primary still runs, which then sees
         * the flag: what the GPU shows, emulated after the fact. */
        if (!e && n->pdl) e = store(out + 4, &one, 4, k);
    } else if (!strcmp(k, "order_first")) {  /* (int* seen, const int* flag, long long spin) */
        int zero = 0;                         /* it saw no flag: nothing ran alongside */
        e = store(out, &zero, 4, k);
    } else if (!strcmp(k, "order_second")) { /* (int* flag, int* seen) */
        int one = 1;
        e = store(out, &one, 4, k);
        /* After a launch-order edge it starts once the first's blocks have: the first then
         * sees the flag, emulated after the fact as for pdl_second. */
        if (!e && n->launch_order) e = store((uintptr_t)P(uint64_t, 1), &one, 4, k);
    } else if (!strcmp(k, "arch_value")) {   /* (int* out, int v) */
        int v = P(int, 1);
        e = store(out, &v, 4, k);
    } else if (!strcmp(k, "node_set_param")) {
        /* (cudaGraphDeviceNode_t node, size_t offset, int v): cudaGraphKernelNodeSetParam(node,
         * offset, v), into the one executable graph of the node's graph. A handle that is no
         * device node, a graph never instantiated or an offset past the node's parameters
         * fail the launch here (on a GPU the call returns an error in the kernel). */
        uintptr_t h = (uintptr_t)P(uint64_t, 0);
        size_t offset = (size_t)P(uint64_t, 1);
        int v = P(int, 2);
        Node* target = (Node*)(h & ~(uintptr_t)1);
        if (!(h & 1) || target->magic != M_NODE || !target->device_updatable || !target->graph
                || target->graph->magic != M_GRAPH)
            return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: %#lx is no device node", k,
                        (unsigned long)h);
        pthread_mutex_lock(&lock);
        Exec* x = exec_of(target->graph);
        pthread_mutex_unlock(&lock);
        if (!x) return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: the node's graph has no "
                            "executable graph", k);
        Node* live = &x->snapshot.nodes[target - target->graph->nodes];
        const Func* tf = live->func;
        size_t end = tf->nparams ? (size_t)tf->offset[tf->nparams - 1] + tf->size[tf->nparams - 1] : 0;
        if (offset > end || end - offset < sizeof v)
            return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "kernel %s: offset %zu past the node's %zu "
                        "bytes of parameters", k, offset, end);
        memcpy(live->params + offset, &v, sizeof v);
    } else if (!strcmp(k, "cdp_parent")) {   /* (int* out, int v, int n): child<<<1, n>>> stores v */
        int v = P(int, 1);
        for (int i = 0; !e && i < P(int, 2); i++) e = store(out + 4 * (uintptr_t)i, &v, 4, k);
    } else if (!strcmp(k, "rdc_value")) {    /* (int* out, int v): v + __device__ int offset */
        const Global* offset = find_global(f, "offset");
        if (!offset) return fail(CUDA_ERROR_INVALID_IMAGE, "kernel %s: no variable offset", k);
        int v = P(int, 1) + *(int*)offset->ptr;
        e = store(out, &v, 4, k);
    } else if (!strcmp(k, "lb")) {
        for (unsigned long long t = 0; !e && t < n->block[0]; t++) {
            int v = (int)t;
            e = store(out + 4 * t, &v, 4, k);
        }
    }
    return e;
}

/* Graphs built node by node (cuGraphCreate, cuGraphAddKernelNode), and a kernel node's parameters
 * set again in its graph or in a graph instantiated from it. Nodes run in the order they were
 * added, each after its dependencies (which must be earlier nodes of the same graph). */
static CUresult fk_GraphCreate(CUgraph* out, unsigned int flags) {
    if (!out || flags) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphCreate(flags=%u)", flags);
    Graph* g = calloc(1, sizeof *g);
    g->magic = M_GRAPH;
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}
/* A device-updatable node's CUgraphDeviceNode: its address with the low bit set (a Node is
 * aligned), so that it is no CUgraphNode. */
static CUgraphDeviceNode device_node_of(const Node* n) {
    return (CUgraphDeviceNode)((uintptr_t)n | 1);
}
static CUresult get_node(CUgraphNode h, Node** out, const char* what) {
    Node* n = (Node*)h;
    if (!n || n->magic != M_NODE || !n->graph || n->graph->magic != M_GRAPH)
        return fail(CUDA_ERROR_INVALID_VALUE, "%s: node %p", what, (void*)h);
    *out = n;
    return CUDA_SUCCESS;
}
/* The node CUDA_KERNEL_NODE_PARAMS describe, checked as a launch of them would be. */
static CUresult node_from_params(const CUDA_KERNEL_NODE_PARAMS* p, Node* out, const char* what) {
    Func* f;
    if (!p) return fail(CUDA_ERROR_INVALID_VALUE, "%s: no parameters", what);
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "%s without a current context", what);
    /* func, a CUfunction (a CUkernel there is refused); or, where func is NULL, kern, a
     * CUkernel (cuda.core's), run in ctx or the current context. */
    CUresult e = p->func ? get_func(p->func, &f, what)
               : p->kern ? get_kernel(p->kern, &f, what)
               : fail(CUDA_ERROR_INVALID_VALUE, "%s: func and kern are NULL", what);
    if (e) return e;
    if (p->ctx && ((Ctx*)p->ctx)->magic != M_CTX)
        return fail(CUDA_ERROR_INVALID_CONTEXT, "%s: ctx %p", what, (void*)p->ctx);
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = p->gridDimX;
    c.gridDimY = p->gridDimY;
    c.gridDimZ = p->gridDimZ;
    c.blockDimX = p->blockDimX;
    c.blockDimY = p->blockDimY;
    c.blockDimZ = p->blockDimZ;
    c.sharedMemBytes = p->sharedMemBytes;
    return make_node(&c, f, p->kernelParams, p->extra, out);
}
/* What adding any node checks: the graph, the out pointer, that each dependency is a node of
 * that graph, and room for one node more. */
static CUresult check_add(CUgraph gh, CUgraphNode* out, const CUgraphNode* deps, size_t ndeps,
                          const char* what) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "%s: graph %p", what, (void*)gh);
    if (!out || (ndeps && !deps)) return fail(CUDA_ERROR_INVALID_VALUE, "%s", what);
    for (size_t i = 0; i < ndeps; i++) {
        Node* d;
        CUresult e = get_node(deps[i], &d, what);
        if (e) return e;
        if (d->graph != g)
            return fail(CUDA_ERROR_INVALID_VALUE, "%s: dependency %zu is a node of another graph",
                        what, i);
    }
    if (g->nnodes == MAX_NODES)
        return fail(CUDA_ERROR_INVALID_VALUE, "over %d nodes a graph not modelled", MAX_NODES);
    if (g->nedges + (int)ndeps > MAX_EDGES)
        return fail(CUDA_ERROR_INVALID_VALUE, "over %d edges a graph not modelled", MAX_EDGES);
    return CUDA_SUCCESS;
}
/* One more edge of `g`, from node `from` to node `to`, with `data` (NULL: a plain edge); the
 * caller has checked there is room. */
static void add_edge(Graph* g, CUgraphNode from, CUgraphNode to, const CUgraphEdgeData* data) {
    Edge* edge = &g->edges[g->nedges++];
    memset(edge, 0, sizeof *edge);
    edge->from = (int)((Node*)from - g->nodes);
    edge->to = (int)((Node*)to - g->nodes);
    if (data) edge->data = *data;
}
/* The plain edges from `deps` to the node about to be added at index `to` (check_add passed). */
static void add_plain_edges(Graph* g, const CUgraphNode* deps, size_t ndeps, int to) {
    for (size_t i = 0; i < ndeps; i++) add_edge(g, deps[i], (CUgraphNode)&g->nodes[to], NULL);
}
static CUresult fk_GraphAddKernelNode(CUgraphNode* out, CUgraph gh, const CUgraphNode* deps,
                                      size_t ndeps, const CUDA_KERNEL_NODE_PARAMS* p) {
    Graph* g = (Graph*)gh;
    Node node;
    CUresult e = check_add(gh, out, deps, ndeps, "cuGraphAddKernelNode");
    if (!e) e = node_from_params(p, &node, "cuGraphAddKernelNode");
    if (e) return e;
    node.magic = M_NODE;
    node.graph = g;
    g->nodes[g->nnodes] = node;
    add_plain_edges(g, deps, ndeps, g->nnodes);
    *out = (CUgraphNode)&g->nodes[g->nnodes++];
    trace("graph %p: kernel node %d, %s", (void*)g, g->nnodes - 1, node.func->name);
    return CUDA_SUCCESS;
}
static CUresult fk_GraphAddEmptyNode(CUgraphNode* out, CUgraph gh, const CUgraphNode* deps,
                                     size_t ndeps) {
    /* A node that runs nothing (cuda.core's GraphDefinition.empty()): func NULL. */
    Graph* g = (Graph*)gh;
    CUresult e = check_add(gh, out, deps, ndeps, "cuGraphAddEmptyNode");
    if (e) return e;
    add_plain_edges(g, deps, ndeps, g->nnodes);
    Node* n = &g->nodes[g->nnodes++];
    memset(n, 0, sizeof *n);
    n->magic = M_NODE;
    n->graph = g;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}
/* A node's type: a kernel node, or an empty one (func NULL). */
static CUresult fk_GraphNodeGetType(CUgraphNode h, CUgraphNodeType* type) {
    Node* n;
    CUresult e = get_node(h, &n, "cuGraphNodeGetType");
    if (e) return e;
    if (!type) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetType: type NULL");
    *type = n->func ? CU_GRAPH_NODE_TYPE_KERNEL : CU_GRAPH_NODE_TYPE_EMPTY;
    return CUDA_SUCCESS;
}
/* A kernel node's parameters: its CUfunction (whether it was given as one or as a CUkernel),
 * its shape, and kernelParams pointing into the node's own copy of the values. */
static CUresult fk_GraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS* p) {
    Node* n;
    static __thread void* args[MAX_PARAMS];
    CUresult e = get_node(h, &n, "cuGraphKernelNodeGetParams");
    if (e) return e;
    if (!n->func || !p) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphKernelNodeGetParams: not a kernel node");
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)n->func;
    p->gridDimX = n->grid[0];
    p->gridDimY = n->grid[1];
    p->gridDimZ = n->grid[2];
    p->blockDimX = n->block[0];
    p->blockDimY = n->block[1];
    p->blockDimZ = n->block[2];
    p->sharedMemBytes = n->shmem;
    for (int i = 0; i < n->func->nparams; i++) args[i] = n->params + n->func->offset[i];
    p->kernelParams = args;
    return CUDA_SUCCESS;
}
/* A node's attributes stay when its parameters are set again, and must hold for the new ones. */
static CUresult keep_attrs(Node* node, const Node* old) {
    int pdl;
    unsigned long long threads = (unsigned long long)node->block[0] * node->block[1] * node->block[2];
    node->nattrs = old->nattrs;
    memcpy(node->attrs, old->attrs, sizeof old->attrs);
    node->pdl = old->pdl;           /* a programmatic edge's, which new parameters keep */
    node->launch_order = old->launch_order;
    node->device_updatable = old->device_updatable;
    node->disabled = old->disabled;         /* new parameters leave a node as enabled as it was */
    return check_attrs(node->attrs, node->nattrs, node->grid, threads, node->shmem, node->func, &pdl);
}
static CUresult fk_GraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS* p) {
    Node* n;
    static __thread Node node;
    CUresult e = get_node(h, &n, "cuGraphKernelNodeSetParams");
    if (!e) e = node_from_params(p, &node, "cuGraphKernelNodeSetParams");
    if (!e) e = keep_attrs(&node, n);
    if (e) return e;
    node.magic = M_NODE;
    node.graph = n->graph;
    *n = node;
    return CUDA_SUCCESS;
}
/* A kernel node's launch attributes, checked as a launch's would be (with the node's grid,
 * block and kernel), but for those cuda.h says are valid for launches only: programmatic stream
 * serialization (a graph expresses it with programmatic edges) and the two events. */
static CUresult fk_GraphKernelNodeSetAttribute(CUgraphNode h, CUkernelNodeAttrID id,
                                               const CUkernelNodeAttrValue* value) {
    Node* n;
    int pdl;
    CUresult e = get_node(h, &n, "cuGraphKernelNodeSetAttribute");
    if (e) return e;
    if (!n->func || !value)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphKernelNodeSetAttribute: not a kernel node");
    /* FAKECUDA_REFUSE_NODE_ATTRIBUTE=<id>: refuse that attribute, as a driver without it
     * would (for tests of what a refused attribute leaves behind). */
    const char* refuse = getenv("FAKECUDA_REFUSE_NODE_ATTRIBUTE");
    if (refuse && *refuse && atoi(refuse) == (int)id)
        return fail(CUDA_ERROR_NOT_SUPPORTED, "cuGraphKernelNodeSetAttribute: attribute %d "
                    "refused (FAKECUDA_REFUSE_NODE_ATTRIBUTE)", (int)id);
    if (id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        || id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT || id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphKernelNodeSetAttribute: attribute %d is "
                    "valid for launches only", (int)id);
    if (id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
        /* cuda.h 12.4: 0 or 1, and a node that opted in cannot opt out. The handle is the
         * node's for cuGraphKernelNodeGetAttribute (value is const here). */
        int v = value->deviceUpdatableKernelNode.deviceUpdatable;
        if (driver_version() < 12040)
            return fail(CUDA_ERROR_INVALID_VALUE, "launch attribute %d is newer than driver %d",
                        (int)id, driver_version());
        if (v != 0 && v != 1)
            return fail(CUDA_ERROR_INVALID_VALUE, "deviceUpdatable %d (0 or 1)", v);
        if (!v && n->device_updatable)
            return fail(CUDA_ERROR_INVALID_VALUE, "a device-updatable node cannot opt out");
        n->device_updatable |= v;
        trace("graph %p: node %d device-updatable", (void*)n->graph, (int)(n - n->graph->nodes));
        return CUDA_SUCCESS;
    }
    CUlaunchAttribute attrs[16];
    unsigned int count = n->nattrs, i;
    memcpy(attrs, n->attrs, sizeof attrs);
    for (i = 0; i < count && attrs[i].id != id; i++) {}
    if (i == count) {
        if (count == 16) return fail(CUDA_ERROR_INVALID_VALUE, "over 16 node attributes not modelled");
        count++;
    }
    memset(&attrs[i], 0, sizeof attrs[i]);
    attrs[i].id = id;
    attrs[i].value = *value;
    unsigned long long threads = (unsigned long long)n->block[0] * n->block[1] * n->block[2];
    if ((e = check_attrs(attrs, count, n->grid, threads, n->shmem, n->func, &pdl))) return e;
    memcpy(n->attrs, attrs, sizeof attrs);
    n->nattrs = count;
    trace("graph %p: node %d, attribute %d", (void*)n->graph, (int)(n - n->graph->nodes), (int)id);
    return CUDA_SUCCESS;
}
static CUresult fk_GraphKernelNodeGetAttribute(CUgraphNode h, CUkernelNodeAttrID id,
                                               CUkernelNodeAttrValue* out) {
    Node* n;
    CUresult e = get_node(h, &n, "cuGraphKernelNodeGetAttribute");
    if (e) return e;
    if (!n->func || !out)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphKernelNodeGetAttribute: not a kernel node");
    memset(out, 0, sizeof *out);        /* an attribute never set: its zero value */
    if (id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE && n->device_updatable) {
        out->deviceUpdatableKernelNode.deviceUpdatable = 1;
        out->deviceUpdatableKernelNode.devNode = device_node_of(n);
    }
    for (unsigned int i = 0; i < n->nattrs; i++)
        if (n->attrs[i].id == id) *out = n->attrs[i].value;
    return CUDA_SUCCESS;
}
/* Edges added after the nodes, with edge data (the ABI of cuGraphAddDependencies_v2, 12.3+).
 * Nodes run in the order they were added, so an edge orders nothing here; what is checked is
 * that both ends are nodes of the graph, the later one added after, and that a programmatic
 * edge (CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) joins kernel nodes from the programmatic or
 * launch-order port. The node it leads to then runs as a programmatic dependent launch. */
static CUresult fk_GraphAddDependencies_v2(CUgraph gh, const CUgraphNode* from, const CUgraphNode* to,
                                           const CUgraphEdgeData* data, size_t n) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: graph %p", (void*)gh);
    if (n && (!from || !to)) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: no nodes");
    for (size_t i = 0; i < n; i++) {
        Node *a, *b;
        CUresult e = get_node(from[i], &a, "cuGraphAddDependencies");
        if (!e) e = get_node(to[i], &b, "cuGraphAddDependencies");
        if (e) return e;
        if (a->graph != g || b->graph != g)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: edge %zu joins a node of another graph", i);
        if (a >= b) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: edge %zu to an earlier node not modelled", i);
        if (!data || data[i].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) {
            if (data && (data[i].from_port || data[i].to_port))
                return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: a default edge with ports");
            continue;
        }
        if (data[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: edge type %d", data[i].type);
        if (!a->func || !b->func)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: a programmatic edge joins kernel nodes only");
        if ((data[i].from_port != CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
             && data[i].from_port != CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER) || data[i].to_port)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphAddDependencies: programmatic edge ports %d, %d",
                        data[i].from_port, data[i].to_port);
        /* A launch-order edge is a launch completion event's (cuda.h: below cc 9.0 too). */
        if (cc < 90 && data[i].from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC)
            return fail(CUDA_ERROR_NOT_SUPPORTED, "programmatic edges need cc 9.0");
    }
    if (g->nedges + (int)n > MAX_EDGES)
        return fail(CUDA_ERROR_INVALID_VALUE, "over %d edges a graph not modelled", MAX_EDGES);
    /* The 13.0 driver gives every edge of one call into a node the data of the call's first
     * edge into it (an H200, session 85: tools/probes/graph_edges.py; "a order, b default" in
     * one call made both launch-order edges, with no error), so this does too. */
    for (size_t i = 0; i < n; i++) {
        size_t first = 0;
        while (to[first] != to[i]) first++;
        const CUgraphEdgeData* kept = data ? &data[first] : NULL;
        add_edge(g, from[i], to[i], kept);
        if (!kept || kept->type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) continue;
        if (kept->from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC) ((Node*)to[i])->pdl = 1;
        else ((Node*)to[i])->launch_order = 1;
    }
    return CUDA_SUCCESS;
}
static CUresult fk_GraphAddDependencies(CUgraph gh, const CUgraphNode* from, const CUgraphNode* to, size_t n) {
    return fk_GraphAddDependencies_v2(gh, from, to, NULL, n);    /* before 12.3: no edge data */
}
/* A destroyed node runs nothing and its handle is no node any more. */
static CUresult fk_GraphDestroyNode(CUgraphNode h) {
    Node* n;
    CUresult e = get_node(h, &n, "cuGraphDestroyNode");
    if (e) return e;
    if (n->device_updatable)        /* cuda.h: such a node stays in its graph */
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphDestroyNode: node %p is device-updatable", (void*)h);
    n->func = NULL;
    n->nattrs = 0;
    n->magic = 0;
    /* Its edges go with it. */
    Graph* g = n->graph;
    int at = (int)(n - g->nodes), kept = 0;
    for (int i = 0; i < g->nedges; i++)
        if (g->edges[i].from != at && g->edges[i].to != at) g->edges[kept++] = g->edges[i];
    g->nedges = kept;
    return CUDA_SUCCESS;
}
/* The graph's edges with their data (cuGraphGetEdges_v2's ABI, 12.3+): the count where `from`
 * is NULL; else up to *num of them, and LOSSY_QUERY where the data is not asked for and some
 * edge has some, as cuda.h says. */
static CUresult fk_GraphGetEdges_v2(CUgraph gh, CUgraphNode* from, CUgraphNode* to,
                                    CUgraphEdgeData* data, size_t* num) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphGetEdges: graph %p", (void*)gh);
    if (!num) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphGetEdges: numEdges is NULL");
    if (!from) {
        *num = (size_t)g->nedges;
        return CUDA_SUCCESS;
    }
    if (!to) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphGetEdges: from without to");
    /* Arrays for no edges are refused (the 13.0 driver, an H200, session 85). */
    if (*num == 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphGetEdges: arrays of no entries");
    size_t n = *num < (size_t)g->nedges ? *num : (size_t)g->nedges;
    int lossy = 0;
    for (size_t i = 0; i < n; i++) {
        const Edge* edge = &g->edges[i];
        from[i] = (CUgraphNode)&g->nodes[edge->from];
        to[i] = (CUgraphNode)&g->nodes[edge->to];
        if (data) data[i] = edge->data;
        else lossy |= edge->data.type || edge->data.from_port || edge->data.to_port;
    }
    for (size_t i = n; i < *num; i++) {
        from[i] = to[i] = NULL;
        if (data) memset(&data[i], 0, sizeof data[i]);
    }
    *num = n;
    return lossy ? fail(CUDA_ERROR_LOSSY_QUERY, "cuGraphGetEdges: edges with data, none asked") : CUDA_SUCCESS;
}
static CUresult fk_GraphGetEdges(CUgraph gh, CUgraphNode* from, CUgraphNode* to, size_t* num) {
    return fk_GraphGetEdges_v2(gh, from, to, NULL, num);      /* before 12.3: no edge data */
}
/* The graph's nodes: those added (kernel and empty nodes) or captured, less those destroyed. */
static CUresult fk_GraphGetNodes(CUgraph gh, CUgraphNode* nodes, size_t* num) {
    Graph* g = (Graph*)gh;
    if (!g || g->magic != M_GRAPH) return fail(CUDA_ERROR_INVALID_VALUE, "graph %p", (void*)gh);
    if (!num) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphGetNodes: numNodes is NULL");
    size_t n = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].magic != M_NODE && !g->nodes[i].func) continue;    /* destroyed */
        if (nodes && n < *num) nodes[n] = (CUgraphNode)&g->nodes[i];
        n++;
    }
    if (!nodes || n < *num) *num = n;
    return CUDA_SUCCESS;
}
/* A node of an executable graph, by the node of the graph it was instantiated from. */
static CUresult exec_node(CUgraphExec xh, CUgraphNode h, Node** out, const char* what) {
    Exec* x = (Exec*)xh;
    Node* n;
    if (!x || x->magic != M_EXEC) return fail(CUDA_ERROR_INVALID_VALUE, "%s: graph exec %p", what, (void*)xh);
    CUresult e = get_node(h, &n, what);
    if (e) return e;
    if (n->graph != x->source)
        return fail(CUDA_ERROR_INVALID_VALUE, "%s: the node is not of the graph this exec was "
                    "instantiated from", what);
    *out = &x->snapshot.nodes[n - n->graph->nodes];
    return CUDA_SUCCESS;
}
static CUresult fk_GraphExecKernelNodeSetParams(CUgraphExec xh, CUgraphNode h,
                                                const CUDA_KERNEL_NODE_PARAMS* p) {
    Node* live;
    Node node;
    CUresult e = exec_node(xh, h, &live, "cuGraphExecKernelNodeSetParams");
    if (e) return e;
    if ((e = node_from_params(p, &node, "cuGraphExecKernelNodeSetParams"))) return e;
    if ((e = keep_attrs(&node, live))) return e;
    if (((Module*)node.func->module)->ctx != ((Module*)live->func->module)->ctx)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphExecKernelNodeSetParams: a kernel of "
                    "another context than the node's");
    node.magic = M_NODE;
    node.graph = live->graph;
    *live = node;
    return CUDA_SUCCESS;
}
static CUresult fk_GraphNodeSetEnabled(CUgraphExec xh, CUgraphNode h, unsigned int enabled) {
    Node* n;
    CUresult e = exec_node(xh, h, &n, "cuGraphNodeSetEnabled");
    if (e) return e;
    if (!n->func) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeSetEnabled: kernel, memcpy "
                              "and memset nodes only");
    n->disabled = !enabled;
    return CUDA_SUCCESS;
}
static CUresult fk_GraphNodeGetEnabled(CUgraphExec xh, CUgraphNode h, unsigned int* enabled) {
    Node* n;
    CUresult e = exec_node(xh, h, &n, "cuGraphNodeGetEnabled");
    if (e) return e;
    if (!enabled) return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphNodeGetEnabled: isEnabled is NULL");
    *enabled = !n->disabled;
    return CUDA_SUCCESS;
}
static CUresult fk_GraphExecNodeSetParams(CUgraphExec xh, CUgraphNode h, CUgraphNodeParams* p) {
    /* The generic form (what cuda.core's ExecutableKernelNode.update calls): kernel nodes only.
     * CUDA_KERNEL_NODE_PARAMS_v3 is laid out as the v2 the rest of this file reads. */
    if (!p || p->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuGraphExecNodeSetParams: only kernel nodes are modelled");
    return fk_GraphExecKernelNodeSetParams(xh, h, (const CUDA_KERNEL_NODE_PARAMS*)&p->kernel);
}
static CUresult fk_LaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** x) {
    if (!c) return fail(CUDA_ERROR_INVALID_VALUE, "config NULL");
    return launch(c, f, p, x);
}
static CUresult fk_LaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shmem, CUstream s, void** p, void** x) {
    CUlaunchConfig c = {gx, gy, gz, bx, by, bz, shmem, s, NULL, 0};
    return launch(&c, f, p, x);
}

/* ------------------------------------------------------------------ memory API */
/* cuMemAlloc is refused during a capture in the global and thread-local modes, as by the
 * driver (tools/probes/capture_calls.py); cuMemAllocAsync is allowed (a graph's allocation
 * node there; this one allocates now). */
static CUresult mem_alloc(CUdeviceptr* p, size_t n, int in_capture_ok, const char* what) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "%s without a context", what);
    if (!n) return fail(CUDA_ERROR_INVALID_VALUE, "%s of 0 bytes", what);
    CUresult e = in_capture_ok ? CUDA_SUCCESS : unsafe_call(what);
    if (e) return e;
    *p = (CUdeviceptr)(uintptr_t)alloc_mem(n, CU_MEMORYTYPE_DEVICE);
    return *p ? CUDA_SUCCESS : fail(CUDA_ERROR_OUT_OF_MEMORY, "out of host memory");
}
static CUresult fk_MemAlloc(CUdeviceptr* p, size_t n) { return mem_alloc(p, n, 0, "cuMemAlloc"); }
static CUresult fk_MemAllocAsync(CUdeviceptr* p, size_t n, CUstream s) {
    (void)s;
    return mem_alloc(p, n, 1, "cuMemAllocAsync");
}
static CUresult fk_MemAllocManaged(CUdeviceptr* p, size_t n, unsigned int flags) {
    (void)flags;
    CUresult e = fk_MemAlloc(p, n);
    if (!e) find_alloc(*p)->type = -1;       /* managed */
    return e;
}
static CUresult fk_MemAllocHost(void** p, size_t n) {
    if (!current()) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuMemAllocHost without a context");
    *p = alloc_mem(n, CU_MEMORYTYPE_HOST);
    return *p ? CUDA_SUCCESS : fail(CUDA_ERROR_OUT_OF_MEMORY, "out of host memory");
}
static CUresult fk_MemHostAlloc(void** p, size_t n, unsigned int flags) { (void)flags; return fk_MemAllocHost(p, n); }
static CUresult fk_MemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int flags) {
    (void)flags;
    *d = (CUdeviceptr)(uintptr_t)p;
    return find_alloc((uintptr_t)p) ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_VALUE, "not pinned");
}
static CUresult fk_MemFree(CUdeviceptr p) { return free_mem((uintptr_t)p); }
static CUresult fk_MemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return free_mem((uintptr_t)p); }
static CUresult fk_MemFreeHost(void* p) { return free_mem((uintptr_t)p); }
static CUresult fk_MemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
    CUresult e = check_range((uintptr_t)src, n, "cuMemcpyDtoH source");
    if (!e) memcpy(dst, (void*)(uintptr_t)src, n);
    return e;
}
static CUresult fk_MemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
    CUresult e = check_range((uintptr_t)dst, n, "cuMemcpyHtoD destination");
    if (!e) memcpy((void*)(uintptr_t)dst, src, n);
    return e;
}
static CUresult fk_MemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    CUresult e = check_range((uintptr_t)dst, n, "cuMemcpyDtoD destination");
    if (!e) e = check_range((uintptr_t)src, n, "cuMemcpyDtoD source");
    if (!e) memmove((void*)(uintptr_t)dst, (void*)(uintptr_t)src, n);
    return e;
}
static CUresult fk_Memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    memmove((void*)(uintptr_t)dst, (void*)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
static CUresult fk_MemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { (void)s; return fk_Memcpy(dst, src, n); }
static CUresult fk_MemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) { (void)s; return fk_MemcpyDtoH(dst, src, n); }
static CUresult fk_MemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) { (void)s; return fk_MemcpyHtoD(dst, src, n); }
static CUresult fk_MemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
    CUresult e = check_range((uintptr_t)p, n, "cuMemsetD8");
    if (!e) memset((void*)(uintptr_t)p, v, n);
    return e;
}
static CUresult fk_MemsetD32(CUdeviceptr p, unsigned int v, size_t n) {
    CUresult e = check_range((uintptr_t)p, 4 * n, "cuMemsetD32");
    for (size_t i = 0; !e && i < n; i++) ((unsigned int*)(uintptr_t)p)[i] = v;
    return e;
}
static CUresult fk_MemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) { (void)s; return fk_MemsetD8(p, v, n); }
static CUresult fk_MemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s) { (void)s; return fk_MemsetD32(p, v, n); }
static CUresult fk_PointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
    Alloc* al = find_alloc((uintptr_t)p);
    if (!al) return fail(CUDA_ERROR_INVALID_VALUE, "pointer 0x%lx is not an allocation", (uintptr_t)p);
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data = (CUcontext)&primary[al->device]; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int*)data = al->type == -1 ? CU_MEMORYTYPE_UNIFIED : (unsigned int)al->type; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr*)data = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void**)data = (void*)(uintptr_t)p; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int*)data = al->type == -1; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)data = al->device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)data = al->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)data = al->size; break;
    default: return fail(CUDA_ERROR_INVALID_VALUE, "pointer attribute %d not modelled", (int)a);
    }
    return CUDA_SUCCESS;
}
/* As the driver documents it: a pointer that is no allocation is not an error here; each
 * attribute gets its null value (memory type 0, no context, device ordinal -2). */
static CUresult fk_PointerGetAttributes(unsigned int count, CUpointer_attribute* attrs,
                                        void** data, CUdeviceptr p) {
    Alloc* al = find_alloc((uintptr_t)p);
    for (unsigned int i = 0; i < count; i++) {
        CUresult e;
        if (al) {
            e = fk_PointerGetAttribute(data[i], attrs[i], p);
            if (e) return e;
            continue;
        }
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data[i] = NULL; break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int*)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr*)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void**)data[i] = NULL; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int*)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)data[i] = -2; break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)data[i] = 0; break;
        default: return fail(CUDA_ERROR_INVALID_VALUE, "pointer attribute %d not modelled",
                             (int)attrs[i]);
        }
    }
    return CUDA_SUCCESS;
}
static CUresult fk_MemGetInfo(size_t* free_b, size_t* total) {
    *free_b = (size_t)70 << 30;
    *total = (size_t)80 << 30;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ errors */
static const struct { CUresult code; const char* name; } error_names[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS"}, {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"}, {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"}, {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"}, {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE"},
};
static CUresult fk_GetErrorName(CUresult code, const char** out) {
    for (size_t i = 0; i < sizeof error_names / sizeof *error_names; i++)
        if (error_names[i].code == code) { *out = error_names[i].name; return CUDA_SUCCESS; }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
static CUresult fk_GetErrorString(CUresult code, const char** out) {
    CUresult e = fk_GetErrorName(code, out);
    if (!e) *out = last_error[0] ? last_error : *out;
    return e;
}

/* ------------------------------------------------------------------ lookup */
#define F(name) {#name, (void*)fk_##name}
static const struct { const char* name; void* fn; } table[] = {
    F(Init), F(DriverGetVersion), F(DeviceGetCount), F(DeviceGet), F(DeviceGetName),
    F(DeviceTotalMem), F(DeviceGetUuid), F(DeviceGetAttribute), F(DevicePrimaryCtxRetain),
    F(DevicePrimaryCtxRelease), F(DevicePrimaryCtxGetState), F(CtxGetCurrent), F(CtxSetCurrent),
    F(CtxPushCurrent), F(CtxPopCurrent), F(CtxDestroy), F(CtxGetDevice), F(CtxSynchronize),
    F(CtxGetApiVersion), F(CtxGetFlags), F(CtxGetStreamPriorityRange), F(CtxGetId),
    F(StreamCreate), F(StreamCreateWithPriority), F(StreamDestroy),
    F(StreamGetCtx), F(StreamSynchronize), F(StreamQuery), F(StreamGetPriority), F(StreamGetFlags),
    F(StreamGetId), F(StreamBeginCapture), F(StreamEndCapture), F(StreamIsCapturing),
    F(ThreadExchangeStreamCaptureMode),
    F(EventCreate), F(EventDestroy), F(EventRecord), F(EventRecordWithFlags), F(EventSynchronize),
    F(EventQuery), F(StreamWaitEvent), F(UserObjectCreate), F(UserObjectRelease),
    F(GraphRetainUserObject), F(GraphInstantiate), F(GraphInstantiateWithParams), F(GraphExecGetId),
    F(GraphReleaseUserObject), F(GraphLaunch), F(GraphUpload), F(OccupancyAvailableDynamicSMemPerBlock),
    F(OccupancyMaxPotentialClusterSize), F(OccupancyMaxActiveClusters), F(GraphNodeSetEnabled), F(GraphNodeGetEnabled), F(GraphExecDestroy), F(GraphCreate),
    F(GraphAddKernelNode), F(GraphAddEmptyNode), F(GraphKernelNodeSetParams),
    F(GraphKernelNodeSetAttribute), F(GraphKernelNodeGetAttribute), F(GraphDestroyNode), F(GraphGetNodes),
    F(GraphNodeGetType), F(GraphKernelNodeGetParams),
    F(GraphAddDependencies_v2),
    F(GraphExecKernelNodeSetParams), F(GraphExecNodeSetParams),
    F(GraphDestroy), F(ModuleLoadData), F(ModuleLoadDataEx), F(ModuleUnload), F(ModuleGetFunction),
    F(FuncGetAttribute), F(FuncSetAttribute), F(FuncGetParamInfo), F(FuncGetName),
    F(OccupancyMaxActiveBlocksPerMultiprocessor), F(OccupancyMaxPotentialBlockSize),
    F(ModuleGetGlobal), F(TexObjectCreate), F(TexObjectDestroy), F(TensorMapEncodeTiled),
    F(LaunchKernelEx), F(LaunchKernel), F(MemAlloc), F(MemAllocAsync), F(MemAllocManaged),
    F(MemAllocHost), F(MemHostAlloc), F(MemHostGetDevicePointer), F(MemFree), F(MemFreeAsync),
    F(MemFreeHost), F(MemcpyDtoH), F(MemcpyHtoD), F(MemcpyDtoD), F(Memcpy), F(MemcpyAsync),
    F(MemcpyDtoHAsync), F(MemcpyHtoDAsync), F(MemsetD8), F(MemsetD32), F(MemsetD8Async),
    F(MemsetD32Async), F(PointerGetAttribute), F(PointerGetAttributes), F(MemGetInfo), F(GetErrorName), F(GetErrorString),
    F(LibraryLoadData), F(LibraryUnload), F(LibraryGetKernel), F(LibraryGetModule),
    F(KernelGetFunction), F(KernelGetAttribute), F(KernelSetAttribute), F(KernelGetParamInfo),
    F(KernelGetName), F(FuncGetModule), F(LinkCreate), F(LinkAddData), F(LinkAddFile),
    F(LinkComplete), F(LinkDestroy),
    {"cuGraphInstantiateWithFlags", (void*)fk_GraphInstantiate},
};

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
    *pfn = NULL;
    if (!strcmp(symbol, "cuGetProcAddress")) *pfn = (void*)cuGetProcAddress_v2;
    else if (!strcmp(symbol, "cuStreamGetId") && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        *pfn = (void*)fk_StreamGetId_ptsz;
    else if (!strcmp(symbol, "cuStreamGetCaptureInfo"))  /* the ABI changed in 12.3 */
        *pfn = version >= 12030 ? (void*)fk_StreamGetCaptureInfo_v3 : (void*)fk_StreamGetCaptureInfo_v2;
    else if (!strcmp(symbol, "cuStreamGetCaptureInfo_v2")) *pfn = (void*)fk_StreamGetCaptureInfo_v2;
    else if (!strcmp(symbol, "cuStreamGetCaptureInfo_v3")) *pfn = (void*)fk_StreamGetCaptureInfo_v3;
    else if (!strcmp(symbol, "cuGraphAddDependencies"))  /* edge data from 12.3 */
        *pfn = version >= 12030 ? (void*)fk_GraphAddDependencies_v2 : (void*)fk_GraphAddDependencies;
    else if (!strcmp(symbol, "cuGraphGetEdges"))         /* edge data from 12.3 */
        *pfn = version >= 12030 ? (void*)fk_GraphGetEdges_v2 : (void*)fk_GraphGetEdges;
    else if (!strcmp(symbol, "cuCtxCreate"))             /* the ABI changed in 12.5 */
        *pfn = version >= 12050 ? (void*)fk_CtxCreate_v4 : (void*)fk_CtxCreate_v2;
    else
        for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
            const char* n = table[i].name;
            if ((n[0] == 'c' && !strcmp(symbol, n)) ||
                (n[0] != 'c' && !strncmp(symbol, "cu", 2) && !strcmp(symbol + 2, n))) {
                *pfn = table[i].fn;
                break;
            }
        }
    trace("cuGetProcAddress(%s, %d, flags %llu) -> %s", symbol, version, (unsigned long long)flags,
          *pfn ? "found" : "not found");
    if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
/* The names C programs dlsym directly (the examples' C extension, the C++ launch floor). */
EXPORT CUresult cuInit(unsigned int flags) { return fk_Init(flags); }
EXPORT CUresult cuDriverGetVersion(int* v) { return fk_DriverGetVersion(v); }
EXPORT CUresult cuDeviceGet(CUdevice* d, int i) { return fk_DeviceGet(d, i); }
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { return fk_DevicePrimaryCtxRetain(c, d); }
EXPORT CUresult cuCtxSetCurrent(CUcontext c) { return fk_CtxSetCurrent(c); }
EXPORT CUresult cuModuleLoadData(CUmodule* m, const void* image) { return fk_ModuleLoadData(m, image); }
EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) { return fk_ModuleGetFunction(f, m, name); }
EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int flags) { return fk_StreamCreate(s, flags); }
EXPORT CUresult cuStreamSynchronize(CUstream s) { return fk_StreamSynchronize(s); }
EXPORT CUresult cuGetErrorName(CUresult e, const char** s) { return fk_GetErrorName(e, s); }
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int shmem, CUstream s, void** p, void** x) {
    return fk_LaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, p, x);
}

/* NVRTC dlopens libcuda.so.1 and asks for the driver's private export tables; having none,
 * the fake says so (NVRTC then compiles without them). */
EXPORT CUresult cuGetExportTable(const void** table_out, const CUuuid* id) {
    (void)id;
    *table_out = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
