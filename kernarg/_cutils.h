/* Small C helpers shared by kernarg's Cython modules (internal; not part of the C API). */
#ifndef KERNARG_CUTILS_H
#define KERNARG_CUTILS_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CUDA hosts (x86-64, aarch64, ppc64le) are little-endian; the packers rely on it. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kernarg supports little-endian hosts only"
#endif

/* Each module that includes this header uses only some of its functions. */
#if defined(__GNUC__)
#define KERNARG_MAYBE_UNUSED __attribute__((unused))
#define KERNARG_NOINLINE __attribute__((noinline))
#else
#define KERNARG_MAYBE_UNUSED
#define KERNARG_NOINLINE
#endif

/* Room for kernarg's critical section on a free-threaded build (_guard.h); nothing on a GIL
   build, where the GIL is kernarg's exclusion. */
#ifdef Py_GIL_DISABLED
typedef PyCriticalSection kernarg_section;
#else
typedef struct { char unused; } kernarg_section;
#endif

/* Whether kernarg's state guard is compiled (_guard.h): a free-threaded build of 3.14 or
   later. KERNARG_GUARDED_BUILD is the same as a constant, for Cython code to test in an `if`
   the C compiler removes (the hot entry points that take the section themselves). */
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030E0000
#define KERNARG_GUARDED 1
#define KERNARG_GUARDED_BUILD 1
#else
#define KERNARG_GUARDED_BUILD 0
#endif

/* Word-sized values that a free-threaded build reads outside kernarg's critical section
   (what `None` means as a stream: _stream.pyx's count of open use_stream blocks and the
   policy) are read and written whole, as relaxed atomics; on a GIL build the same plain loads
   and stores as before. */
#define KERNARG_LOAD_RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define KERNARG_STORE_RELAXED(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A flag that says a one-time lookup is done (_interop.pyx's adapters: what they read of
   CuPy and torch the first time), set in kernarg's section once what it guards is written
   (release), read outside it before what it guards is (acquire). */
#define KERNARG_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define KERNARG_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* A sequence lock, for caches that a free-threaded build reads outside kernarg's section
   (_handler.pyx's per-type cache, _interop.pyx's last memory resource) and writes only inside
   it, so one writer at a time. A writer makes the count odd, writes, and makes it even again;
   a reader reads the count, copies the fields it needs, and uses the copy only if the count
   was even and is unchanged (else it takes the section and reads again). Each field such a
   reader reads is loaded and stored whole (KERNARG_LOAD_RELAXED), so no read is torn; the
   count says whether the copy is of one write. The fences are those of H.-J. Boehm's "Can
   seqlocks get along with programming language memory models?" (MSPC 2012). On a GIL build
   none of it is compiled: a read is always valid and a write is the stores alone. */
#if KERNARG_GUARDED_BUILD
static inline unsigned kernarg_seq_begin(const unsigned *seq) {
    return __atomic_load_n(seq, __ATOMIC_ACQUIRE);
}
static inline int kernarg_seq_valid(const unsigned *seq, unsigned begun) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return (begun & 1) == 0 && __atomic_load_n(seq, __ATOMIC_RELAXED) == begun;
}
static inline void kernarg_seq_write_begin(unsigned *seq) {
    __atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
static inline void kernarg_seq_write_end(unsigned *seq) {
    __atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}
#else
static inline unsigned kernarg_seq_begin(const unsigned *seq) { (void)seq; return 0; }
static inline int kernarg_seq_valid(const unsigned *seq, unsigned begun) {
    (void)seq; (void)begun;
    return 1;
}
static inline void kernarg_seq_write_begin(unsigned *seq) { (void)seq; }
static inline void kernarg_seq_write_end(unsigned *seq) { (void)seq; }
#endif

/* A sequence-locked struct of 32-bit words (_launch.pyx's Dims and launch attributes, cached
   in a Kernel), copied word by word, each word loaded and stored whole: what a reader outside
   any lock copies, and what a writer (one at a time) stores. On a GIL build, a memcpy. */
static inline void kernarg_copy_words(void *dst, const void *src, size_t nwords) {
#if KERNARG_GUARDED_BUILD
    uint32_t *d = (uint32_t *)dst;
    const uint32_t *s = (const uint32_t *)src;
    for (size_t i = 0; i < nwords; i++)
        __atomic_store_n(d + i, __atomic_load_n(s + i, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
#else
    memcpy(dst, src, nwords * 4);
#endif
}

/* Whether the `n` pointers at `stored`, each loaded whole, are those at `given`: a
   sequence-locked reader's comparison of the objects a cache was made from (_launch.pyx's
   Kernel._cfg_from), which it only compares, never follows. On a GIL build, a memcmp. */
static inline int kernarg_same_pointers(PyObject *const *stored, PyObject *const *given,
                                        size_t n) {
#if KERNARG_GUARDED_BUILD
    for (size_t i = 0; i < n; i++)
        if (__atomic_load_n(stored + i, __ATOMIC_RELAXED) != given[i]) return 0;
    return 1;
#else
    return memcmp(stored, given, n * sizeof(PyObject *)) == 0;
#endif
}

/* Replace the strong reference in `*slot` by one to `v` (or NULL), the pointer stored whole,
   for a slot that a reader outside kernarg's section compares with KERNARG_LOAD_RELAXED (it
   only compares, never follows, the pointer); the old reference is dropped after. */
static inline void kernarg_set_ref(PyObject **slot, PyObject *v) {
    PyObject *old = __atomic_load_n(slot, __ATOMIC_RELAXED);
    Py_XINCREF(v);
    __atomic_store_n(slot, v, __ATOMIC_RELAXED);
    Py_XDECREF(old);
}

/* A pointer published to readers that take no lock: stored with release once what it points
   to is written, loaded with acquire, and pushed onto a list head by compare-and-swap (the
   producer-stream waits' event pools, _launch.pyx, which are never freed). */
static inline void *kernarg_load_ptr(void *const *slot) {
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}
static inline void kernarg_push_ptr(void **head, void **next, void *node) {
    /* *next = *head, then *head = node if *head is still *next (else again). */
    *next = __atomic_load_n(head, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(head, next, node, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
    }
}

/* A spin lock for a few instructions' work that no thread may be suspended in (an event
   pool's pop and push, _launch.pyx): taken with no call into Python and no blocking call, so
   it never suspends the caller's critical sections, kernarg's among them, as a contended
   PyMutex or critical section would. On a GIL build it compiles to nothing: the GIL, held
   throughout, is the exclusion. */
#if KERNARG_GUARDED_BUILD
#include <sched.h>
static inline void kernarg_spin_lock(int *lock) {
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(lock, __ATOMIC_RELAXED))
            sched_yield();
    }
}
static inline void kernarg_spin_unlock(int *lock) { __atomic_store_n(lock, 0, __ATOMIC_RELEASE); }
#else
static inline void kernarg_spin_lock(int *lock) { (void)lock; }
static inline void kernarg_spin_unlock(int *lock) { (void)lock; }
#endif

/* A ctypes instance's value is read under the instance's own critical section on a
   free-threaded build: CPython 3.14t's ctypes sets values, fields and elements under it (the
   setters of .value, of a Structure's fields, of an Array's items and slices), so a value
   that another thread sets while kernarg packs is copied whole, as it was before the set or
   after it, never half of each. kernarg's own section does not give that: it keeps kernarg's
   code out, not ctypes'. kernarg_ctypes_copy copies the n bytes behind the object's b_ptr
   (at bptr_offset in the object; read under the lock too, as ctypes.resize moves it);
   kernarg_object_lock/unlock bracket a longer read (the buffer protocol's). If the object's
   lock is contended, CPython suspends the thread's outer critical sections while it waits,
   kernarg's among them, as at any call into Python: the caller keeps nothing of kernarg's
   state in hand across it but its own block. A GIL build compiles the copy alone. */
#if KERNARG_GUARDED_BUILD
static inline void kernarg_object_lock(kernarg_section *cs, PyObject *obj) {
    PyCriticalSection_Begin(cs, obj);
}
static inline void kernarg_object_unlock(kernarg_section *cs) { PyCriticalSection_End(cs); }
#else
static inline void kernarg_object_lock(kernarg_section *cs, PyObject *obj) {
    (void)cs; (void)obj;
}
static inline void kernarg_object_unlock(kernarg_section *cs) { (void)cs; }
#endif

/* Whether no other thread can reach ``obj``: the caller's reference is its only one, owned by
   this thread (PyUnstable_Object_IsUniquelyReferenced, CPython 3.14), as a dict a producer's
   property builds at each read is. Such an object needs no lock to be read. Always 1 on a GIL
   build, where no lock is taken anyway. */
#if KERNARG_GUARDED_BUILD
static inline int kernarg_unshared(PyObject *obj) {
    return PyUnstable_Object_IsUniquelyReferenced(obj);
}
#else
static inline int kernarg_unshared(PyObject *obj) { (void)obj; return 1; }
#endif

static inline void kernarg_ctypes_copy(char *dst, PyObject *obj, Py_ssize_t bptr_offset,
                                       Py_ssize_t n) {
    kernarg_section cs;
    kernarg_object_lock(&cs, obj);
    memcpy(dst, *(char **)((char *)obj + bptr_offset), (size_t)n);
    kernarg_object_unlock(&cs);
}

/* The ctypes object at the root of obj's bases (CDataObject's b_base, at base_offset), obj
   itself where it has none. A field or element read from a struct, union or array (a view:
   s.inner, s.x of a POINTER field, a[1]) shares its root's memory, and ctypes keeps what a
   pointer set through it needs alive in the root's b_objects, never the view's. A view's
   b_base is set when it is made and never changes, and keeps its base alive: no lock, and
   the chain ends (each base was made before the view on it). */
static inline PyObject *kernarg_ctypes_root(PyObject *obj, Py_ssize_t base_offset) {
    PyObject *base;
    while ((base = *(PyObject **)((char *)obj + base_offset)) != NULL)
        obj = base;
    return obj;
}

/* What ctypes keeps alive for the pointers in obj (a new reference, or NULL): the b_objects
   (at kept_offset, what `_objects` reads) of obj's root (kernarg_ctypes_root), read under
   the root's lock. */
static inline PyObject *kernarg_ctypes_root_kept(PyObject *obj, Py_ssize_t kept_offset,
                                                 Py_ssize_t base_offset) {
    kernarg_section cs;
    PyObject *root = kernarg_ctypes_root(obj, base_offset), *kept;
    kernarg_object_lock(&cs, root);
    kept = *(PyObject **)((char *)root + kept_offset);
    Py_XINCREF(kept);
    kernarg_object_unlock(&cs);
    return kept;
}

/* The offset in its objects of the slot a member descriptor (`_objects` of ctypes' _CData)
   reads, or -1 where ``descr`` is not one. (PyMemberDef is Python.h's from 3.12.) */
#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#endif
static inline Py_ssize_t kernarg_member_offset(PyObject *descr) {
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type)
        return -1;
    return ((PyMemberDescrObject *)descr)->d_member->offset;
}

/* Per-thread storage for _handler.pyx's block pools on a free-threaded build, where
   kernarg.pack takes and returns blocks outside kernarg's section: each thread has pools of
   its own (a block freed on another thread than the one that took it goes to the freeing
   thread's), so that threads packing at once share no pool. One pool shared under a spin lock
   made two threads packing ints slower together than one alone: every pack moved the pool's
   cache line between the cores twice, and waits ended in sched_yield. kernarg_pools_init (at
   the module's initialisation) makes the key whose destructor frees a thread's pools when the
   thread exits; kernarg_thread_pools returns this thread's, zeroed when first made, or NULL if
   there is no memory for them (the caller then allocates and frees each block itself). A GIL
   build keeps one set of pools for the process and compiles none of this. */
#if KERNARG_GUARDED_BUILD
#include <pthread.h>
static pthread_key_t kernarg_pools_key;

static KERNARG_MAYBE_UNUSED int kernarg_pools_init(void (*destroy)(void *)) {
    if (pthread_key_create(&kernarg_pools_key, destroy) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "kernarg: no thread-specific key for its pools");
        return -1;
    }
    return 0;
}

static KERNARG_MAYBE_UNUSED void *kernarg_thread_pools(size_t size) {
    void *pools = pthread_getspecific(kernarg_pools_key);
    if (pools == NULL) {
        pools = calloc(1, size);
        if (pools != NULL && pthread_setspecific(kernarg_pools_key, pools) != 0) {
            free(pools);
            pools = NULL;
        }
    }
    return pools;
}
#else
static KERNARG_MAYBE_UNUSED int kernarg_pools_init(void (*destroy)(void *)) {
    (void)destroy;
    return 0;
}

static KERNARG_MAYBE_UNUSED void *kernarg_thread_pools(size_t size) {
    (void)size;
    return NULL;
}
#endif

/* Fill def as a C function of CPython's METH_FASTCALL | METH_KEYWORDS convention (that of
   builtins): it reads its positional arguments where the caller put them, then the keyword
   values named by kwnames, with no tuple made and no generic keyword parser run. The first
   lines of doc, "name(signature)\n--\n\n", are the signature inspect reads. */
static KERNARG_MAYBE_UNUSED void kernarg_fastcall_def(PyMethodDef *def, const char *name,
                                                      void *fn, const char *doc) {
    def->ml_name = name;
    def->ml_meth = (PyCFunction)(void (*)(void))fn;
    def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
    def->ml_doc = doc;
}

/* Put def's function on tp as a method (a method descriptor in its dict, as a def in the
   class body would be), in place of what the class body defined under that name. */
static KERNARG_MAYBE_UNUSED int kernarg_install_method(PyTypeObject *tp, PyMethodDef *def) {
    PyObject *descr = PyDescr_NewMethod(tp, def);
    int r;
    if (descr == NULL) return -1;
    r = PyDict_SetItemString(tp->tp_dict, def->ml_name, descr);
    Py_DECREF(descr);
    PyType_Modified(tp);
    return r;
}

/* Value of an exact int of at most two 30-bit digits (|x| < 2**60: small ints and device
   addresses) without a function call; 0 if it is wider (the caller then takes the general
   path). CPython 3.12+ keeps the digit count and sign in `lv_tag` (cpython/longintrepr.h: sign
   in the low 2 bits, 0 positive, 1 zero, 2 negative; digit count from bit 3), as Cython's own
   int conversions read it; where that layout is not visible, compact ints only. 3.11 and
   earlier: the digits and a signed size. */
static inline int kernarg_small_int(PyObject *x, long long *out) {
#if PY_VERSION_HEX >= 0x030C0000 && defined(_PyLong_NON_SIZE_BITS) && defined(_PyLong_SIGN_MASK)
    const uintptr_t tag = ((PyLongObject *)x)->long_value.lv_tag;
    const digit *d = ((PyLongObject *)x)->long_value.ob_digit;
    const long long sign = 1 - (long long)(tag & _PyLong_SIGN_MASK);
    switch (tag >> _PyLong_NON_SIZE_BITS) {
    case 0:
    case 1: *out = sign * (long long)d[0]; return 1;   /* zero: sign 0, whatever d[0] holds */
    case 2: *out = sign * (((long long)d[1] << PyLong_SHIFT) | (long long)d[0]); return 1;
    default: return 0;
    }
#elif PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)x)) {
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)x);
        return 1;
    }
    return 0;
#else
    const digit *d = ((PyLongObject *)x)->ob_digit;
    switch (Py_SIZE(x)) {
    case 0: *out = 0; return 1;
    case 1: *out = (long long)d[0]; return 1;
    case -1: *out = -(long long)d[0]; return 1;
    case 2: *out = ((long long)d[1] << PyLong_SHIFT) | (long long)d[0]; return 1;
    case -2: *out = -(((long long)d[1] << PyLong_SHIFT) | (long long)d[0]); return 1;
    default: return 0;
    }
#endif
}

/* An exact int's 64 bits, for the ints kernarg_small_int does not read (|v| >= 2**60): 1 and
   *out its value where it fits a long long, 2 and *out its bits where it is 2**63 .. 2**64-1,
   0 (with no error set) for the rest. Not for int subclasses, whose __index__ the C API may
   call. */
KERNARG_MAYBE_UNUSED
static int kernarg_int64_bits(PyObject *x, long long *out) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    unsigned long long u;
    if (!overflow) {
        *out = v;
        return 1;
    }
    if (overflow < 0)
        return 0;
    u = PyLong_AsUnsignedLongLong(x);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {       /* 2**64 or more */
        PyErr_Clear();
        return 0;
    }
    memcpy(out, &u, 8);
    return 2;
}

/* Pack a run of exact small ints starting at item i, while the cursor is 8-aligned and the
   area has room. Few live values, so everything stays in registers. Returns the index of the
   first item not packed; the general loop takes it from there.
   Not inlined: inlined into pack_items, the loop shared that function's registers, and when the
   function grew (texture handles), gcc 12 moved &PyLong_Type out of its register and rotated the
   loop, which made 256 ints ~15% slower (~310 -> ~350 ns on 3.11) for one more instruction per
   int. A call of its own gives the loop the registers whatever pack_items becomes. */
KERNARG_MAYBE_UNUSED KERNARG_NOINLINE
static Py_ssize_t kernarg_int_run(PyObject *const *items, Py_ssize_t i, Py_ssize_t n,
                                  char *data, Py_ssize_t *cur, Py_ssize_t cap,
                                  void **argv, uint16_t *sizes) {
    Py_ssize_t c = *cur;
    long long v;
    if (c & 7)
        return i;
    for (; i < n && c + 8 <= cap; i++) {
        PyObject *x = items[i];
        if (Py_TYPE(x) != &PyLong_Type || !kernarg_small_int(x, &v))
            break;
        memcpy(data + c, &v, 8);
        argv[i] = data + c;
        sizes[i] = 8;
        c += 8;
    }
    *cur = c;
    return i;
}

/* Typed counterpart of kernarg_int_run: a run of exact small ints for parameters whose codes
   are `code_i64` (stored as 8 bytes), `code_i32` (range-checked, stored as 4) or in the bit
   set `unsigned64` (unsigned 8-byte values and addresses: non-negative, stored as 8), at the
   signature's precomputed offsets. Returns the index of the first item not packed. */
KERNARG_MAYBE_UNUSED
static Py_ssize_t kernarg_typed_int_run(PyObject *const *items, Py_ssize_t i, Py_ssize_t n,
                                        const uint8_t *codes, const uint16_t *offsets,
                                        char *data, void **argv, int code_i32, int code_i64,
                                        uint32_t unsigned64) {
    long long v;
    for (; i < n; i++) {
        PyObject *x = items[i];
        char *dst = data + offsets[i];
        int code = codes[i];
        if (Py_TYPE(x) != &PyLong_Type || !kernarg_small_int(x, &v))    /* |v| < 2**60 */
            break;
        if (code == code_i64 || (v >= 0 && ((unsigned64 >> code) & 1))) {
            memcpy(dst, &v, 8);
        } else if (code == code_i32 && v == (int32_t)v) {
            int32_t w = (int32_t)v;
            memcpy(dst, &w, 4);
        } else {
            break;
        }
        argv[i] = dst;
    }
    return i;
}

/* The same loop as a call of its own, for runs of two ints or more (see kernarg_int_run on why
   a long loop wants its own registers); a lone int is placed by the inlined one above. */
KERNARG_MAYBE_UNUSED KERNARG_NOINLINE
static Py_ssize_t kernarg_typed_int_run_call(PyObject *const *items, Py_ssize_t i, Py_ssize_t n,
                                             const uint8_t *codes, const uint16_t *offsets,
                                             char *data, void **argv, int code_i32,
                                             int code_i64, uint32_t unsigned64) {
    return kernarg_typed_int_run(items, i, n, codes, offsets, data, argv, code_i32, code_i64,
                                 unsigned64);
}

/* Round a double to a binary floating-point format with `ebits` exponent and `mbits` fraction
   bits (IEEE layout, subnormals, infinities), to nearest with ties to even, in one step. Going
   through float first would round twice and can be off by one ulp. NaN becomes a quiet NaN. */
static inline uint32_t kernarg_round_double(double x, int ebits, int mbits) {
    uint64_t b;
    memcpy(&b, &x, 8);
    const uint32_t sign = (uint32_t)(b >> 63) << (ebits + mbits);
    const uint64_t mag = b & 0x7fffffffffffffffULL;
    const int bias = (1 << (ebits - 1)) - 1;
    const uint32_t inf = (uint32_t)((1u << ebits) - 1) << mbits;
    if (mag >= 0x7ff0000000000000ULL)                       /* inf or NaN */
        return sign | inf | (mag > 0x7ff0000000000000ULL ? (1u << (mbits - 1)) : 0);
    if (mag == 0)
        return sign;
    int exp = (int)(mag >> 52) - 1023;
    uint64_t m = mag & ((1ULL << 52) - 1);
    if (exp == -1023) {                                     /* double subnormal */
        exp = -1022;
    } else {
        m |= 1ULL << 52;
    }
    int shift;
    uint32_t e;
    if (exp >= 1 - bias) {                                  /* normal in the target */
        if (exp > bias)
            return sign | inf;
        shift = 52 - mbits;
        e = (uint32_t)(exp + bias);
    } else {                                                /* subnormal in the target */
        shift = 52 - mbits + (1 - bias - exp);
        if (shift > 53)
            return sign;                                    /* below half the least subnormal */
        e = 0;
    }
    uint64_t q = m >> shift;
    const uint64_t r = m & ((1ULL << shift) - 1);
    const uint64_t half = 1ULL << (shift - 1);
    if (r > half || (r == half && (q & 1)))
        q++;
    if (e == 0)       /* subnormal: a carry into bit mbits lands exactly on the least normal */
        return sign | (uint32_t)q;
    if (q >> (mbits + 1)) {                                 /* carry out of the significand */
        q >>= 1;
        e++;
    }
    if (e >= (1u << ebits) - 1)
        return sign | inf;
    return sign | (e << mbits) | (uint32_t)(q & ((1ULL << mbits) - 1));
}

static inline uint16_t kernarg_double_to_half(double x) {
    return (uint16_t)kernarg_round_double(x, 5, 10);
}

static inline uint16_t kernarg_double_to_bfloat16(double x) {
    return (uint16_t)kernarg_round_double(x, 8, 7);
}

/* A bfloat16's value as a double, exactly: a bfloat16 is a float's upper half (NaNs and
   infinities included), so this is the double float(ml_dtypes.bfloat16) gives. */
static inline double kernarg_bfloat16_to_double(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return (double)f;
}

/* An IEEE half's value as a double, exactly (every half is a double): the bits numpy's
   float(numpy.float16) gives, NaN payloads and signs included, so that a numpy.float16 read in
   place packs as the float it converts to. */
static inline double kernarg_half_to_double(uint16_t h) {
    const uint64_t sign = (uint64_t)(h >> 15) << 63;
    const uint64_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint64_t bits;
    double d;
    if (exp == 0) {                        /* zero or subnormal: man * 2**-24 */
        d = (double)man * (1.0 / 16777216.0);
        return sign ? -d : d;
    }
    if (exp == 0x1f)                       /* infinity or NaN */
        bits = sign | 0x7ff0000000000000ULL | (man << 42);
    else
        bits = sign | ((exp - 15 + 1023) << 52) | (man << 42);
    memcpy(&d, &bits, 8);
    return d;
}

/* Whether `type.__name__ == name` (name: ASCII) without building `__name__`, as CPython's
   type_name() finds it: a heap type's ht_name, else a static type's tp_name after its last dot
   (the rest is its module). kernarg compares every base of an MRO when it first sees a type
   or resolves a stream, and `__name__` of a static base (object, a C extension's class)
   allocates a new str each time. */
static inline int kernarg_type_name_is(PyTypeObject *t, const char *name) {
    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        PyObject *ht_name = ((PyHeapTypeObject *)t)->ht_name;
        return PyUnicode_Check(ht_name) && PyUnicode_CompareWithASCIIString(ht_name, name) == 0;
    }
    const char *tp = strrchr(t->tp_name, '.');
    return strcmp(tp != NULL ? tp + 1 : t->tp_name, name) == 0;
}

/* Whether `t` is one of a C extension's own (static) types whose tp_name starts with `prefix`
   ("numpy." for numpy's scalar types and ndarray): a test on the type object, no attribute
   read. Subclasses made in Python are heap types and answer no. */
static inline int kernarg_static_type_in(PyTypeObject *t, const char *prefix) {
    return !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) && strncmp(t->tp_name, prefix, strlen(prefix)) == 0;
}

/* `d[key]` as a new reference, with PyDict_GetItemRef's answer (1 found, 0 absent, -1 an
   exception set): for a dict a free-threaded build reads outside kernarg's section while
   another thread may replace or remove the value (kernarg.register's registry), where the
   borrowed reference of PyDict_GetItemWithError (and of Cython's dict.get) could be freed
   before it is taken. Before 3.13, under the GIL, that borrowed one is taken at once. */
static inline int kernarg_dict_get_ref(PyObject *d, PyObject *key, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyDict_GetItemRef(d, key, out);
#else
    *out = PyDict_GetItemWithError(d, key);
    if (*out != NULL) {
        Py_INCREF(*out);
        return 1;
    }
    return PyErr_Occurred() ? -1 : 0;
#endif
}

#endif /* KERNARG_CUTILS_H */
