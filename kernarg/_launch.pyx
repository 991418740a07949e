# cython: language_level=3, embedsignature=True, binding=True
# distutils: language = c++
"""Kernels and launches over cuda.bindings' C driver API (cydriver).

Everything before the driver call -- configuration checks, stream resolution, packing, the
launch-attribute list -- is plain code that runs (and is tested) without a GPU; the driver is
touched only in _driver_* helpers, whose failures become kernarg.CudaError.
"""
cimport cython
from cuda.bindings cimport cydriver
from libc.stdint cimport uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcmp, memcpy, memset

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_SIZE
from libc.stdlib cimport atexit, calloc, free, malloc

from kernarg._cdefs cimport (
    PyCFunction_NewEx,
    PyMethodDef,
    PyTuple_GET_ITEM,
    exc_text,
    is_numpy_bool,
    kernarg_fastcall_def,
    kernarg_install_method,
    kernarg_small_int,
    or_default,
    parse_fastcall,
    shown_value,
    tuple_items,
    tuple_of,
)
from kernarg._handler cimport (
    KERNARG_INLINE_ARGS,
    KERNARG_INLINE_BYTES,
    Arena,
    BlockState,
    ParamBlock,
    block_from_state,
    block_release,
    device_ordinal,
    lookup_type,
    pack_items,
    set_launch_device,
    state_release,
    untyped_block_items,
)
from kernarg._interop cimport (
    KIND_TENSOR_MAP,
    _describe,
    _reraise,
    _type_name,
    kernarg_seq_begin,
    kernarg_seq_valid,
    kernarg_seq_write_begin,
    kernarg_seq_write_end,
    load_int,
    load_object,
    store_int,
    store_type,
)
from kernarg._signature cimport Signature, pack_typed_items, ptx_text, typed_block_items
from kernarg._stream cimport (
    KERNARG_GUARDED_BUILD,
    LazySection,
    enter_lazily,
    guard_module,
    kernarg_object_lock,
    kernarg_object_unlock,
    kernarg_section,
    leave_lazily,
    stream_handle,
    stream_handle_lazily,
)

include "_driver_compat.pxi"    # written by setup.py for the cuda-bindings being built against

# What a free-threaded build's launches read outside kernarg's section (_cutils.h): a Kernel's
# limits and last dimensions, written only inside it.
cdef extern from "_cutils.h":
    unsigned int load_uint "KERNARG_LOAD_RELAXED"(unsigned int) noexcept nogil
    void store_uint "KERNARG_STORE_RELAXED"(unsigned int, unsigned int) noexcept nogil
    void kernarg_set_ref(PyObject** slot, PyObject* v) noexcept
    void kernarg_copy_words(void* dst, const void* src, size_t nwords) noexcept nogil
    bint kernarg_same_pointers(PyObject* const* stored, PyObject* const* given,
                               size_t n) noexcept nogil
    void* kernarg_load_ptr(void* const* slot) noexcept nogil
    void kernarg_push_ptr(void** head, void** next, void* node) noexcept nogil
    void kernarg_spin_lock(int* lock) noexcept nogil
    void kernarg_spin_unlock(int* lock) noexcept nogil

# A launch attribute's value in C words, as a Kernel keeps those of its kept launches with
# attributes (KeptConfig.values): what a launch outside kernarg's section compares by value
# (_equal_values_of), where it may compare the kept objects' addresses but not follow them;
# and the release store that publishes the kept launches (Kernel._cfgs).
cdef extern from *:
    """
    /* A value given for a launch attribute (a, NULL where none was: the default, as
       kernarg_equal_attribute takes it), in C words: its kind and up to four 64-bit words,
       the rest zero, so that two values kernarg_equal_attribute finds equal, of the kinds
       below, have equal words, and values of other kinds or values have other words. None,
       False and True; an int that fits 64 bits; a float, bit for bit; a tuple of up to four
       such ints (a cluster). Anything else (a str, a bigger int or tuple) is of kind
       KERNARG_VALUE_OTHER, which only the object itself matches. Reads only what a, which
       the caller holds, holds: immutable objects, with no Python code run. */
    enum {
        KERNARG_VALUE_OTHER, KERNARG_VALUE_NONE, KERNARG_VALUE_FALSE, KERNARG_VALUE_TRUE,
        KERNARG_VALUE_INT, KERNARG_VALUE_FLOAT, KERNARG_VALUE_TUPLE   /* + its length */
    };
    typedef struct { int64_t kind; int64_t words[4]; } kernarg_attr_value;

    /* Store p in *slot with release, for readers that load it with acquire
       (kernarg_load_ptr): what p points at, written before, is seen by them. */
    static inline void kernarg_publish_ptr(void **slot, void *p) {
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    }

    static int kernarg_value_word(PyObject *a, int64_t *word) {
        int overflow;
        if (Py_TYPE(a) != &PyLong_Type) return 0;
        *word = PyLong_AsLongLongAndOverflow(a, &overflow);     /* an exact int: no error */
        return !overflow;
    }

    static void kernarg_encode_attribute(kernarg_attr_value *v, PyObject *a, int flag) {
        Py_ssize_t i, n;
        double x;
        memset(v, 0, sizeof *v);
        if (a == NULL) a = flag ? Py_False : Py_None;
        if (a == Py_None) {
            v->kind = KERNARG_VALUE_NONE;
        } else if (a == Py_False || a == Py_True) {
            v->kind = a == Py_True ? KERNARG_VALUE_TRUE : KERNARG_VALUE_FALSE;
        } else if (Py_TYPE(a) == &PyFloat_Type) {
            x = PyFloat_AS_DOUBLE(a);
            memcpy(&v->words[0], &x, sizeof x);
            v->kind = KERNARG_VALUE_FLOAT;
        } else if (kernarg_value_word(a, &v->words[0])) {
            v->kind = KERNARG_VALUE_INT;
        } else if (Py_TYPE(a) == &PyTuple_Type && (n = PyTuple_GET_SIZE(a)) <= 4) {
            for (i = 0; i < n; i++)
                if (!kernarg_value_word(PyTuple_GET_ITEM(a, i), &v->words[i])) {
                    memset(v, 0, sizeof *v);
                    return;
                }
            v->kind = KERNARG_VALUE_TUPLE + n;
        } else {
            v->words[0] = 0;        /* (an int past 64 bits may have left its word) */
        }
    }
    """
    ctypedef struct kernarg_attr_value:
        long long kind
    enum: KERNARG_VALUE_OTHER
    void kernarg_encode_attribute(kernarg_attr_value* v, PyObject* a, bint flag) noexcept
    void kernarg_publish_ptr(void** slot, void* p) noexcept nogil

import array
import operator
import os
import sys
import threading
import weakref
from collections import OrderedDict

from kernarg._errors import CudaError, NoDriverError
from kernarg._nvrtc import normalize_options
from kernarg._signature import _inline_namespaces, check_kernel_name

__all__ = ["BoundLaunch", "Kernel", "KernelNode", "LaunchConfig", "PreparedLaunch", "launch",
           "set_producer_sync"]

cdef enum:
    MAX_ATTRS = 15
    MAX_BLOCK_THREADS = 1024
    # Kernel.launch's parameters (_KERNEL_LAUNCH_NAMES): grid, block, stream, shmem, then
    # the launch attributes, whose values a config is made from (KeptConfig.attributes_from)
    KERNEL_LAUNCH_NAMES = 19
    LAUNCH_ATTRIBUTE_NAMES = KERNEL_LAUNCH_NAMES - 4
    # The launches with launch attributes a Kernel keeps (Kernel._cfgs): launches that
    # alternate between that many sets of attributes, or threads that launch one kernel
    # with attributes of their own, find theirs
    KEPT_CONFIGS = 4

_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_BLOCK_LIMITS = (1024, 1024, 64)
_CLUSTER_LIMITS = (16, 16, 16)    # each axis may take all 16 blocks of a non-portable cluster
cdef long long GRID_LIMITS[3]
cdef long long BLOCK_LIMITS[3]
cdef long long CLUSTER_LIMITS[3]
GRID_LIMITS[:] = [2**31 - 1, 65535, 65535]
BLOCK_LIMITS[:] = [1024, 1024, 64]
CLUSTER_LIMITS[:] = [16, 16, 16]


cdef struct Dims:
    # What cuLaunchKernelEx needs besides the attributes: checked grid, block and shmem; and
    # what the launch checks against the kernel's limits.
    unsigned int grid[3]
    unsigned int block[3]
    unsigned int shmem
    unsigned int threads            # block[0] * block[1] * block[2]
    unsigned int cluster_blocks     # blocks per cluster (0: no cluster attribute)
    unsigned int domains            # 1 + the highest domain mem_sync_domain_map names (or 0)
    bint cooperative                # a cooperative launch: all blocks must be co-resident
    # A shmem_mode other than "default": the driver alone judges shmem (the mode overrides the
    # kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES).
    bint shmem_by_driver


cdef struct KeptConfig:
    # What a Kernel.launch with launch attributes launched (dimensions and attributes, as a
    # config has them), and the objects it was made from (grid, block and shmem, and the
    # attributes' values in _KERNEL_LAUNCH_NAMES's order, NULL where none was given), when
    # every one was immutable: the same objects again launch the same (_last_config_of), and
    # so do equal attribute values (_equal_values_of, by the values in C words, ``values``;
    # else _equal_to_last_config, which keeps the new objects). Strong references (dropped in
    # Kernel.__dealloc__), written with ``seq`` in kernarg's section (_remember_config), read
    # by launches outside it (_last_config_of, _equal_values_of), which copy the rest: a
    # launch that releases the GIL, or runs outside the section, may find them rewritten.
    PyObject* dims_from[3]
    PyObject* attributes_from[LAUNCH_ATTRIBUTE_NAMES]
    kernarg_attr_value values[LAUNCH_ATTRIBUTE_NAMES]
    Dims dims
    cydriver.CUlaunchAttribute attrs[MAX_ATTRS]
    unsigned int nattrs
    unsigned seq


cdef struct CoopLimit:
    # The blocks a cooperative launch may have (_cooperative_limit) for the block shape last
    # asked: a Kernel's, 32-bit words that a launch outside kernarg's section copies whole.
    unsigned int threads
    unsigned int shmem
    long long blocks                # 0 until asked
    int per_sm                      # the occupancy calculator's blocks per multiprocessor


cdef bint _is_bool(object v):
    return isinstance(v, bool) or is_numpy_bool(type(v))


cdef object _index(object v, str what):
    """``v`` as an int: a Python int, or any integer that says so through ``__index__`` (numpy
    and CuPy integer scalars, a 0-d integer array); never a bool or a float."""
    if _is_bool(v):
        raise TypeError(f"{what} must be an int, got {type(v).__name__}")
    if isinstance(v, int):
        return v
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(v).__name__}") from None


def _dims(value, str what, limits):
    """Normalise a grid/block/cluster value to a 3-tuple of positive ints within ``limits``."""
    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, "
                            f"got {shown_value(value, True)}")
        dims = tuple(value) + (1,) * (3 - len(value))
    elif _is_bool(value):
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got bool")
    else:
        try:
            dims = (_index(value, what), 1, 1)
        except TypeError:
            raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, "
                            f"got {shown_value(value, True)}") from None
    dims = tuple(_index(d, f"{what}[{axis}]") for axis, d in enumerate(dims))
    for axis, (d, limit) in enumerate(zip(dims, limits)):
        if not 1 <= d <= limit:
            raise ValueError(f"{what}[{axis}] is {shown_value(d)}; it must be between 1 and "
                             f"{limit}")
    return dims


cdef inline bint _fast_dim(object v, long long limit, unsigned int* out) noexcept:
    cdef long long x
    if type(v) is int and kernarg_small_int(<PyObject*>v, &x) and 1 <= x <= limit:
        out[0] = <unsigned int>x
        return True
    return False


cdef int _fill_dims(object value, unsigned int* out, str what, const long long* lim) except -1:
    """``_dims`` into ``out`` without a Python object for the common cases (an int, or a
    tuple of ints, within the limits ``lim``); anything else goes through ``_dims``, which
    raises the message or accepts what it accepts (int subclasses, lists). (The limits are
    not passed as the module's tuples: a free-threaded build looks a module global up in the
    module's dict at each read, ~120 instructions, where a GIL build keeps it cached.)"""
    cdef Py_ssize_t n, i
    if _fast_dim(value, lim[0], out):
        out[1] = 1
        out[2] = 1
        return 0
    if type(value) is tuple:
        n = len(<tuple>value)
        if 1 <= n <= 3:
            for i in range(3):
                if i >= n:
                    out[i] = 1
                elif not _fast_dim((<tuple>value)[i], lim[i], out + i):
                    break
            else:
                return 0
    out[0], out[1], out[2] = _dims(value, what, (lim[0], lim[1], lim[2]))
    return 0


cdef int _fill_config(Dims* d, object grid, object block, object shmem) except -1:
    """Check and store grid, block and shmem, with LaunchConfig's messages."""
    cdef long long threads, sh
    _fill_dims(grid, d.grid, "grid", GRID_LIMITS)
    _fill_dims(block, d.block, "block", BLOCK_LIMITS)
    threads = <long long>d.block[0] * d.block[1] * d.block[2]
    d.threads = <unsigned int>threads
    d.cluster_blocks = 0
    d.domains = 0
    d.cooperative = False
    d.shmem_by_driver = False
    if threads > MAX_BLOCK_THREADS:
        raise ValueError(f"block {(d.block[0], d.block[1], d.block[2])} has {threads} threads; "
                         f"the limit is {MAX_BLOCK_THREADS}")
    if type(shmem) is int and kernarg_small_int(<PyObject*>shmem, &sh) and 0 <= sh < 2**32:
        d.shmem = <unsigned int>sh
    else:
        try:
            value = _index(shmem, "shmem")
        except TypeError:
            value = None
        if value is None or not 0 <= value < 2**32:
            raise ValueError(f"shmem must be an int between 0 and 2**32-1 bytes, "
                             f"got {shown_value(shmem, True)}")
        d.shmem = <unsigned int>value
    return 0


@cython.final
cdef class LaunchConfig:
    """A validated launch configuration (no driver needed to build one). A value: equal,
    hashed, pickled and copied by its fields.

    Parameters
    ----------
    grid, block : int or tuple
        Grid and block dimensions; up to 3 ints. Block: at most 1024 threads in all, z <= 64.
    shmem : int
        Dynamic shared memory in bytes (the device limit is checked at launch).
    cluster : int or tuple, optional
        Thread-block cluster dimensions (compute capability 9.0+); the grid must be a multiple.
    cooperative : bool
        Cooperative launch (grid-wide synchronisation); at launch, the grid is checked
        against the blocks the kernel can have resident at once (Kernel.max_cooperative_blocks);
        a grid of clusters is the driver's to refuse, with the clusters it has and
        Kernel.max_active_clusters in the error.
    pdl : bool
        Programmatic dependent launch (may overlap the previous kernel in the stream).
    priority : int, optional
        Launch priority.
    cluster_scheduling : str, optional
        How the blocks of a cluster are placed on SMs: ``"default"``, ``"spread"`` or
        ``"load_balancing"`` (``CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE``).
    preferred_cluster : int or tuple, optional
        A larger cluster the device may group blocks into instead of ``cluster``, best effort
        (``CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION``, CUDA 12.8+ drivers): needs
        ``cluster``; each axis a multiple of the cluster's (z equal to it), and dividing the grid.
    mem_sync_domain : str, optional
        The memory synchronisation domain of the kernel's memory operations: ``"default"`` or
        ``"remote"`` (``CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN``; compute capability 9.0+).
    mem_sync_domain_map : tuple or dict, optional
        The physical domains the two logical ones are mapped to for this launch, ``(default,
        remote)`` or ``{"default": d, "remote": r}``: domain ids from 0 to the device's
        ``MEM_SYNC_DOMAIN_COUNT`` - 1 (4 domains on compute capability 9.0; checked at launch)
        (``CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP``).
    nvlink_util_centric : bool, optional
        A hint that the kernel's blocks each carry about as much NVLink traffic, which the
        driver may schedule the launch for (``True``), or not (``False``, passed too: a launch
        attribute overrides the stream's) (``CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING``;
        CUDA 13 drivers).
    cluster_size_mode : str, optional
        Whether the cluster may have a non-portable size (more than 8 blocks):
        ``"default"`` (the kernel's ``NON_PORTABLE_CLUSTER_SIZE_ALLOWED``, which kernarg sets
        on first need), ``"require_portable"`` (a cluster of more than 8 blocks is a
        ValueError here) or ``"allow_non_portable"``
        (``CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE``; CUDA 13.2 drivers).
    shmem_mode : str, optional
        The dynamic shared memory ``shmem`` may take: ``"default"`` (the kernel's
        ``MAX_DYNAMIC_SHARED_SIZE_BYTES``, which kernarg raises at launch up to the device's
        opt-in limit), ``"require_portable"`` (within ``MAX_SHARED_MEMORY_PER_BLOCK``),
        ``"allow_non_portable"`` (within ``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``),
        ``"allow_oversized"`` or ``"prefer_oversized"`` (past it, up to
        ``MAX_OVERSIZED_SHARED_MEMORY_PER_BLOCK``, with 8 KiB of L1 cache left)
        (``CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE``; CUDA 13.2 drivers). With a mode but
        ``"default"``, the driver alone judges ``shmem``: kernarg neither raises the kernel's
        attribute, which the mode overrides, nor refuses a size.
    shmem_carveout : int, optional
        Preferred shared memory carveout, in percent (0-100) of the shared memory and L1 they
        share; a hint (``CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT``).
    access_policy : tuple or dict, optional
        An L2 access policy window (``CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW``): ``(base,
        num_bytes, hit_ratio=1.0, hit="persisting", miss="streaming")``, or a dict of those
        names. ``base`` is an address (int) or any pointer argument kernarg packs (a device
        buffer, an array); its address is read once, and the config does not keep it alive
        (the window is a cache hint: the driver reads no memory through it). ``hit`` is
        ``"normal"``, ``"streaming"`` or ``"persisting"``, ``miss`` ``"normal"`` or
        ``"streaming"``; ``num_bytes`` is limited by the device's
        ``MAX_ACCESS_POLICY_WINDOW_SIZE`` (checked by the driver at launch).
    launch_completion_event : event, optional
        An event recorded once every block of the kernel has begun
        (``CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT``; best effort, see cuda.h): a
        ``CUevent`` as an int or a cuda.bindings handle, or a cuda.core ``Event``. It must be
        made without timing (``CU_EVENT_DISABLE_TIMING``). The config holds the object given.
    programmatic_event : event or tuple, optional
        An event recorded once every block has triggered it
        (``cudaTriggerProgrammaticLaunchCompletion()``, PTX ``griddepcontrol.launch_dependents``),
        or, with ``(event, True)``, as each block starts
        (``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT``; compute capability 9.0+): kernels that
        wait for it may start before this one ends and synchronise with
        ``cudaGridDependencySynchronize()``. An event as for ``launch_completion_event``.
        A config with an event cannot be pickled (a handle is valid in its process only).
    """

    cdef readonly tuple grid
    cdef readonly tuple block
    cdef readonly unsigned int shmem
    cdef readonly object cluster
    cdef readonly bint cooperative
    cdef readonly bint pdl
    cdef readonly object priority
    cdef readonly object cluster_scheduling
    cdef readonly object preferred_cluster
    cdef readonly object mem_sync_domain
    cdef readonly object mem_sync_domain_map
    cdef readonly object nvlink_util_centric
    cdef readonly object cluster_size_mode
    cdef readonly object shmem_mode
    cdef readonly object shmem_carveout
    cdef readonly object access_policy
    cdef readonly object launch_completion_event
    cdef readonly object programmatic_event
    cdef tuple _events                  # the event objects given: the config keeps them alive
    cdef cydriver.CUlaunchAttribute _attrs[MAX_ATTRS]
    cdef unsigned int _nattrs
    cdef Dims _d

    def __init__(self, grid, block, *, shmem=0, cluster=None, cooperative=False, pdl=False,
                 priority=None, cluster_scheduling=None, preferred_cluster=None,
                 mem_sync_domain=None, shmem_carveout=None, access_policy=None,
                 launch_completion_event=None, programmatic_event=None,
                 mem_sync_domain_map=None, nvlink_util_centric=None, cluster_size_mode=None,
                 shmem_mode=None):
        if self.grid is not None:
            # A value, and launchers read its fields without a lock (a prepared launch on a
            # free-threaded build, and the driver with the GIL released): set once.
            raise TypeError("a LaunchConfig cannot be initialised again: make a new one")
        # A check below that reads the grid, block or shmem is made by _regrid too (a
        # Kernel.launch of the attributes of a launch with attributes it kept, on a new grid).
        _fill_config(&self._d, grid, block, shmem)
        self.grid = (self._d.grid[0], self._d.grid[1], self._d.grid[2])
        self.block = (self._d.block[0], self._d.block[1], self._d.block[2])
        self.shmem = self._d.shmem
        self.cooperative = bool(cooperative)
        self.pdl = bool(pdl)
        memset(self._attrs, 0, sizeof(self._attrs))
        self._nattrs = 0
        cdef cydriver.CUlaunchAttributeValue* v
        cdef unsigned int dims[3]
        cdef unsigned int size
        cdef int axis
        self.cluster = None
        if cluster is not None:
            # Each axis may take all 16 blocks of a non-portable cluster; the block count
            # is checked below, and over 8 needs the kernel's opt-in at launch.
            _fill_dims(cluster, dims, "cluster", CLUSTER_LIMITS)
            self.cluster = (dims[0], dims[1], dims[2])
            for axis in range(3):
                if self._d.grid[axis] % dims[axis]:
                    raise ValueError(f"grid {self.grid} is not a multiple of cluster "
                                     f"{self.cluster} on axis {axis}")
            size = dims[0] * dims[1] * dims[2]
            if size > 16:
                raise ValueError(f"cluster {self.cluster} has {size} blocks; the limit is 16 "
                                 "(8 is portable)")
            self._d.cluster_blocks = size
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = dims[0], dims[1], dims[2]
        if self.cooperative:
            self._d.cooperative = True
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_COOPERATIVE).cooperative = 1
        if self.pdl:
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) \
                .programmaticStreamSerializationAllowed = 1
        if priority is not None:
            # Any int the attribute's C int holds, a numpy int too, as for the other values;
            # the driver judges it against the context's range (cuCtxGetStreamPriorityRange).
            priority = _index(priority, "priority")
            if not -2**31 <= priority < 2**31:
                raise ValueError(f"priority must be an int between -2**31 and 2**31-1 (a C "
                                 f"int), got {shown_value(priority)}")
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_PRIORITY).priority = priority
        self.priority = priority
        self.cluster_scheduling = None
        if cluster_scheduling is not None:
            self.cluster_scheduling = _choice(cluster_scheduling, "cluster_scheduling",
                                              _CLUSTER_SCHEDULING)
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) \
                .clusterSchedulingPolicyPreference = \
                _CLUSTER_SCHEDULING[self.cluster_scheduling]
        self.preferred_cluster = None
        if preferred_cluster is not None:
            self.preferred_cluster = _preferred_cluster(preferred_cluster, self.grid,
                                                        self.cluster)
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
            v.preferredClusterDim.x, v.preferredClusterDim.y, v.preferredClusterDim.z = \
                self.preferred_cluster
        self.mem_sync_domain = None
        if mem_sync_domain is not None:
            self.mem_sync_domain = _choice(mem_sync_domain, "mem_sync_domain",
                                           _MEM_SYNC_DOMAINS)
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN).memSyncDomain = \
                _MEM_SYNC_DOMAINS[self.mem_sync_domain]
        self.mem_sync_domain_map = None
        if mem_sync_domain_map is not None:
            self.mem_sync_domain_map = _domain_map(mem_sync_domain_map)
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)
            v.memSyncDomainMap.default_, v.memSyncDomainMap.remote = self.mem_sync_domain_map
            self._d.domains = 1 + max(self.mem_sync_domain_map)
        self.nvlink_util_centric = None
        if nvlink_util_centric is not None:
            if not _is_bool(nvlink_util_centric):
                raise TypeError("nvlink_util_centric must be True or False (a scheduling hint), "
                                f"got {shown_value(nvlink_util_centric, True)}")
            self.nvlink_util_centric = bool(nvlink_util_centric)
            self._add_uint(ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, self.nvlink_util_centric)
        self.cluster_size_mode = None
        if cluster_size_mode is not None:
            self.cluster_size_mode = _choice(cluster_size_mode, "cluster_size_mode",
                                             _CLUSTER_SIZE_MODES)
            if self.cluster_size_mode == "require_portable" and self._d.cluster_blocks > 8:
                raise ValueError(f"cluster {self.cluster} has {self._d.cluster_blocks} blocks; "
                                 "cluster_size_mode='require_portable' allows at most 8 (the "
                                 "portable cluster size)")
            self._add_uint(ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE,
                           _CLUSTER_SIZE_MODES[self.cluster_size_mode])
        self.shmem_mode = None
        if shmem_mode is not None:
            self.shmem_mode = _choice(shmem_mode, "shmem_mode", _SHMEM_MODES)
            self._d.shmem_by_driver = self.shmem_mode != "default"
            self._add_uint(ATTRIBUTE_SHARED_MEMORY_MODE, _SHMEM_MODES[self.shmem_mode])
        self.shmem_carveout = None
        if shmem_carveout is not None:
            self.shmem_carveout = _index(shmem_carveout, "shmem_carveout")
            if not 0 <= self.shmem_carveout <= 100:
                raise ValueError("shmem_carveout must be a percentage of the shared memory "
                                 "and L1 they share, from 0 to 100, got "
                                 f"{shown_value(self.shmem_carveout)}")
            self._add(cydriver.CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) \
                .sharedMemCarveout = self.shmem_carveout
        self.access_policy = None
        if access_policy is not None:
            self.access_policy = _access_policy(access_policy)
            base, num_bytes, hit_ratio, hit, miss = self.access_policy
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
            v.accessPolicyWindow.base_ptr = <void*><uintptr_t><uint64_t>base
            v.accessPolicyWindow.num_bytes = num_bytes
            v.accessPolicyWindow.hitRatio = hit_ratio
            v.accessPolicyWindow.hitProp = _ACCESS_PROPERTIES[hit]
            v.accessPolicyWindow.missProp = _ACCESS_PROPERTIES[miss]
        self._events = (launch_completion_event, programmatic_event)
        self.launch_completion_event = None
        if launch_completion_event is not None:
            self.launch_completion_event = _event_handle(launch_completion_event,
                                                         "launch_completion_event")
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
            v.launchCompletionEvent.event = \
                <cydriver.CUevent><uintptr_t>self.launch_completion_event
        self.programmatic_event = None
        if programmatic_event is not None:
            event, at_start = programmatic_event, False
            if isinstance(programmatic_event, tuple):
                if len(programmatic_event) != 2 or not _is_bool(programmatic_event[1]):
                    raise TypeError("programmatic_event must be an event or a tuple (event, "
                                    "trigger_at_block_start: bool), got "
                                    f"{shown_value(programmatic_event, True)}")
                event, at_start = programmatic_event
            self.programmatic_event = (_event_handle(event, "programmatic_event"),
                                       bool(at_start))
            v = self._add(cydriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
            v.programmaticEvent.event = <cydriver.CUevent><uintptr_t>self.programmatic_event[0]
            v.programmaticEvent.triggerAtBlockStart = self.programmatic_event[1]

    cdef cydriver.CUlaunchAttributeValue* _add(self, cydriver.CUlaunchAttributeID attr_id):
        """The value of one more attribute, ``attr_id``, for the caller to fill (zeroed)."""
        self._attrs[self._nattrs].id = attr_id
        self._nattrs += 1
        return &self._attrs[self._nattrs - 1].value

    cdef void _add_uint(self, int attr_id, unsigned int value) noexcept:
        """One more attribute, ``attr_id``, whose value is the union's first 4 bytes: an
        unsigned int or an enum (the attributes of CUDA 13 cydriver 12.x does not name)."""
        (<unsigned int*>self._add(<cydriver.CUlaunchAttributeID>attr_id))[0] = value

    @property
    def attributes(self):
        """The launch attributes as (name, value) pairs, in the order passed to the driver."""
        return tuple([(name, getattr(self, field) if field else 1)
                      for name, field in [_ATTRIBUTE_NAMES[<int>self._attrs[i].id]
                                          for i in range(self._nattrs)]])

    def _raw_attributes(self):
        """``((id, value bytes), ...)``: the CUlaunchAttribute array given to the driver, each
        value union's 64 bytes as cuda.h lays them out (for tests to read back)."""
        return tuple([(<int>self._attrs[i].id,
                       (<char*>&self._attrs[i].value)[:sizeof(cydriver.CUlaunchAttributeValue)])
                      for i in range(self._nattrs)])

    def __repr__(self):
        return (f"LaunchConfig(grid={self.grid}, block={self.block}, shmem={self.shmem}, "
                f"attributes={self.attributes})")

    # A LaunchConfig is a value: equal to another of the same fields, hashable by them, and
    # pickled (and copied) as the arguments that build it again, checked again there.

    cdef tuple _fields(self):
        return (self.grid, self.block, self.shmem, self.cluster, self.cooperative, self.pdl,
                self.priority, self.cluster_scheduling, self.preferred_cluster,
                self.mem_sync_domain, self.shmem_carveout, self.access_policy,
                self.launch_completion_event, self.programmatic_event,
                self.mem_sync_domain_map, self.nvlink_util_centric, self.cluster_size_mode,
                self.shmem_mode)

    cdef tuple _given(self):
        """_fields with the event objects given in place of their handles, to build an equal
        config that keeps them alive too."""
        cdef tuple fields = self._fields()
        return fields[:12] + self._events + fields[14:]

    def __eq__(self, other):
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self._fields() == (<LaunchConfig>other)._fields()

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        if self.launch_completion_event is not None or self.programmatic_event is not None:
            raise TypeError("a kernarg.LaunchConfig with an event (launch_completion_event, "
                            "programmatic_event) cannot be pickled: an event handle is valid "
                            "in its process only")
        return (_launch_config, self._fields())

    # A value that cannot change: a copy is the config itself (one with events cannot be
    # pickled, which copy would otherwise do).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __replace__(self, **changes):
        """``copy.replace(config, shmem=4096)`` (Python 3.13+): this configuration with the
        fields named changed, checked again as a new one is."""
        fields = dict(zip(_CONFIG_FIELDS, self._given()))
        for name in changes:
            if name not in fields:
                raise TypeError(f"LaunchConfig has no field {name!r} (its fields: "
                                f"{', '.join(_CONFIG_FIELDS)})")
        fields.update(changes)
        return _launch_config(*fields.values())


_CONFIG_FIELDS = ("grid", "block", "shmem", "cluster", "cooperative", "pdl", "priority",
                  "cluster_scheduling", "preferred_cluster", "mem_sync_domain",
                  "shmem_carveout", "access_policy", "launch_completion_event",
                  "programmatic_event", "mem_sync_domain_map", "nvlink_util_centric",
                  "cluster_size_mode", "shmem_mode")


def _launch_config(grid, block, shmem, cluster, cooperative, pdl, priority,
                   cluster_scheduling=None, preferred_cluster=None, mem_sync_domain=None,
                   shmem_carveout=None, access_policy=None, launch_completion_event=None,
                   programmatic_event=None, mem_sync_domain_map=None,
                   nvlink_util_centric=None, cluster_size_mode=None, shmem_mode=None):
    """A pickled LaunchConfig, made again from its fields (pickles of kernarg before the
    fields after ``priority`` have seven, before ``mem_sync_domain_map`` fourteen, and
    before ``nvlink_util_centric`` fifteen)."""
    return LaunchConfig(grid, block, shmem=shmem, cluster=cluster, cooperative=cooperative,
                        pdl=pdl, priority=priority, cluster_scheduling=cluster_scheduling,
                        preferred_cluster=preferred_cluster, mem_sync_domain=mem_sync_domain,
                        shmem_carveout=shmem_carveout, access_policy=access_policy,
                        launch_completion_event=launch_completion_event,
                        programmatic_event=programmatic_event,
                        mem_sync_domain_map=mem_sync_domain_map,
                        nvlink_util_centric=nvlink_util_centric,
                        cluster_size_mode=cluster_size_mode, shmem_mode=shmem_mode)


# The launch attributes of CUDA 13 that cuda-bindings 12.x's cydriver does not name: their
# cuda.h values, which the driver's ABI fixes. Each value is the union's first 4 bytes: an
# unsigned int (nvlinkUtilCentricScheduling) or an enum (portableClusterSizeMode,
# sharedMemoryMode). A driver that does not know one refuses the launch, as for any attribute.
cdef enum:
    ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING = 16
    ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE = 17
    ATTRIBUTE_SHARED_MEMORY_MODE = 18


# Each launch attribute LaunchConfig passes: its name in ``attributes``, and the field that
# holds its value (None: the attribute is a flag, passed as 1).
_ATTRIBUTE_NAMES = {
    cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: ("cluster_dimension", "cluster"),
    cydriver.CU_LAUNCH_ATTRIBUTE_COOPERATIVE: ("cooperative", None),
    cydriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        ("programmatic_stream_serialization", None),
    cydriver.CU_LAUNCH_ATTRIBUTE_PRIORITY: ("priority", "priority"),
    cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        ("cluster_scheduling_policy_preference", "cluster_scheduling"),
    cydriver.CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        ("preferred_cluster_dimension", "preferred_cluster"),
    cydriver.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: ("mem_sync_domain", "mem_sync_domain"),
    cydriver.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        ("mem_sync_domain_map", "mem_sync_domain_map"),
    cydriver.CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        ("preferred_shared_memory_carveout", "shmem_carveout"),
    cydriver.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: ("access_policy_window", "access_policy"),
    cydriver.CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        ("launch_completion_event", "launch_completion_event"),
    cydriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: ("programmatic_event", "programmatic_event"),
    ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        ("nvlink_util_centric_scheduling", "nvlink_util_centric"),
    ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE: ("portable_cluster_size_mode", "cluster_size_mode"),
    ATTRIBUTE_SHARED_MEMORY_MODE: ("shared_memory_mode", "shmem_mode"),
}
# The attributes older drivers do not know: id -> (keyword, the CUDA version of the first
# driver that takes it, as cuDriverGetVersion gives it), oldest first: cuda.h 12.4 added the
# device-updatable node (Kernel.graph_node's keyword only), 13.0 the NVLink hint, 13.2 the two
# modes.
_NEWER_ATTRIBUTES = {
    cydriver.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: ("device_updatable", 12040),
    ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING: ("nvlink_util_centric", 13000),
    ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE: ("cluster_size_mode", 13020),
    ATTRIBUTE_SHARED_MEMORY_MODE: ("shmem_mode", 13020),
}


cdef object _too_new(const cydriver.CUlaunchAttribute* attrs, unsigned int nattrs):
    """Why the driver refused the attributes ``attrs``, where one is newer than the driver (the
    driver reports it as an invalid value only), in words; else None."""
    cdef int version = 0
    cdef unsigned int i
    for i in range(nattrs):
        found = _NEWER_ATTRIBUTES.get(<int>attrs[i].id)
        if found is None:
            continue
        keyword, needed = found
        if version == 0 and cydriver.cuDriverGetVersion(&version) != cydriver.CUDA_SUCCESS:
            return None
        if version < needed:
            return (f"{keyword} needs a driver of CUDA {needed // 1000}.{needed % 1000 // 10} "
                    f"or later; this one is CUDA {version // 1000}.{version % 1000 // 10}")
    return None


# The launch attributes whose values are names: each name, and the driver's enumerator for it.
_CLUSTER_SCHEDULING = {"default": cydriver.CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
                       "spread": cydriver.CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
                       "load_balancing": cydriver.CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING}
_MEM_SYNC_DOMAINS = {"default": cydriver.CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
                     "remote": cydriver.CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE}
# cuda.h 13's CUlaunchAttributePortableClusterMode and CUsharedMemoryMode (not in 12.x's).
_CLUSTER_SIZE_MODES = {"default": 0, "require_portable": 1, "allow_non_portable": 2}
_SHMEM_MODES = {"default": 0, "require_portable": 1, "allow_non_portable": 2,
                "allow_oversized": 3, "prefer_oversized": 4}
_ACCESS_PROPERTIES = {"normal": cydriver.CU_ACCESS_PROPERTY_NORMAL,
                      "streaming": cydriver.CU_ACCESS_PROPERTY_STREAMING,
                      "persisting": cydriver.CU_ACCESS_PROPERTY_PERSISTING}
_ACCESS_POLICY_FIELDS = ("base", "num_bytes", "hit_ratio", "hit", "miss")


cdef str _choice(object value, str what, dict choices):
    """``value``, one of the names in ``choices``, or an error that lists them."""
    if type(value) is not str or value not in choices:
        names = ", ".join([repr(name) for name in choices])
        kind = ValueError if isinstance(value, str) else TypeError
        raise kind(f"{what} must be one of {names}, got {shown_value(value, True)}")
    return value


cdef tuple _domain_map(object value):
    """``(default, remote)``: the domain ids a mem_sync_domain_map maps the two logical
    domains to, from a pair or a dict of the two names; each a C unsigned char (the device's
    domain count is checked at launch)."""
    if isinstance(value, dict):
        unknown = [key for key in value if key not in _MEM_SYNC_DOMAINS]
        if unknown or len(value) != 2:
            raise TypeError("mem_sync_domain_map must map both 'default' and 'remote' to a "
                            f"domain id, got {shown_value(value, True)}")
        pair = (value["default"], value["remote"])
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        pair = tuple(value)
    else:
        raise TypeError("mem_sync_domain_map must be a pair (default, remote) of domain ids or "
                        f"a dict of those names, got {shown_value(value, True)}")
    ids = []
    for name, domain in zip(("default", "remote"), pair):
        domain = _index(domain, f"mem_sync_domain_map {name}")
        if not 0 <= domain <= 255:
            raise ValueError(f"mem_sync_domain_map {name} must be a domain id from 0 to the "
                             f"device's domain count - 1, got {shown_value(domain)}")
        ids.append(domain)
    return tuple(ids)


cdef tuple _preferred_cluster(object value, tuple grid, object cluster):
    """The preferred (substitute) cluster's dimensions, checked as cuda.h states the rules: a
    regular cluster must be given, each axis a multiple of its axis (z equal to it), and the
    grid a multiple of the preferred cluster."""
    cdef unsigned int d[3]
    _fill_dims(value, d, "preferred_cluster", GRID_LIMITS)
    dims = (d[0], d[1], d[2])
    if cluster is None:
        raise ValueError(f"preferred_cluster {dims} needs a cluster: the preferred cluster is a "
                         "larger substitute for the cluster given by cluster=")
    for axis in range(3):
        if dims[axis] % cluster[axis] or (axis == 2 and dims[2] != cluster[2]):
            raise ValueError(f"preferred_cluster {dims} must be a multiple of cluster "
                             f"{cluster} on axes 0 and 1 and equal to it on axis 2 (axis "
                             f"{axis} is {dims[axis]})")
        if grid[axis] % dims[axis]:
            raise ValueError(f"grid {grid} is not a multiple of preferred_cluster {dims} on "
                             f"axis {axis}")
    return dims


cdef tuple _access_policy(object value):
    """An access policy window as the tuple ``(base, num_bytes, hit_ratio, hit, miss)``, from
    a tuple of 2 to 5 of those or a dict of their names; each checked."""
    if isinstance(value, dict):
        unknown = [key for key in value if key not in _ACCESS_POLICY_FIELDS]
        if unknown:
            raise TypeError(f"access_policy has no field {shown_value(unknown[0], True)} (its "
                            f"fields: {', '.join(_ACCESS_POLICY_FIELDS)})")
        missing = [key for key in _ACCESS_POLICY_FIELDS[:2] if key not in value]
        if missing:
            raise TypeError(f"access_policy must give {' and '.join(missing)}")
        fields = [value.get(key) for key in _ACCESS_POLICY_FIELDS]
    elif isinstance(value, (tuple, list)) and 2 <= len(value) <= 5:
        fields = list(value) + [None] * (5 - len(value))
    else:
        raise TypeError("access_policy must be a tuple (base, num_bytes[, hit_ratio[, hit[, "
                        "miss]]]) or a dict of those names, got "
                        f"{shown_value(value, True)}")
    base, num_bytes, hit_ratio, hit, miss = fields
    base = _window_base(base)
    num_bytes = _index(num_bytes, "access_policy num_bytes")
    if not 0 <= num_bytes < 2**64:
        raise ValueError(f"access_policy num_bytes must be between 0 and 2**64-1, got "
                         f"{shown_value(num_bytes)}")
    if hit_ratio is None:
        hit_ratio = 1.0
    elif _is_bool(hit_ratio) or isinstance(hit_ratio, (str, bytes)):
        raise TypeError("access_policy hit_ratio must be a number from 0 to 1, got "
                        f"{shown_value(hit_ratio, True)}")
    try:
        hit_ratio = float(hit_ratio)
    except Exception as exc:
        raise TypeError("access_policy hit_ratio must be a number from 0 to 1, got "
                        f"{shown_value(hit_ratio, True)}") from exc
    if not 0.0 <= hit_ratio <= 1.0:             # NaN fails both
        raise ValueError(f"access_policy hit_ratio must be from 0 to 1, got {hit_ratio!r}")
    hit = _choice("persisting" if hit is None else hit, "access_policy hit",
                  _ACCESS_PROPERTIES)
    miss = "streaming" if miss is None else miss
    if miss == "persisting":
        raise ValueError("access_policy miss must be 'normal' or 'streaming', got "
                         "'persisting' (the driver refuses it for the lines that miss)")
    miss = _choice(miss, "access_policy miss", _ACCESS_PROPERTIES)
    return (base, num_bytes, hit_ratio, hit, miss)


cdef object _event_handle(object event, str what):
    """The CUevent ``event`` is, as an int: an int handle, a cuda.bindings ``CUevent``, or a
    cuda.core ``Event``, which must not time (the driver records these attributes' events only
    where timing is disabled)."""
    if type(event).__module__.startswith("cuda.core") and \
            getattr(event, "is_timing_enabled", False) is True:
        raise ValueError(f"{what} must be an event without timing (CU_EVENT_DISABLE_TIMING), "
                         "got a cuda.core Event with timing enabled")
    return int(_handle_address(event, what, "Event"))


cdef ParamBlock _pack_one(object value):
    """``value`` packed untyped, alone, with no launch stream or device known."""
    cdef tuple one = (value,)
    return untyped_block_items(tuple_items(one), 1, one, 1, -1)


cdef object _window_base(object base):
    """The window's start address: an int, or the pointer kernarg would pass for ``base`` as
    a kernel argument (read through a block released at once: the window is a hint on an
    address range, and the config keeps no argument alive)."""
    if type(base) is int or (isinstance(base, int) and not _is_bool(base)):
        base = int(base)
        if not 0 <= base < 2**64:
            raise ValueError(f"access_policy base must be an address between 0 and 2**64-1, "
                             f"got {shown_value(base)}")
        return base
    if base is None or _is_bool(base) or isinstance(base, float):
        raise TypeError("access_policy base must be an address (int) or a pointer argument "
                        f"(a device buffer, an array), got {shown_value(base, True)}")
    try:
        blk = _pack_one(base)
    except Exception as exc:
        # The packer names "argument 0 (type)": here, the base is the argument.
        text = exc_text(exc)
        if text.startswith("argument 0 "):
            text = text[len("argument 0 "):]
        else:
            text = f"({_type_name(type(base))}): {text}"
        _reraise(exc, f"access_policy base {text}")
    try:
        if blk.sizes != (8,):
            raise TypeError("access_policy base must be an address (int) or a pointer "
                            f"argument, got {_type_name(type(base))}, which kernarg packs as "
                            f"{blk.sizes[0]} bytes")
        return int.from_bytes(bytes(blk), sys.byteorder)
    finally:
        blk.release()


# ---------------------------------------------------------------------------------------------
# Driver access. Every call goes through _check; a missing driver becomes NoDriverError.

# 1 once cuInit succeeded (0 again in a forked child): read whole (relaxed), as a
# free-threaded build's launches read it outside kernarg's section.
cdef int _driver_ready = 0
_driver_lock = threading.Lock()
# Set in the child of a fork() made after this process initialised CUDA: the driver does not
# support CUDA in such a child (a call may fail, hang or crash), so kernarg refuses before it
# calls the driver there, as PyTorch and CuPy do (see _after_fork_in_child).
cdef bint _forked_after_init = False


cdef str _error_name(cydriver.CUresult err):
    cdef const char* name = NULL
    try:
        if cydriver.cuGetErrorName(err, &name) == cydriver.CUDA_SUCCESS and name != NULL:
            return name.decode()
    except Exception:
        pass
    return f"CUresult {<int>err}"


cdef int _check(cydriver.CUresult err, str what) except -1:
    if err == cydriver.CUDA_SUCCESS:
        return 0
    name = _error_name(err)
    if err == cydriver.CUDA_ERROR_NO_DEVICE:
        raise NoDriverError(f"{what}: no CUDA GPU found ({name})", name, <int>err)
    if err == cydriver.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
        # A call the driver refuses while a stream captures a graph (in the global and
        # thread-local capture modes): allocating, synchronous copies, unloading code (which
        # kernarg's _unload relaxes), loading code before CUDA 13.0 (the 13.0 driver loads;
        # tools/probes/capture_calls.py) ... The refusal costs the capture.
        raise CudaError(f"{what} failed: {name}: a stream is capturing a CUDA graph, and the "
                        "driver refuses this call during a capture (that capture is now "
                        "invalidated): make it before beginning the capture -- load or compile "
                        "kernels (Kernel.from_source, from_ptx, from_cubin) first", name, <int>err)
    raise CudaError(f"{what} failed: {name}", name, <int>err)


cdef inline int _ensure_driver(LazySection* lazy=NULL) except -1:
    # Inline, the usual case is one compare: as a call, its prologue (the slow path's frame)
    # was ~30 instructions of every launch (tools/probes/cold_launch.py). ``lazy``: as for
    # _enqueue (cuInit is made in kernarg's section).
    if load_int(_driver_ready):
        return 0
    enter_lazily(lazy)
    return _init_driver()


cdef int _init_driver() except -1:
    global _driver_ready
    cdef cydriver.CUresult err
    if _forked_after_init:
        raise CudaError("CUDA cannot be used in this process: it was forked (os.fork, or "
                        "multiprocessing's 'fork' start method, the default on Linux before "
                        "Python 3.14) from a process that had initialised CUDA, which the driver "
                        "does not support; start workers with the 'spawn' or 'forkserver' "
                        "method (multiprocessing.get_context('spawn')), to which kernels, "
                        "signatures and launch configurations pickle")
    with _driver_lock:
        try:
            err = cydriver.cuInit(0)
        except Exception as exc:   # libcuda could not be loaded at all
            raise _driver_load_error(exc) from exc
        if err == cydriver.CUDA_ERROR_NO_DEVICE or err == cydriver.CUDA_ERROR_NOT_INITIALIZED:
            raise NoDriverError(f"no CUDA driver/GPU found ({_error_name(err)})",
                                _error_name(err), <int>err)
        _check(err, "cuInit")
        store_int(_driver_ready, 1)
    return 0


def _driver_load_error(exc):
    """The error for cuda.bindings failing to load the driver with ``exc``: a CudaError naming
    CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM where its value stopped cuda.bindings (a
    ValueError from int(), which says neither the variable nor that a driver is there), else
    NoDriverError."""
    from kernarg import _stream

    if _stream._env_stopped(exc):
        return CudaError(_stream._ENV_PROBLEM)
    return NoDriverError(f"no CUDA driver/GPU found: {exc}")


def _after_fork_in_child():
    """In the child of a fork: refuse CUDA where the parent had initialised it, and make the
    module's locks again (another thread of the parent may have held one at the fork, and
    would never release it here)."""
    global _driver_ready, _forked_after_init, _driver_lock, _shmem_fn_lock
    if load_int(_driver_ready):
        store_int(_driver_ready, 0)     # so that the next driver call goes to _init_driver
        _forked_after_init = True
    _driver_lock = threading.Lock()
    _shmem_fn_lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


cdef cydriver.CUdevice _device(int device) except? -1:
    """The CUdevice of ordinal ``device``; a CudaError naming it and the device count if there
    is no such device."""
    cdef cydriver.CUdevice dev = 0
    cdef int count = 0
    cdef cydriver.CUresult err = cydriver.cuDeviceGet(&dev, device)
    if err == cydriver.CUDA_ERROR_INVALID_DEVICE:
        if cydriver.cuDeviceGetCount(&count) != cydriver.CUDA_SUCCESS:
            count = -1
        raise CudaError(f"device={device}: no such CUDA device (this machine has "
                        + (f"{count}, numbered 0 .. {count - 1}" if count > 0 else
                           "none" if count == 0 else "an unknown number")
                        + "; CUDA_ERROR_INVALID_DEVICE)", _error_name(err), <int>err)
    _check(err, f"cuDeviceGet({device})")
    return dev


cdef cydriver.CUcontext _primary_context(int device) except NULL:
    """``device``'s primary context (retained; current nowhere new: see _enter)."""
    cdef cydriver.CUcontext primary = NULL
    cdef cydriver.CUdevice dev
    _ensure_driver()
    dev = _device(device)
    _check(cydriver.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain")
    # The retain is balanced by the process lifetime: primary contexts are shared.
    return primary


# A kernarg call that needs a kernel's context leaves the thread's current context as it found
# it. The runtime and the libraries built on it (torch, CuPy, JAX) take the current context's
# device as the thread's current device, so a launch on device 1 that left device 1's context
# current would send their next allocation or kernel there. A thread with no context keeps the
# one kernarg made current, as the runtime's first call leaves one.
cdef inline int _enter(cydriver.CUcontext ctx) except -1:
    """Make ``ctx`` current for one call. 1 when it was pushed over another context, which the
    caller must pop (_leave), also when the call fails; else 0: ``ctx`` was current already,
    or the thread had none and keeps ``ctx``."""
    cdef cydriver.CUcontext current
    _check(cydriver.cuCtxGetCurrent(&current), "cuCtxGetCurrent")
    if current == ctx:
        return 0
    if current == NULL:
        _check(cydriver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return 0
    _check(cydriver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    return 1


cdef int _leave(int pushed) except -1:
    """Give back the context _enter pushed over (``pushed``: what _enter returned)."""
    cdef cydriver.CUcontext popped
    if pushed:
        _check(cydriver.cuCtxPopCurrent(&popped), "cuCtxPopCurrent")
    return 0


cdef int _leave_after_error(int pushed) noexcept:
    """_leave while an exception propagates: that exception is the one to report."""
    cdef cydriver.CUcontext popped
    if pushed:
        cydriver.cuCtxPopCurrent(&popped)
    return 0


@cython.final
cdef class _InContext:
    """``with _in_context(ctx):`` runs its body with ``ctx`` current (_enter), and gives the
    thread's context back after it, whether it raised or not; NULL: whatever is current."""
    cdef cydriver.CUcontext ctx
    cdef int pushed

    def __enter__(self):
        self.pushed = _enter(self.ctx) if self.ctx != NULL else 0

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            _leave(self.pushed)
        else:
            _leave_after_error(self.pushed)
        return False


cdef _InContext _in_context(cydriver.CUcontext ctx):
    cdef _InContext c = _InContext.__new__(_InContext)
    c.ctx = ctx
    return c


cdef extern from "<time.h>" nogil:
    ctypedef struct kernarg_timespec "struct timespec":
        long tv_sec
        long tv_nsec
    int clock_gettime(int clock, kernarg_timespec* t)
    int CLOCK_MONOTONIC


cdef inline double _now_ns() noexcept nogil:
    cdef kernarg_timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1e9 + t.tv_nsec


def _launch_extras_ns(stream=None, int n=100000, int device=0):
    """Host ns per call of what a launch does besides packing and cuLaunchKernelEx, each timed
    in a C loop of ``n`` calls on ``stream``: the context check (cuCtxGetCurrent), the capture
    query (cuStreamGetCaptureInfo) and releasing and re-taking the GIL around the launch. For
    the launch benchmark, which weighs them against the C++ floor; needs the driver."""
    cdef cydriver.CUcontext current
    cdef Capture capture
    cdef cydriver.CUstream s = <cydriver.CUstream><uintptr_t>stream_handle(stream)
    cdef double t0, t1, t2, t3
    cdef int _i
    with _in_context(_primary_context(device)):
        t0 = _now_ns()
        for _i in range(n):
            cydriver.cuCtxGetCurrent(&current)
        t1 = _now_ns()
        for _i in range(n):
            _capture_of(s, &capture)
        t2 = _now_ns()
    for _i in range(n):
        with nogil:
            pass
    t3 = _now_ns()
    return {"cuCtxGetCurrent": (t1 - t0) / n, "cuStreamGetCaptureInfo": (t2 - t1) / n,
            "GIL release + acquire": (t3 - t2) / n}


def device_arch(int device=0):
    """``"compute_XY"`` (for NVRTC) of ``device``; needs the driver."""
    cdef cydriver.CUdevice dev
    cdef int major = 0, minor = 0
    _ensure_driver()
    dev = _device(device)
    _check(cydriver.cuDeviceGetAttribute(
        &major, cydriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
    _check(cydriver.cuDeviceGetAttribute(
        &minor, cydriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
    return f"compute_{major}{minor}"


cdef class _Module:
    """Owns a loaded CUmodule; unloaded when the last Kernel using it goes away."""
    cdef cydriver.CUmodule handle
    cdef cydriver.CUcontext ctx     # the context it was loaded in
    cdef object image               # the bytes loaded (get_global reads its variables' names)
    cdef object __weakref__     # Kernel.from_source's modules are found again through weakrefs

    cdef cydriver.CUfunction function(self, str entry, str name) except NULL:
        """The kernel whose PTX entry (or symbol) is ``entry``; ``name`` is the user's."""
        cdef cydriver.CUfunction func = NULL
        if "\0" in entry:
            raise ValueError(f"{name!r} is not a kernel name: it holds a NUL character")
        _check(cydriver.cuModuleGetFunction(&func, self.handle, entry.encode()),
               f"cuModuleGetFunction({name!r})")
        return func

    def __dealloc__(self):
        # Not in a forked child: its copy of the parent's driver state must not be touched.
        # The driver unloads a module "from the current context": its own is pushed for it
        # when another is current (kernarg gives threads their contexts back, see _enter).
        # Errors are dropped: at exit the driver may be gone.
        cdef cydriver.CUcontext current = NULL, popped
        if self.handle == NULL or _forked_after_init:
            return
        if cydriver.cuCtxGetCurrent(&current) == cydriver.CUDA_SUCCESS \
                and current != self.ctx and self.ctx != NULL \
                and cydriver.cuCtxPushCurrent(self.ctx) == cydriver.CUDA_SUCCESS:
            _unload(self.handle)
            cydriver.cuCtxPopCurrent(&popped)
        else:
            _unload(self.handle)


cdef void _unload(cydriver.CUmodule handle) noexcept:
    """cuModuleUnload, allowed while a stream captures. The last reference to a kernel can go
    at any time -- the garbage collector runs where it will -- and so during another stream's
    capture, where the driver counts an unload as a potentially unsafe call: in the default
    capture mode it refuses it and invalidates the capture (NVIDIA/warp#401 met this). No graph
    needs the module (a graph that captured one of its kernels holds the kernel, see
    _keep_for_graph), so the thread's capture mode is relaxed for the call and given back."""
    cdef cydriver.CUstreamCaptureMode mode = cydriver.CU_STREAM_CAPTURE_MODE_RELAXED
    if cydriver.cuThreadExchangeStreamCaptureMode(&mode) != cydriver.CUDA_SUCCESS:
        cydriver.cuModuleUnload(handle)
        return
    cydriver.cuModuleUnload(handle)
    cydriver.cuThreadExchangeStreamCaptureMode(&mode)


def _device_runtime_calls(bytes image):
    """The CUDA device runtime functions relocatable cubin ``image`` calls and leaves to the
    linker (``__cudaCDP2LaunchDeviceV2``: a kernel launched from the device), which the device
    runtime library (libcudadevrt.a) defines."""
    from kernarg._images import undefined_functions

    return [f for f in undefined_functions(image) if f.startswith(("__cudaCDP", "cuda"))]


cdef bytes _linked(bytes image):
    """``image``, a relocatable cubin, linked by the driver's JIT linker into one it loads,
    with the CUDA device runtime library where it calls that runtime (dynamic parallelism:
    kernels launched from the device). A symbol nothing defines is a CudaError quoting the
    linker's log."""
    from kernarg._nvrtc import cudadevrt_library

    calls = _device_runtime_calls(image)
    library = cudadevrt_library() if calls else None
    cdef cydriver.CUlinkState state = NULL
    cdef void* out = NULL
    cdef size_t size = 0
    cdef char log[4096]
    cdef cydriver.CUjit_option opts[2]
    cdef void* values[2]
    cdef cydriver.CUresult err
    log[0] = 0
    opts[0] = cydriver.CU_JIT_ERROR_LOG_BUFFER
    values[0] = <void*>log
    opts[1] = cydriver.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
    values[1] = <void*><uintptr_t>sizeof(log)
    _check(cydriver.cuLinkCreate(2, opts, values, &state), "cuLinkCreate")
    try:
        err = cydriver.cuLinkAddData(state, cydriver.CU_JIT_INPUT_CUBIN,
                                     <void*><const char*>image, len(image),
                                     b"relocatable cubin", 0, NULL, NULL)
        if err == cydriver.CUDA_SUCCESS and library is not None:
            path = os.fsencode(library)
            err = cydriver.cuLinkAddFile(state, cydriver.CU_JIT_INPUT_LIBRARY, <bytes>path, 0,
                                         NULL, NULL)
        if err == cydriver.CUDA_SUCCESS:
            err = cydriver.cuLinkComplete(state, &out, &size)
        if err != cydriver.CUDA_SUCCESS:
            log[sizeof(log) - 1] = 0
            text = (<bytes>log).decode(errors="replace").strip()
            name = _error_name(err)
            if calls and library is None:
                text += (f"{'; ' if text else ''}it calls the CUDA device runtime "
                         f"({', '.join(calls)}: kernels launched from the device), whose "
                         "library libcudadevrt.a was not found: install nvidia-cuda-runtime "
                         "(pip) for NVRTC's CUDA version, or set CUDA_HOME to a toolkit")
            elif library is not None:
                text += f"{'; ' if text else ''}linked with {library}"
            raise CudaError(f"linking the relocatable cubin (compiled with -rdc=true or -dc) "
                            f"failed: {name}" + (f": {text}" if text else ""), name, <int>err)
        return (<const char*>out)[:size]      # a copy: the link state owns `out`
    finally:
        cydriver.cuLinkDestroy(state)


cdef _Module _load_image(bytes image):
    """Load ``image`` in the current context (linked first, when it is relocatable)."""
    from kernarg._images import is_relocatable_cubin

    cdef _Module mod = _Module.__new__(_Module)
    if is_relocatable_cubin(image):
        image = _linked(image)
    _check(cydriver.cuModuleLoadData(&mod.handle, <const char*>image), "cuModuleLoadData")
    _check(cydriver.cuCtxGetCurrent(&mod.ctx), "cuCtxGetCurrent")
    mod.image = image
    return mod


# The events of the producer-stream waits: recorded on a producer stream, then waited on by the
# launch stream. cuStreamWaitEvent waits on the work the event captured when it is called, so
# the event can be recorded again right after, and events are reused, not made per launch. An
# event must be recorded on a stream of its own context (the producer stream's, which need not
# be the launch's), so each context has a pool of them: a wait takes one, records it, waits on
# it and gives it back. The pool's pop and push are a few instructions under a spin lock
# (nothing on a GIL build), so that a free-threaded build's launches wait with no section, in
# parallel, each thread on an event of its own. The pools are a list pushed onto by
# compare-and-swap and never freed (as the events, whose contexts may go and whose handles
# may be reused, are never destroyed but when a pool is full).
cdef enum:
    EVENTS_KEPT = 16            # events a context's pool keeps; more at once are destroyed after

cdef struct EventPool:
    cydriver.CUcontext ctx
    EventPool* next
    int lock                    # kernarg_spin_lock's
    int nfree                   # events in free[:nfree]
    cydriver.CUevent free[EVENTS_KEPT]

cdef EventPool* _event_pools = NULL     # every context's pool, newest first


cdef EventPool* _pool_of(cydriver.CUcontext ctx) noexcept nogil:
    """The event pool of ``ctx`` (made on first use), or NULL with no memory for one. Two
    threads may make one for the same context at once: the later one is used, the earlier
    one's events live on in it, and both are correct."""
    cdef EventPool* pool = <EventPool*>kernarg_load_ptr(<void**>&_event_pools)
    while pool != NULL and pool.ctx != ctx:
        pool = pool.next
    if pool == NULL:
        pool = <EventPool*>calloc(1, sizeof(EventPool))
        if pool != NULL:
            pool.ctx = ctx
            kernarg_push_ptr(<void**>&_event_pools, <void**>&pool.next, pool)
    return pool


cdef cydriver.CUevent _take_event(EventPool* pool) noexcept nogil:
    """One of the pool's events, this caller's until _give_event; NULL when it has none."""
    cdef cydriver.CUevent event = NULL
    kernarg_spin_lock(&pool.lock)
    if pool.nfree:
        pool.nfree -= 1
        event = pool.free[pool.nfree]
    kernarg_spin_unlock(&pool.lock)
    return event


cdef void _give_event(EventPool* pool, cydriver.CUevent event) noexcept nogil:
    """Give ``event`` back to the pool, or destroy it where the pool is full."""
    cdef bint kept = False
    kernarg_spin_lock(&pool.lock)
    if pool.nfree < EVENTS_KEPT:
        pool.free[pool.nfree] = event
        pool.nfree += 1
        kept = True
    kernarg_spin_unlock(&pool.lock)
    if not kept:
        cydriver.cuEventDestroy(event)


cdef cydriver.CUresult _new_event(cydriver.CUcontext ctx,
                                  cydriver.CUevent* event) noexcept nogil:
    """A new event of ``ctx`` (pushed current for it, popped after)."""
    cdef cydriver.CUcontext popped
    cdef cydriver.CUresult err = cydriver.cuCtxPushCurrent(ctx)
    if err != cydriver.CUDA_SUCCESS:
        return err
    err = cydriver.cuEventCreate(event, cydriver.CU_EVENT_DISABLE_TIMING)
    cydriver.cuCtxPopCurrent(&popped)
    return err


cdef int _wait_on(const BlockState* st, Py_ssize_t i, cydriver.CUstream stream,
                  LazySection* lazy) except -1:
    """Make ``stream`` wait for the work enqueued so far on ``st``'s producer stream ``i``.
    ``lazy``: as for _enqueue; a failure enters it."""
    cdef cydriver.CUstream producer = <cydriver.CUstream><uintptr_t>st.producers.streams[i]
    cdef cydriver.CUcontext ctx = NULL
    cdef cydriver.CUevent event = NULL
    cdef EventPool* pool = NULL
    cdef const char* what = "cuStreamGetCtx"
    cdef cydriver.CUresult err = cydriver.cuStreamGetCtx(producer, &ctx)
    if err == cydriver.CUDA_SUCCESS:
        pool = _pool_of(ctx)
        if pool == NULL:
            enter_lazily(lazy)
            raise MemoryError()
        event = _take_event(pool)
        what = "cuEventRecord"
        if event != NULL:
            err = cydriver.cuEventRecord(event, producer)
            if err == cydriver.CUDA_ERROR_INVALID_HANDLE or \
                    err == cydriver.CUDA_ERROR_CONTEXT_IS_DESTROYED:
                # Made in a context since destroyed, whose handle was reused: left as it is.
                event = NULL
        if event == NULL:
            err = _new_event(ctx, &event)
            if err != cydriver.CUDA_SUCCESS:
                event = NULL
                what = "cuEventCreate (in the producer stream's context)"
            else:
                err = cydriver.cuEventRecord(event, producer)
        if err == cydriver.CUDA_SUCCESS:
            what = "cuStreamWaitEvent (by the launch stream)"
            err = cydriver.cuStreamWaitEvent(stream, event, 0)
        if event != NULL:
            _give_event(pool, event)
    if err != cydriver.CUDA_SUCCESS:
        enter_lazily(lazy)
        _check(err, f"{_producer_of(st, i)}: waiting for it, {(<bytes>what).decode()}")
    return 0


cdef str _producer_of(const BlockState* st, Py_ssize_t i):
    """Names ``st``'s producer stream ``i`` and the argument it came from, for an error."""
    return (f"argument {st.producers.args[i]}'s producer stream "
            f"{st.producers.streams[i]:#x} (its CUDA Array Interface 'stream', or its "
            "library's current stream)")


cdef struct Capture:
    bint active                 # the launch stream is capturing a graph
    cydriver.cuuint64_t id      # ... this capture sequence
    cydriver.CUgraph graph      # ... into this graph


cdef void _capture_of(cydriver.CUstream stream, Capture* c) noexcept nogil:
    cdef cydriver.CUstreamCaptureStatus status
    cdef cydriver.CUresult err
    c.active = False
    c.id = 0
    c.graph = NULL
    err = stream_capture_info(stream, &status, &c.id, &c.graph)
    # An error here (e.g. the legacy stream while another stream captures) means no capture
    # on this stream; the launch itself then reports whatever is wrong.
    c.active = err == cydriver.CUDA_SUCCESS and status == cydriver.CU_STREAM_CAPTURE_STATUS_ACTIVE


cdef int _check_captured_producer(const BlockState* st, Py_ssize_t i, uint64_t stream,
                                  Capture* capture) except -1:
    """Inside a capture, a producer stream can be waited on only if it captures into the same
    graph (it was forked from the capturing stream): an event recorded outside the capture
    cannot be waited on inside it, and touching the legacy default stream would invalidate the
    capture. Refuse before touching anything, so the capture stays usable."""
    cdef Capture other
    cdef uint64_t producer = st.producers.streams[i]
    if producer != 1:           # the legacy default stream never captures
        _capture_of(<cydriver.CUstream><uintptr_t>producer, &other)
        if other.active and other.id == capture.id:
            return 0
    raise ValueError(
        f"{_producer_of(st, i)} is not part of the graph being captured on stream "
        f"{stream:#x}, so the captured launch cannot wait for it. Finish that work before "
        "beginning the capture, or produce the array on the capturing stream (or on one "
        "forked from it)")


# Whether launches wait for the producer streams their arguments recorded. The CUDA Array
# Interface (v3) lets a consumer offer its users a way out of the synchronisation it asks for,
# as numba (NUMBA_CUDA_ARRAY_INTERFACE_SYNC) and CuPy (CUPY_CUDA_ARRAY_INTERFACE_SYNC) do.
_ENV_PRODUCER_SYNC = "KERNARG_CUDA_ARRAY_INTERFACE_SYNC"


def _producer_sync_default():
    # "0" (any integer 0) turns the waits off; anything else, unset or not a number, keeps
    # them: a word kernarg cannot read must not remove a synchronisation.
    value = os.environ.get(_ENV_PRODUCER_SYNC, "1").strip() or "1"
    try:
        return int(value) != 0
    except ValueError:
        return True


cdef bint _producer_sync = _producer_sync_default()


def set_producer_sync(enabled):
    """Turn the launches' waits for their arguments' producer streams on or off, for the whole
    process; returns the previous setting.

    A CUDA Array Interface (v3) ``stream``, and the current stream kernarg's adapters read
    for CuPy and torch (or a DLPack C exchange API producer reports), are streams with work
    the array may still be waiting for: by
    default a launch on another stream makes its stream wait for them (an event recorded on
    each, waited on; ``ParamBlock.producer_streams``). Off, launches skip that, as numba's
    ``NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0`` and CuPy's ``CUPY_CUDA_ARRAY_INTERFACE_SYNC=0`` do
    for their consumers; the arguments' producers must then be done, or ordered by the caller.
    Blocks still record the streams. DLPack's ``__dlpack__(stream=...)`` is unaffected: there
    the producer makes the consumer's stream wait. The setting starts from the environment
    variable ``KERNARG_CUDA_ARRAY_INTERFACE_SYNC`` (``0``: off), read when kernarg is imported.

    Parameters
    ----------
    enabled : bool
        True to wait (the default), False not to.

    Returns
    -------
    bool
        The setting before this call.
    """
    global _producer_sync
    if not _is_bool(enabled):
        raise TypeError(f"set_producer_sync: enabled must be a bool, got "
                        f"{type(enabled).__name__}")
    previous = bool(load_int(_producer_sync))
    store_int(_producer_sync, 1 if enabled else 0)
    return previous


cdef inline int _wait_for_producers(const BlockState* st, uint64_t stream,
                                    Capture* capture, LazySection* lazy) except -1:
    # Inline, so that a launch with no producer stream (most) makes no call. The waits need no
    # section (each takes an event of its own from its context's pool); a capture's checks
    # and a failure enter it. Called through a pointer, which the C compiler cannot inline:
    # inlined (with the pools' code in it), it grew _ready_to_enqueue past what the compiler
    # inlines into the launches, which then ran 35 instructions more with no producer at all
    # (tools/probes/cold_launch.py, session 85).
    if st.nstreams == 0 or not load_int(_producer_sync):
        return 0
    return _wait_on_producers_out_of_line(st, stream, capture, lazy)


cdef int _wait_on_producers(const BlockState* st, uint64_t stream, Capture* capture,
                            LazySection* lazy) except -1:
    cdef Py_ssize_t i
    if capture.active:      # refuse before enqueuing anything
        enter_lazily(lazy)
        for i in range(st.nstreams):
            if st.producers.streams[i] != stream:
                _check_captured_producer(st, i, stream, capture)
    for i in range(st.nstreams):
        if st.producers.streams[i] != stream:
            _wait_on(st, i, <cydriver.CUstream><uintptr_t>stream, lazy)
    return 0


ctypedef int (*WaitOnProducers)(const BlockState*, uint64_t, Capture*, LazySection*) except -1
cdef WaitOnProducers _wait_on_producers_out_of_line = _wait_on_producers


cdef inline void _fill_launch_config(cydriver.CUlaunchConfig* config, const Dims* d,
                                     cydriver.CUstream stream,
                                     cydriver.CUlaunchAttribute* attrs,
                                     unsigned int nattrs) noexcept nogil:
    """cuLaunchKernelEx's config for ``d`` on ``stream``: what a launch and the benchmark's
    floor loops (_c_launch_loop) both pass, so that the floor times the same call."""
    memset(config, 0, sizeof(config[0]))     # fields a newer cuda.h may add stay zero
    config.gridDimX = d.grid[0]
    config.gridDimY = d.grid[1]
    config.gridDimZ = d.grid[2]
    config.blockDimX = d.block[0]
    config.blockDimY = d.block[1]
    config.blockDimZ = d.block[2]
    config.sharedMemBytes = d.shmem
    config.hStream = stream
    config.attrs = attrs
    config.numAttrs = nattrs


cdef inline int _enqueue(Kernel k, const Dims* d, cydriver.CUlaunchAttribute* attrs,
                         unsigned int nattrs, const BlockState* st, uint64_t stream,
                         Capture* capture, LazySection* lazy=NULL) except -1:
    """Launch what ``st`` packed, as every launch does: check for a driver, enter the
    kernel's context (see _enter), then _enqueue_here. What the packed arguments' storage
    becomes after it is the caller's. ``lazy``: NULL where the caller holds kernarg's section
    (or the GIL); else (a free-threaded build's Kernel.launch and prepared launch) the section
    to enter before anything that touches kernarg's state: the first check of a limit, the
    producer streams' events, a failure. The driver calls need none: the driver is
    thread-safe, and a thread's current context is its own."""
    _ensure_driver(lazy)
    if k._ctx != NULL and _enter(k._ctx):
        return _enqueue_pushed(k, d, attrs, nattrs, st, stream, capture, lazy)
    return _enqueue_here(k, d, attrs, nattrs, st, stream, capture, lazy)


cdef int _enqueue_pushed(Kernel k, const Dims* d, cydriver.CUlaunchAttribute* attrs,
                         unsigned int nattrs, const BlockState* st, uint64_t stream,
                         Capture* capture, LazySection* lazy) except -1:
    """_enqueue_here in the kernel's context, pushed over the thread's: popped after."""
    try:
        _enqueue_here(k, d, attrs, nattrs, st, stream, capture, lazy)
    except BaseException:
        _leave_after_error(1)
        raise
    return _leave(1)


cdef inline int _ready_to_enqueue(Kernel k, const Dims* d, const BlockState* st,
                                  uint64_t stream, Capture* capture,
                                  LazySection* lazy=NULL) except -1:
    """What comes before enqueuing ``k`` with ``d`` on ``stream`` (a launch, or a graph's kernel
    node whose graph will run there), in the kernel's context: check the block and shared
    memory the kernel can take, cluster and cooperative limits; find whether ``stream`` is
    capturing a graph (``capture``); make the stream wait on ``st``'s producer streams.
    ``lazy``: as for _enqueue. The kernel's limits are read whole (relaxed), as a launch
    outside kernarg's section reads them; a check writes them, in the section."""
    if d.threads > load_uint(k._threads_ok):
        enter_lazily(lazy)
        _check_threads(k, d)
    if d.shmem > load_uint(k._shmem_ok) and not d.shmem_by_driver:
        enter_lazily(lazy)
        _allow_shmem(k, d.shmem)
    if d.cluster_blocks > 8 and not load_int(k._nonportable_ok):
        enter_lazily(lazy)
        _allow_nonportable_cluster(k)
    if d.cooperative and d.cluster_blocks == 0 and not _cooperative_fits(k, d):
        enter_lazily(lazy)
        _check_cooperative(k, d)
    if d.domains > load_uint(k._domains_ok):
        enter_lazily(lazy)
        _check_domains(k, d)
    if stream != 1:
        _capture_of(<cydriver.CUstream><uintptr_t>stream, capture)
    else:
        # The legacy default stream (CU_STREAM_LEGACY) never captures: cuStreamBeginCapture
        # refuses it. No query, one driver call less for the usual stream=None; a launch on it
        # while another stream captures fails in the driver, as after a query.
        capture.active = False
    return _wait_for_producers(st, stream, capture, lazy)


cdef inline int _enqueue_here(Kernel k, const Dims* d, cydriver.CUlaunchAttribute* attrs,
                              unsigned int nattrs, const BlockState* st, uint64_t stream,
                              Capture* capture, LazySection* lazy) except -1:
    """Launch what ``st`` packed in the current context: _ready_to_enqueue, then one
    cuLaunchKernelEx, the GIL released around it. ``lazy``: as for _enqueue."""
    cdef cydriver.CUlaunchConfig config
    cdef cydriver.CUresult err
    _ready_to_enqueue(k, d, st, stream, capture, lazy)
    _fill_launch_config(&config, d, <cydriver.CUstream><uintptr_t>stream, attrs, nattrs)
    with nogil:
        err = cydriver.cuLaunchKernelEx(&config, k._func, st.argv, NULL)
    if err != cydriver.CUDA_SUCCESS:
        enter_lazily(lazy)
        _launch_failed(k, err, stream, d, attrs, nattrs)
    return 0


cdef int _context_device(cydriver.CUcontext ctx) noexcept:
    """The device ordinal of ``ctx``, or -1 where the driver does not say."""
    cdef cydriver.CUcontext popped
    cdef cydriver.CUdevice dev = -1
    if cydriver.cuCtxPushCurrent(ctx) != cydriver.CUDA_SUCCESS:
        return -1
    if cydriver.cuCtxGetDevice(&dev) != cydriver.CUDA_SUCCESS:
        dev = -1
    cydriver.cuCtxPopCurrent(&popped)
    return <int>dev


cdef int _launch_failed(Kernel k, cydriver.CUresult err, uint64_t stream, const Dims* d,
                        const cydriver.CUlaunchAttribute* attrs, unsigned int nattrs) except -1:
    """Raise the CudaError of a failed launch of ``d``. A stream of another context than the
    launch's (another device's: torch's current stream of device 0 for a kernel on device 1,
    say) is the commonest cause, which the driver reports only as an invalid handle: said in
    words; and so are an attribute the driver is too old to know (_too_new) and a cooperative
    grid of clusters larger than can be resident (_clusters_too_many)."""
    newer = _too_new(attrs, nattrs)
    if newer is None and err == cydriver.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
        newer = _clusters_too_many(k, d, attrs, nattrs)
    if newer is not None:
        name = _error_name(err)
        raise CudaError(f"cuLaunchKernelEx failed: {name}: {newer}", name, <int>err)
    cdef cydriver.CUcontext current = NULL, owner = NULL
    cdef int theirs, ours
    if stream > 2 \
            and cydriver.cuCtxGetCurrent(&current) == cydriver.CUDA_SUCCESS \
            and cydriver.cuStreamGetCtx(<cydriver.CUstream><uintptr_t>stream, &owner) \
            == cydriver.CUDA_SUCCESS \
            and owner != NULL and current != NULL and owner != current:
        name = _error_name(err)
        theirs = _context_device(owner)
        ours = _context_device(current)
        if theirs != ours:
            why = (f"stream {stream:#x} is device {theirs}'s, and kernel {k.name!r} runs on "
                   f"device {ours}: launch it on a stream of device {ours}, or load the "
                   f"kernel for device {theirs} (device={theirs})")
        else:
            why = (f"stream {stream:#x} belongs to another context on device {ours} than "
                   f"the one kernel {k.name!r} runs in: launch it on a stream of that context")
        raise CudaError(f"cuLaunchKernelEx failed: {name}: {why}", name, <int>err)
    return _check(err, "cuLaunchKernelEx")


cdef inline int _pack_and_launch(Kernel k, const Dims* d, cydriver.CUlaunchAttribute* attrs,
                                 unsigned int nattrs, PyObject** items, Py_ssize_t n,
                                 object keep, uint64_t stream, LazySection* lazy) except -1:
    """Pack the ``n`` arguments at ``items`` for ``k`` and launch them on ``stream``.
    ``keep``: their tuple, or None for a vectorcall's own arguments; ``lazy``: as for
    _enqueue (a launch that packs into a ParamBlock takes the section first). Inline: a call
    of its own cost the launches that go on to _launch ~40 instructions
    (tools/probes/cold_launch.py)."""
    # Borrowed (as _prepared_launch borrows the kernel): the kernel keeps its signature, set
    # once when it is made. A reference taken here would be one more count that threads
    # launching one kernel change at every launch, a cache line passed between their cores.
    cdef PyObject* sig = <PyObject*>k.signature
    if sig != <PyObject*>None:
        if (<Signature>sig)._fits_arena and n == (<Signature>sig)._n:
            return _launch_from_stack(k, <Signature>sig, d, attrs, nattrs, items, n, keep,
                                      stream, lazy)
    elif n <= KERNARG_INLINE_ARGS:
        return _launch_from_stack(k, None, d, attrs, nattrs, items, n, keep, stream, lazy)
    enter_lazily(lazy)
    return _launch(k, d, attrs, nattrs, k._pack_items(items, n, keep, stream), stream, True,
                   items)


cdef inline void _stack_state_init(BlockState* st, Arena* arena, Py_ssize_t n,
                                   int device) noexcept:
    """A fresh state for ``n`` <= KERNARG_INLINE_ARGS arguments over ``arena`` (the caller's,
    on the C stack): an area of KERNARG_INLINE_BYTES that untyped packing may move to the heap
    (``st.heap_data``, the caller's to free after state_release)."""
    memset(st, 0, sizeof(st[0]))
    st.nargs = n
    st.data = <char*>(((<uintptr_t>arena.data) + 15) & ~(<uintptr_t>15))
    st.capacity = KERNARG_INLINE_BYTES
    st.argv = arena.argv
    st.sizes = arena.sizes
    st.producers = &arena.producers
    set_launch_device(st, device)


def _kept_for_a_graph(tuple args, uint64_t stream=0):
    """The block a captured launch of ``args`` (at most KERNARG_INLINE_ARGS, untyped) gives
    the graph: packed on the C stack as the launch packs them, then block_from_state (for
    tests)."""
    cdef Arena arena
    cdef BlockState st
    if len(args) > KERNARG_INLINE_ARGS:
        raise ValueError(f"at most {KERNARG_INLINE_ARGS} arguments")
    _stack_state_init(&st, &arena, len(args), -1)
    try:
        pack_items(&st, tuple_items(args), len(args), stream, NULL)
        return block_from_state(&st, args)
    finally:
        state_release(&st)
        free(st.heap_data)


cdef int _launch_from_stack(Kernel k, Signature sig, const Dims* d,
                            cydriver.CUlaunchAttribute* attrs, unsigned int nattrs,
                            PyObject** items, Py_ssize_t n, object keep,
                            uint64_t stream, LazySection* lazy) except -1:
    """The usual launch -- a kernel with a signature whose parameters fit an Arena, every
    argument given (``sig``); or up to KERNARG_INLINE_ARGS arguments packed untyped (``sig``
    None) -- packed into storage on the C stack instead of a ParamBlock. The driver copies the
    parameters when it is called, so nothing need outlive the call but DLPack capsules,
    released here after it, as _launch releases a block. No block is made and freed: its code
    and data (the pool, the freelist, the object) no longer come back into the caches at every
    launch (tools/probes/cold_launch.py). Untyped arguments over KERNARG_INLINE_BYTES move
    their area to the heap, as a block's would, freed here. A launch captured into a graph
    gets a block made of the state after the driver call, which the graph keeps (see
    _launch). ``lazy``: as for _enqueue; the packers take it as kernarg.pack does, and a
    capture keeps its block in the section."""
    cdef Arena arena
    cdef BlockState st
    cdef Capture capture
    _stack_state_init(&st, &arena, n, k.device)
    try:
        if sig is not None:
            st.fixed = True
            memcpy(st.sizes, sig._sizes, KERNARG_INLINE_ARGS * sizeof(uint16_t))
            pack_typed_items(sig, &st, items, n, stream, lazy)
        else:
            pack_items(&st, items, n, stream, lazy)
            _check_untyped(k, &st, items, lazy)
        _enqueue(k, d, attrs, nattrs, &st, stream, &capture, lazy)
        if capture.active:
            enter_lazily(lazy)
            _keep_for_graph(capture.graph, block_from_state(
                &st, keep if keep is not None else tuple_of(items, n)), k)
    finally:
        if st.capsules != NULL:     # DLPack tensors consumed (a call into _handler otherwise)
            state_release(&st)
        if st.heap_data != NULL:    # untyped, past KERNARG_INLINE_BYTES (libc's free is cold)
            free(st.heap_data)
    return 0


cdef int _launch(Kernel k, const Dims* d, cydriver.CUlaunchAttribute* attrs,
                 unsigned int nattrs, ParamBlock blk, uint64_t stream,
                 bint owned=True, PyObject** borrowed=NULL, LazySection* lazy=NULL) except -1:
    """Launch ``k`` with ``blk`` on ``stream`` in the kernel's context, then release ``blk``
    -- unless the stream is capturing a graph, which then owns it (see _keep_for_graph), or
    the block is not ``owned`` (a BoundLaunch's, launched again later). ``borrowed``: the
    arguments ``blk`` was packed from; where the block keeps no tuple of them (a vectorcall's),
    a graph that captures the launch is given one made from these. ``lazy``: as for _enqueue,
    for a block not ``owned`` only (releasing one needs the section)."""
    cdef Capture capture
    cdef bint kept = False
    try:
        _enqueue(k, d, attrs, nattrs, &blk.st, stream, &capture, lazy)
        if capture.active:
            enter_lazily(lazy)
            if borrowed != NULL and blk._args is None:
                blk._args = tuple_of(borrowed, blk.st.nargs)
            kept = _keep_for_graph(capture.graph, blk, k)
    finally:
        if owned and not kept:
            block_release(blk)
    return 0


cdef cydriver.CUfunction _queryable(cydriver.CUfunction f) except? NULL:
    """``f`` as the cuFunc* calls (attributes, parameter info) take it. A CUkernel -- what
    cuda.core's Kernel holds, as it loads code with cuLibraryLoadData -- launches as a
    CUfunction, and the occupancy calculator takes it, but the cuFunc* calls refuse it
    (CUDA_ERROR_INVALID_HANDLE; tools/probes/cukernel_handles.py, run on an H100). Its
    CUfunction in the current context (cuKernelGetFunction) answers them. ``f`` itself for a
    CUfunction, and where the driver gives no function for it."""
    cdef int probe
    cdef cydriver.CUfunction fn
    if cydriver.cuFuncGetAttribute(&probe, cydriver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                   f) != cydriver.CUDA_ERROR_INVALID_HANDLE:
        return f
    if cydriver.cuKernelGetFunction(&fn, <cydriver.CUkernel>f) == cydriver.CUDA_SUCCESS:
        return fn
    return f


cdef int _check_threads(Kernel k, const Dims* d) except -1:
    """Refuse a block larger than the kernel can run (its ``__launch_bounds__``, or the
    registers it uses, allow fewer threads than the device), naming both numbers; remember the
    kernel's limit so later launches compare one int."""
    cdef int limit = 0
    cdef unsigned int threads = d.threads
    if cydriver.cuFuncGetAttribute(&limit, cydriver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                   _queryable(k._func)) != cydriver.CUDA_SUCCESS or limit <= 0:
        store_uint(k._threads_ok, threads)     # the driver has the last word for this handle
        return 0
    store_uint(k._threads_ok, <unsigned int>limit)
    if threads > k._threads_ok:
        raise ValueError(
            f"block {(d.block[0], d.block[1], d.block[2])} has {threads} threads; kernel "
            f"{k.name!r} can run at most {limit} per block (its __launch_bounds__ or its "
            "register use)")
    return 0


cdef long long _cooperative_limit(Kernel k, unsigned int threads, unsigned int shmem,
                                  bint strict) except -2:
    """How many blocks of ``threads`` threads and ``shmem`` bytes of dynamic shared memory can
    be resident at once on the current context's device: the driver's occupancy calculator per
    multiprocessor, times the multiprocessors. Where the driver cannot say: a CudaError when
    ``strict``, else -1. Remembered for the last block shape asked."""
    cdef int per_sm = 0, sms = 0
    cdef cydriver.CUdevice dev
    cdef cydriver.CUresult err
    if threads == k._coop.threads and shmem == k._coop.shmem and k._coop.blocks > 0:
        return k._coop.blocks
    err = cydriver.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k._func, <int>threads,
                                                               shmem)
    if err == cydriver.CUDA_SUCCESS:
        err = cydriver.cuCtxGetDevice(&dev)
    if err == cydriver.CUDA_SUCCESS:
        err = cydriver.cuDeviceGetAttribute(
            &sms, cydriver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
    if err != cydriver.CUDA_SUCCESS:
        if strict:
            _check(err, f"kernel {k.name!r}: the occupancy calculator "
                        "(cuOccupancyMaxActiveBlocksPerMultiprocessor, multiprocessor count)")
        return -1
    cdef CoopLimit c
    memset(&c, 0, sizeof(c))
    c.threads, c.shmem, c.blocks, c.per_sm = threads, shmem, <long long>per_sm * sms, per_sm
    kernarg_seq_write_begin(&k._coop_seq)
    kernarg_copy_words(&k._coop, &c, sizeof(CoopLimit) // 4)
    kernarg_seq_write_end(&k._coop_seq)
    return c.blocks


cdef inline bint _cooperative_fits(Kernel k, const Dims* d) noexcept:
    """Whether ``d``'s grid is known to fit the blocks ``k`` can have resident at once, from
    the limit of its last block shape (_cooperative_limit); False where that is not ``d``'s
    block shape, or not yet asked: then _check_cooperative asks, in kernarg's section. Needs no
    section: the limit is copied whole under its sequence lock."""
    cdef CoopLimit c
    cdef unsigned begun = kernarg_seq_begin(&k._coop_seq)
    kernarg_copy_words(&c, &k._coop, sizeof(CoopLimit) // 4)
    if not kernarg_seq_valid(&k._coop_seq, begun):
        return False
    return c.threads == d.threads and c.shmem == d.shmem and c.blocks > 0 and \
        <long long>d.grid[0] * d.grid[1] * d.grid[2] <= c.blocks


cdef int _check_cooperative(Kernel k, const Dims* d) except -1:
    """A cooperative launch needs every block resident at once: refuse a larger grid before
    the launch, naming the grid, the limit and how it is made (the driver would only say
    COOPERATIVE_LAUNCH_TOO_LARGE)."""
    cdef long long blocks = <long long>d.grid[0] * d.grid[1] * d.grid[2]
    cdef long long limit = _cooperative_limit(k, d.threads, d.shmem, False)
    if limit < 0 or blocks <= limit:
        return 0                        # where the driver cannot say, the launch reports
    raise ValueError(
        f"cooperative grid {(d.grid[0], d.grid[1], d.grid[2])} has {blocks} blocks; kernel "
        f"{k.name!r} can have at most {limit} resident at once with block "
        f"{(d.block[0], d.block[1], d.block[2])} and {d.shmem} bytes of dynamic shared memory "
        f"({k._coop.per_sm} per multiprocessor); see Kernel.max_cooperative_blocks")


cdef object _clusters_too_many(Kernel k, const Dims* d, const cydriver.CUlaunchAttribute* attrs,
                               unsigned int nattrs):
    """Why the driver refused a cooperative launch of ``d`` as too large, in the kernel's
    context, where the launch has clusters (its cluster= or the kernel's __cluster_dims__):
    more clusters than the driver's occupancy calculator says can be resident at once
    (_cluster_occupancy, as Kernel.max_active_clusters asks it). None where it has no clusters,
    the calculator cannot say, or says they fit: the driver's error stands as it is. Not checked
    before the launch, as a grid without clusters is (_check_cooperative): cuda.h does not say
    that a cooperative launch's cluster limit is the calculator's, so only the driver refuses."""
    cdef unsigned int i
    cluster = None
    for i in range(nattrs):
        if attrs[i].id == cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            cluster = (attrs[i].value.clusterDim.x, attrs[i].value.clusterDim.y,
                       attrs[i].value.clusterDim.z)
    dims = cluster
    if dims is None:        # the kernel's own, which the calculator then takes (cuda.h)
        own = k.attributes
        dims = tuple(own.get(f"required_cluster_{axis}", 0)
                     for axis in ("width", "height", "depth"))
        if dims[0] <= 0:
            return None
    grid = (d.grid[0], d.grid[1], d.grid[2])
    block = (d.block[0], d.block[1], d.block[2])
    try:
        n = _cluster_occupancy(k, LaunchConfig(grid, block, shmem=d.shmem, cluster=cluster),
                               False, True)
    except (CudaError, ValueError):
        return None
    clusters = grid[0] * grid[1] * grid[2] // (max(dims[0], 1) * max(dims[1], 1) *
                                               max(dims[2], 1))
    if clusters <= n:
        return None
    return (f"cooperative grid {grid} has {clusters} clusters of {dims} blocks; kernel "
            f"{k.name!r} can have at most {n} resident at once with block {block} and "
            f"{d.shmem} bytes of dynamic shared memory, by the driver's occupancy calculator; "
            "see Kernel.max_active_clusters")


cdef int _check_domains(Kernel k, const Dims* d) except -1:
    """Refuse a mem_sync_domain_map that names a domain the device does not have
    (``MEM_SYNC_DOMAIN_COUNT``: 4 on compute capability 9.0, 1 before), naming the count;
    remember it so later launches compare one int. Where the driver cannot say, it has the
    last word."""
    cdef int count = 0
    cdef cydriver.CUdevice dev
    if cydriver.cuCtxGetDevice(&dev) != cydriver.CUDA_SUCCESS or \
            cydriver.cuDeviceGetAttribute(
                &count, cydriver.CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, dev) \
            != cydriver.CUDA_SUCCESS or count <= 0:
        store_uint(k._domains_ok, d.domains)
        return 0
    store_uint(k._domains_ok, <unsigned int>count)
    if d.domains > k._domains_ok:
        raise ValueError(f"mem_sync_domain_map names domain {d.domains - 1}; device {dev}, "
                         f"where kernel {k.name!r} runs, has {count} memory synchronisation "
                         f"domain{'' if count == 1 else 's'} (0 to {count - 1}: "
                         "MEM_SYNC_DOMAIN_COUNT)")
    return 0


cdef int _cluster_occupancy(Kernel k, LaunchConfig cfg, bint non_portable,
                            bint active) except -1:
    """In ``k``'s context: how many clusters of ``cfg`` can be resident at once (``active``,
    cuOccupancyMaxActiveClusters), else the largest cluster ``cfg`` can have
    (cuOccupancyMaxPotentialClusterSize). As before a launch, the kernel is first let have
    ``cfg``'s dynamic shared memory, and clusters of over 8 blocks where ``non_portable``."""
    cdef int value = 0
    cdef cydriver.CUlaunchConfig config
    cdef cydriver.CUfunction f = _queryable(k._func)
    if cfg._d.shmem > k._shmem_ok:
        _allow_shmem(k, cfg._d.shmem)
    if non_portable and not k._nonportable_ok:
        _allow_nonportable_cluster(k)
    _fill_launch_config(&config, &cfg._d, NULL, cfg._attrs, cfg._nattrs)
    cdef int width = 0, height = 0, depth = 0
    if active:
        _check(cydriver.cuOccupancyMaxActiveClusters(&value, f, &config),
               f"cuOccupancyMaxActiveClusters of kernel {k.name!r} with {cfg!r}")
        return value
    _check(cydriver.cuOccupancyMaxPotentialClusterSize(&value, f, &config),
           f"cuOccupancyMaxPotentialClusterSize of kernel {k.name!r} with {cfg!r}")
    # A kernel with a cluster size of its own (__cluster_dims__) launches with that size only,
    # and cuda.h says the answer reflects it; the 13.0 driver answered 8 for a kernel of
    # __cluster_dims__(2, 1, 1) on an H200 (session 85). So kernarg answers the kernel's size.
    if cydriver.cuFuncGetAttribute(
            &width, cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, f) \
            == cydriver.CUDA_SUCCESS and width > 0:
        _check(cydriver.cuFuncGetAttribute(
            &height, cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, f),
            f"cuFuncGetAttribute of kernel {k.name!r}")
        _check(cydriver.cuFuncGetAttribute(
            &depth, cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, f),
            f"cuFuncGetAttribute of kernel {k.name!r}")
        return width * max(height, 1) * max(depth, 1)
    return value


cdef int _allow_nonportable_cluster(Kernel k) except -1:
    """Clusters of more than 8 blocks (up to 16 on Hopper) are non-portable: a kernel takes
    them only with NON_PORTABLE_CLUSTER_SIZE_ALLOWED set, which kernarg sets on first need.
    Where the driver refuses (an older GPU), the launch reports it."""
    if cydriver.cuFuncSetAttribute(
            _queryable(k._func), cydriver.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            1) \
            == cydriver.CUDA_SUCCESS:
        store_int(k._nonportable_ok, 1)
    return 0


cdef int _allow_shmem(Kernel k, unsigned int shmem) except -1:
    """Let ``k`` launch with ``shmem`` bytes of dynamic shared memory, or say why it cannot.

    A kernel may use 48 KiB of shared memory (static and dynamic) unless it opts into more,
    up to the device's per-block opt-in limit, through its MAX_DYNAMIC_SHARED_SIZE_BYTES
    attribute. kernarg raises that attribute when a launch asks for more dynamic shared memory
    than the kernel allows (as the user would have to), refuses what the device cannot give with
    the limit in the message, and remembers the allowed size so later launches compare one
    int. Where the driver cannot answer for this handle, the launch goes ahead and the driver
    has the last word."""
    cdef int allowed = 0, static_bytes = 0, optin = 0
    cdef cydriver.CUdevice dev
    cdef cydriver.CUfunction f = _queryable(k._func)
    if cydriver.cuFuncGetAttribute(
            &allowed, cydriver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f) \
            != cydriver.CUDA_SUCCESS:
        store_uint(k._shmem_ok, shmem)
        return 0
    if shmem <= <unsigned int>allowed:
        store_uint(k._shmem_ok, <unsigned int>allowed)
        return 0
    _check(cydriver.cuCtxGetDevice(&dev), "cuCtxGetDevice")
    _check(cydriver.cuDeviceGetAttribute(
        &optin, cydriver.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
        "cuDeviceGetAttribute")
    _check(cydriver.cuFuncGetAttribute(
        &static_bytes, cydriver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute")
    if <long long>shmem + static_bytes > optin:
        raise ValueError(
            f"shmem={shmem} bytes of dynamic shared memory is more than kernel {k.name!r} can "
            f"have on device {dev}: at most {max(optin - static_bytes, 0)} bytes (the device's "
            f"limit of {optin} bytes of shared memory per block, less the kernel's "
            f"{static_bytes} bytes of static shared memory)")
    _check(cydriver.cuFuncSetAttribute(
        f, cydriver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, <int>shmem),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    store_uint(k._shmem_ok, shmem)
    return 0


# ---------------------------------------------------------------------------------------------
# Graph capture: a captured launch keeps its arguments and its kernel alive as long as the
# graph does.
#
# The driver copies the parameter bytes into the graph node, but the arrays they point to (and
# DLPack tensors, whose deleters must not run early) must outlive every replay, and so must the
# kernel's code: a Kernel unloads its module when it goes (NVIDIA/warp#782 is a graph replaying
# a kernel whose module had gone). A captured launch therefore hands its ParamBlock and its
# Kernel to a CUDA user object owned by the graph. The driver
# runs the user object's destructor on a thread of its own, where taking the GIL could deadlock
# against a thread that holds it while destroying the graph; so the destructor only pushes the
# block onto a lock-free stack and asks the interpreter (Py_AddPendingCall, callable without
# the GIL) to drop the references from the main thread. The next captured launch drains the
# stack too, should the pending-call queue have been full.
#
# Dropping a reference can run Python code (an array's __del__), here inside a pending call.
# CPython 3.11 then hangs where a trace or profile function is set (a debugger, coverage): a
# pending call added meanwhile (another graph going, on the driver's thread) signals the eval
# breaker, which the running one cannot clear (CPython runs no pending call inside another),
# and 3.11's traced dispatch goes back to the RESUME that checks it, for ever: a function
# called from then on in that pending call never starts. So on 3.11 the pending call drops the
# references with tracing suspended (PyThreadState_EnterTracing, as CPython does around a trace
# function); 3.10's and 3.12's eval loops move past the check, and keep it.

cdef extern from *:
    """
    typedef struct kernarg_keep { PyObject *obj; struct kernarg_keep *next; } kernarg_keep;
    static kernarg_keep *kernarg_keep_released = NULL;

    static void kernarg_keep_push(kernarg_keep *node) {
        kernarg_keep *head = __atomic_load_n(&kernarg_keep_released, __ATOMIC_RELAXED);
        do {
            node->next = head;
        } while (!__atomic_compare_exchange_n(&kernarg_keep_released, &head, node, 1,
                                              __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }

    static kernarg_keep *kernarg_keep_take_all(void) {
        return __atomic_exchange_n(&kernarg_keep_released, NULL, __ATOMIC_ACQUIRE);
    }

    /* Tracing off and on again around a pending call's Python code, on CPython 3.11 only
       (see above). */
    static void kernarg_untraced_begin(void) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        PyThreadState_EnterTracing(PyThreadState_Get());
    #endif
    }
    static void kernarg_untraced_end(void) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        PyThreadState_LeaveTracing(PyThreadState_Get());
    #endif
    }
    """
    ctypedef struct kernarg_keep:
        PyObject* obj
        kernarg_keep* next
    void kernarg_keep_push(kernarg_keep* node) noexcept nogil
    kernarg_keep* kernarg_keep_take_all() noexcept nogil
    void kernarg_untraced_begin() noexcept
    void kernarg_untraced_end() noexcept
    int Py_AddPendingCall(int (*func)(void*) noexcept, void* arg) noexcept nogil
    int Py_IsInitialized() noexcept nogil


cdef void _drain_released() noexcept:
    """Drop the references of every keep-alive whose graph is gone (with the GIL)."""
    cdef kernarg_keep* node = kernarg_keep_take_all()
    cdef kernarg_keep* nxt
    while node != NULL:
        nxt = node.next
        Py_XDECREF(node.obj)
        free(node)
        node = nxt


@cython.profile(False)      # a KERNARG_DEBUG build's own trace events must not straddle the
@cython.linetrace(False)    # suspension: the one at return then found no trace function
cdef int _drain_pending(void* unused) noexcept with gil:
    """_drain_released as the interpreter's pending call, untraced on 3.11 (see above)."""
    kernarg_untraced_begin()
    _drain_released()
    kernarg_untraced_end()
    return 0


cdef kernarg_keep* _keep_node(object kept) except NULL:
    """A new keep-alive node holding a reference to ``kept``."""
    cdef kernarg_keep* node = <kernarg_keep*>malloc(sizeof(kernarg_keep))
    if node == NULL:
        raise MemoryError()
    Py_INCREF(kept)
    node.obj = <PyObject*>kept
    node.next = NULL
    return node


@cython.profile(False)      # a KERNARG_DEBUG build's trace hooks would take the GIL here, on
@cython.linetrace(False)    # the driver's thread, and after finalization crash in doing so
cdef void _keep_destroyed(void* data) noexcept nogil:
    # Runs on a driver thread without the GIL: no Python API here but Py_AddPendingCall, and
    # that only while the interpreter is up. The driver may run it late (the user object is
    # CU_USER_OBJECT_NO_DESTRUCTOR_SYNC's), after the interpreter has finalized, when a graph
    # went at exit: a pending call added then crashed the process (NVIDIA/cuda-python#2042 is
    # cuda.core's). Py_IsInitialized is 0 once finalization is past the atexit handlers, and
    # the interpreter runs no pending call from there on: what the graph kept goes with the
    # process.
    kernarg_keep_push(<kernarg_keep*>data)
    if Py_IsInitialized():
        Py_AddPendingCall(_drain_pending, NULL)


cdef kernarg_keep* _destroyed_at_exit = NULL     # _DriverRelease.destroy_at_exit's


@cython.profile(False)      # runs after finalization: no trace hooks (see _keep_destroyed)
@cython.linetrace(False)
cdef void _destroy_at_exit() noexcept nogil:
    _keep_destroyed(_destroyed_at_exit)


@cython.final
cdef class _DriverRelease:
    """For tests without a driver: a keep-alive of ``kept`` as a graph's user object holds
    one (_graph_keeps), whose ``destroy`` does what the driver does when the graph goes: calls
    the user object's destructor, without the GIL (call it on a thread of its own, as the
    driver does). Never destroyed, it drops ``kept`` when collected."""
    cdef kernarg_keep* node

    def __cinit__(self, kept):
        self.node = _keep_node(kept)

    def destroy(self):
        cdef kernarg_keep* node = self.node
        if node == NULL:
            raise RuntimeError("this keep-alive was destroyed already")
        self.node = NULL
        with nogil:
            _keep_destroyed(node)

    def destroy_at_exit(self):
        """Destroy it at the process's exit (a C atexit handler), after the interpreter has
        finalized: what a driver that ran a late destructor then would do. One at a time."""
        global _destroyed_at_exit
        if self.node == NULL:
            raise RuntimeError("this keep-alive was destroyed already")
        if _destroyed_at_exit != NULL or atexit(_destroy_at_exit) != 0:
            raise RuntimeError("cannot destroy another keep-alive at exit")
        _destroyed_at_exit = self.node
        self.node = NULL

    def __dealloc__(self):
        if self.node != NULL:
            Py_XDECREF(self.node.obj)
            free(self.node)


cdef int _keep_for_graph(cydriver.CUgraph graph, ParamBlock blk, Kernel k) except -1:
    """Make ``graph``, being captured, own a reference to ``blk`` and to the kernel ``k`` it
    launches. Returns 1 (the caller must not release the block)."""
    _graph_keeps(graph, (blk, k), "a captured launch's")
    return 1


cdef cydriver.CUuserObject _graph_keeps(cydriver.CUgraph graph, object kept,
                                        str whose) except NULL:
    """Make ``graph`` own a reference to ``kept``, through a CUDA user object whose one
    reference the graph holds, and which is returned (``cuGraphReleaseUserObject`` lets go of
    it). ``whose``: what is kept, for an error message."""
    cdef cydriver.CUuserObject obj
    cdef cydriver.CUresult err
    cdef kernarg_keep* node
    _drain_released()
    node = _keep_node(kept)
    err = cydriver.cuUserObjectCreate(&obj, node, _keep_destroyed, 1,
                                      cydriver.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
    if err != cydriver.CUDA_SUCCESS:
        Py_XDECREF(node.obj)
        free(node)
        _check(err, f"cuUserObjectCreate (keeping {whose} arguments alive)")
    err = cydriver.cuGraphRetainUserObject(graph, obj, 1, cydriver.CU_GRAPH_USER_OBJECT_MOVE)
    if err != cydriver.CUDA_SUCCESS:
        cydriver.cuUserObjectRelease(obj, 1)    # runs _keep_destroyed: the node goes back
        _check(err, f"cuGraphRetainUserObject (keeping {whose} arguments alive)")
    return obj


cdef tuple _driver_layout(cydriver.CUfunction func):
    """The kernel's (offset, size) per parameter from cuFuncGetParamInfo, or None where the
    driver does not support the query. ``func`` may be a CUkernel (see _queryable)."""
    cdef size_t i = 0, offset, size
    cdef cydriver.CUresult err
    func = _queryable(func)
    out = []
    while True:
        err = cydriver.cuFuncGetParamInfo(func, i, &offset, &size)
        if err == cydriver.CUDA_ERROR_INVALID_VALUE:    # past the last parameter
            return tuple(out)
        if err != cydriver.CUDA_SUCCESS:                  # e.g. a driver older than 12.4
            return None
        out.append((offset, size))
        i += 1


cdef Py_ssize_t _first_tensor_map(const BlockState* st, PyObject** items):
    """The index of the first tensor-map argument of those ``st`` packed from ``items``, or
    their count for none (or no ``items``).
    From there on, an argument may be at another offset than the kernel's parameter only
    because kernarg's cuda.h aligns CUtensorMap to 128 (CUDA 13) and the kernel's own
    declaration to 64 (as CUDA 12's did). A launch passes every argument by its own pointer
    (kernelParams), so there the sizes are what must agree."""
    cdef Py_ssize_t j
    if items != NULL:
        for j in range(st.nargs):
            if lookup_type(<object>items[j], j).kind == KIND_TENSOR_MAP:
                return j
    return st.nargs


cdef int _set_layout(Kernel k, tuple layout) except -1:
    """Give ``k`` the driver's ``layout`` (or None), also as C numbers (Kernel._layout_c)."""
    k._layout = layout
    k._layout_c = None if layout is None else \
        array.array("q", [v for pair in layout for v in pair]).tobytes()
    return 0


cdef inline bint _layout_matches(const BlockState* st, bytes layout_c) noexcept:
    """Whether every argument ``st`` packed has the size and offset of ``layout_c``'s
    parameter (``(offset, size)`` pairs as C long longs): a launch's check of an untyped pack,
    in C. Where it is not, _check_layout says what is wrong, or accepts the arguments from a
    tensor map on."""
    cdef const long long* lay = <const long long*>PyBytes_AS_STRING(layout_c)
    cdef Py_ssize_t i, n = PyBytes_GET_SIZE(layout_c) // (2 * sizeof(long long))
    if st.nargs != n:
        return False
    for i in range(n):
        if (<long long>st.sizes[i] != lay[2 * i + 1]
                or <long long>(<char*>st.argv[i] - st.data) != lay[2 * i]):
            return False
    return True


cdef inline int _check_untyped(Kernel k, const BlockState* st, PyObject** items,
                               LazySection* lazy=NULL) except -1:
    """Check what ``st`` packed untyped from ``items`` against ``k``'s parameter layout, where
    the driver gave one: in C when it matches, else _check_layout says what is wrong (in
    kernarg's section: ``lazy`` as for _enqueue). The layout is set before the kernel is
    returned to anyone, and never again."""
    if k._layout is not None and not _layout_matches(st, k._layout_c):
        enter_lazily(lazy)
        _check_layout(st, items, k._layout, k.name)
    return 0


def check_layout(ParamBlock blk, tuple layout, str name="kernel"):
    """Raise TypeError unless the untyped block ``blk`` has exactly ``layout``'s parameters:
    ``((offset, size), ...)`` as the driver reports them. This catches the classic untyped
    mistake of a Python float (8-byte double) for a ``float`` parameter before it launches.
    Offsets from a tensor map on may differ (see _first_tensor_map)."""
    args = blk.args
    if args is None:
        raise ValueError("check_layout: the block keeps no arguments (released, or a launch's)")
    _check_layout(&blk.st, tuple_items(args), layout, name)


cdef int _check_layout(const BlockState* st, PyObject** items, tuple layout,
                       str name) except -1:
    """check_layout of what ``st`` packed from the objects at ``items``."""
    cdef Py_ssize_t i, n = len(layout), moved_from = -1     # -1: not looked for yet
    if st.nargs != n:
        raise TypeError(f"{name} takes {n} arguments, got {st.nargs}")
    for i in range(n):
        offset, size = layout[i]
        got_size = st.sizes[i]
        got_offset = <char*>st.argv[i] - st.data
        if got_offset != offset and got_size == size:
            if moved_from < 0:
                moved_from = _first_tensor_map(st, items)
            if i >= moved_from:
                continue
        if got_size != size or got_offset != offset:
            raise TypeError(
                f"{_describe(i, <object>items[i])} packs as {got_size} bytes at "
                f"offset {got_offset}, but {name}'s parameter {i} is {size} bytes at offset "
                f"{offset}; pass a value of the parameter's C type (e.g. numpy.float32 or "
                "numpy.int32 for 4 bytes) or give the kernel a signature")
    return 0


# ---------------------------------------------------------------------------------------------
# Kernel

# Kernel.from_source's compilations, most recently used last: (source, options, arch, the
# sorted name expressions) -> _Compiled. Bounded, so programs that generate sources keep a few
# hundred compilations, not all of them.
SOURCE_CACHE_SIZE = 256
_source_cache = OrderedDict()

# The modules Kernel.from_source loaded, by (compilation key, context id), while a Kernel from
# one lives: kernels of one source share one module, and asking again loads nothing. The id,
# unlike the context handle, is never reused by a later context, so a module of a destroyed
# context is never found again.
_loaded_modules = weakref.WeakValueDictionary()


class _Compiled:
    """One NVRTC run: PTX, machine code (or None), the lowered names NVRTC gave its name
    expressions, and per kernel name asked for, its PTX entry and signature. ``source`` is
    where the declarations are looked for (the source and its in-memory headers);
    ``evaluate``, what evaluates default arguments (kernarg._signature._evaluator)."""
    __slots__ = ("source", "ptx", "cubin", "lowered", "kernels", "evaluate")

    def __init__(self, source, ptx, cubin, lowered, evaluate=None):
        self.source, self.ptx, self.cubin, self.lowered = source, ptx, cubin, lowered
        self.evaluate = evaluate
        self.kernels = {}

    def kernel(self, str name):
        """``(entry, signature)`` of kernel ``name``; LookupError if the source has none."""
        got = self.kernels.get(name)
        if got is None:
            lowered = self.lowered.get(name)
            sig = Signature._from_source_and_ptx(self.source, name, self.ptx, lowered,
                                                 self.evaluate)
            got = (lowered or _entry_name(self.ptx, name, self.source), sig)
            self.kernels[name] = got
        return got


def _compile_for(str source, tuple names, tuple options, str arch, tuple headers=(),
                 device=None):
    """``(key, _Compiled)``: the cached compilation of ``source`` for ``arch``
    (``"compute_90"``, the device's; compiled to its machine code when this NVRTC knows it)
    that holds the kernels ``names``. Plain names (``extern "C"`` or C++ function names) need
    nothing from NVRTC but the program, so all of one source's share one run; template
    instantiations and qualified names are name expressions NVRTC instantiates, so the run is
    keyed by them. ``headers``: in-memory headers as normalize_headers gives them, part of the
    key; the kernels' declarations are looked for in them too. An architecture the options
    name (``-arch=sm_90a``, for the features of one GPU) is compiled for instead, when the
    device can load what it makes; ``device`` (its ordinal) is for the message when not."""
    from kernarg._nvrtc import (compile_program_cached, declaration_text, split_arch_option,
                                target_arch)
    from kernarg._signature import _evaluator

    exprs = tuple(sorted({n for n in names if not n.isidentifier()}))
    key = (source, options, arch, exprs, headers)
    cc = int(arch[len("compute_"):])
    named, without = split_arch_option(options)
    if named is None:
        target = target_arch(cc)
    else:
        _check_named_arch(named, cc, device)
        target, options = named, without

    def build():
        c = compile_program_cached(source, options=options, name_expressions=exprs,
                                   arch=target, headers=headers)
        return _Compiled(declaration_text(source, headers), c.ptx, c.cubin, c.lowered,
                         _evaluator(source, options, target, headers))

    return key, _source_cache_get(key, build)


def _check_named_arch(str named, int cc, device):
    """ValueError unless a device of compute capability ``cc`` (90 for 9.0) loads what NVRTC
    makes for the architecture ``named`` in from_source's options."""
    from kernarg._nvrtc import arch_runs_on

    major, minor = divmod(cc, 10)
    runs = arch_runs_on(named, (major, minor))
    if runs:
        return
    if runs is None:
        raise ValueError(
            f"options: the architecture {named!r} is not one whose code from_source can load: "
            "name sm_XY, sm_XYa or sm_XYf (machine code), or compute_XY, compute_XYa or "
            "compute_XYf (PTX), such as 'sm_90a'")
    who = "the device" if device is None else f"device {device}"
    # Architecture-specific targets begin with sm_90a.
    such_as = f"'sm_{cc}' or 'sm_{cc}a'" if cc >= 90 else f"'sm_{cc}'"
    raise ValueError(
        f"options: the architecture {named!r} makes code that {who} (compute capability "
        f"{major}.{minor}) cannot load; name one it runs, such as {such_as}, or leave it "
        "out: from_source compiles for the device's own architecture")


def _source_cache_get(key, build):
    """The cached value for ``key``, or ``build()``'s, stored (least recently used dropped)."""
    value = _source_cache.get(key)
    if value is not None:
        try:
            _source_cache.move_to_end(key)
        except KeyError:
            pass            # another thread dropped it meanwhile: the value is still good
        return value
    value = build()
    _source_cache[key] = value
    while len(_source_cache) > SOURCE_CACHE_SIZE:
        _source_cache.popitem(last=False)
    return value


cdef list _kernels_from_source(str source, tuple names, tuple options, int device,
                               object headers):
    """Kernel.from_source(_many): one cached compilation, one module per context."""
    from kernarg._nvrtc import normalize_headers, split_arch_option

    cdef unsigned long long ctx_id = 0
    headers = normalize_headers(headers)        # checked before the driver is asked
    split_arch_option(options)                  # so are the architecture options
    for name in names:
        check_kernel_name(name)
    cdef cydriver.CUcontext ctx = _primary_context(device)
    key, compiled = _compile_for(source, names, options, device_arch(device), headers, device)
    found = [(name, *compiled.kernel(name)) for name in names]    # every name, before loading
    _check(cydriver.cuCtxGetId(ctx, &ctx_id), "cuCtxGetId")
    recipe = ("source", source, options, headers)
    kernels = []
    with _in_context(ctx):
        mod = _loaded_modules.get((key, ctx_id))
        if mod is None:
            mod = _load_image(compiled.cubin if compiled.cubin is not None
                              else compiled.ptx.encode() + b"\0")
            _loaded_modules[(key, ctx_id)] = mod
        for name, entry, sig in found:
            k = Kernel._make((<_Module>mod).function(entry, name), mod, sig, name, ctx, device)
            k._recipe = recipe
            kernels.append(k)
    return kernels


# The driver's attributes of a kernel that Kernel.attributes reports, by the names cuda.h
# gives them (less the CU_FUNC_ATTRIBUTE_ prefix, in lower case).
_FUNC_ATTRIBUTES = (
    ("max_threads_per_block", <int>cydriver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
    ("shared_size_bytes", <int>cydriver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
    ("const_size_bytes", <int>cydriver.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
    ("local_size_bytes", <int>cydriver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
    ("num_regs", <int>cydriver.CU_FUNC_ATTRIBUTE_NUM_REGS),
    ("ptx_version", <int>cydriver.CU_FUNC_ATTRIBUTE_PTX_VERSION),
    ("binary_version", <int>cydriver.CU_FUNC_ATTRIBUTE_BINARY_VERSION),
    ("max_dynamic_shared_size_bytes",
     <int>cydriver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
)
# And those of thread block clusters and the carveout (cuda.h 11.8 and later), reported where
# the driver answers for them.
_FUNC_CLUSTER_ATTRIBUTES = (
    ("preferred_shared_memory_carveout",
     <int>cydriver.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT),
    ("cluster_size_must_be_set", <int>cydriver.CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET),
    ("required_cluster_width", <int>cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH),
    ("required_cluster_height", <int>cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT),
    ("required_cluster_depth", <int>cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH),
    ("non_portable_cluster_size_allowed",
     <int>cydriver.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED),
    ("cluster_scheduling_policy_preference",
     <int>cydriver.CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE),
)


# cuOccupancyMaxPotentialBlockSize calls its per-block-size shared memory function back, in
# the calling thread, with no user data: the Python function it stands for is held here for
# the length of the call, under a lock (the function may let another thread run), and put
# back after (the function may itself ask for a block size). The first exception it raises is
# kept and raised once the driver returns.
_shmem_fn_lock = threading.RLock()
cdef object _shmem_fn = None
cdef object _shmem_fn_error = None


cdef size_t _call_shmem_fn(int block) noexcept with gil:
    global _shmem_fn_error
    if _shmem_fn_error is not None:
        return 0
    try:
        value = _shmem_fn(block)
        n = _shmem_bytes(value)
        if n < 0:
            raise ValueError(
                f"Kernel.max_potential_block_size: shmem({block}) returned "
                f"{shown_value(value, True)}; it must "
                "give the bytes of dynamic shared memory a block of that many threads needs, "
                "an int from 0 to 2**32-1")
        return n
    except BaseException as exc:
        _shmem_fn_error = exc
        return 0


cdef long long _shmem_bytes(object value) except -2:
    """``value`` as bytes of shared memory (an int, or an integer type's value, 0..2**32-1),
    or -1."""
    if isinstance(value, bool):
        return -1
    try:
        n = operator.index(value)
    except TypeError:
        return -1
    return n if 0 <= n < 2**32 else -1


def _mangled_variable(str name):
    """The Itanium C++ ABI name of the namespace-scope variable ``name`` (``"ns::x"`` ->
    ``"_ZN2ns1xE"``), or None where ``name`` is not ``a::b::...`` of identifiers. Variables at
    global scope keep their own names, as do ``extern "C"`` ones."""
    parts = name.split("::")
    if len(parts) < 2 or not all(p.isidentifier() and p.isascii() for p in parts):
        return None
    return "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "E"


def _variable_symbol(image, str name, inline=frozenset()):
    """The one variable symbol of ``image`` (the bytes a module was loaded from) whose C++ name
    is ``name`` with its anonymous namespaces and NVRTC's _INTERNAL_ prefix left out (and the
    ``inline`` namespaces, where the source says which are); None where there is not exactly
    one, or the image cannot be read."""
    from kernarg._images import image_variable_names
    from kernarg._signature import _nested_name, _template_symbols

    if not isinstance(image, bytes):
        return None
    wanted = name.strip().removeprefix("::")
    variables = image_variable_names(image) or ()
    found = _template_symbols(variables, wanted)        # a variable template's: tv<float>
    if found is None:
        found = [v for v in variables if _nested_name(v) == wanted
                 or inline and _nested_name(v, inline) == wanted]
    return found[0] if len(found) == 1 else None


def _variable_hint(image, str name):
    """``"; did you mean ..."`` naming the variables of ``image`` that ``name`` may have meant
    (_signature._did_you_mean), or ``""``."""
    from kernarg._images import image_variable_names
    from kernarg._signature import _cpp_name, _did_you_mean

    if not isinstance(image, bytes):
        return ""
    return _did_you_mean(name, [_cpp_name(v) for v in image_variable_names(image) or ()
                                if not v.startswith((".", "__"))])


cdef class Kernel:
    """A loaded CUDA kernel: launch it with Python arguments.

    Create one with :meth:`from_source` (or :meth:`from_source_many`), :meth:`from_ptx`,
    :meth:`from_cubin` or :meth:`from_handle`. When the kernel's :class:`Signature` is known,
    arguments are packed as its parameter types and their number is checked.

    A kernel pickles as the code it was loaded from (source with its options and headers, PTX
    or cubin) and is loaded again where it is unpickled, on the device of the same ordinal;
    one from a handle refuses. A copy of a kernel is the kernel itself.
    """

    cdef cydriver.CUfunction _func
    cdef cydriver.CUcontext _ctx    # the context to launch in, or NULL: the current one
    cdef object _module
    cdef readonly Signature signature
    cdef readonly str name
    cdef readonly int device        # the device ordinal it runs on, or -1 if not known
    # Without a signature: the driver's (offset, size) per parameter (cuFuncGetParamInfo),
    # which untyped packs must match, or None where the driver cannot tell; set by
    # _set_layout, which also keeps it as C long longs (offset, size, ...) in _layout_c, so
    # that a launch compares numbers, not Python objects (see _layout_matches).
    cdef tuple _layout
    cdef bytes _layout_c
    # Dynamic shared memory (bytes) launches may ask for without another look at the
    # kernel's limit (see _allow_shmem); 0 until a launch asks for some.
    cdef unsigned int _shmem_ok
    # Threads per block the kernel can launch with (its __launch_bounds__ and registers allow
    # fewer than the device's 1024); 0 until the first launch asks the driver.
    cdef unsigned int _threads_ok
    cdef bint _nonportable_ok       # cluster sizes over 8 allowed (set on first need)
    cdef unsigned int _domains_ok   # the device's sync domains (0 until a launch maps some)
    # The co-resident block limit of the last cooperative block shape, written with _coop_seq
    # in kernarg's section, read by launches outside it (_cooperative_fits).
    cdef CoopLimit _coop
    cdef unsigned _coop_seq
    # Kernel.launch's last grid, block and shmem without launch attributes, when each was
    # immutable (an int, or a tuple of ints), and the dimensions checked from them: the same
    # objects again need no second look (see _kernel_launch); other objects checking to the
    # same dimensions leave them as they are (_new_dims). Strong references (dropped in
    # __dealloc__), written with _last_seq (_cutils.h's sequence lock) under the kernel's own
    # lock (_remember_dims), as a free-threaded build's launches read them outside kernarg's
    # section (_last_dims_of).
    cdef PyObject* _last_grid
    cdef PyObject* _last_block
    cdef PyObject* _last_shmem
    cdef Dims _last_dims
    cdef unsigned _last_seq
    # ... and its last stream given as an int, with the handle read from it. stream_handle
    # reads an int in a few instructions, but its code and data are in another module, cold
    # after a driver launch: dropping this cache brought back ~11 more cache lines a launch
    # (tools/probes/cold_launch.py, session 40).
    cdef object _last_stream
    cdef uint64_t _last_handle
    # What its last KEPT_CONFIGS launches with launch attributes that made a config launched
    # (KeptConfig), the oldest replaced first (_cfg_next, the slot the next config takes):
    # NULL until the first is kept, as most kernels never launch with attributes (~6 KB of
    # them; freed in __dealloc__). Set, and _cfg_next written, in kernarg's section
    # (_remember_config); launches outside it load the pointer with acquire (_kept_configs).
    cdef KeptConfig* _cfgs
    cdef unsigned int _cfg_next
    # What loads it again in another process, for pickle: ("source", source, options,
    # headers), ("ptx", text, entry, signature) or ("cubin", image, entry, signature) -- the
    # arguments of the constructor -- or None from a handle.
    cdef tuple _recipe
    # Weak references (a WeakKeyDictionary of kernels, a cache that must not keep one alive).
    cdef object __weakref__

    def __init__(self):
        raise TypeError("use Kernel.from_source/from_ptx/from_cubin/from_handle")

    def __dealloc__(self):
        Py_XDECREF(self._last_grid)
        Py_XDECREF(self._last_block)
        Py_XDECREF(self._last_shmem)
        cdef int i, j
        cdef KeptConfig* c
        if self._cfgs != NULL:
            for j in range(KEPT_CONFIGS):
                c = &self._cfgs[j]
                for i in range(3):
                    Py_XDECREF(c.dims_from[i])
                for i in range(LAUNCH_ATTRIBUTE_NAMES):
                    Py_XDECREF(c.attributes_from[i])
            free(self._cfgs)

    @staticmethod
    cdef Kernel _make(cydriver.CUfunction func, object module, object signature, str name,
                      cydriver.CUcontext ctx, int device):
        cdef Kernel k = Kernel.__new__(Kernel)
        k._func = func
        k._ctx = ctx
        k._module = module
        k.signature = signature
        k.name = name
        k.device = device
        k._shmem_ok = 0
        k._threads_ok = 0
        k._nonportable_ok = False
        k._domains_ok = 0
        return k

    @classmethod
    def from_ptx(cls, ptx, str name not None, *, signature=None, device=0, entry=None):
        """Load PTX text and get kernel ``name`` (its signature is read from the PTX).
        ``entry`` is its ``.entry`` name in the PTX when that is not ``name`` or ``name``'s
        C++ mangled form (a template instantiation's lowered name, say)."""
        text = ptx_text(ptx, "Kernel.from_ptx")
        sig = _signature_arg(signature, "Kernel.from_ptx")
        device = _kernel_device(device)
        cdef cydriver.CUcontext ctx = _primary_context(device)
        with _in_context(ctx):
            mod = _load_image(text.encode() + b"\0")
            if entry is None:
                entry = _entry_name(text, name)
            if sig is None:
                sig = Signature.from_ptx(text, entry)
            k = Kernel._make((<_Module>mod).function(entry, name), mod, sig, name, ctx, device)
        k._recipe = ("ptx", text, entry, sig)
        return k

    @classmethod
    def from_cubin(cls, cubin, str name not None, *, signature=None, device=0, entry=None):
        """Load a cubin/fatbin image and get kernel ``name``: its symbol, or a C++ kernel's
        name (``scale``, ``ns::f``) where the image's symbol table has one kernel of that
        name (uncompressed images); else give the mangled name as ``entry``."""
        if not isinstance(cubin, (bytes, bytearray, memoryview)):
            hint = "; PTX text goes to Kernel.from_ptx" if isinstance(cubin, str) else ""
            raise TypeError(f"Kernel.from_cubin: cubin must be the image's bytes, got "
                            f"{type(cubin).__name__}{hint}")
        signature = _signature_arg(signature, "Kernel.from_cubin")
        device = _kernel_device(device)
        image = bytes(cubin)
        if entry is None:       # read from the image, before the driver is asked
            entry = _cubin_entry(image, name)
        cdef cydriver.CUcontext ctx = _primary_context(device)
        cdef cydriver.CUfunction func
        with _in_context(ctx):
            mod = _load_image(image)
            func = (<_Module>mod).function(name if entry is None else entry, name)
            k = Kernel._make(func, mod, signature, name, ctx, device)
            if signature is None:
                _set_layout(k, _driver_layout(func))
        k._recipe = ("cubin", image, entry, signature)
        return k

    @classmethod
    def from_source(cls, str source not None, str name not None, options=(), *, device=0,
                    headers=None):
        """Compile CUDA C++ with NVRTC for ``device``'s architecture and load kernel ``name``;
        its signature comes from the source.
        ``name`` may be a template instantiation (``"saxpy<float>"``) or a qualified C++ name
        (``"ns::kern"``): NVRTC instantiates it and gives its PTX name.

        Compilations are cached (the 256 most recently used), by source, options and
        architecture -- and by name for template instantiations and qualified names, which
        NVRTC must be asked for by name (``from_source_many`` asks for several in one run): the
        plain-named kernels of one source share one NVRTC run. While a kernel from it lives,
        the loaded module is shared too: kernels of one compilation, or the same kernel asked
        for again, on one device, load nothing more.

        The kernel is loaded as machine code (CUBIN) for the device's exact architecture when
        this NVRTC supports it, else as PTX: a driver JIT-compiles only PTX of an ISA it knows,
        so PTX from an NVRTC newer than the driver would not load, while its machine code does
        (CUDA's minor-version compatibility).

        ``headers`` maps include names to header texts the source may ``#include`` (NVRTC's
        in-memory headers, part of the cache key); a kernel declared in one is found there.

        An architecture in ``options`` (``"-arch=sm_90a"``: the features of one GPU, such as
        Hopper's wgmma) is compiled for instead of the device's own, when the device can load
        what it makes; else, or when the options name two, a ValueError."""
        return _kernels_from_source(source, (name,), normalize_options(options),
                                    _kernel_device(device), headers)[0]

    @classmethod
    def from_source_many(cls, str source not None, names, options=(), *, device=0,
                         headers=None):
        """Compile ``source`` once and load the kernels ``names`` from it (plain names,
        template instantiations and qualified names alike: one NVRTC run, one module).

        Returns
        -------
        dict
            ``{name: Kernel}``, in the order of ``names``.
        """
        if isinstance(names, str):
            raise TypeError("Kernel.from_source_many: names must be a sequence of kernel "
                            f"names, not one str ({names!r}); use from_source for one")
        try:
            names = tuple(names)
        except TypeError:
            raise TypeError("Kernel.from_source_many: names must be a sequence of kernel names, "
                            f"got {type(names).__name__}") from None
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"Kernel.from_source_many: kernel names are str, got "
                                f"{type(n).__name__} ({shown_value(n, True)})")
        kernels = _kernels_from_source(source, names, normalize_options(options),
                                       _kernel_device(device), headers)
        return dict(zip(names, kernels))

    @classmethod
    def from_handle(cls, handle, *, signature=None, str name="<handle>", device=None):
        """Wrap an existing CUfunction or CUkernel (int, cuda.bindings object, or cuda.core
        Kernel). The
        caller keeps its module loaded. With ``device``, launches run in that device's
        primary context (where the function must have been loaded), the thread's own current
        context given back after each, and check arrays against it; without, they run in
        whatever context is current. Without ``signature``, packing
        is untyped."""
        cdef uintptr_t address
        cdef cydriver.CUcontext ctx = NULL
        handle, address = _kernel_address(handle, "Kernel.from_handle")
        signature = _signature_arg(signature, "Kernel.from_handle")
        if device is not None:
            device = device_ordinal(device)
            ctx = _primary_context(device)
        k = Kernel._make(<cydriver.CUfunction>address, handle, signature, name, ctx,
                         -1 if device is None else device)
        if signature is None and device is not None:
            with _in_context(ctx):
                _set_layout(k, _driver_layout(k._func))
        return k

    @property
    def handle(self):
        """The CUfunction handle, as an int."""
        return <uintptr_t>self._func

    def max_cooperative_blocks(self, block, shmem=0):
        """How many blocks of shape ``block`` (with ``shmem`` bytes of dynamic shared memory)
        can be resident at once, the most a cooperative launch may have: the driver's
        occupancy calculator per multiprocessor, times the device's multiprocessors.

        Returns
        -------
        int
        """
        cdef Dims d
        _fill_config(&d, 1, block, shmem)
        _ensure_driver()
        with _in_context(self._ctx):
            return _cooperative_limit(self, d.threads, d.shmem, True)

    def max_active_blocks_per_sm(self, block, shmem=0):
        """How many blocks of shape ``block`` (with ``shmem`` bytes of dynamic shared memory)
        one multiprocessor can hold at once (``cuOccupancyMaxActiveBlocksPerMultiprocessor``).

        Returns
        -------
        int
        """
        cdef Dims d
        cdef int per_sm = 0
        _fill_config(&d, 1, block, shmem)
        _ensure_driver()
        with _in_context(self._ctx):
            _check(cydriver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, self._func, <int>d.threads, d.shmem),
                f"cuOccupancyMaxActiveBlocksPerMultiprocessor of kernel {self.name!r}")
        return per_sm

    def available_shmem(self, block, blocks_per_sm=1):
        """The most dynamic shared memory, in bytes, a block of shape ``block`` may have for
        ``blocks_per_sm`` such blocks to be resident on one multiprocessor at once
        (``cuOccupancyAvailableDynamicSMemPerBlock``); 0 where they cannot be, whatever the
        shared memory. A launch asking for more than 48 KiB has kernarg raise the kernel's
        limit first, up to the device's.

        Returns
        -------
        int
        """
        cdef Dims d
        cdef size_t available = 0
        _fill_config(&d, 1, block, 0)
        blocks = _index(blocks_per_sm, "blocks_per_sm")
        if not 1 <= blocks <= 2**31 - 1:
            raise ValueError(f"blocks_per_sm must be from 1 to 2**31 - 1, got {blocks}")
        _ensure_driver()
        with _in_context(self._ctx):
            _check(cydriver.cuOccupancyAvailableDynamicSMemPerBlock(
                &available, _queryable(self._func), <int>blocks, <int>d.threads),
                f"cuOccupancyAvailableDynamicSMemPerBlock of kernel {self.name!r}")
        return available

    def max_active_clusters(self, grid, block, cluster=None, shmem=0):
        """How many clusters of the launch ``grid``, ``block``, ``cluster``, ``shmem`` can be
        resident on the device at once (``cuOccupancyMaxActiveClusters``). ``cluster=None``:
        the kernel's own cluster size (``__cluster_dims__``); a ValueError for a kernel without
        one. As before a launch, kernarg first allows the kernel clusters of over 8 blocks
        and dynamic shared memory over 48 KiB where the configuration needs them. The driver's
        estimate: the device may schedule fewer.

        Returns
        -------
        int
        """
        cdef LaunchConfig cfg = LaunchConfig(grid, block, shmem=shmem, cluster=cluster)
        cdef int width = -1
        _ensure_driver()
        with _in_context(self._ctx):
            if cluster is None:
                cydriver.cuFuncGetAttribute(
                    &width, cydriver.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                    _queryable(self._func))
                if width == 0:
                    raise ValueError(f"max_active_clusters: kernel {self.name!r} has no cluster "
                                     "size of its own (__cluster_dims__) for cluster=None to "
                                     "ask of: give cluster=")
            return _cluster_occupancy(self, cfg, cfg._d.cluster_blocks > 8, True)

    def max_potential_cluster_size(self, grid, block, shmem=0, non_portable=False):
        """The largest cluster, in blocks, a launch of ``grid``, ``block``, ``shmem`` can have
        (``cuOccupancyMaxPotentialClusterSize``): the kernel's own size where it has one
        (``__cluster_dims__``; read from the kernel's attributes, as the 13.0 driver answers
        the portable size for such a kernel too), else at most 8, the portable size.
        ``non_portable=True`` first allows the kernel larger clusters
        (``NON_PORTABLE_CLUSTER_SIZE_ALLOWED``, which a launch with a cluster of over 8 blocks
        sets too), where the device has them (16 on compute capability 9.0).

        Returns
        -------
        int
        """
        cdef LaunchConfig cfg = LaunchConfig(grid, block, shmem=shmem)
        if not _is_bool(non_portable):
            raise TypeError("non_portable must be True or False, got "
                            f"{shown_value(non_portable, True)}")
        _ensure_driver()
        with _in_context(self._ctx):
            return _cluster_occupancy(self, cfg, non_portable, False)

    @property
    def module_handle(self):
        """The CUmodule the kernel was loaded from, as an int (for ``cuModuleGetGlobal``, say:
        a ``__constant__`` or ``__device__`` variable of the source); None for a kernel made
        ``from_handle``. The module stays loaded while the kernel lives."""
        if isinstance(self._module, _Module):
            return <uintptr_t>(<_Module>self._module).handle
        return None

    def get_global(self, str name not None):
        """The address and size of the ``__device__`` or ``__constant__`` variable ``name`` of
        the kernel's module (``cuModuleGetGlobal``), to copy values to or from it. A
        namespace-scope variable may be named as in C++ (``"ns::table"``), one in an anonymous
        namespace or of internal linkage (``static``) too. The memory is the module's: it is
        valid while the kernel (which keeps the module loaded) lives.

        Returns
        -------
        tuple of int
            ``(address, nbytes)``.
        """
        cdef cydriver.CUdeviceptr ptr = 0
        cdef size_t nbytes = 0
        cdef cydriver.CUresult err
        if not isinstance(self._module, _Module):
            raise ValueError(
                f"Kernel.get_global({name!r}): kernel {self.name!r} was made with from_handle, "
                "so kernarg does not know its module; ask the module's owner "
                "(cuModuleGetGlobal or cuLibraryGetGlobal)")
        if not name or "\0" in name:
            raise ValueError(f"Kernel.get_global: {name!r} is not a variable name")
        _ensure_driver()
        cdef cydriver.CUmodule mod = (<_Module>self._module).handle
        mangled = _mangled_variable(name)
        with _in_context(self._ctx):
            err = cydriver.cuModuleGetGlobal(&ptr, &nbytes, mod, name.encode())
            if err == cydriver.CUDA_ERROR_NOT_FOUND and mangled is not None:
                err = cydriver.cuModuleGetGlobal(&ptr, &nbytes, mod, mangled.encode())
            if err == cydriver.CUDA_ERROR_NOT_FOUND:
                # Internal linkage in a namespace, or an anonymous one: the symbol's name has
                # a prefix made from the source (_ZN..._INTERNAL_...2ns1xE), found in the image.
                recipe = self._recipe
                symbol = _variable_symbol((<_Module>self._module).image, name,
                                          _inline_namespaces(recipe[1])
                                          if recipe is not None and recipe[0] == "source"
                                          else frozenset())
                if symbol is not None:
                    err = cydriver.cuModuleGetGlobal(&ptr, &nbytes, mod, symbol.encode())
        if err == cydriver.CUDA_ERROR_NOT_FOUND:
            raise CudaError(
                f"Kernel.get_global({name!r}): kernel {self.name!r}'s module has no "
                f"__device__ or __constant__ variable {name!r}"
                + (f" (nor {mangled!r})" if mangled is not None else "")
                + " (CUDA_ERROR_NOT_FOUND)"
                + _variable_hint((<_Module>self._module).image, name),
                "CUDA_ERROR_NOT_FOUND", <int>err)
        _check(err, f"cuModuleGetGlobal({name!r})")
        return <uintptr_t>ptr, nbytes

    @property
    def attributes(self):
        """What the driver says of the compiled kernel (``cuFuncGetAttribute``), as a dict:
        ``max_threads_per_block`` (its launch bounds and register use allow), ``num_regs``,
        ``shared_size_bytes`` (static shared memory), ``const_size_bytes``,
        ``local_size_bytes`` (per thread), ``max_dynamic_shared_size_bytes`` (what a launch
        may ask for now; kernarg raises it when a launch asks for more, see ``shmem``),
        ``ptx_version`` and ``binary_version`` (major * 10 + minor). Also, where the driver
        answers for them (compute capability 9.0 has clusters), those of thread block clusters:
        ``required_cluster_width``, ``_height`` and ``_depth`` (its ``__cluster_dims__``, 0
        where it has none), ``cluster_size_must_be_set``, ``non_portable_cluster_size_allowed``
        (kernarg sets it for a launch with a cluster of over 8 blocks),
        ``cluster_scheduling_policy_preference``, and ``preferred_shared_memory_carveout``
        (-1: none)."""
        cdef int value = 0
        cdef cydriver.CUfunction f
        _ensure_driver()
        out = {}
        with _in_context(self._ctx):
            f = _queryable(self._func)
            for key, attr in _FUNC_ATTRIBUTES:
                _check(cydriver.cuFuncGetAttribute(&value, <cydriver.CUfunction_attribute>attr,
                                                   f),
                       f"cuFuncGetAttribute({key}) of kernel {self.name!r}")
                out[key] = value
            for key, attr in _FUNC_CLUSTER_ATTRIBUTES:
                if cydriver.cuFuncGetAttribute(&value, <cydriver.CUfunction_attribute>attr, f) \
                        == cydriver.CUDA_SUCCESS:
                    out[key] = value
        return out

    def max_potential_block_size(self, shmem=0, block_limit=0):
        """The block size (threads) with the highest occupancy for this kernel on its device,
        from the driver's occupancy calculator (``cuOccupancyMaxPotentialBlockSize``), and the
        smallest grid that fills the device at that occupancy.

        Parameters
        ----------
        shmem : int or callable
            Dynamic shared memory per block, in bytes; or a function of the block size (threads)
            that gives it, for kernels whose shared memory grows with the block. The driver
            calls it for each block size it weighs, from inside its own call: it should only
            compute (CUDA's occupancy callbacks are not meant to call CUDA).
        block_limit : int
            The largest block size to consider (0: the kernel's own limit).

        Returns
        -------
        tuple of int
            ``(min_grid, block)``.
        """
        global _shmem_fn, _shmem_fn_error
        cdef int min_grid = 0, block = 0
        cdef long long fixed = 0
        cdef cydriver.CUresult err = cydriver.CUDA_SUCCESS   # set on every path; gcc can't see it
        error = None
        block_limit = _index(block_limit, "Kernel.max_potential_block_size: block_limit")
        if not 0 <= block_limit < 2**31:
            raise ValueError("Kernel.max_potential_block_size: block_limit must be between 0 "
                             f"(the kernel's own limit) and 2**31-1, got {block_limit}")
        if not callable(shmem):
            fixed = _shmem_bytes(shmem)
            if fixed < 0:
                kind = TypeError if isinstance(shmem, bool) or not hasattr(shmem, "__index__") \
                    else ValueError
                raise kind(
                    "Kernel.max_potential_block_size: shmem must be the bytes of dynamic shared "
                    "memory a block needs (an int from 0 to 2**32-1) or a function of the block "
                    f"size giving them, got {shown_value(shmem, True)}")
        _ensure_driver()
        with _in_context(self._ctx):
            if not callable(shmem):
                err = cydriver.cuOccupancyMaxPotentialBlockSize(&min_grid, &block, self._func,
                                                                NULL, <size_t>fixed, block_limit)
            else:
                with _shmem_fn_lock:
                    saved = (_shmem_fn, _shmem_fn_error)
                    _shmem_fn, _shmem_fn_error = shmem, None
                    try:
                        err = cydriver.cuOccupancyMaxPotentialBlockSize(
                            &min_grid, &block, self._func, _call_shmem_fn, 0, block_limit)
                        error = _shmem_fn_error
                    finally:
                        _shmem_fn, _shmem_fn_error = saved
        if error is not None:
            raise error
        _check(err, f"cuOccupancyMaxPotentialBlockSize of kernel {self.name!r}")
        return min_grid, block

    cdef ParamBlock _pack_args(self, tuple args, uint64_t stream):
        return self._pack_items(tuple_items(args), PyTuple_GET_SIZE(args), args, stream)

    cdef ParamBlock _pack_items(self, PyObject** items, Py_ssize_t n, object keep,
                                uint64_t stream):
        """A block of the ``n`` arguments at ``items``, typed when the kernel has a signature;
        ``keep``: their tuple, or None (see kernarg._handler.untyped_block_items)."""
        if self.signature is not None:
            return typed_block_items(<Signature>self.signature, items, n, keep, stream,
                                     self.device, NULL)
        cdef ParamBlock blk = untyped_block_items(items, n, keep, stream, self.device)
        try:
            _check_untyped(self, &blk.st, items)
        except BaseException:
            block_release(blk)
            raise
        return blk

    @property
    def param_layout(self):
        """``((offset, size), ...)`` of the kernel's parameters as the driver reports them
        (kernels without a signature, from :meth:`from_cubin` or :meth:`from_handle` with a
        device), else None."""
        return self._layout

    # launch(grid, block, *args, stream=None, ...) is a C function installed on the type after
    # the class (see _kernel_launch_fastcall): no tuple of the arguments, no generic keyword
    # parsing.

    def prepare(self, grid, block, *, stream=None, shmem=0, cluster=None, cooperative=False,
                pdl=False, priority=None, cluster_scheduling=None, preferred_cluster=None,
                mem_sync_domain=None, shmem_carveout=None, access_policy=None,
                launch_completion_event=None, programmatic_event=None,
                mem_sync_domain_map=None, nvlink_util_centric=None, cluster_size_mode=None,
                shmem_mode=None):
        """A launcher with the configuration checked and the stream resolved once; calling it
        only packs and launches. The keywords after ``stream`` are LaunchConfig's."""
        cfg = LaunchConfig(grid, block, shmem=shmem, cluster=cluster, cooperative=cooperative,
                           pdl=pdl, priority=priority, cluster_scheduling=cluster_scheduling,
                           preferred_cluster=preferred_cluster,
                           mem_sync_domain=mem_sync_domain, shmem_carveout=shmem_carveout,
                           access_policy=access_policy,
                           launch_completion_event=launch_completion_event,
                           programmatic_event=programmatic_event,
                           mem_sync_domain_map=mem_sync_domain_map,
                           nvlink_util_centric=nvlink_util_centric,
                           cluster_size_mode=cluster_size_mode, shmem_mode=shmem_mode)
        return PreparedLaunch(self, cfg, stream_handle(stream))

    def graph_node(self, graph, grid, block, *args, after=(), shmem=0, stream=None,
                   cluster=None, cooperative=False, pdl=False, priority=None,
                   cluster_scheduling=None, preferred_cluster=None, mem_sync_domain=None,
                   shmem_carveout=None, access_policy=None, mem_sync_domain_map=None,
                   after_launch=(), nvlink_util_centric=None, cluster_size_mode=None,
                   shmem_mode=None, device_updatable=False):
        """Add a launch of this kernel with ``args`` to ``graph`` as a kernel node
        (``cuGraphAddKernelNode``), after the nodes ``after``; returns a :class:`KernelNode`.

        ``graph``: a ``CUgraph`` as an int or a cuda.bindings handle, or a cuda.core
        ``GraphDefinition``. ``after``: nodes of that graph -- KernelNodes, ``CUgraphNode``s (int
        or cuda.bindings) or cuda.core graph nodes. ``stream``: the stream the graph will be
        launched on (default: the default stream): as for a launch, it is made to wait for the
        arguments' producer streams, and DLPack producers are given it. The graph keeps the
        arguments and the kernel alive until it is destroyed, as a captured launch does.

        The launch attributes (``cluster`` to ``mem_sync_domain_map``,
        ``nvlink_util_centric``, ``cluster_size_mode`` and ``shmem_mode``, as for LaunchConfig)
        are set on the node (``cuGraphKernelNodeSetAttribute``); a node the driver refuses one
        for is removed again. ``pdl=True`` is a graph's programmatic dependent launch: the
        edges from the kernel nodes ``after`` are programmatic ones
        (``CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`` from their
        ``CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC``), what a stream capture makes of a launch
        with ``pdl=True``: this kernel may start once every block of theirs has called
        ``cudaTriggerProgrammaticLaunchCompletion()`` or ended, and must call
        ``cudaGridDependencySynchronize()`` before it reads what they wrote.

        ``after_launch``: kernel nodes this one waits to have been launched, not to have ended
        -- every block of theirs begun, best effort as for ``launch_completion_event``, the
        graph's counterpart of that attribute (cuda.h ties the port to it): the edges come
        from their ``CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER``. Nothing they write is ordered
        before this kernel reads it.

        ``device_updatable=True`` makes the node device-updatable
        (``CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE``, drivers of CUDA 12.4 or later):
        kernels may then change its arguments, grid or enabled state from the device
        (``cudaGraphKernelNodeSetParam`` and the other functions of
        ``cudaGraphKernelNodeUpdatesApply``), given the node's :attr:`KernelNode.device_node`
        and an argument's offset, ``kernel.signature.offsets[i]``. cuda.h's rules for such a
        node hold: it cannot be removed from its graph, its graph can be instantiated only once
        at a time and not updated with ``cuGraphExecUpdate``, and a graph whose kernels update
        it must be uploaded (``cuGraphUpload``) before it is launched. It is the last attribute
        set, so a node the driver refuses any attribute for is still removed again."""
        if not _is_bool(device_updatable):
            raise TypeError("graph_node: device_updatable must be True or False, got "
                            f"{shown_value(device_updatable, True)}")
        cdef LaunchConfig cfg = LaunchConfig(
            grid, block, shmem=shmem, cluster=cluster, cooperative=cooperative, pdl=pdl,
            priority=priority, cluster_scheduling=cluster_scheduling,
            preferred_cluster=preferred_cluster, mem_sync_domain=mem_sync_domain,
            shmem_carveout=shmem_carveout, access_policy=access_policy,
            mem_sync_domain_map=mem_sync_domain_map, nvlink_util_centric=nvlink_util_centric,
            cluster_size_mode=cluster_size_mode, shmem_mode=shmem_mode)
        cdef uintptr_t g = _graph_address(graph, "graph")
        cdef list deps = _node_addresses(after, "after")
        cdef list launched = _node_addresses(after_launch, "after_launch")
        if cfg.pdl and not deps:
            raise ValueError("graph_node: pdl=True needs the nodes it follows (after=): in a "
                             "graph, a programmatic dependent launch is an edge from a kernel "
                             "node before it")
        for j, node_address in enumerate(launched):
            if node_address in deps:
                raise ValueError(f"graph_node: after_launch[{j}] is in after= too: a node "
                                 "follows another's end or its launch, not both")
        cdef uint64_t s = stream_handle(stream)
        # The dependencies given to cuGraphAddKernelNode: after=, unless its edges are
        # programmatic; those and after_launch='s are added as edges with their data.
        cdef Py_ssize_t plain = 0 if cfg.pdl else len(deps)
        deps += launched
        cdef Py_ssize_t i, n = len(deps)
        cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
        cdef cydriver.CUgraphNode node = NULL
        cdef cydriver.CUgraphNode* dep_c = NULL
        cdef cydriver.CUuserObject kept = NULL
        cdef cydriver.CUfunction func = NULL
        cdef cydriver.CUresult err
        cdef cydriver.CUgraphNode* to = NULL
        cdef cydriver.CUgraphEdgeData* edges = NULL
        cdef cydriver.CUlaunchAttribute updatable
        _ensure_driver()
        if n:
            # The dependencies; also the other ends of the edges with data, and their data.
            dep_c = <cydriver.CUgraphNode*>malloc(
                n * (sizeof(cydriver.CUgraphNode) * 2 + sizeof(cydriver.CUgraphEdgeData)))
            if dep_c == NULL:
                raise MemoryError()
            to = dep_c + n
            edges = <cydriver.CUgraphEdgeData*>(dep_c + 2 * n)
            memset(edges, 0, n * sizeof(cydriver.CUgraphEdgeData))
        try:
            for i in range(n):
                dep_c[i] = <cydriver.CUgraphNode><uintptr_t>deps[i]
                edges[i].from_port = cydriver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC \
                    if i < n - len(launched) else cydriver.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER
                edges[i].type = cydriver.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
            with _in_context(self._ctx):
                # A CUkernel (a cuda.core Kernel's) as its CUfunction in this context: a kernel
                # node takes a CUfunction in ``func``. Found once; the node's updates reuse it.
                func = _queryable(self._func)
                blk = _node_params(self, cfg, args, s, func, &p)
                kept = _node_kept(<cydriver.CUgraph>g, blk, self)
                # The plain dependencies; the edges with data are added below.
                err = cydriver.cuGraphAddKernelNode(&node, <cydriver.CUgraph>g, dep_c, plain,
                                                    &p)
                if err != cydriver.CUDA_SUCCESS:
                    cydriver.cuGraphReleaseUserObject(<cydriver.CUgraph>g, kept, 1)
                    _check(err, f"cuGraphAddKernelNode (kernel {self.name!r})")
                if n > plain:
                    for i in range(plain, n):
                        to[i] = node
                    # The programmatic edges, then the launch-order ones, in a call each: the
                    # 13.0 driver gives every edge of one call into a node the data of the
                    # call's first (an H200, session 85: tools/probes/graph_edges.py).
                    i = n - len(launched)
                    err = cydriver.CUDA_SUCCESS
                    if i > plain:
                        err = graph_add_edges(<cydriver.CUgraph>g, dep_c + plain, to + plain,
                                              edges + plain, i - plain)
                    if err == cydriver.CUDA_SUCCESS and n > i:
                        err = graph_add_edges(<cydriver.CUgraph>g, dep_c + i, to + i,
                                              edges + i, n - i)
                    if err != cydriver.CUDA_SUCCESS:
                        cydriver.cuGraphDestroyNode(node)
                        cydriver.cuGraphReleaseUserObject(<cydriver.CUgraph>g, kept, 1)
                        what = " and ".join(
                            (["programmatic edges from after="] if cfg.pdl else []) +
                            (["launch-order edges from after_launch="] if launched else []))
                        _check(err, f"cuGraphAddDependencies ({what} to kernel "
                                    f"{self.name!r}: each of those must be a kernel node "
                                    "of this graph)")
                for i in range(cfg._nattrs):
                    if cfg._attrs[i].id == \
                            cydriver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
                        continue        # a launch's attribute: the node has its edges instead
                    _set_node_attribute(node, <cydriver.CUgraph>g, kept, &cfg._attrs[i],
                                        cfg.attributes[i][0], self.name)
                if device_updatable:
                    # Last: a device-updatable node cannot be destroyed, so every refusal that
                    # removes the node again comes before it (and a refusal of this one leaves
                    # the node as it was, removable).
                    memset(&updatable, 0, sizeof(updatable))
                    updatable.id = cydriver.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
                    updatable.value.deviceUpdatableKernelNode.deviceUpdatable = 1
                    _set_node_attribute(node, <cydriver.CUgraph>g, kept, &updatable,
                                        "device_updatable", self.name)
        finally:
            free(dep_c)
        cdef KernelNode made = KernelNode._make(self, cfg, <cydriver.CUgraph>g, node, func, kept,
                                                graph)
        made.device_updatable = device_updatable
        return made

    def nodes_in(self, graph):
        """The kernel nodes of ``graph`` (a ``CUgraph`` as an int, a cuda.bindings ``CUgraph``
        or a cuda.core graph) that launch this kernel, in the graph's node order, as
        :class:`KernelNode` objects: the nodes a stream capture made of its launches, or
        nodes added otherwise. Their ``set_args``, ``set_exec_args`` and ``set_enabled`` work
        as those of ``graph_node``'s nodes do: a graph captured once can be instantiated and
        launched again with other arrays. Nodes of child graphs are not searched.

        A node's ``config`` is its grid, block and dynamic shared memory, with the cluster
        and cooperative attributes the driver reports for it: what new arguments and shapes are
        checked against. Setting new arguments leaves the node's other attributes as they are.
        The arguments a node had when found stay alive as long as the graph (a capture gave
        them to it), not only until new ones are set."""
        cdef uintptr_t g = _graph_address(graph, "graph")
        cdef size_t i, count = 0
        cdef cydriver.CUgraphNode* nodes = NULL
        cdef cydriver.CUgraphNodeType kind
        cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
        cdef cydriver.CUfunction func
        cdef KernelNode made
        found = []
        _ensure_driver()
        with _in_context(self._ctx):
            func = _queryable(self._func)
            _check(cydriver.cuGraphGetNodes(<cydriver.CUgraph>g, NULL, &count),
                   "cuGraphGetNodes (the graph's node count)")
            if count == 0:
                return found
            nodes = <cydriver.CUgraphNode*>malloc(count * sizeof(cydriver.CUgraphNode))
            if nodes == NULL:
                raise MemoryError()
            try:
                _check(cydriver.cuGraphGetNodes(<cydriver.CUgraph>g, nodes, &count),
                       "cuGraphGetNodes")
                for i in range(count):
                    _check(cydriver.cuGraphNodeGetType(nodes[i], &kind), "cuGraphNodeGetType")
                    if kind != cydriver.CU_GRAPH_NODE_TYPE_KERNEL:
                        continue
                    memset(&p, 0, sizeof(p))
                    _check(cydriver.cuGraphKernelNodeGetParams(nodes[i], &p),
                           "cuGraphKernelNodeGetParams")
                    # A node launches a CUfunction (this context's, where the kernel is a
                    # CUkernel), or a CUkernel with no function.
                    if not (p.func == func or p.func == self._func or
                            (p.func == NULL and
                             <cydriver.CUfunction>p.kern == self._func)):
                        continue
                    made = KernelNode._make(self, _node_config(nodes[i], &p),
                                            <cydriver.CUgraph>g, nodes[i], func, NULL, graph)
                    made.device_updatable = _node_device_updatable(nodes[i])
                    found.append(made)
            finally:
                free(nodes)
        return found

    def __getitem__(self, config):
        """``kernel[grid, block]``, ``[grid, block, stream]``, ``[grid, block, stream, shmem]``.
        """
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise TypeError("use kernel[grid, block], kernel[grid, block, stream] or "
                            "kernel[grid, block, stream, shmem]")
        grid, block = config[0], config[1]
        stream = config[2] if len(config) > 2 else None
        shmem = config[3] if len(config) > 3 else 0
        return self.prepare(grid, block, stream=stream, shmem=shmem)

    def __repr__(self):
        where = f" on device {self.device}" if self.device >= 0 else ""
        return f"<kernarg.Kernel {self.name}{where} signature={self.signature!r}>"

    def __reduce__(self):
        # Pickled as its code: unpickling loads it again, on the device of the same ordinal
        # in that process (from_source compiles it for that device's architecture, or finds
        # it in the cache), as CuPy's RawKernel does. A handle means nothing in another
        # process, and from_handle has no code.
        if self._recipe is None:
            raise TypeError(f"kernarg.Kernel {self.name!r} cannot be pickled: it wraps a "
                            "function handle (Kernel.from_handle), which is valid in this "
                            "process only, and kernarg has no code to load it again from; "
                            "pickle the source, PTX or cubin it came from instead")
        return (_unpickle_kernel, (self._recipe, self.name, self.device))

    # One kernel's code cannot change: a copy is the kernel itself, not a second load.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _unpickle_kernel(tuple recipe, str name, int device):
    """A pickled Kernel (see Kernel.__reduce__), loaded again from its code. A driver failure
    says it happened unpickling the kernel (the traceback of a worker that unpickles its task
    shows little else)."""
    kind, code, *rest = recipe
    try:
        if kind == "source":
            return Kernel.from_source(code, name, rest[0], device=device, headers=rest[1])
        load = Kernel.from_ptx if kind == "ptx" else Kernel.from_cubin
        return load(code, name, signature=rest[1], device=device, entry=rest[0])
    except CudaError as exc:
        raise type(exc)(f"unpickling kernarg.Kernel {name!r} (from {kind}, device={device}): "
                        f"{exc}", exc.name, exc.code) from exc


# ---------------------------------------------------------------------------------------------
# Kernel.launch and kernarg.launch as CPython "fastcall" C functions
#
# Both take the kernel's arguments as *args. Written as Cython def functions, every call would
# copy them into a new tuple and run Cython's generic keyword parser; a launch needs neither.
# They are C functions of CPython's METH_FASTCALL | METH_KEYWORDS convention instead (the
# vectorcall convention of builtins): the positional arguments are read from the caller's
# array where they lie, followed by the keyword values, named by ``kwnames``. The packers read
# that array as a PreparedLaunch's vectorcall does (no tuple; a launch captured into a graph
# gets one made, see _launch's ``borrowed``). Their first lines (the "--" line ends them) are
# the signatures ``inspect.signature`` reads.

cdef tuple _KERNEL_LAUNCH_NAMES = (
    "grid", "block", "stream", "shmem", "cluster", "cooperative", "pdl", "priority",
    "cluster_scheduling", "preferred_cluster", "mem_sync_domain", "shmem_carveout",
    "access_policy", "launch_completion_event", "programmatic_event", "mem_sync_domain_map",
    "nvlink_util_centric", "cluster_size_mode", "shmem_mode")
cdef PyObject* _STREAM = PyTuple_GET_ITEM(_KERNEL_LAUNCH_NAMES, 2)    # interned: "stream"


cdef object _kernel_launch_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                                    PyObject* kwnames):
    """``Kernel.launch(grid, block, *args, stream=None, shmem=0, cluster=None,
    cooperative=False, pdl=False, priority=None, ...)``: ``args[0:nargs]`` by position. On a
    free-threaded build it takes kernarg's critical section itself (the guard leaves it
    unwrapped: see the module's end), once the launch needs it (_kernel_launch)."""
    cdef LazySection lazy
    if not KERNARG_GUARDED_BUILD:       # (a C constant: a GIL build compiles only this)
        return _kernel_launch_call(<PyObject*>self, args, nargs, kwnames, NULL)
    lazy.held = False
    try:
        return _kernel_launch_call(<PyObject*>self, args, nargs, kwnames, &lazy)
    finally:
        leave_lazily(&lazy)


cdef object _kernel_launch_call(PyObject* self, PyObject** args, Py_ssize_t nargs,
                                PyObject* kwnames, LazySection* lazy):
    cdef PyObject* given[KERNEL_LAUNCH_NAMES]
    if nargs >= 2 and (kwnames == NULL or (PyTuple_GET_SIZE(<object>kwnames) == 1 and
                                           PyTuple_GET_ITEM(<object>kwnames, 0) == _STREAM)):
        # The usual call, k.launch(grid, block, *args) with or without stream=: nothing to
        # sort by name (a key that is not the interned "stream" takes the general path).
        memset(given, 0, sizeof(given))
        given[0], given[1] = args[0], args[1]
        if kwnames != NULL:
            given[2] = args[nargs]
    else:
        parse_fastcall("Kernel.launch", _KERNEL_LAUNCH_NAMES, 2, args, nargs, kwnames, given)
    _kernel_launch(<Kernel>self,        # the method descriptor has checked the type
                   <object>given[0], <object>given[1], args + 2, nargs - 2 if nargs > 2 else 0,
                   or_default(given[2], None), or_default(given[3], 0), given + 4, lazy)
    return None


cdef int _kernel_launch(Kernel k, object grid, object block, PyObject** items, Py_ssize_t n,
                        object stream, object shmem, PyObject** attributes,
                        LazySection* lazy) except -1:
    """Pack the ``n`` arguments at ``items`` and launch on ``stream`` (anything
    kernarg.resolve_stream accepts), after making it wait on every producer stream the
    arguments exported. ``attributes``: the values given for the launch attributes, cluster
    to shmem_mode in _KERNEL_LAUNCH_NAMES's order, NULL where not given. ``lazy``: NULL where
    the caller holds kernarg's section (or the GIL); else the section to enter once the launch
    needs it (see _enqueue): a launch with no attributes (or with the attribute objects, or
    values, of a launch with attributes the kernel kept), on None or an int stream, of
    arguments the packers place outside it, runs all of it outside."""
    cdef Dims d
    cdef cydriver.CUlaunchAttribute* attrs = NULL
    cdef cydriver.CUlaunchAttribute last_attrs[MAX_ATTRS]
    cdef unsigned int nattrs = 0
    cdef Py_ssize_t i
    cdef bint plain = True
    cdef int found
    # No attribute asked for: the flags (cooperative, pdl: 1 and 2) false, every other value
    # None (or not given). Most launches give none of them: one pass over NULLs, in C.
    for i in range(LAUNCH_ATTRIBUTE_NAMES):
        if attributes[i] != NULL and attributes[i] != <PyObject*>None:
            if i == 1 or i == 2:
                if type(<object>attributes[i]) is not bool:
                    enter_lazily(lazy)      # its __bool__ runs in the section
                if not <object>attributes[i]:
                    continue
            plain = False
            break
    if plain:
        # No launch attributes: check the dimensions straight into the launch, no objects --
        # or not at all, for the objects this kernel's last such launch checked. Code that
        # launches a kernel over and over passes the same ones (constants, cached small ints).
        # The check's code and data are cold after the driver's last launch, and each cache
        # line of them that must come back costs a few ns (tools/probes/cold_launch.py).
        if not _last_dims_of(k, grid, block, shmem, &d):
            if _immutable_dims(grid) and _immutable_dims(block) and type(shmem) is int:
                _new_dims_call(k, grid, block, shmem, &d)
            else:
                # Other objects' __index__ runs in the section, as kernarg's other callbacks.
                enter_lazily(lazy)
                _fill_config(&d, grid, block, shmem)
    else:
        # Launch attributes, the same objects as one of the launches with them this kernel
        # kept: what it launched (_attributes for the rest).
        found = _last_config_of(k, grid, block, shmem, attributes, &d, last_attrs, &nattrs)
        if found != SAME_CONFIG:
            _attributes_call(k, grid, block, shmem, attributes, found, lazy, &d, last_attrs,
                             &nattrs)
        attrs = last_attrs
    cdef uint64_t handle
    if KERNARG_GUARDED_BUILD and lazy != NULL and not lazy.held:
        # None, ints and a stream object of the type last resolved, whose __cuda_stream__
        # answers as usual, need no section (stream_handle_lazily says why).
        handle = stream_handle_lazily(stream, lazy)
    elif stream is not None and stream is k._last_stream:      # an int: it cannot change
        handle = k._last_handle
    else:
        enter_lazily(lazy)
        handle = stream_handle(stream)
        if type(stream) is int:
            k._last_stream, k._last_handle = stream, handle
    return _pack_and_launch(k, &d, attrs, nattrs, items, n, None, handle, lazy)


cdef int _attributes(Kernel k, object grid, object block, object shmem,
                     PyObject** attributes, int found, LazySection* lazy, Dims* d,
                     cydriver.CUlaunchAttribute* attrs, unsigned int* nattrs) except -1:
    """What _kernel_launch launches for the launch ``attributes`` it was given (at least one
    set), ``grid``, ``block`` and ``shmem``, where they are not all the objects of one of the
    kernel's kept launches with attributes (``found``: _last_config_of's answer, which has put
    what that launch launched in ``d``, ``attrs`` and ``nattrs`` unless NOT_SAME): the
    dimensions into
    ``d``, the attributes into ``attrs`` (MAX_ATTRS of room) and their count into ``nattrs``.
    The same attribute objects, or equal ones (_equal_values_of by their values in C words,
    with no section; else _equal_to_last_config, in kernarg's section): theirs with this grid,
    block and shmem (a grid made for each launch's data, with pdl=True, say); else a
    LaunchConfig made, and remembered, in kernarg's section. Building a config
    anew costs more than the rest of the launch's host work (~0.6 µs with a cluster, on the
    development VM)."""
    cdef LaunchConfig cfg
    if found == NOT_SAME:
        found = _equal_values_call(k, grid, block, shmem, attributes, d, attrs, nattrs)
    if found == NOT_SAME:
        enter_lazily(lazy)          # the kept objects are followed, not only compared
        found = _equal_to_last_config_call(k, grid, block, shmem, attributes, d, attrs,
                                           nattrs)
    if found == SAME_ATTRIBUTES:
        if not (_immutable_dims(grid) and _immutable_dims(block) and type(shmem) is int):
            enter_lazily(lazy)      # their __index__ runs in the section
        if not _regrid(d, grid, block, shmem, attrs, nattrs[0]):
            found = NOT_SAME        # LaunchConfig says what is wrong
    if found != NOT_SAME:
        return 0
    enter_lazily(lazy)
    cfg = LaunchConfig(grid, block, shmem=shmem,
                       cluster=or_default(attributes[0], None),
                       cooperative=or_default(attributes[1], False),
                       pdl=or_default(attributes[2], False),
                       priority=or_default(attributes[3], None),
                       cluster_scheduling=or_default(attributes[4], None),
                       preferred_cluster=or_default(attributes[5], None),
                       mem_sync_domain=or_default(attributes[6], None),
                       shmem_carveout=or_default(attributes[7], None),
                       access_policy=or_default(attributes[8], None),
                       launch_completion_event=or_default(attributes[9], None),
                       programmatic_event=or_default(attributes[10], None),
                       mem_sync_domain_map=or_default(attributes[11], None),
                       nvlink_util_centric=or_default(attributes[12], None),
                       cluster_size_mode=or_default(attributes[13], None),
                       shmem_mode=or_default(attributes[14], None))
    _remember_config(k, cfg, grid, block, shmem, attributes)
    # Copied, as a remembered launch is: the events' handles stay valid while the caller holds
    # the attribute objects they were read from.
    d[0] = cfg._d
    memcpy(attrs, cfg._attrs, cfg._nattrs * sizeof(cydriver.CUlaunchAttribute))
    nattrs[0] = cfg._nattrs
    return 0


# _kernel_launch calls _attributes through a pointer: the C compiler inlines a function called
# once, and inlined (a call of 15 keywords, and _regrid) it made _kernel_launch's code and stack
# frame larger, and launches with no attributes ~10-15 ns slower (timeit, tools/fakecuda).
cdef int (*_attributes_call)(Kernel, object, object, object, PyObject**, int, LazySection*,
                             Dims*, cydriver.CUlaunchAttribute*, unsigned int*) except -1
_attributes_call = _attributes

# ... and _attributes calls _equal_to_last_config through one too: inlined there, the module's
# code was laid out anew and launches with no attributes took ~15 ns more (timeit, three
# alternations; callgrind: the same instructions), ~3 ns through the pointer.
cdef int (*_equal_to_last_config_call)(Kernel, object, object, object, PyObject**, Dims*,
                                       cydriver.CUlaunchAttribute*, unsigned int*) noexcept
_equal_to_last_config_call = _equal_to_last_config


cdef inline bint _last_dims_of(Kernel k, object grid, object block, object shmem,
                               Dims* d) noexcept:
    """Whether ``grid``, ``block`` and ``shmem`` are the objects of ``k``'s last launch
    without attributes (_remember_dims); then ``d`` has their dimensions. Needs no section:
    on a free-threaded build the fields are read whole under ``k``'s sequence lock, and only
    compared (an object the caller holds is alive, so one at the same address is the same)."""
    cdef unsigned begun
    if not KERNARG_GUARDED_BUILD:
        if <PyObject*>grid == k._last_grid and <PyObject*>block == k._last_block and \
                <PyObject*>shmem == k._last_shmem:
            d[0] = k._last_dims
            return True
        return False
    begun = kernarg_seq_begin(&k._last_seq)
    if load_object(k._last_grid) != <PyObject*>grid or \
            load_object(k._last_block) != <PyObject*>block or \
            load_object(k._last_shmem) != <PyObject*>shmem:
        return False
    kernarg_copy_words(d, &k._last_dims, sizeof(Dims) // 4)
    return kernarg_seq_valid(&k._last_seq, begun)


cdef int _new_dims(Kernel k, object grid, object block, object shmem, Dims* d) except -1:
    """Check ``grid``, ``block`` and ``shmem`` (ints and tuples of them) into ``d``, and keep
    them as ``k``'s last unless their values are those kept (_dims_kept)."""
    _fill_config(d, grid, block, shmem)
    if not _dims_kept(k, d):
        _remember_dims(k, grid, block, shmem, d)
    return 0


# _kernel_launch calls _new_dims through a pointer, as it calls _attributes: inlined, launches
# that find their dimensions kept took 5-15 ns more than before (timeit, tools/fakecuda; the
# same instructions), through the pointer 0-7 ns.
cdef int (*_new_dims_call)(Kernel, object, object, object, Dims*) except -1
_new_dims_call = _new_dims


cdef inline bint _dims_kept(Kernel k, const Dims* d) noexcept:
    """Whether ``d`` is what ``k``'s last launch without attributes launched (_remember_dims):
    then other objects of the same values (a grid tuple made at each launch) need not replace
    the kept ones, and threads launching one kernel so on a free-threaded build write nothing
    of it, which kept them taking turns at its lock. Read as _last_dims_of reads it."""
    cdef Dims kept
    cdef unsigned begun
    if not KERNARG_GUARDED_BUILD:
        return k._last_grid != NULL and memcmp(&k._last_dims, d, sizeof(Dims)) == 0
    begun = kernarg_seq_begin(&k._last_seq)
    if load_object(k._last_grid) == NULL:
        return False
    kernarg_copy_words(&kept, &k._last_dims, sizeof(Dims) // 4)
    return kernarg_seq_valid(&k._last_seq, begun) and memcmp(&kept, d, sizeof(Dims)) == 0


cdef void _remember_dims(Kernel k, object grid, object block, object shmem,
                         const Dims* d) noexcept:
    """Make ``grid``, ``block`` and ``shmem`` (immutable objects: ints and tuples of them, whose
    references drop here run no code) and their dimensions ``d`` ``k``'s last
    (_last_dims_of). Writers take turns under the kernel's own lock on a free-threaded build
    (nothing on a GIL build), not kernarg's section, so that threads launching with
    alternating dimensions still launch at once."""
    cdef kernarg_section cs
    kernarg_object_lock(&cs, <PyObject*>k)
    kernarg_seq_write_begin(&k._last_seq)
    kernarg_set_ref(&k._last_grid, <PyObject*>grid)
    kernarg_set_ref(&k._last_block, <PyObject*>block)
    kernarg_set_ref(&k._last_shmem, <PyObject*>shmem)
    kernarg_copy_words(&k._last_dims, d, sizeof(Dims) // 4)
    kernarg_seq_write_end(&k._last_seq)
    kernarg_object_unlock(&cs)


cdef enum:
    # What _last_config_of found.
    NOT_SAME            # other launch attributes than those of the launches the kernel keeps
    SAME_ATTRIBUTES     # one's attributes, another grid, block or shmem
    SAME_CONFIG         # one's attributes, grid, block and shmem


cdef int _last_config_of(Kernel k, object grid, object block, object shmem,
                         PyObject** attributes, Dims* d, cydriver.CUlaunchAttribute* attrs,
                         unsigned int* nattrs) noexcept:
    """Whether the launch ``attributes`` (as _kernel_launch has them), and ``grid``,
    ``block`` and ``shmem``, are the objects one of ``k``'s kept launches with attributes was
    made from (_remember_config): NOT_SAME, or SAME_CONFIG, or SAME_ATTRIBUTES if only the
    attributes are. Unless NOT_SAME, ``d``, ``attrs`` and ``nattrs`` have what it launched.
    Needs no section, as _last_dims_of: copied and compared under the kept launch's sequence
    lock."""
    cdef KeptConfig* cfgs = _kept_configs(k)
    cdef KeptConfig* c
    cdef unsigned begun
    cdef int j
    if cfgs == NULL:
        return NOT_SAME
    for j in range(KEPT_CONFIGS):
        c = &cfgs[j]
        begun = kernarg_seq_begin(&c.seq)
        if kernarg_same_pointers(c.attributes_from, attributes, LAUNCH_ATTRIBUTE_NAMES):
            return _kept_config(c, grid, block, shmem, d, attrs, nattrs, begun)
    return NOT_SAME


cdef inline KeptConfig* _kept_configs(Kernel k) noexcept nogil:
    """``k``'s kept launches with attributes (KEPT_CONFIGS of them), or NULL before the
    first: the pointer loaded with acquire, so that a launch outside kernarg's section that
    sees it sees the zeroed slots _remember_config published."""
    return <KeptConfig*>kernarg_load_ptr(<void* const*>&k._cfgs)


cdef inline int _kept_config(KeptConfig* c, object grid, object block, object shmem, Dims* d,
                             cydriver.CUlaunchAttribute* attrs, unsigned int* nattrs,
                             unsigned begun) noexcept:
    """The rest of _last_config_of (and _equal_values_of), the attributes found to be those
    of the kept launch ``c``, under its sequence lock ``begun``: SAME_CONFIG or
    SAME_ATTRIBUTES (``grid``, ``block`` and ``shmem`` compared as objects), with ``d``,
    ``attrs`` and ``nattrs`` copied; NOT_SAME where a writer got in."""
    cdef unsigned int n
    cdef int found = SAME_CONFIG
    if load_object(c.dims_from[0]) != <PyObject*>grid or \
            load_object(c.dims_from[1]) != <PyObject*>block or \
            load_object(c.dims_from[2]) != <PyObject*>shmem:
        found = SAME_ATTRIBUTES
    n = load_uint(c.nattrs)
    if n > MAX_ATTRS:           # torn by a writer: the check below fails
        return NOT_SAME
    kernarg_copy_words(d, &c.dims, sizeof(Dims) // 4)
    kernarg_copy_words(attrs, c.attrs, n * sizeof(cydriver.CUlaunchAttribute) // 4)
    nattrs[0] = n
    return found if kernarg_seq_valid(&c.seq, begun) else NOT_SAME


cdef extern from *:
    """
    /* Whether a and b, two values of a launch attribute that _immutable_value accepts, make
       the same config: one object, or of one exact type and equal -- ints, strs, floats bit
       for bit (0.0 and -0.0 are not taken for one), and tuples of those item by item (None
       and bools are single objects). No Python code runs. */
    static int kernarg_equal_value(PyObject *a, PyObject *b, int in_tuple) {
        PyTypeObject *t = Py_TYPE(a);
        Py_ssize_t i, n;
        double x, y;
        if (a == b) return 1;
        if (t != Py_TYPE(b)) return 0;
        if (t == &PyLong_Type)
            return PyObject_RichCompareBool(a, b, Py_EQ) == 1;   /* int == int cannot fail */
        if (t == &PyUnicode_Type)
            return PyUnicode_Compare(a, b) == 0;                 /* nor str against str */
        if (t == &PyFloat_Type) {
            x = PyFloat_AS_DOUBLE(a);
            y = PyFloat_AS_DOUBLE(b);
            return memcmp(&x, &y, sizeof x) == 0;
        }
        if (t != &PyTuple_Type || in_tuple) return 0;
        n = PyTuple_GET_SIZE(a);
        if (n != PyTuple_GET_SIZE(b)) return 0;
        for (i = 0; i < n; i++)
            if (!kernarg_equal_value(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i), 1))
                return 0;
        return 1;
    }

    /* kernarg_equal_value for two values given for one launch attribute, NULL where none
       was: the parameter's default, False for a flag (cooperative, pdl), else None. */
    static int kernarg_equal_attribute(PyObject *a, PyObject *b, int flag) {
        PyObject *absent = flag ? Py_False : Py_None;
        return kernarg_equal_value(a ? a : absent, b ? b : absent, 0);
    }
    """
    bint kernarg_equal_attribute(PyObject* a, PyObject* b, bint flag) noexcept


cdef int _equal_to_last_config(Kernel k, object grid, object block, object shmem,
                               PyObject** attributes, Dims* d,
                               cydriver.CUlaunchAttribute* attrs,
                               unsigned int* nattrs) noexcept:
    """_last_config_of for launch attributes that are not the objects of one of ``k``'s kept
    launches with attributes but equal them (kernarg_equal_attribute): a string made again
    (other values _equal_values_of compares, with no section) makes the config that launch
    made. NOT_SAME, or SAME_CONFIG or SAME_ATTRIBUTES (the grid, block and shmem compared as
    objects) with ``d``, ``attrs`` and ``nattrs`` as _last_config_of puts them; then the given
    objects replace the kept ones, for the next launch with them to find by address. In
    kernarg's section: the kept objects are followed (their writers take turns in it)."""
    cdef Py_ssize_t i
    cdef int j
    cdef KeptConfig* c
    if k._cfgs == NULL:                     # (written in the section, as this runs)
        return NOT_SAME
    for j in range(KEPT_CONFIGS):
        c = &k._cfgs[j]
        if c.dims_from[0] == NULL:          # no launch with attributes kept here
            continue
        for i in range(LAUNCH_ATTRIBUTE_NAMES):
            if attributes[i] != c.attributes_from[i] and not kernarg_equal_attribute(
                    attributes[i], c.attributes_from[i], i == 1 or i == 2):
                break
        else:
            d[0] = c.dims
            memcpy(attrs, c.attrs, c.nattrs * sizeof(cydriver.CUlaunchAttribute))
            nattrs[0] = c.nattrs
            kernarg_seq_write_begin(&c.seq)
            for i in range(LAUNCH_ATTRIBUTE_NAMES):
                kernarg_set_ref(&c.attributes_from[i], attributes[i])
            kernarg_seq_write_end(&c.seq)
            if c.dims_from[0] == <PyObject*>grid and c.dims_from[1] == <PyObject*>block and \
                    c.dims_from[2] == <PyObject*>shmem:
                return SAME_CONFIG
            return SAME_ATTRIBUTES
    return NOT_SAME


cdef int _equal_values_of(Kernel k, object grid, object block, object shmem,
                          PyObject** attributes, Dims* d, cydriver.CUlaunchAttribute* attrs,
                          unsigned int* nattrs) noexcept:
    """_equal_to_last_config with no section: the launch ``attributes`` compared with those
    of ``k``'s kept launches with attributes, each as the same object or by its value in C
    words (kernarg_encode_attribute: None, bools, ints, floats and tuples of up to four ints,
    a cluster made at each launch, ``cluster=(cx, 1, 1)``; not strs). As _last_config_of,
    under the kept launch's sequence lock, the kept objects' addresses compared but never
    followed, and nothing written: the kept objects stay (a value no launch has put in the
    kept words is compared by value again). NOT_SAME where each kept launch has one that
    differs, or is of another kind: the caller then asks _equal_to_last_config, in kernarg's
    section."""
    cdef kernarg_attr_value given[LAUNCH_ATTRIBUTE_NAMES]
    cdef kernarg_attr_value kept
    cdef KeptConfig* c
    cdef Py_ssize_t i
    cdef int j, found
    cdef unsigned begun
    cdef uint32_t encoded = 0           # the given values encoded so far, a bit each
    cdef KeptConfig* cfgs = _kept_configs(k)
    if cfgs == NULL:
        return NOT_SAME
    for j in range(KEPT_CONFIGS):
        c = &cfgs[j]
        begun = kernarg_seq_begin(&c.seq)
        if load_object(c.dims_from[0]) == NULL:         # no launch with attributes kept here
            continue
        for i in range(LAUNCH_ATTRIBUTE_NAMES):
            if load_object(c.attributes_from[i]) == attributes[i]:
                continue
            if not encoded & (1u << i):
                kernarg_encode_attribute(&given[i], attributes[i], i == 1 or i == 2)
                encoded |= 1u << i
            kernarg_copy_words(&kept, &c.values[i], sizeof(kernarg_attr_value) // 4)
            if given[i].kind == KERNARG_VALUE_OTHER or \
                    memcmp(&given[i], &kept, sizeof(kernarg_attr_value)) != 0:
                break
        else:
            found = _kept_config(c, grid, block, shmem, d, attrs, nattrs, begun)
            if found != NOT_SAME:
                return found
    return NOT_SAME


def _attribute_words(value, bint flag=False, bint given=True):
    """kernarg_encode_attribute's words for ``value`` given for a launch attribute (a flag's:
    cooperative, pdl), or for none given (``given`` False), as (kind, word, word, word, word):
    for tests."""
    cdef kernarg_attr_value v
    kernarg_encode_attribute(&v, <PyObject*>value if given else NULL, flag)
    words = <long long*>&v
    return tuple([words[i] for i in range(sizeof(kernarg_attr_value) // 8)])


def _equal_attributes(a, b, bint flag=False):
    """kernarg_equal_attribute of two values given for a launch attribute: for tests."""
    return kernarg_equal_attribute(<PyObject*>a, <PyObject*>b, flag)


# _attributes calls it through a pointer, as it calls _equal_to_last_config.
cdef int (*_equal_values_call)(Kernel, object, object, object, PyObject**, Dims*,
                               cydriver.CUlaunchAttribute*, unsigned int*) noexcept
_equal_values_call = _equal_values_of


cdef bint _regrid(Dims* d, object grid, object block, object shmem,
                  const cydriver.CUlaunchAttribute* attrs, unsigned int nattrs) except -1:
    """Put ``grid``, ``block`` and ``shmem``, checked, in ``d``, which has what a launch with
    the attributes ``attrs`` launched (_last_config_of): what those attributes set is kept.
    False where the grid is not a multiple of the cluster or preferred cluster they set (the
    caller makes a LaunchConfig, which says so)."""
    cdef Dims kept = d[0]
    cdef unsigned int i
    cdef const cydriver.CUlaunchAttributeValue* v
    _fill_config(d, grid, block, shmem)
    d.cluster_blocks, d.domains = kept.cluster_blocks, kept.domains
    d.cooperative, d.shmem_by_driver = kept.cooperative, kept.shmem_by_driver
    for i in range(nattrs):
        v = &attrs[i].value
        if attrs[i].id == cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            if d.grid[0] % v.clusterDim.x or d.grid[1] % v.clusterDim.y or \
                    d.grid[2] % v.clusterDim.z:
                return False
        elif attrs[i].id == cydriver.CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
            if d.grid[0] % v.preferredClusterDim.x or d.grid[1] % v.preferredClusterDim.y or \
                    d.grid[2] % v.preferredClusterDim.z:
                return False
    return True


cdef void _remember_config(Kernel k, LaunchConfig cfg, object grid, object block,
                           object shmem, PyObject** attributes) noexcept:
    """Keep what ``cfg`` launches as one of ``k``'s launches with attributes
    (_last_config_of), in place of the oldest kept, where every object it was made from
    (``grid``, ``block``, ``shmem``, the ``attributes``) cannot change (_immutable_value:
    their references dropped here run no code). In kernarg's section, which makes writers
    take turns."""
    cdef Py_ssize_t i
    cdef kernarg_attr_value value
    cdef KeptConfig* c
    if not (_immutable_value(grid) and _immutable_value(block) and _immutable_value(shmem)):
        return
    for i in range(LAUNCH_ATTRIBUTE_NAMES):
        if attributes[i] != NULL and not _immutable_value(<object>attributes[i]):
            return
    if k._cfgs == NULL:
        c = <KeptConfig*>calloc(KEPT_CONFIGS, sizeof(KeptConfig))
        if c == NULL:
            return                          # (no memory: the next launch makes its own)
        kernarg_publish_ptr(<void**>&k._cfgs, c)
    c = &k._cfgs[k._cfg_next]
    k._cfg_next = (k._cfg_next + 1) % KEPT_CONFIGS
    kernarg_seq_write_begin(&c.seq)
    kernarg_set_ref(&c.dims_from[0], <PyObject*>grid)
    kernarg_set_ref(&c.dims_from[1], <PyObject*>block)
    kernarg_set_ref(&c.dims_from[2], <PyObject*>shmem)
    for i in range(LAUNCH_ATTRIBUTE_NAMES):
        kernarg_set_ref(&c.attributes_from[i], attributes[i])
        kernarg_encode_attribute(&value, attributes[i], i == 1 or i == 2)
        kernarg_copy_words(&c.values[i], &value, sizeof(kernarg_attr_value) // 4)
    kernarg_copy_words(&c.dims, &cfg._d, sizeof(Dims) // 4)
    kernarg_copy_words(c.attrs, cfg._attrs, cfg._nattrs * sizeof(cydriver.CUlaunchAttribute) // 4)
    store_uint(c.nattrs, cfg._nattrs)
    kernarg_seq_write_end(&c.seq)


cdef bint _immutable_value(object value) noexcept:
    """A value a config is made from that cannot change: None, a bool, int, float or str, or a
    tuple of those (an access policy window of an int address)."""
    cdef type t = type(value)
    if value is None or t is bool or t is int or t is float or t is str:
        return True
    if t is not tuple:
        return False
    for item in <tuple>value:
        t = type(item)
        if not (item is None or t is bool or t is int or t is float or t is str):
            return False
    return True


cdef inline bint _immutable_dims(object value) noexcept:
    """An int, or a tuple of ints: a grid or block that cannot change once checked."""
    if type(value) is int:
        return True
    if type(value) is not tuple:
        return False
    for item in <tuple>value:
        if type(item) is not int:
            return False
    return True


cdef const char* _KERNEL_LAUNCH_DOC = b"""\
launch($self, grid, block, *args, stream=None, shmem=0, cluster=None, cooperative=False, \
pdl=False, priority=None, cluster_scheduling=None, preferred_cluster=None, \
mem_sync_domain=None, shmem_carveout=None, access_policy=None, launch_completion_event=None, \
programmatic_event=None, mem_sync_domain_map=None, nvlink_util_centric=None, \
cluster_size_mode=None, shmem_mode=None)
--

Pack ``args`` and launch on ``stream`` (anything kernarg.resolve_stream accepts), after
making it wait on every producer stream the arguments exported. ``shmem``: bytes of dynamic
shared memory; ``cluster``, ``cooperative``, ``pdl``, ``priority`` and the launch attributes
after it as for LaunchConfig.
"""
cdef PyMethodDef _kernel_launch_def
kernarg_fastcall_def(&_kernel_launch_def, "launch", <void*>_kernel_launch_fastcall,
                     _KERNEL_LAUNCH_DOC)
kernarg_install_method(<PyTypeObject*>Kernel, &_kernel_launch_def)


cdef int _kernel_device(object device) except -1:
    """The device a Kernel constructor loads on: an ordinal, or a library's device object
    (device_ordinal)."""
    cdef int ordinal = device_ordinal(device)
    if ordinal < 0:
        raise TypeError("device must be a CUDA device ordinal (an int >= 0, a cuda.core or "
                        "CuPy Device, or a torch.device('cuda:N')), got None")
    return ordinal


cdef Signature _signature_arg(object signature, str who):
    """The ``signature=`` of a Kernel constructor: a Signature, what ``Signature()`` takes (a
    C parameter list, or a sequence of types), or None."""
    if signature is None or isinstance(signature, Signature):
        return signature
    try:
        return Signature(signature)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(f"{who}: signature: {exc}") from None


cdef tuple _kernel_address(object handle, str who):
    """(the object that holds it, the CUfunction/CUkernel address) of what ``from_handle``
    takes: an int, a cuda.bindings ``CUfunction``/``CUkernel`` or a cuda.core ``Kernel``."""
    cdef uintptr_t address
    if hasattr(handle, "_handle") and type(handle).__module__.startswith("cuda.core"):
        handle = handle._handle
    try:
        # An int by __index__ (an int, a numpy int, a cuda.bindings handle), not by int(),
        # which makes a number of a float (numpy's float32 too: 1.5 -> 1), a numeric str or
        # anything with __int__; and not a bool.
        if isinstance(handle, bool) or is_numpy_bool(type(handle)):
            raise TypeError
        address = operator.index(handle)
    except (TypeError, OverflowError):
        try:
            address = int(getattr(handle, "getPtr")()) if hasattr(handle, "getPtr") else 0
        except (TypeError, ValueError, OverflowError):
            address = 0
    if address == 0:
        raise ValueError(f"{who}: {shown_value(handle, True)} is not a kernel handle")
    return handle, address


# ---------------------------------------------------------------------------------------------
# kernarg.launch(stream, config, kernel, *args): cuda.core's call form

# Kernels launch() was given as handles, by address. A wrapper made by from_handle without a
# device or signature depends on the address alone (it keeps only the handle's Python object,
# which owns nothing), so an address the driver reuses for another kernel is still launched
# right. Bounded: cleared when full.
FOREIGN_CACHE_SIZE = 1024
cdef dict _foreign_kernels = {}
# Wrappers of objects that take weak references (cuda.core Kernels), by the object: id ->
# (weak reference, wrapper). A cuda.core Kernel builds a new handle object each time it is
# asked (~0.5 us), and its wrapper carries the kernel's parameter layout, which belongs to that
# kernel, not to its address. The entry goes when the object does (and the weak reference's
# check says so too), so an id is never matched to a later object that reuses it.
cdef dict _foreign_by_object = {}
# cuda.core LaunchConfigs converted, by their field values (read on every call: cuda.core's
# configs are mutable), and the cuda.core config types seen.
cdef dict _foreign_configs = {}
cdef dict _core_config_types = {}     # type -> its _config_fields


cdef extern from *:
    """
    /* How many cuda.core configs kernarg.launch remembers it saw last (by their values). */
    #define KERNARG_RECENT 4
    /* The kernels kernarg.launch remembers: KERNARG_KERNEL_SETS sets of KERNARG_KERNEL_WAYS
       slots, a key's set picked by its hash (kernarg_kernel_set_of), each set a cache line.
       A launch loop of up to a few dozen kernels finds each (a set holds any four of them;
       five of one loop in one set would take turns), with no dict lookup, and on a
       free-threaded build with no section. */
    #define KERNARG_KERNEL_SETS 64
    #define KERNARG_KERNEL_WAYS 4
    #define KERNARG_KERNEL_SLOTS (KERNARG_KERNEL_SETS * KERNARG_KERNEL_WAYS)
    #if defined(__GNUC__)
    #define KERNARG_LINE_ALIGNED __attribute__((aligned(64)))
    #else
    #define KERNARG_LINE_ALIGNED
    #endif

    /* A kernel remembered by its key, and its Kernel. kernarg_recent_kernels: foreign
       kernel objects, keyed by their address (no reference), the Kernel a reference
       borrowed from the object's entry, which _last_foreign_entries holds.
       kernarg_recent_handles: kernel handles (an int, a cuda.bindings CUfunction or
       CUkernel), keyed by the handle's value, the Kernel borrowed from
       _last_handle_kernels. A key of 0: an empty slot. Slot i of either is way
       i % KERNARG_KERNEL_WAYS of set i / KERNARG_KERNEL_WAYS. */
    typedef struct {
        uintptr_t key;
        PyObject *kernel;
    } kernarg_recent_kernel;
    static kernarg_recent_kernel kernarg_recent_kernels[KERNARG_KERNEL_SLOTS] KERNARG_LINE_ALIGNED;
    static kernarg_recent_kernel kernarg_recent_handles[KERNARG_KERNEL_SLOTS] KERNARG_LINE_ALIGNED;
    /* Each set's next way to fill, in turn (so four kernels put in one set in a row take four
       ways): written only in kernarg's section. */
    static unsigned char kernarg_recent_kernels_next[KERNARG_KERNEL_SETS];
    static unsigned char kernarg_recent_handles_next[KERNARG_KERNEL_SETS];
    /* The handle types seen (cuda.bindings' CUfunction and CUkernel, whose __index__ gives
       the address in C): stored whole, once each, in the section; each held by
       _handle_type_refs. */
    static PyTypeObject *kernarg_handle_types[2];

    /* What kernarg.launch remembers of the foreign kernels, handles and cuda.core configs it
       saw last (kernarg_recent_kernels, kernarg_recent_handles, kernarg_core_slots,
       kernarg_core_kind) is written only in
       kernarg's section; a free-threaded build's launches also read it outside, under this
       spin lock (_cutils.h), held for a few loads, compares of exact ints and reference
       counts, never across a call into Python or a reference dropped. Nothing on a GIL
       build. */
    static int kernarg_recent_lock;

    /* The first slot of `key`'s set (of 64: six bits). Objects allocated side by side are
       keys in arithmetic progression, whose Fibonacci hash (the key times 2**64 over the
       golden ratio) steps by the stride times that ratio: for some strides nearly a whole
       number, so that the top bits barely move. At 144 bytes (LaunchConfigs under
       PYTHONMALLOC=debug) or 48, 16 keys had five or six in one set, and 40 took as few as 8 sets.
       So the product's top half is folded into its bottom half and multiplied again (a
       multiply-xorshift-multiply mixer): every stride from 16 bytes to 2 KiB, and powers of
       two, then spread like random keys (test_launch's test of this hash). Three instructions
       more than the Fibonacci hash alone. */
    static inline int kernarg_kernel_set_of(uintptr_t key) {
        uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
        h ^= h >> 32;
        return (int)((h * 0x9E3779B97F4A7C15ull) >> (64 - 6)) * KERNARG_KERNEL_WAYS;
    }

    static void kernarg_recent_set(kernarg_recent_kernel *slots, int i, uintptr_t key,
                                   PyObject *kernel) {
        kernarg_spin_lock(&kernarg_recent_lock);
        slots[i].key = key;
        slots[i].kernel = kernel;
        kernarg_spin_unlock(&kernarg_recent_lock);
    }

    /* The slot `key` is in, or -1: for a caller in kernarg's section (where alone slots are
       written), or a GIL build's. */
    static inline int kernarg_recent_find(const kernarg_recent_kernel *slots, uintptr_t key) {
        int i, first = kernarg_kernel_set_of(key);
        for (i = first; i < first + KERNARG_KERNEL_WAYS; i++)
            if (slots[i].key == key) return i;
        return -1;
    }

    /* The slot a new `key` takes (in the section): its set's ways in turn, `next` the
       table's turns (kernarg_recent_*_next, kernarg_core_by_address_next). */
    static int kernarg_recent_victim(unsigned char *next, uintptr_t key) {
        int first = kernarg_kernel_set_of(key);
        int set = first / KERNARG_KERNEL_WAYS;
        int way = next[set];
        next[set] = (unsigned char)((way + 1) % KERNARG_KERNEL_WAYS);
        return first + way;
    }

    /* The Kernel remembered in `slots` for `key` (a new reference), or None: for a reader
       outside the section, which must hold its reference before a writer may drop the
       slot's (a writer empties a slot under the lock before it drops what holds its Kernel).
       A foreign kernel object's key is the caller's object, alive: a slot of its address is
       its own, since a slot is emptied before its object's memory can be reused (_forget).
       A handle's key names the same kernel whichever object gives it. */
    static PyObject *kernarg_recent_ref(const kernarg_recent_kernel *slots, uintptr_t key) {
        PyObject *k = Py_None;
        int i;
        kernarg_spin_lock(&kernarg_recent_lock);
        i = kernarg_recent_find(slots, key);
        if (i >= 0) k = slots[i].kernel;
        Py_INCREF(k);
        kernarg_spin_unlock(&kernarg_recent_lock);
        return k;
    }

    /* The address of a kernel given as an exact int or as an object of a handle type seen
       (kernarg_handle_types), read with no Python code of a user's run; 0 for any other
       object, or a value that is no address (the caller's slow path then says what is
       wrong). */
    static uintptr_t kernarg_handle_address(PyObject *obj) {
        PyTypeObject *t = Py_TYPE(obj);
        unsigned long long address;
        PyObject *index;
        if (t == &PyLong_Type) {
            address = PyLong_AsUnsignedLongLong(obj);
        } else if (t == __atomic_load_n(&kernarg_handle_types[0], __ATOMIC_RELAXED)
                   || t == __atomic_load_n(&kernarg_handle_types[1], __ATOMIC_RELAXED)) {
            index = PyNumber_Index(obj);
            if (index == NULL) {
                PyErr_Clear();
                return 0;
            }
            address = PyLong_AsUnsignedLongLong(index);
            Py_DECREF(index);
        } else {
            return 0;
        }
        if (address == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();      /* a negative or wide int */
            return 0;
        }
        return (uintptr_t)address;
    }
    """
    enum: KERNARG_RECENT
    enum: KERNARG_KERNEL_WAYS
    enum: KERNARG_KERNEL_SLOTS
    ctypedef struct kernarg_recent_kernel:
        uintptr_t key
        PyObject* kernel
    kernarg_recent_kernel kernarg_recent_kernels[KERNARG_KERNEL_SLOTS]
    kernarg_recent_kernel kernarg_recent_handles[KERNARG_KERNEL_SLOTS]
    unsigned char kernarg_recent_kernels_next[]
    unsigned char kernarg_recent_handles_next[]
    PyTypeObject* kernarg_handle_types[2]
    int kernarg_kernel_set_of(uintptr_t key) noexcept
    void kernarg_recent_set(kernarg_recent_kernel* slots, int i, uintptr_t key,
                            PyObject* kernel) noexcept
    int kernarg_recent_find(const kernarg_recent_kernel* slots, uintptr_t key) noexcept
    int kernarg_recent_victim(unsigned char* next, uintptr_t key) noexcept
    object kernarg_recent_ref(const kernarg_recent_kernel* slots, uintptr_t key)
    uintptr_t kernarg_handle_address(PyObject* obj) noexcept


# The foreign kernel objects launched, for a launch loop's repeated lookups (of one kernel, or
# of a few dozen in turn): their addresses and Kernels (kernarg_recent_kernels, a set of four
# slots by the address's hash, each set a cache line) and their entries of _foreign_by_object,
# a set's slots filled in turn. An entry's weak reference is held here too, so its callback
# (_forget) always runs when the object goes, and clears its slot before the address can be
# reused.
cdef list _last_foreign_entries = [None] * KERNARG_KERNEL_SLOTS
# The kernel handles launched (ints, cuda.bindings CUfunctions and CUkernels, which take no
# weak reference): their addresses and Kernels (kernarg_recent_handles, in sets as
# kernarg_recent_kernels), the Kernels held here. An address is the handle's value, not an
# object's: no object's death can make it name another kernel (a wrapper of a handle depends
# on its address alone, see _foreign_kernels). Found with no dict lookup, no weak reference
# tried, and on a free-threaded build with no section.
cdef list _last_handle_kernels = [None] * KERNARG_KERNEL_SLOTS
cdef list _handle_type_refs = []        # the types in kernarg_handle_types


def _forget(ref, key):
    """Weak-reference callback: drop ``_foreign_by_object[key]`` if it is still ``ref``'s."""
    cdef int first = kernarg_kernel_set_of(key)     # key: the object's address, its slots' key
    cdef int i
    for i in range(first, first + KERNARG_KERNEL_WAYS):
        entry = _last_foreign_entries[i]
        if entry is not None and entry[0] is ref:
            kernarg_recent_set(kernarg_recent_kernels, i, 0, NULL)
            _last_foreign_entries[i] = None
    entry = _foreign_by_object.get(key)
    if entry is not None and entry[0] is ref:
        del _foreign_by_object[key]


cdef Kernel _launch_kernel(object kernel):
    if isinstance(kernel, Kernel):
        return <Kernel>kernel
    return _foreign_kernel(kernel)


cdef inline Kernel _foreign_kernel(object kernel):
    """The Kernel that launches ``kernel``, which is not one: a cuda.core Kernel's wrapper, or
    a raw handle's. One remembered is found here, with no more than a few compares (not in
    _wrapped_kernel, whose Python temporaries cost a launch loop ~10 ns to set up)."""
    cdef int i = kernarg_recent_find(kernarg_recent_kernels, <uintptr_t><PyObject*>kernel)
    cdef uintptr_t handle
    if i >= 0:
        return <Kernel>kernarg_recent_kernels[i].kernel
    handle = kernarg_handle_address(<PyObject*>kernel)
    if handle != 0:
        i = kernarg_recent_find(kernarg_recent_handles, handle)
        if i >= 0:
            return <Kernel>kernarg_recent_handles[i].kernel
    return _wrapped_kernel(kernel, handle)


cdef Kernel _wrapped_kernel(object kernel, uintptr_t handle):
    """_foreign_kernel for a kernel not remembered (``handle``: its address as a handle, or 0
    where it is not an exact int or a handle type seen): found in the dicts, or wrapped."""
    cdef Kernel k
    if handle != 0:
        k = _foreign_kernels.get(handle)
        if k is not None:       # wrapped before: no weak reference tried (~1 us, its TypeError)
            return _remember_handle(kernel, handle, k)
    entry = _foreign_by_object.get(id(kernel))
    if entry is not None and (<tuple>entry)[0]() is kernel:
        return _remember_recent(kernel, <tuple>entry)
    try:
        owner, address = _kernel_address(kernel, "kernarg.launch")
    except ValueError:
        raise TypeError(f"kernarg.launch: kernel must be a kernarg.Kernel, a cuda.core Kernel or "
                        f"a CUfunction/CUkernel handle, got {type(kernel).__name__}") from None
    key = id(kernel)
    try:
        ref = weakref.ref(kernel, lambda r, key=key: _forget(r, key))
    except TypeError:           # an int or a handle object: found by address
        k = _foreign_kernels.get(address)
        if k is None:
            if len(_foreign_kernels) >= FOREIGN_CACHE_SIZE:
                _foreign_kernels.clear()
            k = Kernel.from_handle(owner)
            _foreign_kernels[address] = k
        return _remember_handle(kernel, address, k)
    k = Kernel.from_handle(owner, name=f"{type(kernel).__name__} {address:#x}")
    _set_layout(k, _core_layout(kernel))
    if len(_foreign_by_object) >= FOREIGN_CACHE_SIZE:
        _foreign_by_object.clear()
    entry = _foreign_by_object[key] = (ref, k)
    return _remember_recent(kernel, entry)


cdef Kernel _remember_recent(object kernel, tuple entry):
    """Put the foreign kernel object ``kernel`` and its ``entry`` of _foreign_by_object in the
    next slot of its set (kernarg_recent_kernels); its Kernel."""
    cdef Kernel k = <Kernel>entry[1]
    cdef int i = kernarg_recent_victim(kernarg_recent_kernels_next, <uintptr_t><PyObject*>kernel)
    kernarg_recent_set(kernarg_recent_kernels, i, 0, NULL)     # while the old entry is dropped
    _last_foreign_entries[i] = entry
    kernarg_recent_set(kernarg_recent_kernels, i, <uintptr_t><PyObject*>kernel, <PyObject*>k)
    return k


cdef Kernel _remember_handle(object kernel, uintptr_t address, Kernel k):
    """Put the kernel handle ``kernel`` (at ``address``) and its Kernel ``k`` in the next slot
    of its set (kernarg_recent_handles), and its type, a cuda.bindings handle type, in
    kernarg_handle_types; ``k``."""
    cdef int i
    cdef type t = type(kernel)
    if (t is not int and t.__module__.startswith("cuda.bindings")
            and t.__name__ in ("CUfunction", "CUkernel")):
        for i in range(2):
            if kernarg_handle_types[i] == <PyTypeObject*>t:
                break
            if kernarg_handle_types[i] == NULL:
                _handle_type_refs.append(t)
                store_type(kernarg_handle_types[i], <PyTypeObject*>t)
                break
    if kernarg_handle_address(<PyObject*>kernel) != address:
        return k                # an int subclass, a numpy int: looked up in the dict
    i = kernarg_recent_victim(kernarg_recent_handles_next, address)
    kernarg_recent_set(kernarg_recent_handles, i, 0, NULL)     # while the old Kernel is dropped
    _last_handle_kernels[i] = k
    kernarg_recent_set(kernarg_recent_handles, i, address, <PyObject*>k)
    return k


cdef tuple _core_layout(object kernel):
    """A cuda.core Kernel's ((offset, size), ...) from its ``arguments_info`` (the driver's
    parameter query), so that untyped packs are checked against it as for
    ``Kernel.from_handle(..., device=)``; None where it cannot say (an older driver, or not a
    cuda.core Kernel)."""
    try:
        return tuple((int(p.offset), int(p.size)) for p in kernel.arguments_info)
    except Exception:
        return None


cdef Kernel _foreign_kernel_lazily(object kernel, LazySection* lazy):
    """_foreign_kernel for a free-threaded build's launch (``lazy``: the section it enters
    once it needs it): a kernel object or handle remembered (kernarg_recent_ref) with no
    section; else in the section."""
    cdef uintptr_t handle
    if not lazy.held:
        found = kernarg_recent_ref(kernarg_recent_kernels, <uintptr_t><PyObject*>kernel)
        if found is not None:
            return <Kernel>found
        handle = kernarg_handle_address(<PyObject*>kernel)
        if handle != 0:
            found = kernarg_recent_ref(kernarg_recent_handles, handle)
            if found is not None:
                return <Kernel>found
        enter_lazily(lazy)
    return _foreign_kernel(kernel)


def _kernel_for_launch(kernel):
    """The :class:`Kernel` that :func:`launch` launches for ``kernel`` (for tests)."""
    return _launch_kernel(kernel)


def _last_handle_addresses():
    """The kernel handles :func:`launch` remembers, 0 for an empty slot (for tests)."""
    return tuple(kernarg_recent_handles[i].key for i in range(KERNARG_KERNEL_SLOTS))


def _last_foreign_addresses():
    """The addresses of the foreign kernel objects :func:`launch` remembers, 0 for an empty
    slot (for tests)."""
    return tuple(kernarg_recent_kernels[i].key for i in range(KERNARG_KERNEL_SLOTS))


def _kernel_slots_of(address):
    """The slots of :func:`launch`'s remembered kernels (and of _last_foreign_addresses' and
    _last_handle_addresses' tuples) that a kernel object or handle at ``address`` may take:
    its set's (for tests)."""
    first = kernarg_kernel_set_of(address)
    return range(first, first + KERNARG_KERNEL_WAYS)


cdef object _grid_in_blocks(object grid, object cluster):
    # cuda.core counts the grid in clusters when a cluster is given; the driver, in blocks.
    g = _dims(grid, "grid", _GRID_LIMITS)
    c = _dims(cluster, "cluster", (16, 16, 16))
    return (g[0] * c[0], g[1] * c[1], g[2] * c[2])


cdef extern from *:
    """
    /* The C function that reads the field `descr` describes, where it is a getset descriptor
       (a C extension type's field: Cython's `public` attributes are). */
    static int kernarg_field_getter(PyObject *descr, getter *get, void **closure) {
        PyGetSetDef *def;
        if (Py_TYPE(descr) != &PyGetSetDescr_Type) return 0;
        def = ((PyGetSetDescrObject *)descr)->d_getset;
        if (def->get == NULL) return 0;
        *get = def->get;
        *closure = def->closure;
        return 1;
    }

    static PyObject *kernarg_read_field(getter get, void *closure, PyObject *obj) {
        return get(obj, closure);
    }

    /* Whether `t` is a C extension's (static) type that looks attributes up as `object` does:
       its fields' descriptors cannot be replaced, nor read around. */
    static int kernarg_static_plain_type(PyTypeObject *t) {
        return !PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE)
            && t->tp_getattro == PyObject_GenericGetAttr;
    }
    """
    ctypedef PyObject* (*getter)(PyObject*, void*)
    bint kernarg_field_getter(object descr, getter* get, void** closure) noexcept
    object kernarg_read_field(getter get, void* closure, object obj)
    bint kernarg_static_plain_type(PyTypeObject* t) noexcept


_CORE_CONFIG_FIELDS = ("grid", "block", "cluster", "shmem_size", "is_cooperative",
                       "programmatic_stream_serialization")


@cython.final
cdef class _ConfigFields:
    """The C functions that read a cuda.core LaunchConfig type's six fields: reading them so
    is reading the attributes, less six lookups by name (~60 ns a launch on the development
    VM, more on Python 3.12)."""
    cdef getter get[6]
    cdef void* closure[6]


cdef object _config_fields(type t):
    """``t``'s field readers (_ConfigFields), or None where the fields must be read by name:
    a heap type (a Python class, whose attributes can be reassigned), one with an attribute
    lookup of its own, or a field that is not a C extension's."""
    cdef _ConfigFields f = _ConfigFields.__new__(_ConfigFields)
    if not kernarg_static_plain_type(<PyTypeObject*>t):
        return None
    for i, name in enumerate(_CORE_CONFIG_FIELDS):
        descr = getattr(t, name, None)
        if descr is None or not kernarg_field_getter(descr, &f.get[i], &f.closure[i]):
            return None
    return f


cdef inline object _field(_ConfigFields f, int i, object config):
    return kernarg_read_field(f.get[i], f.closure[i], config)


cdef tuple _core_config_values(object config, object fields=None):
    """A cuda.core LaunchConfig's fields as read: grid, block, cluster, shmem_size (None
    means 0: _converted says so), is_cooperative (``cooperative_launch`` before cuda.core 1.0)
    and programmatic_stream_serialization. ``fields``: the type's readers (_config_fields)."""
    cdef _ConfigFields f
    if fields is not None:
        f = <_ConfigFields>fields
        return (_field(f, 0, config), _field(f, 1, config), _field(f, 2, config),
                _field(f, 3, config), _field(f, 4, config), _field(f, 5, config))
    cooperative = getattr(config, "is_cooperative", None)
    if cooperative is None:
        cooperative = getattr(config, "cooperative_launch", False)
    return (config.grid, config.block, getattr(config, "cluster", None),
            getattr(config, "shmem_size", None), cooperative,
            getattr(config, "programmatic_stream_serialization", False))


cdef extern from *:
    """
    /* Read `obj`'s n fields through their getters into got[] (new references): 0, or -1 with
       the exception set and nothing held. */
    static int kernarg_read_fields(getter *get, void **closure, PyObject *obj, PyObject **got,
                                   int n) {
        int i;
        for (i = 0; i < n; i++) {
            got[i] = get[i](obj, closure[i]);
            if (got[i] == NULL) {
                while (i--) Py_CLEAR(got[i]);
                return -1;
            }
        }
        return 0;
    }

    /* Whether field values a and b convert the same: one object, two ints of one value (an
       int field's C getter makes a new int each time above CPython's small ints), or two
       tuples of up to three such ints (cuda.core makes a new tuple of a config's grid, block
       and cluster each time a config is made, so code that makes its config at each launch
       reads new ones). No Python code runs: exact ints and tuples only. */
    static int kernarg_same_int(PyObject *a, PyObject *b) {
        if (a == b) return 1;
        if (!PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return 0;
        return PyObject_RichCompareBool(a, b, Py_EQ) == 1;    /* int == int cannot fail */
    }

    /* kernarg_same_field past one object (not inlined: a launch loop reads the same
       objects, and its six compares stay a few instructions each). */
    #if defined(__GNUC__)
    __attribute__((noinline))
    #endif
    static int kernarg_same_value(PyObject *a, PyObject *b) {
        Py_ssize_t i, n;
        if (a == NULL || b == NULL) return 0;
        if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b))
            return kernarg_same_int(a, b);
        n = PyTuple_GET_SIZE(a);
        if (n != PyTuple_GET_SIZE(b) || n > 3) return 0;
        for (i = 0; i < n; i++)
            if (!kernarg_same_int(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i))) return 0;
        return 1;
    }

    static inline int kernarg_same_field(PyObject *a, PyObject *b) {
        return a == b || kernarg_same_value(a, b);
    }

    /* A cuda.core config remembered: the six field values read from it and the LaunchConfig
       they convert to (owned references; all NULL in an empty slot), a cache line each; in
       kernarg_core_by_address, also the address of the config object they were read from
       (`key`, no reference: the fields are compared all the same), or a key of the values
       (kernarg_core_value_key). kernarg_core_slots are in the order they were last found or
       filled: a launch loop of one config finds it in the first, and a config made anew, of
       the values of one of the last four, finds its slot, which moves to the front.
       kernarg_core_by_address: each config converted, in a set of four slots (as
       kernarg_recent_kernels) by its address and in another by its values' key, so that a
       loop of a few dozen kernels in turn, each with its own config, finds them all, made
       anew at each launch or not. */
    typedef struct {
        PyObject *read[6];
        PyObject *config;
        uintptr_t key;
    } kernarg_core_slot;
    static kernarg_core_slot kernarg_core_slots[KERNARG_RECENT] KERNARG_LINE_ALIGNED;
    static kernarg_core_slot kernarg_core_by_address[KERNARG_KERNEL_SLOTS] KERNARG_LINE_ALIGNED;
    static unsigned char kernarg_core_by_address_next[KERNARG_KERNEL_SETS];

    static inline int kernarg_same_fields(PyObject **got, PyObject **read) {
        int i;
        for (i = 0; i < 6; i++)
            if (!kernarg_same_field(got[i], read[i])) return 0;
        return 1;
    }

    /* kernarg_find_core_config past the first slot (not inlined: a launch loop of one config
       never comes here). The caller holds kernarg_recent_lock. */
    #if defined(__GNUC__)
    __attribute__((noinline))
    #endif
    static PyObject *kernarg_scan_core_slots(PyObject **got) {
        kernarg_core_slot found;
        int j;
        for (j = 1; j < KERNARG_RECENT; j++) {
            if (kernarg_same_fields(got, kernarg_core_slots[j].read)) {
                found = kernarg_core_slots[j];
                memmove(&kernarg_core_slots[1], &kernarg_core_slots[0], j * sizeof(found));
                kernarg_core_slots[0] = found;
                return found.config;
            }
        }
        return NULL;
    }

    static inline uint64_t kernarg_mix(uint64_t h, uint64_t v) {
        h = (h ^ v) * 0x9E3779B97F4A7C15ull;
        return h ^ (h >> 29);
    }

    /* A key of the field values in got[], where each is None, a bool, an exact int of 64 bits
       or an exact tuple of up to three such ints (what cuda.core's configs hold): odd, where a
       config's address is even, and the same for values kernarg_same_fields finds the same.
       0 where a value is of another kind. */
    static uintptr_t kernarg_core_value_key(PyObject **got) {
        uint64_t h = 0x243F6A8885A308D3ull;
        long long v;
        int i, overflow;
        Py_ssize_t j, n;
        PyObject *a, *item;
        for (i = 0; i < 6; i++) {
            a = got[i];
            if (a == Py_None || a == Py_True || a == Py_False) {
                h = kernarg_mix(h, (uintptr_t)a);
            } else if (PyLong_CheckExact(a)) {
                v = PyLong_AsLongLongAndOverflow(a, &overflow);     /* an exact int: no error */
                if (overflow) return 0;
                h = kernarg_mix(h ^ 1, (uint64_t)v);
            } else if (PyTuple_CheckExact(a) && (n = PyTuple_GET_SIZE(a)) <= 3) {
                h = kernarg_mix(h ^ 2, (uint64_t)n);
                for (j = 0; j < n; j++) {
                    item = PyTuple_GET_ITEM(a, j);
                    if (!PyLong_CheckExact(item)) return 0;
                    v = PyLong_AsLongLongAndOverflow(item, &overflow);
                    if (overflow) return 0;
                    h = kernarg_mix(h, (uint64_t)v);
                }
            } else {
                return 0;
            }
        }
        return (uintptr_t)(h | 1);
    }

    /* kernarg_core_value_key of the six items of the tuple values. */
    static uintptr_t kernarg_core_value_key_of(PyObject *values) {
        PyObject *got[6];
        int i;
        for (i = 0; i < 6; i++) got[i] = PyTuple_GET_ITEM(values, i);
        return kernarg_core_value_key(got);
    }

    /* The config of `key`'s slot in kernarg_core_by_address if its fields match got[], or
       NULL. The caller holds kernarg_recent_lock. */
    static PyObject *kernarg_core_by_key(PyObject **got, uintptr_t key) {
        int i, first = kernarg_kernel_set_of(key);
        for (i = first; i < first + KERNARG_KERNEL_WAYS; i++)
            if (kernarg_core_by_address[i].key == key)
                return kernarg_same_fields(got, kernarg_core_by_address[i].read)
                    ? kernarg_core_by_address[i].config : NULL;
        return NULL;
    }

    /* kernarg_find_core_config past the first slot (not inlined, as kernarg_scan_core_slots):
       the config kept for the config object at `key`, or for its field values (a config made
       anew), or kernarg_scan_core_slots'. The caller holds kernarg_recent_lock. */
    #if defined(__GNUC__)
    __attribute__((noinline))
    #endif
    static PyObject *kernarg_find_core_config_past_first(PyObject **got, uintptr_t key) {
        PyObject *found = kernarg_core_by_key(got, key);
        uintptr_t by_value;
        if (found != NULL) return found;
        by_value = kernarg_core_value_key(got);
        if (by_value != 0 && (found = kernarg_core_by_key(got, by_value)) != NULL) return found;
        return kernarg_scan_core_slots(got);
    }

    static inline PyObject *kernarg_find_core_config_locked(PyObject **got, uintptr_t key) {
        return kernarg_same_fields(got, kernarg_core_slots[0].read)
            ? kernarg_core_slots[0].config : kernarg_find_core_config_past_first(got, key);
    }

    /* The config of the slot whose field values match the six in got[], read from the config
       object at `key` (borrowed: for a caller in kernarg's section, where alone slots are
       emptied), or NULL. */
    static inline PyObject *kernarg_find_core_config(PyObject **got, uintptr_t key) {
        PyObject *found;
        kernarg_spin_lock(&kernarg_recent_lock);
        found = kernarg_find_core_config_locked(got, key);
        kernarg_spin_unlock(&kernarg_recent_lock);
        return found;
    }

    /* kernarg_find_core_config for a reader outside the section: the config as a new
       reference, taken before a writer may drop the slot's, or None. */
    static PyObject *kernarg_core_config_ref(PyObject **got, uintptr_t key) {
        PyObject *found;
        kernarg_spin_lock(&kernarg_recent_lock);
        found = kernarg_find_core_config_locked(got, key);
        if (found == NULL) found = Py_None;
        Py_INCREF(found);
        kernarg_spin_unlock(&kernarg_recent_lock);
        return found;
    }

    /* Put the six items of the tuple values and config (new references) in the first slot,
       the others one down; the last one's are dropped, once the slots are whole (dropping
       can run code that launches again). */
    static void kernarg_core_slot_push(PyObject *values, PyObject *config) {
        kernarg_core_slot old;
        int i;
        for (i = 0; i < 6; i++) Py_INCREF(PyTuple_GET_ITEM(values, i));
        Py_INCREF(config);
        kernarg_spin_lock(&kernarg_recent_lock);
        old = kernarg_core_slots[KERNARG_RECENT - 1];
        memmove(&kernarg_core_slots[1], &kernarg_core_slots[0],
                (KERNARG_RECENT - 1) * sizeof(old));
        for (i = 0; i < 6; i++) kernarg_core_slots[0].read[i] = PyTuple_GET_ITEM(values, i);
        kernarg_core_slots[0].config = config;
        kernarg_spin_unlock(&kernarg_recent_lock);
        for (i = 0; i < 6; i++) Py_XDECREF(old.read[i]);
        Py_XDECREF(old.config);
    }

    /* Put the six items of the tuple values and config (new references) in the slot of
       kernarg_core_by_address that `key` has, else in the next of its set; what the slot held
       is dropped once it is whole. */
    static void kernarg_core_by_address_put(uintptr_t key, PyObject *values, PyObject *config) {
        kernarg_core_slot old;
        int i, first = kernarg_kernel_set_of(key), at = -1;
        for (i = 0; i < 6; i++) Py_INCREF(PyTuple_GET_ITEM(values, i));
        Py_INCREF(config);
        for (i = first; i < first + KERNARG_KERNEL_WAYS; i++)
            if (kernarg_core_by_address[i].key == key) at = i;
        if (at < 0) at = kernarg_recent_victim(kernarg_core_by_address_next, key);
        kernarg_spin_lock(&kernarg_recent_lock);
        old = kernarg_core_by_address[at];
        for (i = 0; i < 6; i++) kernarg_core_by_address[at].read[i] = PyTuple_GET_ITEM(values, i);
        kernarg_core_by_address[at].config = config;
        kernarg_core_by_address[at].key = key;
        kernarg_spin_unlock(&kernarg_recent_lock);
        for (i = 0; i < 6; i++) Py_XDECREF(old.read[i]);
        Py_XDECREF(old.config);
    }

    static void kernarg_core_drop(kernarg_core_slot *slots, int n) {
        int i, j;
        for (j = 0; j < n; j++) {
            for (i = 0; i < 6; i++) Py_XDECREF(slots[j].read[i]);
            Py_XDECREF(slots[j].config);
        }
    }

    /* Empty the slots and kernarg_core_by_address (as kernarg_core_slot_push, the
       references are dropped last: kernarg_core_by_address one slot at a time, each taken
       out whole under the lock). */
    static void kernarg_core_slots_clear(void) {
        kernarg_core_slot old[KERNARG_RECENT];
        int j;
        kernarg_spin_lock(&kernarg_recent_lock);
        memcpy(old, kernarg_core_slots, sizeof(old));
        memset(kernarg_core_slots, 0, sizeof(old));
        kernarg_spin_unlock(&kernarg_recent_lock);
        kernarg_core_drop(old, KERNARG_RECENT);
        for (j = 0; j < KERNARG_KERNEL_SLOTS; j++) {
            kernarg_spin_lock(&kernarg_recent_lock);
            old[0] = kernarg_core_by_address[j];
            memset(&kernarg_core_by_address[j], 0, sizeof(old[0]));
            kernarg_spin_unlock(&kernarg_recent_lock);
            kernarg_core_drop(old, 1);
        }
    }

    /* Copy the slots to out[] whole, each reference in them counted for the copy: as they
       were at one moment, while launches outside the section may move them. */
    static void kernarg_core_slots_copy(kernarg_core_slot *out) {
        int i, j;
        kernarg_spin_lock(&kernarg_recent_lock);
        memcpy(out, kernarg_core_slots, KERNARG_RECENT * sizeof(kernarg_core_slot));
        for (j = 0; j < KERNARG_RECENT; j++) {
            for (i = 0; i < 6; i++) Py_XINCREF(out[j].read[i]);
            Py_XINCREF(out[j].config);
        }
        kernarg_spin_unlock(&kernarg_recent_lock);
    }

    /* The cuda.core config type whose slots kernarg_core_slots holds, and its field readers
       (_ConfigFields'), for a reader outside the section: the type is only compared (the
       caller's config keeps its own alive), and the readers are of a static type's fields,
       which is never freed. NULL when the slots are of no type. */
    typedef struct {
        PyTypeObject *type;
        getter get[6];
        void *closure[6];
    } kernarg_core_kind_t;
    static kernarg_core_kind_t kernarg_core_kind;

    static void kernarg_core_kind_set(PyTypeObject *t, getter *get, void **closure) {
        kernarg_spin_lock(&kernarg_recent_lock);
        kernarg_core_kind.type = t;
        if (t != NULL) {
            memcpy(kernarg_core_kind.get, get, sizeof(kernarg_core_kind.get));
            memcpy(kernarg_core_kind.closure, closure, sizeof(kernarg_core_kind.closure));
        }
        kernarg_spin_unlock(&kernarg_recent_lock);
    }

    /* Whether `obj`'s type is the type of the slots; then its field readers are copied to
       get[] and closure[]. */
    static int kernarg_core_kind_of(PyObject *obj, getter *get, void **closure) {
        int same;
        kernarg_spin_lock(&kernarg_recent_lock);
        same = Py_TYPE(obj) == kernarg_core_kind.type;
        if (same) {
            memcpy(get, kernarg_core_kind.get, sizeof(kernarg_core_kind.get));
            memcpy(closure, kernarg_core_kind.closure, sizeof(kernarg_core_kind.closure));
        }
        kernarg_spin_unlock(&kernarg_recent_lock);
        return same;
    }

    /* A tuple of the n references in got[], which it takes over (all of them, also when it
       cannot be made: NULL with the exception set). */
    static PyObject *kernarg_fields_tuple(PyObject **got, int n) {
        int i;
        PyObject *t = PyTuple_New(n);
        for (i = 0; i < n; i++) {
            if (t) PyTuple_SET_ITEM(t, i, got[i]);
            else Py_DECREF(got[i]);
            got[i] = NULL;
        }
        return t;
    }

    /* Drop the n references in got[] (NULL entries allowed) and clear them. */
    static void kernarg_drop_fields(PyObject **got, int n) {
        int i;
        for (i = 0; i < n; i++) Py_CLEAR(got[i]);
    }
    """
    int kernarg_read_fields(getter* get, void** closure, object obj, PyObject** got,
                            int n) except -1
    void kernarg_drop_fields(PyObject** got, int n) noexcept
    tuple kernarg_fields_tuple(PyObject** got, int n)
    bint kernarg_same_field(PyObject* a, PyObject* b) noexcept
    ctypedef struct kernarg_core_slot:
        PyObject* read[6]
        PyObject* config
        uintptr_t key
    kernarg_core_slot kernarg_core_slots[KERNARG_RECENT]
    kernarg_core_slot kernarg_core_by_address[KERNARG_KERNEL_SLOTS]
    PyObject* kernarg_find_core_config(PyObject** got, uintptr_t key) noexcept
    object kernarg_core_config_ref(PyObject** got, uintptr_t key)
    void kernarg_core_by_address_put(uintptr_t key, PyObject* values, PyObject* config) noexcept
    uintptr_t kernarg_core_value_key_of(object values) noexcept
    void kernarg_core_kind_set(PyTypeObject* t, getter* get, void** closure) noexcept
    bint kernarg_core_kind_of(PyObject* obj, getter* get, void** closure) noexcept
    void kernarg_core_slot_push(PyObject* values, PyObject* config) noexcept
    void kernarg_core_slots_clear() noexcept
    void kernarg_core_slots_copy(kernarg_core_slot* out) noexcept


# The cuda.core configs converted, where their type's fields have C getters (cuda.core's do):
# the type, and for each config, the field values read from it and what they converted to: in
# kernarg_core_slots (the KERNARG_RECENT found or converted last, the last first) and in
# kernarg_core_by_address (each by the config object's address and by a key of its values,
# kernarg_core_value_key, in a set of four slots each). A
# launch loop reads the same objects from its configs each time (or equal ints: the getter of a
# C int field makes a new one above 256), so comparing them, with no tuple made of them, finds
# its config. That is ~400 instructions a launch less than hashing them for _foreign_configs
# (tools/probes/cold_launch.py); a loop that launches a few dozen kernels in turn, each with its
# own config, finds each by its address, and one that makes its config anew at each launch
# finds it by its values' key (or among the last four: values of another kind than
# kernarg_core_value_key takes). Only hashable values are kept: tuples and ints cannot
# change, so the same objects convert the same; an address names no object (the fields are
# compared all the same, so a config that takes a gone one's address is read as itself).
cdef object _last_core_type = None
cdef _ConfigFields _last_core_fields = None


def _config_from(config):
    """``config`` as a :class:`LaunchConfig`: itself, or a cuda.core ``LaunchConfig`` converted
    (with a cluster, cuda.core's grid counts clusters; the driver's, blocks)."""
    return _config_of(config)


def _recent_configs():
    """The slots of cuda.core configs remembered (see _last_core_type): for each, the field
    values it holds (None where empty) and its config (for tests), as they were at one moment
    (a free-threaded build's launches may move them outside the section)."""
    cdef kernarg_core_slot copy[KERNARG_RECENT]
    cdef int i, j
    kernarg_core_slots_copy(copy)
    slots = []
    try:
        for i in range(KERNARG_RECENT):
            if copy[i].config == NULL:
                slots.append((None, None))
            else:
                slots.append((tuple(<object>copy[i].read[j] for j in range(6)),
                              <object>copy[i].config))
    finally:
        for i in range(KERNARG_RECENT):
            kernarg_drop_fields(copy[i].read, 6)
            kernarg_drop_fields(&copy[i].config, 1)
    return slots


def _config_addresses():
    """The keys of the cuda.core configs kernarg_core_by_address remembers, 0 for an empty
    slot, in the slots' order: configs' addresses, and their values' keys (odd: see
    _config_keys) (for tests; _kernel_slots_of gives a key's slots)."""
    return tuple(kernarg_core_by_address[i].key for i in range(KERNARG_KERNEL_SLOTS))


def _config_keys(config):
    """The keys a cuda.core config converted is kept by in kernarg_core_by_address: its
    address, and its field values' key (0 where they are of a kind not kept so) (for
    tests)."""
    values, by_getters = _config_values(config)
    return id(config), kernarg_core_value_key_of(values) if by_getters else 0


def _config_values(config, bint by_name=False):
    """A cuda.core config's fields as launch() reads them; ``by_name``: by attribute name, as
    for a Python class (for tests that the two agree)."""
    fields = None if by_name else _config_fields(type(config))
    return _core_config_values(config, fields), fields is not None


cdef inline LaunchConfig _config_of(object config):
    cdef PyObject* got[6]
    cdef PyObject* found
    cdef LaunchConfig cfg
    if type(config) is LaunchConfig:
        return <LaunchConfig>config
    if type(config) is not _last_core_type:
        return _convert_config(config)
    kernarg_read_fields(_last_core_fields.get, _last_core_fields.closure, config, got, 6)
    found = kernarg_find_core_config(got, <uintptr_t><PyObject*>config)
    if found == NULL:
        return _config_of_fields(got, <uintptr_t><PyObject*>config)
    cfg = <LaunchConfig>found                   # a reference, before code can run
    kernarg_drop_fields(got, 6)
    return cfg


cdef LaunchConfig _config_of_lazily(object config, LazySection* lazy):
    """_config_of for a free-threaded build's launch of a ``config`` that is not a
    LaunchConfig (_launch_call takes one as it is; ``lazy``: the section it enters once it
    needs it): a cuda.core config of the type remembered whose fields match a slot, with no
    section (the fields read through their C getters, the slot found under
    kernarg_recent_lock); else in the section."""
    cdef PyObject* got[6]
    cdef getter get[6]
    cdef void* closure[6]
    if not lazy.held and kernarg_core_kind_of(<PyObject*>config, get, closure):
        kernarg_read_fields(get, closure, config, got, 6)
        found = kernarg_core_config_ref(got, <uintptr_t><PyObject*>config)
        kernarg_drop_fields(got, 6)
        if found is not None:
            return <LaunchConfig>found
    enter_lazily(lazy)
    return _config_of(config)


cdef LaunchConfig _config_of_fields(PyObject** got, uintptr_t key):
    """_config_of for a config (at address ``key``) of the type kept whose fields read ``got``
    (references it takes over) match no slot: they are its values, not read again."""
    return _config_from_values(_last_core_type, _last_core_fields, kernarg_fields_tuple(got, 6),
                               key)


cdef LaunchConfig _convert_config(object config):
    """_config_of for all but its own configs and those of the type converted last."""
    t = type(config)
    fields = _core_config_types.get(t, _core_config_types)     # the dict itself: not seen
    if fields is _core_config_types:
        if not t.__module__.startswith("cuda.core"):
            raise TypeError(f"kernarg.launch: config must be a kernarg.LaunchConfig or a "
                            f"cuda.core LaunchConfig, got {t.__name__}")
        fields = _core_config_types[t] = _config_fields(t)
    return _config_from_values(t, fields, _core_config_values(config, fields),
                               <uintptr_t><PyObject*>config)


cdef LaunchConfig _config_from_values(object t, object fields, tuple values, uintptr_t key):
    """The config of a cuda.core config of type ``t`` (at address ``key``) whose fields read
    ``values``: found in _foreign_configs or converted, and kept in the first slot of
    kernarg_core_slots and in kernarg_core_by_address, by ``key`` and by the values'
    (kernarg_core_value_key), where ``t``'s fields have C getters (``fields``)."""
    global _last_core_type, _last_core_fields
    cdef uintptr_t by_value
    try:
        cfg = _foreign_configs.get(values)
    except TypeError:                   # a list in it (cuda.core makes tuples): not cached
        return _converted(values)
    if cfg is None:
        cfg = _converted(values)
        if len(_foreign_configs) >= FOREIGN_CACHE_SIZE:
            _foreign_configs.clear()
        _foreign_configs[values] = cfg
    if fields is not None:
        another = t is not _last_core_type
        if another:                             # another type: the slots are forgotten
            _forget_core_configs()
        kernarg_core_slot_push(<PyObject*>values, <PyObject*>cfg)
        kernarg_core_by_address_put(key, <PyObject*>values, <PyObject*>cfg)
        by_value = kernarg_core_value_key_of(values)
        if by_value != 0:
            kernarg_core_by_address_put(by_value, <PyObject*>values, <PyObject*>cfg)
        if another:                             # launches outside the section: its slots
            kernarg_core_kind_set(<PyTypeObject*>t, (<_ConfigFields>fields).get,
                                  (<_ConfigFields>fields).closure)
        _last_core_type, _last_core_fields = t, fields
    return cfg


cdef void _forget_core_configs() noexcept:
    """Empty kernarg_core_slots and kernarg_core_by_address, and forget their type (a config of
    another type is converted next): launches outside the section find no slot's type from
    here on, and the slots' references are dropped last (kernarg_core_slots_clear)."""
    global _last_core_type
    _last_core_type = None
    kernarg_core_kind_set(NULL, NULL, NULL)
    kernarg_core_slots_clear()


def _forget_configs():
    """Forget the cuda.core configs kept, as a config of another type does (for tests; in
    kernarg's section, as every function of the module's namespace)."""
    _forget_core_configs()


cdef LaunchConfig _converted(tuple values):
    grid, block, cluster, shmem, cooperative, pdl = values
    if cluster is not None:
        grid = _grid_in_blocks(grid, cluster)
    return LaunchConfig(grid, block, shmem=shmem or 0, cluster=cluster,
                        cooperative=cooperative, pdl=pdl)


cdef tuple _LAUNCH_NAMES = ("stream", "config", "kernel")


cdef object _launch_fastcall(PyObject* module, PyObject** args, Py_ssize_t nargs,
                             PyObject* kwnames):
    """``kernarg.launch(stream, config, kernel, *args)``: ``args[0:nargs]`` by position (see
    _kernel_launch_fastcall, also for the section, which a free-threaded build enters once
    the launch needs it: _launch_call)."""
    cdef LazySection lazy
    if not KERNARG_GUARDED_BUILD:       # (a C constant: a GIL build compiles only this)
        return _launch_call(module, args, nargs, kwnames, NULL)
    lazy.held = False
    try:
        return _launch_call(module, args, nargs, kwnames, &lazy)
    finally:
        leave_lazily(&lazy)


cdef object _launch_call(PyObject* module, PyObject** args, Py_ssize_t nargs,
                         PyObject* kwnames, LazySection* lazy):
    """``lazy``: as for _kernel_launch. A launch of a Kernel, or of a foreign kernel launched
    lately, with a LaunchConfig or a cuda.core config converted lately, on a stream that
    Kernel.launch resolves outside the section, of arguments the packers place outside it,
    runs all of it outside."""
    cdef PyObject* given[3]
    cdef Py_ssize_t n = nargs - 3 if nargs > 3 else 0
    cdef uint64_t handle
    # The kernel and config as given are borrowed, not counted (see _pack_and_launch): the
    # caller's array holds them. A foreign kernel's wrapper and a converted config are held.
    cdef object kernel_ref, config_ref
    if kwnames == NULL and nargs >= 3:         # the usual call: nothing to sort by name
        given[0], given[1], given[2] = args[0], args[1], args[2]
    else:
        parse_fastcall("launch", _LAUNCH_NAMES, 3, args, nargs, kwnames, given)
    cdef PyObject* k = given[2]
    cdef PyObject* cfg = given[1]
    if KERNARG_GUARDED_BUILD and lazy != NULL:
        if not isinstance(<object>k, Kernel):
            kernel_ref = _foreign_kernel_lazily(<object>k, lazy)
            k = <PyObject*>kernel_ref
        if type(<object>cfg) is not LaunchConfig:
            config_ref = _config_of_lazily(<object>cfg, lazy)
            cfg = <PyObject*>config_ref
        if lazy.held:
            handle = stream_handle(<object>given[0])
        else:
            handle = stream_handle_lazily(<object>given[0], lazy)
    else:
        if not isinstance(<object>k, Kernel):
            kernel_ref = _foreign_kernel(<object>k)
            k = <PyObject*>kernel_ref
        if type(<object>cfg) is not LaunchConfig:
            config_ref = _config_of(<object>cfg)
            cfg = <PyObject*>config_ref
        handle = stream_handle(<object>given[0])
    _pack_and_launch(<Kernel>k, &(<LaunchConfig>cfg)._d, (<LaunchConfig>cfg)._attrs,
                     (<LaunchConfig>cfg)._nattrs, args + 3, n, None, handle, lazy)
    return None


cdef const char* _LAUNCH_DOC = b"""\
launch(stream, config, kernel, *args)
--

Launch ``kernel`` with ``config`` on ``stream``: cuda.core's ``launch`` call form, so
code written for ``cuda.core.launch`` can switch by changing the import.

Parameters
----------
stream
    Anything :func:`kernarg.resolve_stream` accepts (a cuda.core ``Stream``, say).
config : LaunchConfig or cuda.core LaunchConfig
    A cuda.core config is read as cuda.core defines it: with a ``cluster``, its ``grid``
    counts clusters, not blocks. A converted config is kept and found again by its
    fields, which are read each call, since cuda.core's configs are mutable.
kernel : Kernel, cuda.core Kernel, or a CUfunction/CUkernel handle
    A foreign kernel is wrapped once (``Kernel.from_handle``) and launched in the current
    context, as cuda.core launches it. Its arguments are packed untyped; a cuda.core
    Kernel's are then checked against the parameter sizes and offsets the driver reports
    (``arguments_info``), so a Python float for a ``float`` parameter is an error, not 8
    bytes where the kernel reads 4.
*args
    The kernel's arguments.
"""
cdef PyMethodDef _launch_def
kernarg_fastcall_def(&_launch_def, "launch", <void*>_launch_fastcall, _LAUNCH_DOC)
launch = PyCFunction_NewEx(&_launch_def, NULL, __name__)


# A PreparedLaunch is called through CPython's vectorcall protocol (PEP 590): the packers read
# the arguments straight from the caller's array, where a tp_call would first have CPython copy
# them into a tuple (and free it after the launch; ~60 ns of a ~320 ns launch of 16 arguments).
# Cython gives a class no vectorcall slot, so the module sets one up below: each instance holds
# the function pointer (set in __cinit__), and the type says at which offset. A graph-captured
# launch, which must keep its arguments alive, makes the tuple then (_launch's ``borrowed``).
# The Cython __call__ stays as the type's tp_call (``PreparedLaunch.__call__(p, ...)``).

cdef extern from *:
    """
    static void kernarg_enable_vectorcall(PyTypeObject *tp, Py_ssize_t offset) {
        tp->tp_vectorcall_offset = offset;
        tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
        PyType_Modified(tp);
    }
    """
    void kernarg_enable_vectorcall(PyTypeObject* tp, Py_ssize_t offset) noexcept
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf) noexcept


@cython.final
cdef class PreparedLaunch:
    """``Kernel.prepare(...)``: call it with the kernel's arguments."""

    cdef void* _vectorcall      # read by CPython: see kernarg_enable_vectorcall
    cdef Kernel _kernel
    cdef readonly LaunchConfig config
    cdef readonly uint64_t stream

    def __cinit__(self, *args, **kwargs):
        self._vectorcall = <void*>_prepared_vectorcall

    def __init__(self, Kernel kernel, LaunchConfig config, uint64_t stream):
        if self._kernel is not None:
            # Its calls read these without a lock (on a free-threaded build): set once.
            raise TypeError(f"a {type(self).__name__} cannot be initialised again: get a new "
                            "one from Kernel.prepare(...)")
        self._kernel = kernel
        self.config = config
        self.stream = stream

    def __call__(self, *args):
        _prepared_launch(self, tuple_items(args), PyTuple_GET_SIZE(args), args, NULL)

    def bind(self, *args):
        """Pack ``args`` once: the returned :class:`BoundLaunch` launches them, unchanged,
        each time it is called."""
        _check_initialised(self)
        cdef BoundLaunch bound = BoundLaunch.__new__(BoundLaunch)
        bound._kernel = self._kernel
        bound.config = self.config
        bound.stream = self.stream
        bound._blk = self._kernel._pack_args(args, self.stream)
        return bound

    def __reduce__(self):
        raise TypeError("a kernarg.PreparedLaunch cannot be pickled or copied: it "
                        "launches on a stream handle of this process; pickle its kernel and "
                        "config, and prepare again where they are needed")


cdef inline int _check_initialised(PreparedLaunch p) except -1:
    if p._kernel is None:
        raise TypeError(f"this {type(p).__name__} was never initialised: get one from "
                        "Kernel.prepare(...)")
    return 0


cdef inline int _prepared_launch(PreparedLaunch p, PyObject** items, Py_ssize_t n,
                                 object keep, LazySection* lazy) except -1:
    """A prepared launch of the ``n`` arguments at ``items``, by either call path; ``keep``:
    their tuple, or None for a vectorcall's own arguments (a graph then gets a tuple made);
    ``lazy``: as for _enqueue. The launcher's kernel, config and stream are set once, by
    __init__, before anyone can call it."""
    _check_initialised(p)
    # Borrowed, not counted (see _pack_and_launch): the caller holds ``p``, which holds them.
    cdef PyObject* k = <PyObject*>p._kernel
    cdef PyObject* cfg = <PyObject*>p.config
    return _pack_and_launch(<Kernel>k, &(<LaunchConfig>cfg)._d, (<LaunchConfig>cfg)._attrs,
                            (<LaunchConfig>cfg)._nattrs, items, n, keep, p.stream, lazy)


cdef object _prepared_vectorcall(object callable, PyObject** args, size_t nargsf,
                                 PyObject* kwnames):
    """PreparedLaunch's call, as CPython's vectorcall: ``args[0:n]`` are the arguments. CPython
    calls it from the instance, past the type's guarded slots: on a free-threaded build it takes
    kernarg's critical section itself (_guard.h), once the launch needs it (_enqueue)."""
    cdef PreparedLaunch self = <PreparedLaunch>callable
    cdef Py_ssize_t n = PyVectorcall_NARGS(nargsf)
    cdef LazySection lazy
    if kwnames != NULL and PyTuple_GET_SIZE(<object>kwnames) != 0:
        raise TypeError(f"{type(self).__name__}() takes kernel arguments by position only, "
                        f"got keyword argument {(<tuple>kwnames)[0]!r}")
    if not KERNARG_GUARDED_BUILD:       # (a C constant: a GIL build compiles only this)
        _prepared_launch(self, args, n, None, NULL)
        return None
    lazy.held = False
    try:
        _prepared_launch(self, args, n, None, &lazy)
    finally:
        leave_lazily(&lazy)
    return None


cdef int _enable_prepared_vectorcall() except -1:
    cdef PreparedLaunch probe = PreparedLaunch.__new__(PreparedLaunch)
    kernarg_enable_vectorcall(<PyTypeObject*>PreparedLaunch,
                              <char*>&probe._vectorcall - <char*><PyObject*>probe)
    return 0


_enable_prepared_vectorcall()


@cython.final
cdef class BoundLaunch:
    """``Kernel.prepare(...).bind(*args)``: a kernel, configuration, stream and arguments
    packed once. Each call launches them again: the launch stream waits on the arguments'
    producer streams (recorded at bind time) and the driver copies the parameter bytes, so a
    call costs what the driver does. The arguments (and DLPack tensors) stay alive until the
    launcher is closed (``close()``, leaving a ``with`` block, or collected) and, for launches
    captured into a CUDA graph, until the graph is destroyed. The values are those at bind
    time: a Python scalar changed afterwards is not seen; an array's contents are, as always."""

    cdef void* _vectorcall      # read by CPython: see kernarg_enable_vectorcall
    cdef Kernel _kernel
    cdef readonly LaunchConfig config
    cdef readonly uint64_t stream
    cdef ParamBlock _blk        # None once closed; read and written under the object's lock

    def __cinit__(self, *args, **kwargs):
        self._vectorcall = <void*>_bound_vectorcall

    def __init__(self):
        raise TypeError("BoundLaunch objects come from PreparedLaunch.bind(*args)")

    def __call__(self):
        _bound_launch(self, NULL)

    @property
    def closed(self):
        return self._blk is None

    @property
    def nargs(self):
        """How many arguments were bound."""
        if self._blk is None:
            raise ValueError("this BoundLaunch is closed")
        return self._blk.st.nargs

    def close(self):
        """Let go of the packed arguments. A CUDA graph that captured a launch keeps its own
        reference, so its replays stay valid; so does a call in flight on another thread."""
        cdef kernarg_section cs
        cdef ParamBlock blk
        kernarg_object_lock(&cs, <PyObject*>self)
        blk = self._blk
        self._blk = None
        kernarg_object_unlock(&cs)
        blk = None              # the arguments may go here, outside the lock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __reduce__(self):
        raise TypeError("a kernarg.BoundLaunch cannot be pickled or copied: it holds packed "
                        "arguments (addresses valid in this process only) and a stream handle; "
                        "pickle its kernel and config, and prepare and bind again where they "
                        "are needed")


cdef int _bound_launch(BoundLaunch self, LazySection* lazy) except -1:
    """A BoundLaunch's call, by either call path; ``lazy``: as for _enqueue. The launcher's
    kernel, config and stream are set once, by PreparedLaunch.bind, before anyone can call
    it; its block is read under the launcher's own lock (nothing on a GIL build), into a
    reference of this call's own: another thread may close() while the driver call, with the
    GIL released (or on a free-threaded build), still reads the block."""
    cdef kernarg_section cs
    cdef ParamBlock blk
    kernarg_object_lock(&cs, <PyObject*>self)
    blk = self._blk
    kernarg_object_unlock(&cs)
    if blk is None:
        raise ValueError("this BoundLaunch is closed")
    # Borrowed (as _prepared_launch borrows them): ``self`` holds both.
    cdef PyObject* k = <PyObject*>self._kernel
    cdef PyObject* cfg = <PyObject*>self.config
    return _launch(<Kernel>k, &(<LaunchConfig>cfg)._d, (<LaunchConfig>cfg)._attrs,
                   (<LaunchConfig>cfg)._nattrs, blk, self.stream, False, NULL, lazy)


cdef object _bound_vectorcall(object callable, PyObject** args, size_t nargsf,
                              PyObject* kwnames):
    """BoundLaunch's call, as CPython's vectorcall (as PreparedLaunch's: no tuple, no keyword
    parsing). CPython calls it from the instance, past the type's guarded slots: on a
    free-threaded build it takes kernarg's critical section itself, once the launch needs it
    (_enqueue), so that bound launches on several threads run at once."""
    cdef BoundLaunch self = <BoundLaunch>callable
    cdef LazySection lazy
    if PyVectorcall_NARGS(nargsf) != 0 or (kwnames != NULL
                                           and PyTuple_GET_SIZE(<object>kwnames) != 0):
        raise TypeError(f"{type(self).__name__}() takes no arguments: they were bound by "
                        "PreparedLaunch.bind(*args)")
    if not KERNARG_GUARDED_BUILD:       # (a C constant: a GIL build compiles only this)
        _bound_launch(self, NULL)
        return None
    lazy.held = False
    try:
        _bound_launch(self, &lazy)
    finally:
        leave_lazily(&lazy)
    return None


cdef int _enable_bound_vectorcall() except -1:
    cdef BoundLaunch probe = BoundLaunch.__new__(BoundLaunch)
    kernarg_enable_vectorcall(<PyTypeObject*>BoundLaunch,
                              <char*>&probe._vectorcall - <char*><PyObject*>probe)
    return 0


_enable_bound_vectorcall()


# ---------------------------------------------------------------------------------------------
# Graphs built node by node: Kernel.graph_node adds a kernel node to a CUDA graph, and a
# KernelNode sets its arguments again, in its graph or in a graph instantiated from it (what a
# graph replayed in a loop with new arrays each time needs, without capturing it again).

cdef uintptr_t _graph_address(object obj, str what) except 0:
    """The address of the driver graph object (CUgraph, CUgraphNode, CUgraphExec) ``obj`` is: an
    int, a cuda.bindings handle, a KernelNode (its node), or a cuda.core object whose ``handle``
    is one of these (GraphDefinition, GraphNode, Graph)."""
    if isinstance(obj, KernelNode):
        return <uintptr_t>(<KernelNode>obj)._node
    return _handle_address(obj, what, "graph object")


cdef uintptr_t _handle_address(object obj, str what, str kind) except 0:
    """The address of the driver object ``obj`` is: a non-null int, a cuda.bindings handle, or
    a cuda.core object (a ``kind``) whose ``handle`` is one of these."""
    value = obj
    if type(value).__module__.startswith("cuda.core") and hasattr(value, "handle"):
        value = value.handle
    if type(value) is not int:
        if not type(value).__module__.startswith("cuda.bindings"):
            raise TypeError(f"{what} must be an int handle, a cuda.bindings handle or a cuda.core "
                            f"{kind}, got {type(obj).__name__}")
        try:
            value = int(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{what}: {type(obj).__name__} is not a handle "
                            f"({exc_text(exc)})") from None
    if not 0 < value < 2**64:
        if value < 0:
            raise ValueError(f"{what} must be a handle, got {shown_value(value)}")
        raise ValueError(f"{what} must be a non-null handle below 2**64, got "
                         + (f"{value:#x}" if value < 2**256 else shown_value(value)))
    return <uintptr_t>value


cdef list _node_addresses(object after, str what):
    """The node addresses of ``after`` (the keyword ``what``): a node, or a list or tuple of
    nodes (see _graph_address), None or () for none."""
    if after is None:
        return []
    if not isinstance(after, (list, tuple)):
        after = (after,)
    return [_graph_address(node, f"{what}[{i}]") for i, node in enumerate(after)]


cdef ParamBlock _node_params(Kernel k, LaunchConfig cfg, tuple args, uint64_t stream,
                             cydriver.CUfunction func, cydriver.CUDA_KERNEL_NODE_PARAMS* p):
    """Pack ``args`` for a kernel node of ``k`` with ``cfg``, in the kernel's context (the
    caller's to enter), and fill ``p`` for ``func`` (the kernel's CUfunction there, see
    _queryable); make ``stream`` wait for the producer streams, as a launch on it would. The
    block is the caller's to keep or release."""
    cdef const Dims* d = &cfg._d
    cdef Capture capture
    cdef ParamBlock blk = k._pack_args(args, stream)
    try:
        _ready_to_enqueue(k, d, &blk.st, stream, &capture)
        memset(p, 0, sizeof(p[0]))
        p.func = func
        p.gridDimX = d.grid[0]
        p.gridDimY = d.grid[1]
        p.gridDimZ = d.grid[2]
        p.blockDimX = d.block[0]
        p.blockDimY = d.block[1]
        p.blockDimZ = d.block[2]
        p.sharedMemBytes = d.shmem
        p.kernelParams = blk.st.argv
    except BaseException:
        block_release(blk)
        raise
    return blk


cdef int _set_node_attribute(cydriver.CUgraphNode node, cydriver.CUgraph graph,
                             cydriver.CUuserObject kept, const cydriver.CUlaunchAttribute* attr,
                             str name, str kernel) except -1:
    """Set ``attr`` on the kernel node ``node`` of ``graph`` just added, which ``kept`` keeps
    the arguments of. Where the driver refuses it, the node would run without it: it is
    removed again, with the graph's reference to ``kept``, and the driver's error raised,
    naming the attribute (and the driver it needs, where it is newer than this one)."""
    cdef cydriver.CUresult err = cydriver.cuGraphKernelNodeSetAttribute(
        node, <cydriver.CUkernelNodeAttrID>attr.id,
        <const cydriver.CUkernelNodeAttrValue*>&attr.value)
    if err == cydriver.CUDA_SUCCESS:
        return 0
    cydriver.cuGraphDestroyNode(node)
    cydriver.cuGraphReleaseUserObject(graph, kept, 1)
    newer = _too_new(attr, 1)
    _check(err, f"cuGraphKernelNodeSetAttribute({name}) (kernel {kernel!r}"
                f"{'' if newer is None else ': ' + newer})")
    return 0


cdef LaunchConfig _node_config(cydriver.CUgraphNode node,
                               const cydriver.CUDA_KERNEL_NODE_PARAMS* p):
    """The LaunchConfig of a kernel node found in a graph (Kernel.nodes_in): ``p``'s grid,
    block and shared memory, and the cluster and cooperative attributes the driver reports for
    the node (none where it reports none, or cannot say: a cluster of one block is none)."""
    cdef cydriver.CUkernelNodeAttrValue value
    cluster = None
    cooperative = False
    memset(&value, 0, sizeof(value))
    if cydriver.cuGraphKernelNodeGetAttribute(
            node, cydriver.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &value) \
            == cydriver.CUDA_SUCCESS \
            and value.clusterDim.x * value.clusterDim.y * value.clusterDim.z > 1:
        cluster = (value.clusterDim.x, value.clusterDim.y, value.clusterDim.z)
    memset(&value, 0, sizeof(value))
    if cydriver.cuGraphKernelNodeGetAttribute(
            node, cydriver.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &value) == cydriver.CUDA_SUCCESS:
        cooperative = value.cooperative != 0
    return LaunchConfig((p.gridDimX, p.gridDimY, p.gridDimZ),
                        (p.blockDimX, p.blockDimY, p.blockDimZ), shmem=p.sharedMemBytes,
                        cluster=cluster, cooperative=cooperative)


cdef bint _node_device_updatable(cydriver.CUgraphNode node) noexcept:
    """Whether the driver says kernel node ``node`` is device-updatable (False where it cannot
    say: a driver before 12.4)."""
    cdef cydriver.CUkernelNodeAttrValue value
    memset(&value, 0, sizeof(value))
    return cydriver.cuGraphKernelNodeGetAttribute(
        node, cydriver.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &value) \
        == cydriver.CUDA_SUCCESS and value.deviceUpdatableKernelNode.deviceUpdatable != 0


cdef LaunchConfig _reshaped(LaunchConfig cfg, object grid, object block, object shmem):
    """``cfg`` with the grid, block and shared memory size given (None: kept), checked again
    as a new LaunchConfig is."""
    if grid is None and block is None and shmem is None:
        return cfg
    return cfg.__replace__(grid=cfg.grid if grid is None else grid,
                           block=cfg.block if block is None else block,
                           shmem=cfg.shmem if shmem is None else shmem)


cdef cydriver.CUuserObject _node_kept(cydriver.CUgraph graph, ParamBlock blk,
                                      Kernel k) except NULL:
    """_graph_keeps of a kernel node's block and kernel; where that fails, the block is
    released."""
    try:
        return _graph_keeps(graph, (blk, k), "a kernel node's")
    except BaseException:
        block_release(blk)
        raise


@cython.final
cdef class KernelNode:
    """A kernel node of a CUDA graph, from :meth:`Kernel.graph_node` (a node added) or
    :meth:`Kernel.nodes_in` (a graph's nodes of a kernel, a capture's among them).

    ``set_args`` gives the node new arguments in its graph (graphs instantiated after see them);
    ``set_exec_args`` gives them to the node in one instantiated graph (its next launches see
    them), the way to replay a graph with other arrays without building it again. Either packs
    as a launch does, typed by the kernel's signature, and makes ``stream`` (the stream the graph
    will be launched on) wait for the arguments' producers. ``device_updatable``: whether it
    was made device-updatable (``graph_node(..., device_updatable=True)``), when
    ``device_node`` is the handle device code updates it by."""

    cdef readonly Kernel kernel
    cdef readonly LaunchConfig config
    cdef readonly bint device_updatable
    cdef uintptr_t _device_node         # its CUgraphDeviceNode, once asked (0 before)
    cdef cydriver.CUgraph _graph
    cdef cydriver.CUgraphNode _node
    cdef cydriver.CUfunction _func      # the kernel's CUfunction in its context
    cdef cydriver.CUuserObject _kept    # the graph's reference to the node's arguments
    cdef object _owner                  # the graph object given (a cuda.core GraphDefinition)
    cdef dict _exec_blocks              # graph exec address -> the block last set in it

    def __init__(self):
        raise TypeError("KernelNode objects come from Kernel.graph_node(...) and "
                        "Kernel.nodes_in(graph)")

    @staticmethod
    cdef KernelNode _make(Kernel k, LaunchConfig cfg, cydriver.CUgraph graph,
                          cydriver.CUgraphNode node, cydriver.CUfunction func,
                          cydriver.CUuserObject kept, object owner):
        cdef KernelNode self = KernelNode.__new__(KernelNode)
        self.kernel = k
        self.config = cfg
        self._graph = graph
        self._node = node
        self._func = func
        self._kept = kept
        self._owner = owner if not isinstance(owner, int) else None
        self._exec_blocks = {}
        return self

    @property
    def handle(self):
        """The ``CUgraphNode``, as an int."""
        return <uintptr_t>self._node

    @property
    def graph(self):
        """The ``CUgraph`` the node is in, as an int."""
        return <uintptr_t>self._graph

    @property
    def device_node(self):
        """The node's ``CUgraphDeviceNode`` (``cudaGraphDeviceNode_t`` in device code), as an
        int, for a device-updatable node; None for another. A kernel takes it as an argument
        (a ``cudaGraphDeviceNode_t`` parameter) and passes it to ``cudaGraphKernelNodeSetParam``
        and the other device-side update functions. Asked of the driver
        (``cuGraphKernelNodeGetAttribute``) once."""
        cdef cydriver.CUkernelNodeAttrValue value
        if not self.device_updatable:
            return None
        if self._device_node == 0:
            memset(&value, 0, sizeof(value))
            _ensure_driver()
            with _in_context(self.kernel._ctx):
                _check(cydriver.cuGraphKernelNodeGetAttribute(
                    self._node, cydriver.CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
                    &value), f"cuGraphKernelNodeGetAttribute(device_updatable) "
                             f"(kernel {self.kernel.name!r})")
            if value.deviceUpdatableKernelNode.devNode == NULL:
                raise CudaError(f"cuGraphKernelNodeGetAttribute(device_updatable) (kernel "
                                f"{self.kernel.name!r}) gave no device node for a "
                                "device-updatable node", "CUDA_ERROR_UNKNOWN",
                                <int>cydriver.CUDA_ERROR_UNKNOWN)
            self._device_node = <uintptr_t>value.deviceUpdatableKernelNode.devNode
        return self._device_node

    def set_args(self, *args, stream=None, grid=None, block=None, shmem=None):
        """Give the node ``args`` in its graph (``cuGraphKernelNodeSetParams``): graphs
        instantiated from it afterwards launch them; those instantiated before keep theirs. The
        graph keeps the new arguments alive, and lets go of the old ones (a graph instantiated
        before holds its own reference to them).

        ``grid``, ``block``, ``shmem``: a new grid, block or dynamic shared memory size for the
        node, checked as a LaunchConfig's are, with the node's attributes (a cluster must still
        divide the grid); ``config`` is then the node's new configuration."""
        cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
        cdef cydriver.CUuserObject kept, old
        cdef cydriver.CUresult err
        cdef uint64_t s = stream_handle(stream)
        cdef Kernel k = self.kernel
        cdef LaunchConfig cfg = _reshaped(self.config, grid, block, shmem)
        _ensure_driver()
        with _in_context(k._ctx):
            blk = _node_params(k, cfg, args, s, self._func, &p)
            kept = _node_kept(self._graph, blk, k)
            err = cydriver.cuGraphKernelNodeSetParams(self._node, &p)
            if err != cydriver.CUDA_SUCCESS:
                cydriver.cuGraphReleaseUserObject(self._graph, kept, 1)
                _check(err, f"cuGraphKernelNodeSetParams (kernel {k.name!r})")
            old = self._kept
            self._kept = kept
            self.config = cfg
            if old != NULL:         # NULL: a node found (nodes_in), whose arguments it keeps
                _check(cydriver.cuGraphReleaseUserObject(self._graph, old, 1),
                       "cuGraphReleaseUserObject (the node's previous arguments)")

    def set_exec_args(self, graph_exec, *args, stream=None, grid=None, block=None,
                      shmem=None):
        """Give the node ``args`` in ``graph_exec``, a graph instantiated from the node's graph
        (``cuGraphExecKernelNodeSetParams``; an int, a cuda.bindings ``CUgraphExec`` or a
        cuda.core ``Graph``): its next launches launch them. The node keeps the arguments last
        set in each instantiated graph alive until they are set again there or the node is
        gone; as for any launch, arrays must stay valid until the launches that use them end.

        ``grid``, ``block``, ``shmem``: a grid, block or dynamic shared memory size for the
        node in ``graph_exec``, this time, checked as for ``set_args``. The driver sets them all
        at each call, and what is not given is the node's ``config``'s: kernarg keeps nothing
        per instantiated graph, since another one may later have the same handle."""
        cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
        cdef cydriver.CUresult err
        cdef uintptr_t x = _graph_address(graph_exec, "graph_exec")
        cdef uint64_t s = stream_handle(stream)
        cdef Kernel k = self.kernel
        cdef LaunchConfig cfg = _reshaped(self.config, grid, block, shmem)
        _ensure_driver()
        with _in_context(k._ctx):
            blk = _node_params(k, cfg, args, s, self._func, &p)
            err = cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>x, self._node,
                                                          &p)
            if err != cydriver.CUDA_SUCCESS:
                block_release(blk)
                _check(err, f"cuGraphExecKernelNodeSetParams (kernel {k.name!r})")
        old = self._exec_blocks.get(x)
        self._exec_blocks[x] = blk
        if old is not None:
            block_release(<ParamBlock>old)

    def set_enabled(self, graph_exec, enabled):
        """Enable or disable the node in ``graph_exec``, a graph instantiated from the node's
        graph (``cuGraphNodeSetEnabled``; as for ``set_exec_args``): a disabled node runs
        nothing at that graph's next launches, and its dependencies hold as if it ran; its
        arguments stay set."""
        cdef uintptr_t x = _graph_address(graph_exec, "graph_exec")
        if not _is_bool(enabled):
            raise TypeError("set_enabled: enabled must be True or False, got "
                            f"{shown_value(enabled, True)}")
        _ensure_driver()
        with _in_context(self.kernel._ctx):
            _check(cydriver.cuGraphNodeSetEnabled(<cydriver.CUgraphExec>x, self._node,
                                                  1 if enabled else 0),
                   f"cuGraphNodeSetEnabled (kernel {self.kernel.name!r})")

    def is_enabled(self, graph_exec):
        """Whether the node is enabled in ``graph_exec`` (``cuGraphNodeGetEnabled``)."""
        cdef uintptr_t x = _graph_address(graph_exec, "graph_exec")
        cdef unsigned int enabled = 0
        _ensure_driver()
        with _in_context(self.kernel._ctx):
            _check(cydriver.cuGraphNodeGetEnabled(<cydriver.CUgraphExec>x, self._node,
                                                  &enabled),
                   f"cuGraphNodeGetEnabled (kernel {self.kernel.name!r})")
        return enabled != 0

    def __repr__(self):
        return (f"<kernarg.KernelNode {self.kernel.name} node={<uintptr_t>self._node:#x} "
                f"graph={<uintptr_t>self._graph:#x} grid={self.config.grid} "
                f"block={self.config.block}"
                f"{' device-updatable' if self.device_updatable else ''}>")

    def __reduce__(self):
        raise TypeError("a kernarg.KernelNode cannot be pickled or copied: it is a node of a "
                        "CUDA graph of this process")


C_LOOP_PLAIN = 0        # cuLaunchKernel alone: the floor
C_LOOP_EX = 1           # cuLaunchKernelEx with the same config and no attributes
C_LOOP_CHECKED = 2      # ... plus what kernarg's launch does in C around it, every launch


def _c_launch_loop(BoundLaunch bound, Py_ssize_t count, int variant=C_LOOP_PLAIN):
    """The launch floor, measured in this process: ``count`` launches of ``bound``'s kernel,
    block, grid and stream in a C loop with the GIL released, nothing between them -- what
    benchmarks/launch/launch_floor.cu does in a process of its own, but here interleaved with
    the Python launchers in the same context, stream and rounds, so a ratio to it is taken side
    by side. For the launch benchmark only.

    ``variant`` splits a bound launch's cost above the floor into its parts: C_LOOP_PLAIN calls
    ``cuLaunchKernel``; C_LOOP_EX ``cuLaunchKernelEx`` (what kernarg calls), so the driver's
    own difference between the two shows; C_LOOP_CHECKED adds, per launch, the context check,
    the capture query and the GIL release and re-take that kernarg's launch makes. A bound
    launch above C_LOOP_CHECKED is then the Python call and the Cython code around it."""
    cdef ParamBlock blk = bound._blk
    if blk is None:
        raise ValueError("this BoundLaunch is closed")
    if variant not in (C_LOOP_PLAIN, C_LOOP_EX, C_LOOP_CHECKED):
        raise ValueError(f"variant {variant} is not C_LOOP_PLAIN, C_LOOP_EX or C_LOOP_CHECKED")
    cdef const Dims* d = &bound.config._d
    cdef cydriver.CUfunction f = bound._kernel._func
    cdef cydriver.CUstream s = <cydriver.CUstream><uintptr_t>bound.stream
    cdef void** argv = blk.st.argv
    cdef cydriver.CUresult err = cydriver.CUDA_SUCCESS
    cdef cydriver.CUlaunchConfig config
    cdef cydriver.CUcontext current
    cdef Capture capture
    cdef Py_ssize_t _i
    _ensure_driver()
    with _in_context(bound._kernel._ctx):
        _fill_launch_config(&config, d, s, NULL, 0)
        if variant == C_LOOP_PLAIN:
            with nogil:
                for _i in range(count):
                    err = cydriver.cuLaunchKernel(f, d.grid[0], d.grid[1], d.grid[2], d.block[0],
                                                  d.block[1], d.block[2], d.shmem, s, argv, NULL)
                    if err != cydriver.CUDA_SUCCESS:
                        break
            _check(err, "cuLaunchKernel")
        elif variant == C_LOOP_EX:
            with nogil:
                for _i in range(count):
                    err = cydriver.cuLaunchKernelEx(&config, f, argv, NULL)
                    if err != cydriver.CUDA_SUCCESS:
                        break
            _check(err, "cuLaunchKernelEx")
        else:
            for _i in range(count):
                err = cydriver.cuCtxGetCurrent(&current)
                if err != cydriver.CUDA_SUCCESS:
                    break
                _capture_of(s, &capture)
                with nogil:
                    err = cydriver.cuLaunchKernelEx(&config, f, argv, NULL)
                if err != cydriver.CUDA_SUCCESS:
                    break
            _check(err, "cuLaunchKernelEx")


def _cubin_entry(bytes image, str name):
    """The symbol of kernel ``name`` in a cubin or fatbin: ``name`` itself, or the mangled name
    of the one C++ kernel it names (_signature.ptx_entry_name) among the kernels the image's
    ELF symbol tables list. A name the tables do not have is refused there, listing them (and
    which qualified names it could mean); where no table could be read (a compressed fatbin),
    the driver is asked for ``name`` as it is."""
    from kernarg._images import cubin_entry_names
    from kernarg._signature import ptx_entry_name

    entries = cubin_entry_names(image)
    if entries is None or name in entries:
        return name
    return ptx_entry_name(entries, name, "the image's symbols")


def _entry_name(str ptx, str name, source=None):
    """The PTX entry for ``name``: itself, or its C++ mangled form (_signature.ptx_entry_name);
    ``source``, where known, says which namespaces are inline (a name may leave them out)."""
    import re

    from kernarg._signature import ptx_entry_name
    return ptx_entry_name(re.findall(r"\.entry\s+([\w$]+)", ptx), name,
                          inline=_inline_namespaces(source) if source else frozenset())


# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h);
# the launches take it themselves, so that the interpreter calls them as builtins.
guard_module(globals(), __name__, (launch, Kernel.__dict__["launch"]))
