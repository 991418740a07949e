/* kernarg's state guard on free-threaded CPython (internal; included by _stream.pyx only).

   kernarg's modules keep shared state (per-type caches, block pools, events, kernel caches) that
   its code was written to touch under the GIL. On a free-threaded build (Py_GIL_DISABLED) every
   way into that code takes one critical section, on one object, kernarg_state: a critical
   section is suspended whenever the thread would block (a contended lock, a call that detaches
   the thread, such as `with nogil`), as the GIL is handed over then, and taking it again on a
   thread that holds it is free. So kernarg's code keeps the exclusion it had under the GIL.

   The ways in are not edited one by one: kernarg_guard_namespace() runs at the end of each
   module's initialisation and replaces, in the module's namespace,
     - every function defined there by a GuardedFunction that calls it in the section;
     - in every class defined there, every method (instance, class or static) by its guarded
       form, and, in extension types, every property and member by a GuardedAttr;
     - in every extension type, the slots its methods do not cover (tp_new, tp_init, tp_call,
       tp_repr, tp_hash, tp_richcompare, sq/mp_length, mp_subscript, the buffer procs and
       tp_dealloc) by trampolines that call the type's own slot in the section.
   A method, property or special method added later is guarded without a line written for it;
   what CPython calls past the type (a vectorcall an instance carries, as PreparedLaunch's and
   BoundLaunch's) and C entry points (the C API) enter the section themselves. So do the hot
   entry points a module names in `unwrapped` (kernarg.pack, Signature.pack, Kernel.launch,
   kernarg.launch: C functions of the fastcall convention), which are left as they are, so that the
   interpreter calls them as the builtins they are: a call through a wrapper is one it cannot
   specialise (Signature.pack of 3 arguments took 96 ns wrapped, 78 unwrapped and 66 with no
   guard at all, on 3.14.4t). kernarg.pack(args) enters it only at the first argument that
   needs it (_stream.pxd's LazySection), so that packs of numbers (numpy scalars too) and
   cuda.core Buffers run in parallel; Kernel.launch, a prepared launch's call and a bound one's
   only once the launch needs it (_launch.pyx's _enqueue). A type
   named in `unwrapped` (ParamBlock) keeps its slots, which need no section; its methods and
   properties are guarded.
   The wrappers forward what introspection reads (__name__, __qualname__, __doc__,
   __text_signature__, __wrapped__, ...), and pickle as the function they wrap.

   On a GIL build none of this is compiled: kernarg_guard_namespace() does nothing, and the
   code that takes the section itself (the C API, PreparedLaunch's vectorcall, in_section in
   _stream.pxd) tests KERNARG_GUARDED_BUILD (_cutils.h), a C constant, so that only its call
   is compiled there. Nor on 3.13t, where setup.py does not declare free-threading
   support either, so the GIL comes back on at import: 3.13's critical sections have no fast
   path for a thread taking again the lock its top-most section holds (CPython gh-114203, in
   3.14). They park the thread instead, suspending its outer section, so every nested way in
   (kernarg's code calling one of its own guarded functions, or dropping a ParamBlock) would
   let other threads into the middle of an operation, where the GIL lets none. */
#ifndef KERNARG_GUARD_H
#define KERNARG_GUARD_H

#include <Python.h>
#include "_cutils.h"

#ifndef KERNARG_GUARDED

static int kernarg_guard_init(void) { return 0; }
static int kernarg_guard_namespace(PyObject *ns, PyObject *module_name, PyObject *unwrapped) {
    (void)ns; (void)module_name; (void)unwrapped;
    return 0;
}
static void kernarg_guard_enter(kernarg_section *cs) { (void)cs; }
static void kernarg_guard_leave(kernarg_section *cs) { (void)cs; }
static int kernarg_guard_active(void) { return 0; }
static int kernarg_guard_held(void) { return 0; }
static PyObject *kernarg_guard_unwrapped(void) { return PyTuple_New(0); }

#else

static PyObject *kernarg_state = NULL;        /* the object whose lock is kernarg's section */
static PyTypeObject *kernarg_guarded_function = NULL;
static PyTypeObject *kernarg_guarded_method = NULL;
static PyTypeObject *kernarg_guarded_attr = NULL;
static PyObject *kernarg_unwrapped = NULL;    /* what the modules named as taking it themselves */

static void kernarg_guard_enter(kernarg_section *cs) { PyCriticalSection_Begin(cs, kernarg_state); }
static void kernarg_guard_leave(kernarg_section *cs) { PyCriticalSection_End(cs); }
static int kernarg_guard_active(void) { return 1; }

/* (For the tests.) Whether this thread's top-most critical section is kernarg's (1 or 0),
   read from the thread state's tagged pointer to it (its low two bits are flags): what
   kernarg's code, and Python code it calls, runs inside. 3.14 documents that layout as
   private, so a later version answers -1 (not read) until it has been checked. */
static int kernarg_guard_held(void) {
#if PY_VERSION_HEX < 0x030F0000
    const uintptr_t top = PyThreadState_Get()->critical_section & ~(uintptr_t)3;
    return top != 0 && ((PyCriticalSection *)top)->_cs_mutex == &kernarg_state->ob_mutex;
#else
    return -1;
#endif
}

static PyObject *kernarg_guard_unwrapped(void) { return PyList_AsTuple(kernarg_unwrapped); }

static int kernarg_listed(PyObject *objects, PyObject *v) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(objects); i++)
        if (PyTuple_GET_ITEM(objects, i) == v) return 1;
    return 0;
}

/* --- The wrappers: GuardedFunction and GuardedMethod (a callable, called inside the section),
   GuardedAttr (a property or member, read and written inside it). Each holds what it wraps
   first, which the functions below that serve all three read. -------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *wrapped;
} KernargWrapper;

typedef struct {
    KernargWrapper base;
    vectorcallfunc vectorcall;
    vectorcallfunc inner;      /* the wrapped function's own vectorcall, read once */
} KernargGuarded;

#define KERNARG_WRAPPED(self) (((KernargWrapper *)(self))->wrapped)

/* A new wrapper of type tp (its basic size: a KernargWrapper or more), not yet tracked. */
static PyObject *kernarg_wrapper_new(PyTypeObject *tp, PyObject *wrapped) {
    KernargWrapper *w = PyObject_GC_New(KernargWrapper, tp);
    if (w == NULL) return NULL;
    w->wrapped = Py_NewRef(wrapped);
    return (PyObject *)w;
}

static int kernarg_wrapper_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(KERNARG_WRAPPED(self));
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int kernarg_wrapper_clear(PyObject *self) {
    Py_CLEAR(KERNARG_WRAPPED(self));
    return 0;
}

static void kernarg_wrapper_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    kernarg_wrapper_clear(self);
    PyObject_GC_Del(self);
    Py_DECREF(tp);
}

/* What introspection reads is the wrapped object's: its names, documentation, signature,
   defaults, code. Other dunders (__call__, __get__, __reduce__, ...) are the wrapper's own. */
static int kernarg_forwarded(PyObject *name) {
    static const char *const names[] = {
        "__name__", "__qualname__", "__module__", "__doc__", "__text_signature__",
        "__signature__", "__defaults__", "__kwdefaults__", "__annotations__", "__dict__",
        "__code__", "__globals__", "__self__", "__func__", "__type_params__", "__objclass__",
        NULL};
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(name, &n);
    if (s == NULL) { PyErr_Clear(); return 0; }
    if (n < 4 || s[0] != '_' || s[1] != '_') return 1;      /* not a dunder */
    for (int i = 0; names[i] != NULL; i++)
        if (strcmp(s, names[i]) == 0) return 1;
    return 0;
}

static PyObject *kernarg_wrapper_getattro(PyObject *self, PyObject *name) {
    if (PyUnicode_Check(name)) {
        if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0)
            return Py_NewRef(KERNARG_WRAPPED(self));
        if (kernarg_forwarded(name))
            return PyObject_GetAttr(KERNARG_WRAPPED(self), name);
    }
    return PyObject_GenericGetAttr(self, name);
}

static PyObject *kernarg_wrapper_repr(PyObject *self) {
    return PyObject_Repr(KERNARG_WRAPPED(self));
}

#define KERNARG_WRAPPER_SLOTS                                               \
    {Py_tp_getattro, (void *)kernarg_wrapper_getattro},                     \
    {Py_tp_repr, (void *)kernarg_wrapper_repr},                             \
    {Py_tp_traverse, (void *)kernarg_wrapper_traverse},                     \
    {Py_tp_clear, (void *)kernarg_wrapper_clear},                           \
    {Py_tp_dealloc, (void *)kernarg_wrapper_dealloc}

#define KERNARG_WRAPPER_FLAGS \
    (Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE | \
     Py_TPFLAGS_DISALLOW_INSTANTIATION)

/* GuardedFunction, GuardedMethod */

static PyObject *kernarg_guarded_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                      PyObject *kwnames) {
    KernargGuarded *g = (KernargGuarded *)self;
    PyCriticalSection cs;
    PyObject *r;
    PyCriticalSection_Begin(&cs, kernarg_state);
    r = g->inner != NULL ? g->inner(g->base.wrapped, args, nargsf, kwnames)
                         : PyObject_Vectorcall(g->base.wrapped, args, nargsf, kwnames);
    PyCriticalSection_End(&cs);
    return r;
}

static PyObject *kernarg_guarded_new(PyTypeObject *tp, PyObject *fn) {
    KernargGuarded *g = (KernargGuarded *)kernarg_wrapper_new(tp, fn);
    if (g == NULL) return NULL;
    g->inner = PyVectorcall_Function(fn);
    g->vectorcall = kernarg_guarded_call;
    PyObject_GC_Track(g);
    return (PyObject *)g;
}

/* Pickled (and copied) as what it wraps: a function's __reduce__ gives its qualified name,
   which pickle looks up in the module and finds this wrapper there. */
static PyObject *kernarg_guarded_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyObject_CallMethod(KERNARG_WRAPPED(self), "__reduce__", NULL);
}

static PyObject *kernarg_method_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMethodDef kernarg_guarded_methods[] = {
    {"__reduce__", kernarg_guarded_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyMemberDef kernarg_guarded_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(KernargGuarded, vectorcall),
     Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

#define KERNARG_GUARDED_SLOTS                                               \
    KERNARG_WRAPPER_SLOTS,                                                  \
    {Py_tp_call, (void *)PyVectorcall_Call},                                \
    {Py_tp_methods, kernarg_guarded_methods},                               \
    {Py_tp_members, kernarg_guarded_members}

static PyType_Slot kernarg_function_slots[] = {KERNARG_GUARDED_SLOTS, {0, NULL}};
static PyType_Slot kernarg_method_slots[] = {
    KERNARG_GUARDED_SLOTS, {Py_tp_descr_get, (void *)kernarg_method_get}, {0, NULL}};

static PyType_Spec kernarg_function_spec = {
    "kernarg._stream.GuardedFunction", sizeof(KernargGuarded), 0,
    KERNARG_WRAPPER_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL, kernarg_function_slots};
static PyType_Spec kernarg_method_spec = {
    "kernarg._stream.GuardedMethod", sizeof(KernargGuarded), 0,
    KERNARG_WRAPPER_FLAGS | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kernarg_method_slots};

/* GuardedAttr: class access gives the wrapper itself, as a property's does. */

static PyObject *kernarg_attr_get(PyObject *self, PyObject *obj, PyObject *type) {
    PyObject *d = KERNARG_WRAPPED(self);
    PyCriticalSection cs;
    PyObject *r;
    if (obj == NULL) return Py_NewRef(self);
    PyCriticalSection_Begin(&cs, kernarg_state);
    r = Py_TYPE(d)->tp_descr_get(d, obj, type);
    PyCriticalSection_End(&cs);
    return r;
}

static int kernarg_attr_set(PyObject *self, PyObject *obj, PyObject *value) {
    PyObject *d = KERNARG_WRAPPED(self);
    PyCriticalSection cs;
    int r;
    PyCriticalSection_Begin(&cs, kernarg_state);
    r = Py_TYPE(d)->tp_descr_set(d, obj, value);
    PyCriticalSection_End(&cs);
    return r;
}

static PyType_Slot kernarg_attr_slots[] = {
    KERNARG_WRAPPER_SLOTS,
    {Py_tp_descr_get, (void *)kernarg_attr_get},
    {Py_tp_descr_set, (void *)kernarg_attr_set},
    {0, NULL}};

static PyType_Spec kernarg_attr_spec = {
    "kernarg._stream.GuardedAttr", sizeof(KernargWrapper), 0, KERNARG_WRAPPER_FLAGS,
    kernarg_attr_slots};

/* --- Slot trampolines ---------------------------------------------------------------------
   Each guarded extension type has a record of its own slots; a trampoline finds the record of
   the object's type, or of the nearest base that has one (a Python subclass inherits the
   trampolines), and calls the saved slot inside the section. */

typedef struct {
    PyTypeObject *tp;
    newfunc tp_new;
    initproc tp_init;
    ternaryfunc tp_call;
    reprfunc tp_repr;
    hashfunc tp_hash;
    richcmpfunc tp_richcompare;
    lenfunc sq_length;
    lenfunc mp_length;
    binaryfunc mp_subscript;
    getbufferproc bf_getbuffer;
    releasebufferproc bf_releasebuffer;
    destructor tp_dealloc;
} KernargSlots;

#define KERNARG_MAX_GUARDED_TYPES 64
static KernargSlots kernarg_slots[KERNARG_MAX_GUARDED_TYPES];
/* Records are appended while modules initialise (under the import lock) and never change
   after: a record is complete before the count that covers it is published. */
static int kernarg_nslots = 0;

static const KernargSlots *kernarg_slots_of(PyTypeObject *tp) {
    const int n = __atomic_load_n(&kernarg_nslots, __ATOMIC_ACQUIRE);
    for (; tp != NULL; tp = tp->tp_base)
        for (int i = 0; i < n; i++)
            if (kernarg_slots[i].tp == tp) return &kernarg_slots[i];
    Py_FatalError("kernarg: a guarded slot was called on a type kernarg did not guard");
    return NULL;
}

#define KERNARG_ENTER PyCriticalSection _cs; PyCriticalSection_Begin(&_cs, kernarg_state)
#define KERNARG_LEAVE PyCriticalSection_End(&_cs)

static PyObject *kernarg_slot_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *r;
    KERNARG_ENTER;
    r = kernarg_slots_of(tp)->tp_new(tp, args, kw);
    KERNARG_LEAVE;
    return r;
}

static int kernarg_slot_init(PyObject *o, PyObject *args, PyObject *kw) {
    int r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->tp_init(o, args, kw);
    KERNARG_LEAVE;
    return r;
}

static PyObject *kernarg_slot_call(PyObject *o, PyObject *args, PyObject *kw) {
    PyObject *r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->tp_call(o, args, kw);
    KERNARG_LEAVE;
    return r;
}

static PyObject *kernarg_slot_repr(PyObject *o) {
    PyObject *r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->tp_repr(o);
    KERNARG_LEAVE;
    return r;
}

static Py_hash_t kernarg_slot_hash(PyObject *o) {
    Py_hash_t r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->tp_hash(o);
    KERNARG_LEAVE;
    return r;
}

static PyObject *kernarg_slot_richcompare(PyObject *o, PyObject *other, int op) {
    PyObject *r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->tp_richcompare(o, other, op);
    KERNARG_LEAVE;
    return r;
}

static Py_ssize_t kernarg_slot_sq_length(PyObject *o) {
    Py_ssize_t r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->sq_length(o);
    KERNARG_LEAVE;
    return r;
}

static Py_ssize_t kernarg_slot_mp_length(PyObject *o) {
    Py_ssize_t r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->mp_length(o);
    KERNARG_LEAVE;
    return r;
}

static PyObject *kernarg_slot_subscript(PyObject *o, PyObject *key) {
    PyObject *r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->mp_subscript(o, key);
    KERNARG_LEAVE;
    return r;
}

static int kernarg_slot_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    int r;
    KERNARG_ENTER;
    r = kernarg_slots_of(Py_TYPE(o))->bf_getbuffer(o, view, flags);
    KERNARG_LEAVE;
    return r;
}

static void kernarg_slot_releasebuffer(PyObject *o, Py_buffer *view) {
    KERNARG_ENTER;
    kernarg_slots_of(Py_TYPE(o))->bf_releasebuffer(o, view);
    KERNARG_LEAVE;
}

static void kernarg_slot_dealloc(PyObject *o) {
    KERNARG_ENTER;
    kernarg_slots_of(Py_TYPE(o))->tp_dealloc(o);
    KERNARG_LEAVE;
}

#undef KERNARG_ENTER
#undef KERNARG_LEAVE

/* Replace tp's slots by trampolines, for the slots tp defines itself (not inherited from a
   base kernarg does not guard, such as object's repr). */
static int kernarg_guard_slots(PyTypeObject *tp) {
    PyTypeObject *base = tp->tp_base;
    KernargSlots *s;
    if (kernarg_nslots == KERNARG_MAX_GUARDED_TYPES) {
        PyErr_SetString(PyExc_RuntimeError, "kernarg: too many types to guard");
        return -1;
    }
    s = &kernarg_slots[kernarg_nslots];
    memset(s, 0, sizeof *s);
    s->tp = tp;
#define KERNARG_GUARD(field, slot, trampoline)                                          \
    if (tp->field != NULL && (base == NULL || tp->field != base->field)) {             \
        s->slot = tp->field;                                                           \
        tp->field = trampoline;                                                        \
    }
#define KERNARG_GUARD_SUB(sub, field, slot, trampoline)                                 \
    if (tp->sub != NULL && tp->sub->field != NULL                                      \
        && (base == NULL || base->sub == NULL || tp->sub->field != base->sub->field)) { \
        s->slot = tp->sub->field;                                                      \
        tp->sub->field = trampoline;                                                   \
    }
    KERNARG_GUARD(tp_new, tp_new, kernarg_slot_new)
    KERNARG_GUARD(tp_init, tp_init, kernarg_slot_init)
    KERNARG_GUARD(tp_call, tp_call, kernarg_slot_call)
    KERNARG_GUARD(tp_repr, tp_repr, kernarg_slot_repr)
    KERNARG_GUARD(tp_hash, tp_hash, kernarg_slot_hash)
    KERNARG_GUARD(tp_richcompare, tp_richcompare, kernarg_slot_richcompare)
    KERNARG_GUARD(tp_dealloc, tp_dealloc, kernarg_slot_dealloc)
    KERNARG_GUARD_SUB(tp_as_sequence, sq_length, sq_length, kernarg_slot_sq_length)
    KERNARG_GUARD_SUB(tp_as_mapping, mp_length, mp_length, kernarg_slot_mp_length)
    KERNARG_GUARD_SUB(tp_as_mapping, mp_subscript, mp_subscript, kernarg_slot_subscript)
    KERNARG_GUARD_SUB(tp_as_buffer, bf_getbuffer, bf_getbuffer, kernarg_slot_getbuffer)
    KERNARG_GUARD_SUB(tp_as_buffer, bf_releasebuffer, bf_releasebuffer,
                      kernarg_slot_releasebuffer)
#undef KERNARG_GUARD
#undef KERNARG_GUARD_SUB
    /* A vectorcall an instance carries (tp_vectorcall_offset: PreparedLaunch's) is called
       past these slots, so such a function takes the section itself (kernarg_guard_enter). */
    __atomic_store_n(&kernarg_nslots, kernarg_nslots + 1, __ATOMIC_RELEASE);
    return 0;
}

/* --- Putting the guards in place ----------------------------------------------------------- */

/* A function of the module: a Cython def (a cyfunction, whatever Cython names its type), a
   C function (kernarg.pack) or a Python function. */
static int kernarg_is_function(PyObject *v) {
    return PyCFunction_Check(v) || PyFunction_Check(v)
        || strstr(Py_TYPE(v)->tp_name, "cython_function_or_method") != NULL;
}

static int kernarg_is_method_like(PyObject *v) {
    return kernarg_is_function(v) || Py_IS_TYPE(v, &PyMethodDescr_Type)
        || Py_IS_TYPE(v, &PyWrapperDescr_Type);
}

/* The guarded form of a class attribute v, or NULL with no error where v is left as it is. */
static PyObject *kernarg_guarded_attribute(PyObject *v, int extension_type) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == kernarg_guarded_method || t == kernarg_guarded_attr) return NULL;
    if (kernarg_is_method_like(v))
        return kernarg_guarded_new(kernarg_guarded_method, v);
    if (PyObject_TypeCheck(v, &PyClassMethod_Type)
            || PyObject_TypeCheck(v, &PyStaticMethod_Type)) {
        /* classmethod(f) / staticmethod(f): the same around the guarded f. */
        PyObject *f = PyObject_GetAttrString(v, "__func__"), *g, *r;
        if (f == NULL) return NULL;
        if (Py_TYPE(f) == kernarg_guarded_function) { Py_DECREF(f); return NULL; }
        g = kernarg_guarded_new(kernarg_guarded_function, f);
        Py_DECREF(f);
        if (g == NULL) return NULL;
        r = PyObject_CallOneArg((PyObject *)t, g);
        Py_DECREF(g);
        return r;
    }
    if (extension_type && (t == &PyGetSetDescr_Type || t == &PyMemberDescr_Type)) {
        PyObject *a = kernarg_wrapper_new(kernarg_guarded_attr, v);
        if (a != NULL) PyObject_GC_Track(a);
        return a;
    }
    return NULL;
}

static destructor kernarg_subtype_dealloc = NULL;   /* a class statement's tp_dealloc */

/* Guard tp's methods and properties (but those in `unwrapped`) and, unless keep_slots, its
   slots. */
static int kernarg_guard_type(PyTypeObject *tp, PyObject *unwrapped, int keep_slots) {
    /* An extension type (a cdef class; a heap type where Cython makes them from specs), not
       a class statement's, whose instances CPython itself keeps safe. */
    const int extension_type = tp->tp_dealloc != kernarg_subtype_dealloc;
    PyObject *dict = PyType_GetDict(tp), *items, *k, *v, *g;
    Py_ssize_t n;
    if (dict == NULL) return -1;
    items = PyDict_Items(dict);
    if (items == NULL) { Py_DECREF(dict); return -1; }
    n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        k = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        /* __new__ is tp_new's wrapper; the tp_new trampoline guards it. */
        if (PyUnicode_Check(k) && PyUnicode_CompareWithASCIIString(k, "__new__") == 0) continue;
        if (kernarg_listed(unwrapped, v)) continue;
        g = kernarg_guarded_attribute(v, extension_type);
        if (g == NULL) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        if (PyDict_SetItem(dict, k, g) < 0) { Py_DECREF(g); goto fail; }
        Py_DECREF(g);
    }
    Py_DECREF(items);
    Py_DECREF(dict);
    if (extension_type && !keep_slots && kernarg_guard_slots(tp) < 0) return -1;
    PyType_Modified(tp);
    return 0;
fail:
    Py_DECREF(items);
    Py_DECREF(dict);
    return -1;
}

/* Guard what module `module_name` defined in its namespace ns (its globals), but the
   functions and methods in the tuple `unwrapped`, which take the section themselves, and the
   slots of the types there, which need none (their methods and properties are guarded). */
static int kernarg_guard_namespace(PyObject *ns, PyObject *module_name, PyObject *unwrapped) {
    PyObject *items, *k, *v, *mod, *g, *done;
    Py_ssize_t n;
    int same;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(unwrapped); i++) {
        PyObject *f = PyTuple_GET_ITEM(unwrapped, i);
        if (PyList_Append(kernarg_unwrapped, f) < 0) return -1;
        /* A function threads call at once (kernarg.pack runs in parallel) has its references
           from the interpreter's stack deferred, as a Python function's are: else every call
           adds to and takes from its shared count, one cache line that the threads' cores pass
           between them (two threads packing ints in parallel then took as long together as
           one alone). Types have per-thread counts already. */
        if (!PyType_Check(f) && PyObject_IS_GC(f))
            (void)PyUnstable_Object_EnableDeferredRefcount(f);
    }
    items = PyDict_Items(ns);
    done = PyDict_New();        /* function -> its wrapper: an alias gets the same one */
    if (items == NULL || done == NULL) { Py_XDECREF(items); Py_XDECREF(done); return -1; }
    n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        k = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        if (!(PyType_Check(v) || kernarg_is_function(v))) continue;
        if (Py_TYPE(v) == kernarg_guarded_function) continue;
        if (kernarg_listed(unwrapped, v) && !PyType_Check(v)) continue;
        mod = PyObject_GetAttrString(v, "__module__");
        if (mod == NULL) { PyErr_Clear(); continue; }
        same = PyUnicode_Check(mod) && PyUnicode_Compare(mod, module_name) == 0;
        Py_DECREF(mod);
        if (!same) continue;
        if (PyType_Check(v)) {
            if (kernarg_guard_type((PyTypeObject *)v, unwrapped,
                                   kernarg_listed(unwrapped, v)) < 0) goto fail;
            continue;
        }
        if (PyDict_GetItemRef(done, v, &g) < 0) goto fail;
        if (g == NULL) {
            g = kernarg_guarded_new(kernarg_guarded_function, v);
            if (g == NULL || PyDict_SetItem(done, v, g) < 0) { Py_XDECREF(g); goto fail; }
        }
        if (PyDict_SetItem(ns, k, g) < 0) { Py_DECREF(g); goto fail; }
        Py_DECREF(g);
    }
    Py_DECREF(items);
    Py_DECREF(done);
    return 0;
fail:
    Py_DECREF(items);
    Py_DECREF(done);
    return -1;
}

static int kernarg_guard_init(void) {
    PyObject *cls;
    if (kernarg_state != NULL) return 0;
    cls = PyObject_CallFunction((PyObject *)&PyType_Type, "s(){}", "kernarg_probe");
    if (cls == NULL) return -1;
    kernarg_subtype_dealloc = ((PyTypeObject *)cls)->tp_dealloc;
    Py_DECREF(cls);
    kernarg_guarded_function = (PyTypeObject *)PyType_FromSpec(&kernarg_function_spec);
    kernarg_guarded_method = (PyTypeObject *)PyType_FromSpec(&kernarg_method_spec);
    kernarg_guarded_attr = (PyTypeObject *)PyType_FromSpec(&kernarg_attr_spec);
    if (kernarg_guarded_function == NULL || kernarg_guarded_method == NULL
            || kernarg_guarded_attr == NULL)
        return -1;
    kernarg_unwrapped = PyList_New(0);
    if (kernarg_unwrapped == NULL) return -1;
    kernarg_state = PyType_GenericNew(&PyBaseObject_Type, NULL, NULL);
    return kernarg_state == NULL ? -1 : 0;
}

#endif /* KERNARG_GUARDED */
#endif /* KERNARG_GUARD_H */
