"""The launch layer without a GPU: configuration checks, the no-driver error, and everything
that happens before the driver call."""
import gc
import os
import re
import struct
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernarg


def _has_driver():
    try:
        from cuda.bindings import driver

        return driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS
    except Exception:
        return False


HAS_DRIVER = _has_driver()
needs_no_driver = pytest.mark.skipif(HAS_DRIVER, reason="a CUDA driver is present: the "
                                     "no-driver path cannot be exercised here")


def test_config_normalises_dims_and_builds_attributes():
    c = kernarg.LaunchConfig(8, (32, 4))
    assert c.grid == (8, 1, 1) and c.block == (32, 4, 1) and c.shmem == 0
    assert c.attributes == ()
    c = kernarg.LaunchConfig((4, 2), 128, shmem=4096, cluster=(2, 2), cooperative=True,
                             pdl=True, priority=-1)
    assert c.cluster == (2, 2, 1)
    assert c.attributes == (("cluster_dimension", (2, 2, 1)), ("cooperative", 1),
                            ("programmatic_stream_serialization", 1), ("priority", -1))
    # A priority is any int a C int holds, a numpy int as for the other values, kept as an int.
    for priority in (np.int16(-3), -2**31, 2**31 - 1):
        c = kernarg.LaunchConfig(1, 1, priority=priority)
        assert c.attributes == (("priority", int(priority)),) and type(c.priority) is int


def test_a_config_is_a_value_that_pickles_and_copies():
    # Equal (and hashed alike) where every field is, whatever spelling made it; pickled and
    # copied as its fields, made and checked again, attributes and all.
    import copy
    import pickle

    configs = [kernarg.LaunchConfig(8, (32, 4)),
               kernarg.LaunchConfig((4, 2), 128, shmem=4096, cluster=(2, 2), cooperative=True,
                                    pdl=True, priority=np.int16(-1))]
    assert configs[0] == kernarg.LaunchConfig((8, 1, 1), np.array([32, 4, 1]).tolist())
    assert hash(configs[0]) == hash(kernarg.LaunchConfig((8, 1), (32, 4, 1)))
    assert configs[0] != configs[1] and configs[0] != (8, (32, 4)) and configs[0] != None  # noqa
    # One field apart: each differs from the plain config and from the others.
    apart = [kernarg.LaunchConfig(8, (32, 4), **field)
             for field in (dict(shmem=1), dict(shmem=2), dict(cluster=2), dict(cluster=4),
                           dict(cooperative=True), dict(pdl=True), dict(priority=0),
                           dict(priority=1))] + [kernarg.LaunchConfig(4, (32, 4)),
                                                 kernarg.LaunchConfig(8, (4, 32))]
    assert len(set(apart + configs[:1])) == len(apart) + 1
    assert all(a != b for i, a in enumerate(apart) for b in apart[i + 1:] + configs[:1])
    assert len({configs[0], kernarg.LaunchConfig(8, (32, 4)), configs[1]}) == 2
    for c in configs:
        for again in [pickle.loads(pickle.dumps(c, protocol))
                      for protocol in range(pickle.HIGHEST_PROTOCOL + 1)] + \
                [copy.copy(c), copy.deepcopy(c)]:
            assert type(again) is kernarg.LaunchConfig and again == c
            assert (again.grid, again.block, again.shmem, again.cluster, again.cooperative,
                    again.pdl, again.priority, again.attributes, repr(again)) == \
                (c.grid, c.block, c.shmem, c.cluster, c.cooperative, c.pdl, c.priority,
                 c.attributes, repr(c))



def test_a_config_with_fields_replaced_is_checked_again():
    # copy.replace (Python 3.13+) calls __replace__: the other fields kept, the new ones
    # checked as LaunchConfig checks them.
    import copy

    c = kernarg.LaunchConfig((4, 2), 128, shmem=16, cluster=(2, 2), pdl=True, priority=-1)
    more = c.__replace__(shmem=4096, priority=None)
    assert more == kernarg.LaunchConfig((4, 2), 128, shmem=4096, cluster=(2, 2), pdl=True)
    assert c.shmem == 16 and c.priority == -1                  # the original is unchanged
    assert c.__replace__() == c
    with pytest.raises(ValueError, match=r"grid \(3, 2, 1\) is not a multiple of cluster"):
        c.__replace__(grid=(3, 2))
    with pytest.raises(TypeError, match="LaunchConfig has no field 'stream' \\(its fields: "
                                        "grid, block, shmem, cluster, cooperative, pdl, "
                                        "priority, cluster_scheduling, preferred_cluster, "
                                        "mem_sync_domain, shmem_carveout, access_policy, "
                                        "launch_completion_event, programmatic_event, "
                                        "mem_sync_domain_map, nvlink_util_centric, "
                                        "cluster_size_mode, shmem_mode\\)"):
        c.__replace__(stream=5)
    if hasattr(copy, "replace"):
        assert copy.replace(c, block=64) == kernarg.LaunchConfig(
            (4, 2), 64, shmem=16, cluster=(2, 2), pdl=True, priority=-1)


# Errors in grid, block and shmem: LaunchConfig and Kernel.launch (which checks them in C when no
# launch attribute is asked for) must raise the same ones.
DIMS_ERRORS = [
    (dict(grid=0, block=1), ValueError, r"grid\[0\] is 0; it must be between 1 and 2147483647"),
    (dict(grid=(1, 70000), block=1), ValueError, r"grid\[1\] is 70000.*65535"),
    (dict(grid=1, block=(1, 1, 65)), ValueError, r"block\[2\] is 65.*64"),
    (dict(grid=1, block=(64, 32)), ValueError, "2048 threads; the limit is 1024"),
    (dict(grid=1, block=(1, 2, 3, 4)), TypeError, "tuple of 1 to 3 ints"),
    (dict(grid=1.5, block=1), TypeError, "grid must be an int"),
    (dict(grid=(1, "2"), block=1), TypeError, r"grid\[1\] must be an int"),
    (dict(grid=True, block=1), TypeError, "bool"),
    (dict(grid=(True,), block=1), TypeError, "bool|must be an int"),
    (dict(grid=2**31, block=1), ValueError, r"grid\[0\] is 2147483648"),
    (dict(grid=1, block=1, shmem=-1), ValueError, "shmem"),
    (dict(grid=1, block=1, shmem=2**32), ValueError, "shmem"),
    (dict(grid=1, block=1, shmem=True), ValueError, "shmem"),
    # numpy's bool converts to an index (with a warning, on numpy 1.x): still not a size.
    (dict(grid=np.True_, block=1), TypeError,
     "grid must be an int or a tuple of 1 to 3 ints, got bool"),
    (dict(grid=(2, np.True_), block=1), TypeError, r"grid\[1\] must be an int, got bool"),
    (dict(grid=1, block=1, shmem=np.True_), ValueError, "shmem"),
    (dict(grid=np.float64(2), block=1), TypeError, "grid must be an int"),
    (dict(grid=np.arange(2), block=1), TypeError, r"tuple of 1 to 3 ints, got array\(\[0, 1\]\)"),
    (dict(grid=np.int64(0), block=1), ValueError, r"grid\[0\] is 0"),
    (dict(grid=1, block=1, shmem=np.int64(-1)), ValueError, "shmem"),
]


def test_non_portable_cluster_along_one_axis_is_accepted():
    # 16 blocks in one axis is a legal non-portable cluster (sm_90); the launch opts in.
    c = kernarg.LaunchConfig(32, 32, cluster=16)
    assert c.cluster == (16, 1, 1)
    assert kernarg.LaunchConfig((2, 16), 32, cluster=(1, 16)).cluster == (1, 16, 1)


@pytest.mark.parametrize("kwargs, exc, fragment", DIMS_ERRORS + [
    (dict(grid=3, block=1, cluster=2), ValueError, "not a multiple of cluster"),
    (dict(grid=(8, 8), block=1, cluster=(4, 8)), ValueError, "32 blocks; the limit is 16"),
    (dict(grid=32, block=1, cluster=32), ValueError, r"cluster\[0\] is 32; .* 1 and 16"),
    (dict(grid=1, block=1, priority="high"), TypeError, "priority"),
    (dict(grid=1, block=1, priority=True), TypeError, "priority must be an int, got bool"),
    (dict(grid=1, block=1, priority=1.0), TypeError, "priority must be an int, got float"),
    (dict(grid=1, block=1, priority=2**31), ValueError,
     r"priority must be an int between -2\*\*31 and 2\*\*31-1 .*got 2147483648"),
    (dict(grid=1, block=1, priority=-2**31 - 1), ValueError, "priority .*got -2147483649"),
])
def test_config_errors_name_value_and_limit(kwargs, exc, fragment):
    kwargs = dict(kwargs)       # the table is shared with the next test
    with pytest.raises(exc, match=fragment):
        kernarg.LaunchConfig(kwargs.pop("grid"), kwargs.pop("block"), **kwargs)


_ATTRIBUTE_ATOMS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
                    | st.sampled_from([0, 1, -1, 2, 2**63 - 1, -2**63, 2**63, -2**63 - 1])
                    | st.floats(allow_nan=True) | st.sampled_from([0.0, -0.0, 1.0, 2.0])
                    | st.sampled_from(["spread", "remote", ""]))
_ATTRIBUTE_VALUES = _ATTRIBUTE_ATOMS | st.lists(_ATTRIBUTE_ATOMS | st.tuples(st.integers()),
                                                max_size=5).map(tuple)


def _fresh(value):
    """A new object equal to ``value`` where CPython makes one: ints past its small ones,
    floats, strs and tuples (items made anew too)."""
    if type(value) is tuple:
        return tuple(_fresh(v) for v in value)
    if type(value) is int:
        return int(str(value))
    if type(value) is float:
        return float.fromhex(value.hex()) if value == value else value
    if type(value) is str:
        return "".join(list(value))
    return value


def _retyped(value):
    """``value`` with its bools made ints, its ints floats and its floats ints where
    equal (True -> 1, 2 -> 2.0, 2.0 -> 2), item by item in a tuple."""
    if type(value) is tuple:
        return tuple(_retyped(v) for v in value)
    if type(value) is bool:
        return int(value)
    if type(value) is int and -2**53 <= value <= 2**53:
        return float(value)
    if type(value) is float and value.is_integer():
        return int(value)
    return value


@settings(max_examples=400, deadline=None)
@given(a=_ATTRIBUTE_VALUES, b=_ATTRIBUTE_VALUES, flag=st.booleans(),
       make_b=st.sampled_from(["drawn", "fresh", "retyped"]))
def test_launch_attribute_values_compared_in_c_words_agree_with_their_objects(a, b, flag,
                                                                              make_b):
    """Property: a launch outside kernarg's section finds one of its kernel's kept configs by
    the attribute values' C words (kernarg_encode_attribute: None, bools, ints of 64 bits, floats
    bit for bit, tuples of up to four such ints) where the objects are not the kept ones. Two
    values of those kinds have equal words exactly where the comparison of the objects (in
    the section) finds them equal, so either way the same launches share a config; any
    other value (a str, a bigger int or tuple, a tuple holding a bool) has words of the kind
    no value matches, and is left to that comparison. Not given is the default: False for a
    flag, else None."""
    from kernarg._launch import _attribute_words, _equal_attributes

    if make_b == "fresh":
        b = _fresh(a)
    elif make_b == "retyped":                   # equal, but of other types: not the same value
        b = _retyped(a)
    wa, wb = _attribute_words(a, flag), _attribute_words(b, flag)
    other = (0, 0, 0, 0, 0)
    assert len(wa) == 5 and wa == _attribute_words(_fresh(a), flag)
    if wa[0] != 0 and wb[0] != 0:
        assert (wa == wb) == _equal_attributes(a, b, flag), (a, b)
    else:
        assert other in (wa, wb)
    kinds = type(a) in (int, float, bool) or a is None or (
        type(a) is tuple and len(a) <= 4 and all(type(v) is int for v in a))
    assert (wa[0] != 0) == (kinds and (type(a) is not int or -2**63 <= a < 2**63) and (
        type(a) is not tuple or all(-2**63 <= v < 2**63 for v in a))), a
    assert _attribute_words(None, True, given=False) == _attribute_words(False)
    assert _attribute_words(None, False, given=False) == _attribute_words(None)
    if not (type(a) is tuple and tuple in map(type, a)):    # (a tuple in one: only itself)
        assert _equal_attributes(a, _fresh(a), flag)


def check_equal_attribute_values_keep_the_config(launch):
    """A Kernel.launch whose attribute values equal those of one of the last four configs the
    kernel made, in new objects (a cluster tuple made at each launch), finds that config by
    the values' C words and writes nothing: the kernel keeps the objects it was made from (on
    a free-threaded build such launches need no section and do not take turns). A str made
    anew is compared as an object, in the section, and kept in place of the last; other
    values make a config of their own, which replaces the oldest of the four. ``launch(**
    attributes)`` launches one kernel with a grid of 8 blocks (tests/gpu's
    test_launches_with_attributes_of_equal_values_launch_their_config calls this too)."""
    first, scheduling = tuple([2, 1, 1]), "".join(["spr", "ead"])
    refs = sys.getrefcount(first)
    launch(cluster=first, cluster_scheduling="spread")
    assert sys.getrefcount(first) == refs + 1                   # kept
    for _ in range(3):
        again = tuple([2, 1, 1])
        launch(cluster=again, cluster_scheduling="spread")
        assert sys.getrefcount(first) == refs + 1 and sys.getrefcount(again) == refs
    launch(cluster=first, cluster_scheduling=scheduling)        # a str made anew
    assert sys.getrefcount(first) == refs + 1 and sys.getrefcount(scheduling) == refs + 1
    # Three other values: a config each, kept beside the first; launched again in turn, in
    # new objects, each is found by value (none made: the kept objects stay).
    def counts(values):
        return [sys.getrefcount(v) for v in values]

    others = [tuple([c, 1, 1]) for c in (4, 8, 1)]
    alone = counts(others)
    for i in range(3):
        launch(cluster=others[i], cluster_scheduling=scheduling)
    for _ in range(2):
        for c in (2, 4, 8, 1):
            launch(cluster=tuple([c, 1, 1]), cluster_scheduling=scheduling)
    assert sys.getrefcount(first) == refs + 1 and counts(others) == [n + 1 for n in alone]
    # A fifth: the oldest (the first) makes way for it.
    fifth = tuple([2, 1, 1])
    launch(cluster=fifth)
    assert sys.getrefcount(first) == refs and sys.getrefcount(fifth) == refs + 1
    assert counts(others) == [n + 1 for n in alone]


def test_launch_attributes_of_equal_values_find_the_kept_config_without_a_write():
    """check_equal_attribute_values_keep_the_config with no driver: the config is made and
    kept before the launch finds none."""
    if HAS_DRIVER:
        pytest.skip("a driver would launch this test's made-up kernel handle: tests/gpu's "
                    "test_launches_with_attributes_of_equal_values_launch_their_config checks "
                    "this with a real kernel")
    k = kernarg.Kernel.from_handle(0x1234)

    def launch(**attributes):
        with pytest.raises(kernarg.NoDriverError):
            k.launch((8, 1, 1), 32, 1, **attributes)

    check_equal_attribute_values_keep_the_config(launch)


@pytest.mark.parametrize("kwargs, exc, fragment", DIMS_ERRORS)
def test_launch_without_attributes_checks_like_launch_config(kwargs, exc, fragment):
    # Kernel.launch checks grid/block/shmem in C when no attribute is asked for; the errors
    # must be LaunchConfig's, raised before anything reaches the driver.
    kwargs = dict(kwargs)
    k = kernarg.Kernel.from_handle(0x1234)
    with pytest.raises(exc, match=fragment):
        k.launch(kwargs.pop("grid"), kwargs.pop("block"), 1, **kwargs)


class _Dim(int):
    pass


@pytest.mark.parametrize("grid, block", [
    (1, 1), ((2,), (32, 2)), ((2, 3), (4, 4, 4)), ([2, 3, 4], [8, 8]), (2**31 - 1, 1024),
    (2**30 + 5, (1, 1024)), (_Dim(3), (_Dim(2), 2)), ((65535, 65535, 65535), (1, 1, 64)),
    # Integers that are not Python ints: numpy scalars, a 0-d integer array (all __index__).
    (np.int64(4), (np.int32(32), np.uint16(2))), ([np.uint8(2), 3], np.array(64)),
])
def test_launch_accepts_what_launch_config_accepts(grid, block):
    def norm(v):
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        return v + (1,) * (3 - len(v))

    cfg = kernarg.LaunchConfig(grid, block, shmem=np.uint32(2**32 - 1))
    assert cfg.grid == norm(grid) and cfg.block == norm(block) and cfg.shmem == 2**32 - 1
    assert all(type(v) is int for v in cfg.grid + cfg.block)
    k = kernarg.Kernel.from_handle(0x1234)
    if not HAS_DRIVER:       # everything was accepted: only the driver is missing
        with pytest.raises(kernarg.NoDriverError):
            k.launch(grid, block, 1, shmem=2**32 - 1)


def test_prepare_and_getitem_need_no_driver():
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    assert k.handle == 0x1234 and len(k.signature) == 2
    p = k.prepare((4, 1), 256, stream=0x55, shmem=128)
    assert p.stream == 0x55 and p.config.grid == (4, 1, 1) and p.config.shmem == 128
    q = k[2, 64]
    assert q.stream == kernarg.default_stream()
    with pytest.raises(TypeError, match="kernel\\[grid, block\\]"):
        k[1]


def test_bind_packs_once_and_holds_the_arguments_until_closed():
    from producers import DLPackProducer

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    prepared = k.prepare(1, 32, stream=0x55)
    producer = DLPackProducer(0x9000)
    bound = prepared.bind(producer, 7)
    assert isinstance(bound, kernarg.BoundLaunch)
    assert (bound.stream, bound.config, bound.nargs, bound.closed) == (0x55, prepared.config,
                                                                       2, False)
    # Packed once, with the launch stream handed to the producer; the tensor is held.
    assert producer.exported == 1 and producer.streams == [0x55] and producer.deleted == 0
    if not HAS_DRIVER:
        for _ in range(2):       # a failed launch keeps the bound arguments for the next call
            with pytest.raises(kernarg.NoDriverError):
                bound()
        assert producer.exported == 1 and producer.deleted == 0
    # The bound arguments are the only ones: a call takes none (by either call path).
    with pytest.raises(TypeError, match=r"BoundLaunch\(\) takes no arguments: they were bound"):
        bound(1)
    with pytest.raises(TypeError, match=r"BoundLaunch\(\) takes no arguments"):
        bound(stream=3)
    with pytest.raises(TypeError, match="argument"):
        kernarg.BoundLaunch.__call__(bound, 1)
    if not HAS_DRIVER:
        with pytest.raises(kernarg.NoDriverError):
            kernarg.BoundLaunch.__call__(bound)
    assert producer.exported == 1 and producer.deleted == 0
    with bound as same:
        assert same is bound
    assert bound.closed and producer.deleted == 1
    with pytest.raises(ValueError, match="closed"):
        bound()
    with pytest.raises(ValueError, match="closed"):
        assert bound.nargs is None
    bound.close()                # closing twice is harmless
    assert producer.deleted == 1
    # Errors come from bind, naming the parameter; nothing is held.
    with pytest.raises(OverflowError, match="'n'"):
        prepared.bind(None, 2**40)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        prepared.bind(None)
    with pytest.raises(TypeError, match="PreparedLaunch.bind"):
        kernarg.BoundLaunch()


def test_arguments_checked_before_any_driver_call():
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        k.launch(1, 1, None)
    with pytest.raises(OverflowError, match="'n'"):
        k.launch(1, 1, None, 2**40)
    with pytest.raises(ValueError, match="block"):
        k.launch(1, 2048, None, 1)
    with pytest.raises(TypeError, match="stream"):
        k.launch(1, 1, None, 1, stream="default")
    for bad, exc in ((2**64, ValueError), (-1, ValueError), (True, TypeError)):
        with pytest.raises(exc, match="stream"):
            k.launch(1, 1, None, 1, stream=bad)
        with pytest.raises(exc, match="stream"):
            k.prepare(1, 1, stream=bad)
    assert k.prepare(1, 1, stream=2**64 - 1).stream == 2**64 - 1
    assert k.prepare(1, 1, stream=0).stream == 0


def test_kernel_launch_takes_its_arguments_as_its_signature_says():
    # Kernel.launch is a C function of CPython's fastcall convention (no tuple of the
    # arguments): it parses its keywords itself, so it must refuse what a def would.
    import inspect

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    assert list(inspect.signature(kernarg.Kernel.launch).parameters) == [
        "self", "grid", "block", "args", "stream", "shmem", "cluster", "cooperative", "pdl",
        "priority", "cluster_scheduling", "preferred_cluster", "mem_sync_domain",
        "shmem_carveout", "access_policy", "launch_completion_event", "programmatic_event",
        "mem_sync_domain_map", "nvlink_util_centric", "cluster_size_mode", "shmem_mode"]
    assert "producer stream" in kernarg.Kernel.launch.__doc__
    for call, message in (
            (lambda: k.launch(), "missing required argument 'grid' \\(pos 1\\)"),
            (lambda: k.launch(1), "missing required argument 'block' \\(pos 2\\)"),
            (lambda: k.launch(block=1), "missing required argument 'grid'"),
            (lambda: k.launch(1, 1, None, 3, n=3), "unexpected keyword argument 'n'"),
            (lambda: k.launch(1, 1, None, 3, grid=2), "multiple values for argument 'grid'"),
            (lambda: k.launch(1, block=2), "takes 2 arguments"),
            (lambda: k.launch(1, 1, block=2), "multiple values for argument 'block'"),
            (lambda: kernarg.Kernel.launch(object(), 1, 1), "'launch'.*'object'")):
        with pytest.raises(TypeError, match=message):
            call()
    # grid and block by keyword reach the checks; so does every other keyword.
    with pytest.raises(TypeError, match="takes 2 arguments"):
        k.launch(block=32, grid=1)
    with pytest.raises(ValueError, match="grid\\[0\\] is 0"):
        k.launch(grid=0, block=1)
    with pytest.raises(ValueError, match="shmem must be an int"):
        k.launch(1, 1, None, 3, shmem=None)
    with pytest.raises(ValueError, match="cluster\\[0\\] is 17"):
        k.launch(17, 1, None, 3, cluster=17)
    with pytest.raises(TypeError, match="priority must be an int"):
        k.launch(1, 1, None, 3, priority="high")

    class Truth:
        """A flag that says when it is read, by raising."""

        def __init__(self, name):
            self.name = name

        def __bool__(self):
            raise LookupError(f"{self.name} read")

    for flag in ("cooperative", "pdl"):
        with pytest.raises(LookupError, match=f"{flag} read"):
            k.launch(1, 1, None, 3, **{flag: Truth(flag)})
        # A keyword name built at run time is not the interned str: found by equality.
        built = "".join(list(flag))
        assert built is not flag
        with pytest.raises(LookupError, match=f"{flag} read"):
            k.launch(1, 1, None, 3, **{built: Truth(flag)})
    with pytest.raises(OverflowError, match="'n'"):
        kernarg.Kernel.launch(k, 1, 1, None, 2**40)
    with pytest.raises(OverflowError, match="'n'"):
        k.launch(*[1, 1, None, 2**40], **{"stream": 0x55, "pdl": True})


def test_a_prepared_launch_takes_positional_arguments_however_called():
    # A PreparedLaunch is called by vectorcall (the arguments read from the caller's array, no
    # tuple) and, by PreparedLaunch.__call__, from a tuple. Both check alike, before the driver.
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    p = k.prepare(1, 32, stream=0x55)
    calls = (lambda *a, **kw: p(*a, **kw), lambda *a, **kw: kernarg.PreparedLaunch.__call__(
        p, *a, **kw))
    for call in calls:
        with pytest.raises(TypeError, match="takes 2 arguments"):
            call(None)
        with pytest.raises(OverflowError, match="'n'"):
            call(None, 2**40)
    with pytest.raises(TypeError, match="by position only, got keyword argument 'n'"):
        p(None, n=3)
    with pytest.raises(TypeError, match="by position only, got keyword argument 'n'"):
        p(n=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'n'"):
        kernarg.PreparedLaunch.__call__(p, None, n=3)


def test_an_uninitialised_prepared_launch_is_refused_not_a_crash():
    # PreparedLaunch.__new__ gives one with no kernel: calling it used to dereference None.
    p = kernarg.PreparedLaunch.__new__(kernarg.PreparedLaunch)
    for call in (lambda: p(1), lambda: p(*[1, 2]), lambda: p(), lambda: p.bind(1),
                 lambda: kernarg.PreparedLaunch.__call__(p, 1)):
        with pytest.raises(TypeError, match="never initialised: get one from Kernel.prepare"):
            call()


FORK_WITHOUT_INIT = r"""
import os
import kernarg
pid = os.fork()
if pid == 0:
    code = 0
    try:
        kernarg.Kernel.from_handle(0x1234, name="k").launch(1, 1)
        code = 5
    except kernarg.NoDriverError as exc:
        code = 4 if "forked" in str(exc) else 3
    if bytes(kernarg.pack((1,)))[:1] != b"\x01":
        code = 6
    os._exit(code)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@needs_no_driver
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_before_cuda_was_initialised_is_left_alone():
    # kernarg refuses CUDA in a child forked after the parent initialised it (tests/gpu); a
    # parent that never did leaves its children free to: here, with no driver, the child's
    # launch is the usual NoDriverError, and it packs.
    run = subprocess.run([sys.executable, "-c", FORK_WITHOUT_INIT], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3"], (run.stdout, run.stderr)


@needs_no_driver
@pytest.mark.parametrize("recipe", [
    ("source", 'extern "C" __global__ void k(int* p) {}', ("-DX=1",), (("a.h", "int x;"),)),
    ("ptx", ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{ ret; }\n",
     None, kernarg.Signature("int* p")),
    ("cubin", b"\x7fELF", "k", None)], ids=["source", "ptx", "cubin"])
def test_unpickling_a_kernel_without_a_driver_says_it_was_unpickling(recipe):
    # A pickled kernel is loaded again by the constructor of its kind of code (tests/gpu
    # launches them); where that fails in the driver, the error says it was unpickling.
    from kernarg._launch import _unpickle_kernel

    with pytest.raises(kernarg.NoDriverError,
                       match=f"^unpickling kernarg.Kernel 'k' \\(from {recipe[0]}, device=0\\): "
                             "no CUDA driver/GPU found") as info:
        _unpickle_kernel(recipe, "k", 0)
    assert isinstance(info.value.__cause__, kernarg.NoDriverError)


def test_a_kernel_from_a_handle_refuses_pickle_and_is_its_own_copy():
    # A handle means nothing in another process, and kernarg has none of the function's
    # code; a copy is the kernel itself. A prepared or bound launch holds a stream handle (and
    # packed addresses): each refuses pickle, and copy, saying so. (Kernels with code pickle:
    # tests/gpu.)
    import copy
    import pickle
    import weakref

    from producers import CAIObject, cai

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    with pytest.raises(TypeError, match="^kernarg.Kernel 'k' cannot be pickled: it wraps a "
                                        "function handle \\(Kernel.from_handle\\), which is "
                                        "valid in this process only"):
        pickle.dumps(k)
    assert copy.copy(k) is k and copy.deepcopy([k])[0] is k
    ref = weakref.ref(k)
    seen = weakref.WeakKeyDictionary({k: "k"})
    assert seen[k] == "k"
    p = k.prepare(1, 32)
    bound = p.bind(CAIObject(cai(0x1000, typestr="<f4")), 32)
    for obj, what in ((p, "PreparedLaunch"), (bound, "BoundLaunch")):
        for how in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match=f"^a kernarg.{what} cannot be pickled or copied"):
                how(obj)
    with pytest.raises(TypeError, match="^a kernarg.PreparedLaunch cannot be pickled or "
                                        "copied: it launches on a stream handle of this "
                                        "process"):
        pickle.dumps(p)
    bound.close()
    del k, p, bound, obj
    gc.collect()
    assert ref() is None and len(seen) == 0


@needs_no_driver
def test_a_failed_prepared_launch_lets_go_of_its_arguments():
    # The block packed from a vectorcall's arguments holds no tuple of them: it borrows them
    # for the call. A launch that fails after packing must leave every count where it was,
    # and a DLPack tensor it consumed deleted, once.
    from producers import DLPackProducer

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n, double x", name="k")
    untyped = kernarg.Kernel.from_handle(0x1234, name="u")
    producer = DLPackProducer(0x9000)
    n, x = 10**6 + 1, float("1.5")            # objects of their own, not cached constants
    before = [sys.getrefcount(o) for o in (producer, n, x)]
    for kernel in (k, untyped):
        p = kernel.prepare(1, 32, stream=0x55)
        for _ in range(200):
            with pytest.raises(kernarg.NoDriverError):
                p(producer, n, x)
            # Kernel.launch and kernarg.launch read their arguments where the call left
            # them too.
            with pytest.raises(kernarg.NoDriverError):
                kernel.launch(1, 32, producer, n, x, stream=0x55)
            with pytest.raises(kernarg.NoDriverError):
                kernarg.launch(0x55, p.config, kernel, producer, n, x)
        assert producer.deleted == producer.exported
    assert producer.exported == 1200 and set(producer.streams) == {0x55}
    assert [sys.getrefcount(o) for o in (producer, n, x)] == before


@needs_no_driver
def test_a_launch_whose_arguments_fail_to_pack_lets_go_of_what_it_consumed():
    # A launch packs into storage of its own on the C stack when the kernel's signature fits
    # an Arena, or when it has none and at most 16 arguments (past 256 bytes, that storage
    # moves to the heap); else into a ParamBlock. Either way a DLPack tensor consumed before
    # an argument that fails is deleted, once, and the error names the parameter.
    from producers import DLPackProducer

    wide = np.zeros((), dtype=[("v", "u1", 300)])[()]      # 300 bytes by value

    small = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="small")
    big = kernarg.Kernel.from_handle(
        0x1234, signature="float* out, " + ", ".join(f"int n{i}" for i in range(16)),
        name="big")
    untyped = kernarg.Kernel.from_handle(0x1234, name="u")
    cases = ((small, ("x",), r"parameter 1 \('n'\) is int: expected an int, got str"),
             (big, ("x",) + (1,) * 15, r"parameter 1 \('n0'\) is int"),
             (untyped, (object(),), r"argument 1 \(object\): unsupported kernel argument"),
             (untyped, (wide, object()), r"argument 2 \(object\): unsupported"),
             (untyped, (1,) * 16 + (object(),), r"argument 17 \(object\): unsupported"))
    for kernel, bad, message in cases:
        producer = DLPackProducer(0x9000)
        p = kernel.prepare(1, 32, stream=0x55)
        before = sys.getrefcount(producer)
        with pytest.raises(TypeError, match=message):
            p(producer, *bad)
        with pytest.raises(TypeError, match=message):
            kernel.launch(1, 32, producer, *bad, stream=0x55)
        with pytest.raises(TypeError, match=message):
            kernarg.launch(0x55, p.config, kernel, producer, *bad)
        assert producer.exported == producer.deleted == 3, kernel.name
        assert sys.getrefcount(producer) == before


def test_a_captured_stack_launch_gives_the_graph_a_block_of_what_it_packed():
    # A launch packed on the C stack and captured into a graph hands the graph a block made
    # from that state (block_from_state): the same bytes at the same offsets as kernarg.pack
    # makes, past the 256 bytes of an Arena too, holding the argument tuple and the DLPack
    # tensors consumed, whose deleters run once, when the block goes.
    from kernarg._launch import _kept_for_a_graph

    from producers import DLPackProducer

    wide = np.zeros((), dtype=[("v", "u1", 300)])
    wide["v"] = (np.arange(300) * 7 + 3) % 251
    wide = wide[()]
    for args in ((0x1000, 2.5, np.float32(3), True), (0x1000, wide, np.int32(-7)),
                 tuple(range(15)) + (wide,)):
        producer = DLPackProducer(0x9000)
        args = (producer,) + args[1:]
        block = _kept_for_a_graph(args, 0x55)
        packed = kernarg.pack(args)
        assert bytes(block) == bytes(packed) and block.offsets == packed.offsets
        assert block.args is args
        assert producer.exported == 2 and producer.deleted == 0
        del packed
        assert producer.deleted == 1
        del block
        gc.collect()
        assert producer.deleted == 2
    with pytest.raises(ValueError, match="at most 16 arguments"):
        _kept_for_a_graph(tuple(range(17)))


@needs_no_driver
def test_every_launch_path_hands_dlpack_producers_the_launch_stream():
    # The packers take the launch stream as a handle and make the int a producer is given
    # only for it: a stream object's handle, an int as it is, None as the default stream, and
    # the NULL stream 0 as the default stream it is (DLPack forbids stream=0).
    from producers import DLPackProducer

    class Stream:
        def __cuda_stream__(self):
            return (0, 0x77)

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    untyped = kernarg.Kernel.from_handle(0x1234, name="u")
    for stream, handle in ((Stream(), 0x77), (2**64 - 1, 2**64 - 1), (0x55, 0x55),
                           (None, kernarg.default_stream()), (0, kernarg.default_stream())):
        for kernel in (k, untyped):
            producer = DLPackProducer(0x9000)
            with pytest.raises(kernarg.NoDriverError):
                kernel.launch(1, 32, producer, 3, stream=stream)
            with pytest.raises(kernarg.NoDriverError):
                kernel[1, 32, stream](producer, 3)
            with pytest.raises(kernarg.NoDriverError):
                kernel.prepare(1, 32, stream=stream)(producer, 3)
            with pytest.raises(kernarg.NoDriverError):
                kernarg.launch(stream, kernarg.LaunchConfig(1, 32), kernel, producer, 3)
            kernel.prepare(1, 32, stream=stream).bind(producer, 3).close()
            assert producer.streams == [handle] * 5, (stream, kernel.name)
            assert producer.deleted == producer.exported == 5


@needs_no_driver
def test_every_launch_path_fills_in_default_arguments():
    # Left-out arguments with defaults are filled in before the driver is needed: every call
    # path gets as far as the driver (none here) rather than refusing the count.
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n = 4, float a = 0.5f")
    p = k.prepare(1, 32)
    for call in (lambda: k.launch(1, 32, None), lambda: k.launch(1, 32, None, 3, stream=0x55),
                 lambda: p(None), lambda: kernarg.PreparedLaunch.__call__(p, None, 2),
                 lambda: kernarg.launch(None, p.config, k, None)):
        with pytest.raises(kernarg.NoDriverError):
            call()
    assert p.bind(None).closed is False
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k.launch(1, 32)


@needs_no_driver
def test_no_driver_is_a_cuda_error_not_a_loader_traceback():
    k = kernarg.Kernel.from_handle(0x1234)
    with pytest.raises(kernarg.CudaError, match="no CUDA driver"):
        k.launch(1, 1, 5)
    with pytest.raises(kernarg.NoDriverError):
        k[1, 1](5)
    with pytest.raises(kernarg.CudaError, match="no CUDA driver"):
        kernarg.Kernel.from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n"
                                ".visible .entry k() { ret; }", "k")
    with pytest.raises(kernarg.CudaError, match="no CUDA driver"):
        kernarg.Kernel.from_source('extern "C" __global__ void k() {}', "k")
    with pytest.raises(kernarg.NoDriverError):
        kernarg.Kernel.from_source_many('extern "C" __global__ void k() {}', ["k"])
    with pytest.raises(kernarg.NoDriverError):
        k.max_cooperative_blocks(32)
    with pytest.raises(kernarg.NoDriverError):
        k.launch(4, 32, 5, cooperative=True)
    with pytest.raises(ValueError, match="block"):      # the shape is checked first
        k.max_cooperative_blocks(2048)
    with pytest.raises(kernarg.NoDriverError):
        _ = k.attributes
    with pytest.raises(kernarg.NoDriverError):
        k.max_active_blocks_per_sm((16, 16), shmem=1024)
    with pytest.raises(ValueError, match="block"):      # the shape is checked first
        k.max_active_blocks_per_sm((64, 64))
    with pytest.raises(kernarg.NoDriverError):
        k.max_potential_block_size()
    # The occupancy of clusters and shared memory: values checked first, as a launch's are.
    for call in (lambda: k.available_shmem(32), lambda: k.available_shmem(32, np.int64(4)),
                 lambda: k.max_active_clusters(4, 32, cluster=2, shmem=1024),
                 lambda: k.max_potential_cluster_size(4, 32, non_portable=True)):
        with pytest.raises(kernarg.NoDriverError):
            call()
    for call, exc, fragment in (
            (lambda: k.available_shmem(2048), ValueError, "block"),
            (lambda: k.available_shmem(32, 0), ValueError, "blocks_per_sm must be from 1"),
            (lambda: k.available_shmem(32, 2**31), ValueError, "blocks_per_sm must be from 1"),
            (lambda: k.available_shmem(32, 1.5), TypeError, "blocks_per_sm must be an int"),
            (lambda: k.available_shmem(32, True), TypeError, "blocks_per_sm must be an int"),
            (lambda: k.max_active_clusters(3, 32, cluster=2), ValueError,
             "not a multiple of cluster"),
            (lambda: k.max_active_clusters(4, 32, cluster=2, shmem=-1), ValueError, "shmem"),
            (lambda: k.max_potential_cluster_size(0, 32), ValueError, r"grid\[0\] is 0"),
            (lambda: k.max_potential_cluster_size(4, 32, non_portable=1), TypeError,
             "non_portable must be True or False, got 1")):
        with pytest.raises(exc, match=fragment):
            call()
    with pytest.raises(kernarg.NoDriverError):
        k.max_potential_block_size(lambda threads: 4 * threads, block_limit=256)
    # The launch benchmark's probe of the per-launch driver calls needs the driver too.
    from kernarg._launch import _launch_extras_ns

    with pytest.raises(kernarg.NoDriverError):
        _launch_extras_ns(None, 10)


def test_max_potential_block_size_checks_its_arguments_first():
    k = kernarg.Kernel.from_handle(0x1234)
    for bad in (-1, 2**32):
        with pytest.raises(ValueError, match=rf"max_potential_block_size: shmem .* got {bad}"):
            k.max_potential_block_size(bad)
    for bad in (1.5, "4", True, None):
        with pytest.raises(TypeError, match="or a function of the block size"):
            k.max_potential_block_size(bad)
    for bad in (-32, 2**31, 2**64):
        with pytest.raises(ValueError, match=r"max_potential_block_size: block_limit must be "
                                             rf"between 0 .* and 2\*\*31-1, got {bad}"):
            k.max_potential_block_size(0, bad)
    for bad in (1.5, "4", True, None, np.float32(64)):
        with pytest.raises(TypeError, match="max_potential_block_size: block_limit must be an "
                                            f"int, got {type(bad).__name__}"):
            k.max_potential_block_size(0, bad)
    if not HAS_DRIVER:      # a numpy int passes the checks, as for the other values
        with pytest.raises(kernarg.NoDriverError):
            k.max_potential_block_size(0, np.int32(64))


def test_get_global_needs_the_kernels_module():
    """A kernel made from a handle has no module kernarg knows: said before any driver call."""
    k = kernarg.Kernel.from_handle(0x1234, name="k")
    with pytest.raises(ValueError, match=r"get_global\('table'\): kernel 'k' was made with "
                                         "from_handle"):
        k.get_global("table")
    with pytest.raises(TypeError):
        k.get_global(b"table")


def test_namespace_scope_variables_are_found_by_their_itanium_names():
    from kernarg._launch import _mangled_variable

    assert _mangled_variable("ns::bias") == "_ZN2ns4biasE"
    assert _mangled_variable("outer::inner::table") == "_ZN5outer5inner5tableE"
    # Global-scope names are their own; templates and odd names are left to the caller.
    for name in ("bias", "ns::t<int>", "::bias", "ns::", "ns::\u00e9t\u00e9"):
        assert _mangled_variable(name) is None, name


def test_from_handle_rejects_null():
    with pytest.raises(ValueError, match="not a kernel handle"):
        kernarg.Kernel.from_handle(0)
    with pytest.raises(TypeError):
        kernarg.Kernel()


def test_info_command_runs_without_a_gpu(tmp_path):
    env = {**os.environ, "KERNARG_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "kernarg", "info"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "default stream" in out.stdout
    assert f"compilation cache on disk: {tmp_path} (KERNARG_CACHE_DIR)\n" in out.stdout
    from kernarg._nvrtc import nvrtc_version, supported_archs

    major, minor = nvrtc_version()
    assert f"NVRTC {major}.{minor} (machine code for sm_{supported_archs()[0]} .. " in out.stdout
    if not HAS_DRIVER:
        assert "no CUDA driver/GPU found" in out.stdout
    # The build records the cuda-bindings it compiled against; here that is the running one.
    from importlib.metadata import version

    running = version("cuda-bindings")
    assert f"cuda-bindings {running}; kernarg's launcher built against {running}\n" in out.stdout


def test_info_says_which_newer_keywords_the_driver_takes():
    # The driver line of `python -m kernarg info`: the keywords a driver's version decides.
    from kernarg.__main__ import _driver_keywords

    assert _driver_keywords(13020) == ("takes the launch keywords of newer drivers "
                                       "device_updatable, nvlink_util_centric, "
                                       "cluster_size_mode, shmem_mode")
    assert _driver_keywords(13000) == ("takes the launch keywords of newer drivers "
                                       "device_updatable, nvlink_util_centric; too old for "
                                       "cluster_size_mode (CUDA 13.2+), shmem_mode (CUDA 13.2+)")
    assert _driver_keywords(12080).startswith("takes the launch keywords of newer drivers "
                                              "device_updatable; too old for "
                                              "nvlink_util_centric (CUDA 13.0+), ")
    assert _driver_keywords(12030).startswith("too old for device_updatable (CUDA 12.4+), ")


def test_cuda_error_carries_name():
    e = kernarg.CudaError("cuX failed: CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_INVALID_VALUE", 1)
    assert e.name == "CUDA_ERROR_INVALID_VALUE" and e.code == 1
    assert issubclass(kernarg.NoDriverError, kernarg.CudaError)


def test_kernarg_module_has_no_getattr_hook():
    # A module-level __getattr__ stops CPython 3.11 from specialising attribute loads on the
    # module, which made every `kernarg.pack(...)` call pay a dictionary lookup chain.
    assert "__getattr__" not in vars(kernarg)


def test_packing_works_when_the_launch_layer_cannot_import():
    code = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "kernarg._launch":
            raise ImportError("simulated: cydriver ABI mismatch")
sys.meta_path.insert(0, Block())
import kernarg
assert bytes(kernarg.pack((1,))) == (1).to_bytes(8, "little")
for use in (lambda: kernarg.Kernel.from_source, lambda: kernarg.LaunchConfig(1, 1)):
    try:
        use()
    except ImportError as exc:
        assert "simulated: cydriver ABI mismatch" in str(exc), exc
    else:
        raise AssertionError("no ImportError")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_untyped_packs_are_checked_against_the_drivers_parameter_layout():
    import numpy as np

    from kernarg._launch import check_layout

    layout = ((0, 8), (8, 4), (12, 4))          # float* out, float alpha, int n
    check_layout(kernarg.pack((None, np.float32(2), np.int32(3))), layout, "saxpy")
    with pytest.raises(TypeError, match=r"argument 1 \(float\) packs as 8 bytes at offset 8, "
                                        r"but saxpy's parameter 1 is 4 bytes at offset 8"):
        check_layout(kernarg.pack((None, 2.0, np.int32(3))), layout, "saxpy")
    with pytest.raises(TypeError, match="saxpy takes 3 arguments, got 2"):
        check_layout(kernarg.pack((None, np.float32(2))), layout, "saxpy")
    with pytest.raises(TypeError, match="argument 2 .* at offset 16"):
        check_layout(kernarg.pack((None, np.float32(2), 3)), layout, "saxpy")


_DIM = st.one_of(st.integers(-3, 2**31 + 3), st.booleans(), st.floats(0, 4),
                 st.sampled_from([2**30 - 1, 2**30, 2**30 + 1, 65535, 65536, 1024, 1025, 64, 65]),
                 st.integers(-3, 2**31 + 3).map(np.int64), st.booleans().map(np.bool_))
_DIMS = st.one_of(_DIM, st.lists(_DIM, min_size=0, max_size=4).map(tuple),
                  st.lists(_DIM, min_size=1, max_size=3))


def _reference(grid, block, shmem):
    """LaunchConfig's rules, from the pure-Python checker the C fast path must agree with."""
    from kernarg._launch import _BLOCK_LIMITS, _GRID_LIMITS, _dims

    g = _dims(grid, "grid", _GRID_LIMITS)
    b = _dims(block, "block", _BLOCK_LIMITS)
    if b[0] * b[1] * b[2] > 1024:
        raise ValueError("threads")
    if isinstance(shmem, (bool, np.bool_)) or not isinstance(shmem, (int, np.integer)) \
            or not 0 <= shmem < 2**32:
        raise ValueError("shmem")
    return g, b, int(shmem)


@settings(max_examples=400, deadline=None)
@given(_DIMS, _DIMS, st.one_of(st.integers(-1, 2**32), st.booleans(),
                               st.integers(-1, 2**32).map(np.int64)))
def test_fast_dimension_checks_agree_with_the_reference(grid, block, shmem):
    try:
        expected = _reference(grid, block, shmem)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            kernarg.LaunchConfig(grid, block, shmem=shmem)
        with pytest.raises(type(exc)):
            kernarg.Kernel.from_handle(0x1234).launch(grid, block, shmem=shmem)
        return
    cfg = kernarg.LaunchConfig(grid, block, shmem=shmem)
    assert (cfg.grid, cfg.block, cfg.shmem) == expected


def test_from_source_cache_is_bounded_and_keeps_the_most_recently_used(monkeypatch):
    from kernarg import _launch

    monkeypatch.setattr(_launch, "_source_cache", type(_launch._source_cache)())
    monkeypatch.setattr(_launch, "SOURCE_CACHE_SIZE", 3)
    built = []

    def get(key):
        return _launch._source_cache_get(key, lambda: built.append(key) or key * 10)

    assert [get(k) for k in (1, 2, 3, 1, 4)] == [10, 20, 30, 10, 40]   # 1 used again: 2 goes
    assert built == [1, 2, 3, 4] and list(_launch._source_cache) == [3, 1, 4]
    assert get(2) == 20 and built[-1] == 2 and list(_launch._source_cache) == [1, 4, 2]


def test_from_source_cache_hit_survives_another_thread_dropping_the_entry(monkeypatch):
    # A hit reads the entry, then marks it used. Where another thread can run in between (a
    # free-threaded CPython; under the GIL no bytecode runs there) and drops the entry (its
    # own compilations filling the cache), the value read is still the compilation: before,
    # marking it used raised KeyError out of Kernel.from_source.
    from collections import OrderedDict

    from kernarg import _launch

    class DroppedAfterRead(OrderedDict):
        def get(self, key, default=None):
            value = super().get(key, default)
            self.pop(key, None)         # what the other thread's eviction does meanwhile
            return value

    monkeypatch.setattr(_launch, "_source_cache", DroppedAfterRead(((1, 10),)))
    assert _launch._source_cache_get(1, lambda: pytest.fail("built again")) == 10


MULTI = r"""
extern "C" __global__ void plain(float* out, int n) { if (threadIdx.x < n) out[threadIdx.x] = 1; }
__global__ void cpp(double* out, short s) { out[0] = s; }
template <typename T> __global__ void fill(T* out, T v) { out[threadIdx.x] = v; }
namespace ns { __global__ void inner(char c) {} }
"""


@pytest.fixture
def nvrtc_runs(monkeypatch):
    """An empty compilation cache, and the name expressions of every NVRTC run after it."""
    import kernarg._nvrtc as nvrtc
    from kernarg import _launch

    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    monkeypatch.setattr(_launch, "_source_cache", type(_launch._source_cache)())
    monkeypatch.delenv("KERNARG_CACHE_DIR", raising=False)      # no disk cache unless asked
    runs = []
    real = nvrtc.compile_program
    monkeypatch.setattr(nvrtc, "compile_program",
                        lambda *a, **kw: runs.append(kw["name_expressions"]) or real(*a, **kw))
    return runs


def test_kernels_of_one_source_share_one_compilation(nvrtc_runs):
    """Kernel.from_source's compile step (run here for a fixed architecture, as it needs no
    driver): every plain-named kernel of a source comes from one NVRTC run; a template
    instantiation or qualified name, which NVRTC is asked for by name, from its own; each
    kernel gets its own entry and signature."""
    from kernarg import _launch

    runs = nvrtc_runs

    def kernel(name, options=()):
        key, compiled = _launch._compile_for(MULTI, (name,), options, "compute_80")
        return key, compiled, *compiled.kernel(name)

    key, compiled, entry, sig = kernel("plain")
    assert (entry, sig.types) == ("plain", ("float*", "int"))
    key2, compiled2, entry, sig = kernel("cpp")
    assert (entry, sig.types) == ("_Z3cppPds", ("double*", "short"))
    assert key2 == key and compiled2 is compiled and runs == [()]

    _, t_float, entry, sig = kernel("fill<float>")
    assert (entry, sig.types) == ("_Z4fillIfEvPT_S0_", ("float*", "float"))
    _, t_int, entry, sig = kernel("fill<int>")
    assert (entry, sig.types) == ("_Z4fillIiEvPT_S0_", ("int*", "int"))
    _, inner, entry, sig = kernel("ns::inner")
    assert (entry, sig.types) == ("_ZN2ns5innerEc", ("char",))
    assert runs == [(), ("fill<float>",), ("fill<int>",), ("ns::inner",)]
    assert len({id(c) for c in (compiled, t_float, t_int, inner)}) == 4

    # Asked again: nothing compiled, the same entry and Signature object.
    assert kernel("fill<float>")[1] is t_float and kernel("plain")[3] is compiled.kernel("plain")[1]
    assert len(runs) == 4
    # A name the source lacks is a LookupError naming it, and spoils nothing cached.
    with pytest.raises(LookupError, match="'missing'"):
        kernel("missing")
    assert kernel("cpp")[2] == "_Z3cppPds" and len(runs) == 4
    # Other options or another architecture: another run.
    kernel("plain", ("-lineinfo",))
    _launch._compile_for(MULTI, ("plain",), (), "compute_90")
    assert len(runs) == 6


def test_kernel_from_source_evaluates_defaults_with_one_more_compilation(nvrtc_runs):
    # Kernel.from_source's compile step (no driver needed): a kernel whose defaults are all
    # literals costs no second compilation; one with a macro default costs one.
    from kernarg import _launch

    def kernel(source):
        _, compiled = _launch._compile_for(source, ("k",), (), "compute_80")
        return compiled.kernel("k")[1]

    assert kernel('extern "C" __global__ void k(int* p, int n = 4) {}').defaults == {1: 4}
    assert len(nvrtc_runs) == 1
    sig = kernel('#define N 64\nextern "C" __global__ void k(int* p, int n = N) {}')
    assert sig.defaults == {1: 64} and len(nvrtc_runs) == 3


def test_many_kernels_of_a_source_in_one_compilation(nvrtc_runs):
    """Kernel.from_source_many's compile step: plain names, template instantiations and
    qualified names of one source from one NVRTC run, each with its own entry and signature;
    the same names again (in any order, repeated) compile nothing."""
    from kernarg import _launch

    runs = nvrtc_runs
    names = ("fill<float>", "plain", "ns::inner", "fill<int>", "cpp")
    key, compiled = _launch._compile_for(MULTI, names, (), "compute_80")
    assert runs == [("fill<float>", "fill<int>", "ns::inner")]
    got = {n: (compiled.kernel(n)[0], compiled.kernel(n)[1].types) for n in names}
    assert got == {"fill<float>": ("_Z4fillIfEvPT_S0_", ("float*", "float")),
                   "plain": ("plain", ("float*", "int")),
                   "ns::inner": ("_ZN2ns5innerEc", ("char",)),
                   "fill<int>": ("_Z4fillIiEvPT_S0_", ("int*", "int")),
                   "cpp": ("_Z3cppPds", ("double*", "short"))}
    again = _launch._compile_for(MULTI, names[::-1] + ("plain",), (), "compute_80")
    assert again == (key, compiled) and len(runs) == 1
    # A name expression the source cannot instantiate fails the run, naming it.
    with pytest.raises(kernarg.NvrtcError, match="missing<int>"):
        _launch._compile_for(MULTI, ("plain", "missing<int>"), (), "compute_80")


def test_in_memory_headers_are_part_of_the_compilation(nvrtc_runs):
    from kernarg import _launch
    from kernarg._nvrtc import normalize_headers

    src = '#include "k.cuh"\n'
    one = normalize_headers({"k.cuh": 'extern "C" __global__ void k(int* out, short s) {}'})
    two = normalize_headers({"k.cuh": 'extern "C" __global__ void k(double* out) {}'})
    _, first = _launch._compile_for(src, ("k",), (), "compute_80", one)
    assert first.kernel("k")[1].names == ("out", "s")
    assert _launch._compile_for(src, ("k",), (), "compute_80", one)[1] is first
    _, second = _launch._compile_for(src, ("k",), (), "compute_80", two)     # another header
    assert second.kernel("k")[1].types == ("double*",) and len(nvrtc_runs) == 2
    assert normalize_headers({"b.h": "", "a.h": "x"}) == (("a.h", "x"), ("b.h", ""))
    assert normalize_headers(None) == () and normalize_headers(one) == one
    with pytest.raises(TypeError, match="pairs"):
        normalize_headers((("a.h",),))


def test_disk_cache_keeps_compilations_across_processes(nvrtc_runs, monkeypatch, tmp_path):
    """With KERNARG_CACHE_DIR, a compilation is written once and read back by any process:
    here by this one with its memory cache emptied, and by a child process; what is read back
    is what NVRTC gave. Another key (options, names) compiles."""
    import json
    import subprocess
    import sys

    from kernarg import _launch

    monkeypatch.setenv("KERNARG_CACHE_DIR", str(tmp_path / "cache"))
    names = ("plain", "fill<float>")
    _, compiled = _launch._compile_for(MULTI, names, (), "compute_80")
    assert len(nvrtc_runs) == 1
    files = list((tmp_path / "cache").glob("*.json"))
    assert len(files) == 1 and not list((tmp_path / "cache").glob(".tmp-*"))
    stored = json.loads(files[0].read_text())
    from kernarg._nvrtc import target_arch

    assert stored["key"]["source"] == MULTI and stored["key"]["arch"] == target_arch(80)

    monkeypatch.setattr(_launch, "_source_cache", type(_launch._source_cache)())
    _, again = _launch._compile_for(MULTI, names[::-1], (), "compute_80")
    assert len(nvrtc_runs) == 1 and again is not compiled
    assert (again.ptx, again.cubin, again.lowered) == \
        (compiled.ptx, compiled.cubin, compiled.lowered)
    assert again.kernel("fill<float>")[1].types == ("float*", "float")

    # Another process (no NVRTC run there: its compile_program would raise).
    child = subprocess.run([sys.executable, "-c", f"""if 1:
        import kernarg._nvrtc as nvrtc
        from kernarg import _launch
        def refuse(*a, **kw):
            raise AssertionError("compiled")
        nvrtc.compile_program = refuse
        _, c = _launch._compile_for({MULTI!r}, ("plain", "fill<float>"), (), "compute_80")
        print(c.kernel("plain")[1].types, c.lowered)
        """], capture_output=True, text=True, timeout=120,
        env={**os.environ, "KERNARG_CACHE_DIR": str(tmp_path / "cache")})
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == \
        "('float*', 'int') {'fill<float>': '_Z4fillIfEvPT_S0_'}"

    # Machine code (sm_*) is kept too; other options, names or architectures are other files.
    from kernarg._nvrtc import compile_program_cached, supported_archs

    sm = f"sm_{supported_archs()[-1]}"
    first = compile_program_cached(MULTI, arch=sm)
    assert first.cubin and compile_program_cached(MULTI, arch=sm).cubin == first.cubin
    _launch._compile_for(MULTI, names, ("-lineinfo",), "compute_80")
    _launch._compile_for(MULTI, ("plain",), (), "compute_80")
    assert len(nvrtc_runs) == 4 and len(list((tmp_path / "cache").glob("*.json"))) == 4
    # In-memory headers are part of the key: another text, another file.
    for text in (MULTI, MULTI + "// changed\n", MULTI):
        compile_program_cached('#include "m.cuh"\n', arch="compute_80", headers={"m.cuh": text})
    assert len(nvrtc_runs) == 6 and len(list((tmp_path / "cache").glob("*.json"))) == 6


def test_disk_cache_survives_bad_files_and_unwritable_directories(nvrtc_runs, monkeypatch,
                                                                  tmp_path):
    import json

    from kernarg._nvrtc import compile_program_cached

    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNARG_CACHE_DIR", str(cache))
    good = compile_program_cached(MULTI, arch="compute_80")
    (path,) = cache.glob("*.json")
    # A corrupt file, one of another key under this name, a directory: each compiles again
    # (and a corrupt file is replaced by a good one).
    other_key = json.dumps({"key": {"source": "other"}, "ptx": "x", "lowered": {}, "cubin": None})
    for bad in ("{not json", other_key, "[1, 2]"):
        path.write_text(bad)
        assert compile_program_cached(MULTI, arch="compute_80") == good
    assert len(nvrtc_runs) == 4
    assert compile_program_cached(MULTI, arch="compute_80") == good and len(nvrtc_runs) == 4
    # A cache directory that cannot be made: a warning naming it, and the compilation.
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KERNARG_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write the compilation cache in .*file"):
        assert compile_program_cached(MULTI, arch="compute_80") == good
    # A write that fails half-way (a full disk): the warning, and no temporary file left.
    import kernarg._nvrtc as nvrtc

    monkeypatch.setenv("KERNARG_CACHE_DIR", str(tmp_path / "full"))

    def disk_full(data, f):
        f.write("{")
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(nvrtc.json, "dump", disk_full)
        with pytest.warns(RuntimeWarning, match="No space left on device"):
            assert compile_program_cached(MULTI, arch="compute_80") == good
    assert list((tmp_path / "full").iterdir()) == []
    # A key that cannot be made (NVRTC's version unreadable): compiled, uncached.
    with monkeypatch.context() as m:
        m.setattr(nvrtc, "nvrtc_version", lambda: 1 / 0)
        assert compile_program_cached(MULTI, arch="compute_80") == good
    assert list((tmp_path / "full").iterdir()) == []
    # Unset or empty: no cache.
    monkeypatch.setenv("KERNARG_CACHE_DIR", "")
    compile_program_cached(MULTI, arch="compute_80")
    assert len(nvrtc_runs) == 8


def test_from_source_many_refuses_a_str_or_non_str_names():
    with pytest.raises(TypeError, match="not one str"):
        kernarg.Kernel.from_source_many(MULTI, "plain")
    with pytest.raises(TypeError, match="kernel names are str, got int"):
        kernarg.Kernel.from_source_many(MULTI, ["plain", 3])


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_kernel_name_is_refused_before_nvrtc_or_the_driver(name):
    # It reached NVRTC as a name expression, whose error ("expected an expression" in
    # __nv_name_map) named no kernel.
    with pytest.raises(ValueError, match=rf"must name a kernel, got {name!r}$"):
        kernarg.Kernel.from_source(MULTI, name)
    with pytest.raises(ValueError, match=rf"must name a kernel, got {name!r}$"):
        kernarg.Kernel.from_source_many(MULTI, ["plain", name])
    with pytest.raises(ValueError, match=rf"must name a kernel, got {name!r}$"):
        kernarg.Signature.from_source(MULTI, name)


ARCH_SPECIFIC = r"""
#if defined(__CUDA_ARCH_SPECIFIC__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ARCH_VALUE 2
#else
#define ARCH_VALUE 1
#endif
__device__ int arch_specific = ARCH_VALUE;
extern "C" __global__ void arch_value(int* out, int v = ARCH_VALUE + 40) { out[0] = v; }
"""


@pytest.mark.parametrize("options", [("-arch=sm_90a",), ("--gpu-architecture=sm_90a",),
                                     ("-arch", "sm_90a"), (b"--gpu-architecture", b"sm_90a"),
                                     ("-lineinfo", "-arch=sm_90a ", "-arch=sm_90a")])
def test_from_source_compiles_for_the_architecture_the_options_name(nvrtc_runs, options):
    """Kernel.from_source's compile step, for a device of compute capability 9.0: an
    architecture in the options (sm_90a, for features of that GPU alone: wgmma, setmaxnreg) is
    what NVRTC compiles for, and its machine code is what is loaded; the default arguments
    are evaluated for it too. It was overridden by the device's plain sm_90, appended after
    it, so such a kernel compiled without its architecture's features, or not at all."""
    from kernarg import _launch

    _, compiled = _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), options, "compute_90")
    assert re.search(r"^\.target sm_90a$", compiled.ptx, re.M)
    assert compiled.cubin is not None and compiled.cubin[:4] == b"\x7fELF"
    assert re.search(r"arch_specific = 2;", compiled.ptx)
    assert compiled.kernel("arch_value")[1].defaults == {1: 42}
    # PTX of that architecture, for the driver to compile.
    _, ptx_only = _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-arch=compute_90a",),
                                       "compute_90")
    assert ptx_only.cubin is None and re.search(r"arch_specific = 2;", ptx_only.ptx)
    # Without one: the device's own, sm_90.
    _, plain = _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-lineinfo",), "compute_90")
    assert re.search(r"^\.target sm_90$", plain.ptx, re.M) and plain.cubin is not None
    assert re.search(r"arch_specific = 1;", plain.ptx)
    assert plain.kernel("arch_value")[1].defaults == {1: 41}


@pytest.mark.parametrize("arch, device, message", [
    ("compute_90", 0, r"'sm_80' makes code that device 0 \(compute capability 9\.0\) cannot "
                      r"load; name one it runs, such as 'sm_90' or 'sm_90a', or leave it out"),
    ("compute_100", 1, r"'sm_80' makes code that device 1 \(compute capability 10\.0\)"),
    ("compute_75", None, r"'sm_80' makes code that the device \(compute capability 7\.5\) "
                         r"cannot load; name one it runs, such as 'sm_75', or"),
])
def test_an_architecture_the_device_cannot_load_is_refused_before_nvrtc(nvrtc_runs, arch,
                                                                       device, message):
    from kernarg import _launch

    with pytest.raises(ValueError, match=message):
        _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-arch=sm_80",), arch, (), device)
    with pytest.raises(ValueError, match="'lto_90' is not one whose code from_source can load"):
        _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-arch=lto_90",), arch)
    assert nvrtc_runs == []
    # Machine code of an earlier minor version of the same major one loads, as PTX of any
    # earlier version does.
    _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-arch=sm_80",), "compute_86")
    _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), ("-arch=compute_75",), "compute_90")
    assert len(nvrtc_runs) == 2


@pytest.mark.parametrize("options, message", [
    (("-arch=sm_90", "--gpu-architecture=sm_90a"),
     r"more than one target architecture \('-arch=sm_90', '--gpu-architecture=sm_90a'\): "
     "NVRTC would compile for the last alone"),
    (("-lineinfo", "-arch"), "'-arch' is the last option: it must be followed by an arch"),
])
def test_unclear_architecture_options_are_refused_before_the_driver(options, message):
    # NVRTC takes the last of two architectures without a word.
    with pytest.raises(ValueError, match=message):
        kernarg.Kernel.from_source(ARCH_SPECIFIC, "arch_value", options)
    with pytest.raises(ValueError, match=message):
        kernarg.Kernel.from_source_many(ARCH_SPECIFIC, ["arch_value"], options)


@pytest.mark.parametrize("arch, cc, runs", [
    ("sm_90", (9, 0), True), ("sm_90", (9, 1), True), ("sm_80", (8, 6), True),
    ("sm_86", (8, 0), False), ("sm_80", (9, 0), False), ("sm_90", (10, 0), False),
    ("sm_90a", (9, 0), True), ("sm_100a", (10, 3), False), ("compute_90a", (9, 0), True),
    ("compute_90a", (10, 0), False),
    ("sm_100f", (10, 0), True), ("sm_100f", (10, 3), True), ("sm_103f", (10, 0), False),
    ("sm_100f", (12, 0), False), ("compute_120f", (12, 1), True),
    ("compute_75", (7, 5), True), ("compute_75", (12, 1), True), ("compute_90", (8, 9), False),
    ("lto_90", (9, 0), None), ("sm_90b", (9, 0), None), ("native", (9, 0), None),
    ("sm_9", (9, 0), None),
])
def test_arch_runs_on_follows_cudas_compatibility_rules(arch, cc, runs):
    from kernarg._nvrtc import arch_runs_on

    assert arch_runs_on(arch, cc) is runs


def test_split_arch_option_reads_each_form_nvrtc_takes():
    from kernarg._nvrtc import split_arch_option

    assert split_arch_option(()) == (None, ())
    assert split_arch_option(("-lineinfo",)) == (None, ("-lineinfo",))
    assert split_arch_option(("-arch=sm_90a", "-lineinfo")) == ("sm_90a", ("-lineinfo",))
    assert split_arch_option(("-G", "-arch", "sm_90a", "-lineinfo")) == \
        ("sm_90a", ("-G", "-lineinfo"))
    assert split_arch_option((b"--gpu-architecture=compute_90",)) == ("compute_90", ())
    # The same one twice is one; options that only begin alike are other options.
    assert split_arch_option(("-arch=sm_90", "-arch=sm_90")) == ("sm_90", ())
    assert split_arch_option(("-arch-ls",)) == (None, ("-arch-ls",))


_OPTION_WORDS = ["-arch", "--gpu-architecture", "-arch=sm_90", "-arch=sm_90a", "sm_90",
                 "sm_90a", "--gpu-architecture=compute_90", "-lineinfo", "-G", "-arch-x",
                 b"-arch", b"sm_90", b"-arch=sm_90", "-arch=", "--gpu-architecture= sm_90"]


@given(st.lists(st.sampled_from(_OPTION_WORDS), max_size=6))
@settings(max_examples=400, deadline=None)
def test_split_arch_option_keeps_every_other_option_in_order(options):
    from kernarg._nvrtc import split_arch_option

    def text(o):
        return o.decode() if isinstance(o, bytes) else o

    options = tuple(options)
    try:
        named, rest = split_arch_option(options)
    except ValueError as exc:
        # Two different architectures, or a flag with nothing after it.
        assert "more than one target architecture" in str(exc) or "is the last option" in str(exc)
        return
    arch_like = [o for o in options if text(o).partition("=")[0] in ("-arch",
                                                                     "--gpu-architecture")]
    if named is None:
        assert rest == options and not arch_like
    else:
        assert arch_like and all(text(o).partition("=")[0] not in ("-arch", "--gpu-architecture")
                                 for o in rest)
        assert len(rest) <= len(options) - len(arch_like)
        remaining = iter(options)                   # the others, in order: a subsequence
        assert all(any(o is p for p in remaining) for o in rest)


def test_compile_program_gives_machine_code_for_an_architecture_in_the_options():
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._nvrtc import compile_program

    src = 'extern "C" __global__ void k(int* p) { p[0] = 1; }'
    c = compile_program(src, options=("-arch=sm_90a",))
    assert c.cubin is not None and re.search(r"^\.target sm_90a$", c.ptx, re.M)
    assert compile_program(src, options=("-arch=sm_90",), arch="sm_90").cubin is not None
    with pytest.raises(ValueError, match="options name the architecture 'sm_90a' and arch is "
                                         "'sm_90': give one"):
        compile_program(src, options=("-arch=sm_90a",), arch="sm_90")
    sig = kernarg.Signature.from_source(ARCH_SPECIFIC, "arch_value", ("-arch=sm_90a",))
    assert sig.defaults == {1: 42}


@pytest.mark.parametrize("option", ["-dlto", "--dlink-time-opt"])
def test_options_that_make_no_ptx_are_named(option):
    # With -dlto NVRTC gives LTO IR, and empty PTX and CUBIN: from_source said the kernel was
    # "not found in the PTX (entries: [])".
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg import _launch

    with pytest.raises(kernarg.NvrtcError, match=rf"gave no PTX: '{option}' asks for link-time "
                                                 "optimisation IR, which no module load takes"):
        _launch._compile_for(ARCH_SPECIFIC, ("arch_value",), (option,), "compute_90")


def test_nvrtc_writes_its_output_into_memory_of_its_own():
    # The PTX was fetched into b" " * size: with -dlto its size is 1 (a NUL), and CPython's
    # one-byte bytes are shared, so NVRTC wrote a NUL into the interpreter's b" ".
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._nvrtc import compile_program

    try:
        compile_program('extern "C" __global__ void k() {}', options=("-dlto",))
    except kernarg.NvrtcError:
        pass
    assert bytes([0x20])[0] == 0x20


def test_from_handle_takes_ints_handle_objects_and_cuda_core_kernels():
    """Without a device nothing touches the driver: the handle is only read."""
    class GetPtrOnly:               # a handle object that has no __int__, only getPtr()
        def getPtr(self):
            return 0x5000

    CoreKernel = type("Kernel", (), {"__module__": "cuda.core._module",
                                     "__init__": lambda self: setattr(self, "_handle", 0x6000)})
    assert kernarg.Kernel.from_handle(0x4000).handle == 0x4000
    assert kernarg.Kernel.from_handle(GetPtrOnly()).handle == 0x5000
    k = kernarg.Kernel.from_handle(CoreKernel(), signature="float* x, int n", name="saxpy")
    assert k.handle == 0x6000 and k.module_handle is None and k.device == -1
    assert repr(k) == "<kernarg.Kernel saxpy signature=kernarg.Signature('float* x, int n')>"
    # int() would make a number of a float (numpy's too), a numeric str, a bool or anything
    # with __int__: none is a handle (a float32 1.0 was launched as the CUfunction at 0x1).
    IntOnly = type("IntOnly", (), {"__int__": lambda self: 0x4000})
    for bad in (object(), "saxpy", -1, 2**64, 1.5, 4096.0, "4096", True, np.True_, 1 + 0j,
                np.float32(1.0), np.float16(4096), np.complex64(1), Decimal(4096),
                Fraction(4096, 1), IntOnly(), np.array([4096])):
        with pytest.raises(ValueError, match="is not a kernel handle"):
            kernarg.Kernel.from_handle(bad)
    assert kernarg.Kernel.from_handle(np.uint64(0x7000)).handle == 0x7000


def test_kernel_constructors_check_their_arguments_before_the_driver():
    # Each refusal names what was wrong; none needs a driver (CI has none).
    src = 'extern "C" __global__ void k(int n) {}'
    core_device = type("Device", (), {"__module__": "cuda.core._device", "device_id": -1})()
    for bad in ("cuda:0", 1.5, True, np.True_, -1, 2**31, None, core_device):
        for make in (lambda d: kernarg.Kernel.from_source(src, "k", device=d),
                     lambda d: kernarg.Kernel.from_source_many(src, ["k"], device=d),
                     lambda d: kernarg.Kernel.from_ptx(".version 8.0", "k", device=d),
                     lambda d: kernarg.Kernel.from_cubin(b"\x7fELF", "k", device=d)):
            with pytest.raises(TypeError, match="device must be a CUDA device ordinal "
                               r"\(an int >= 0, a cuda.core or CuPy Device, or a "
                               r"torch.device\('cuda:N'\)\), got "):
                make(bad)
        if bad is not None:
            with pytest.raises(TypeError, match="device must be a CUDA device ordinal"):
                kernarg.Kernel.from_handle(0x4000, device=bad)
    with pytest.raises(TypeError, match="Kernel.from_ptx: ptx must be PTX text "
                       r"\(str or bytes\), got NoneType"):
        kernarg.Kernel.from_ptx(None, "k")
    with pytest.raises(TypeError, match="Kernel.from_cubin: cubin must be the image's bytes, "
                       "got str; PTX text goes to Kernel.from_ptx"):
        kernarg.Kernel.from_cubin(".version 8.0", "k")
    with pytest.raises(TypeError, match="got int$"):
        kernarg.Kernel.from_cubin(0, "k")
    for options, message in ((3, "a sequence of NVRTC option strings, such as "
                                 r"\('-lineinfo',\), got int"),
                             (("-lineinfo", 3), r"option strings, got 3 \(int\) among them")):
        with pytest.raises(TypeError, match=message):
            kernarg.Kernel.from_source(src, "k", options=options)
        with pytest.raises(TypeError, match=message):
            kernarg.Signature.from_source(src, "k", options=options)
    # Texts and names must be str (None made an AttributeError of the compiler's code).
    none = "'{}' has incorrect type .*got NoneType"
    for make, message in (
            (lambda: kernarg.Kernel.from_source(None, "k"), none.format("source")),
            (lambda: kernarg.Kernel.from_source(src, None), none.format("name")),
            (lambda: kernarg.Kernel.from_source_many(None, ["k"]), none.format("source")),
            (lambda: kernarg.Kernel.from_ptx(".version 8.0", None), none.format("name")),
            (lambda: kernarg.Kernel.from_cubin(b"\x7fELF", None), none.format("name")),
            (lambda: kernarg.Kernel.from_source_many(src, 5), "Kernel.from_source_many: names "
             "must be a sequence of kernel names, got int"),
            (lambda: kernarg.Kernel.from_source_many(src, None), "names must be a sequence of "
             "kernel names, got NoneType")):
        with pytest.raises(TypeError, match=message):
            make()
    with pytest.raises(ValueError, match="Kernel.from_ptx: ptx is not PTX text .*utf-8"):
        kernarg.Kernel.from_ptx(memoryview(b".version 8.0 \xff"), "k")


def test_kernel_constructors_read_their_signature_before_the_driver():
    # signature= is a Signature or what Signature() takes, read before anything is loaded:
    # from_ptx kept a str as it was, and its first launch read the str as a Signature (a
    # crash; seen under tools/fakecuda).
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n"
    makers = {"from_ptx": lambda sig: kernarg.Kernel.from_ptx(ptx, "k", signature=sig),
              "from_cubin": lambda sig: kernarg.Kernel.from_cubin(b"\x7fELF", "k",
                                                                  signature=sig),
              "from_handle": lambda sig: kernarg.Kernel.from_handle(0x4000, signature=sig)}
    for who, make in makers.items():
        with pytest.raises(TypeError, match=rf"Kernel.{who}: signature: Signature: params must "
                                            r"be a C parameter list \(a str\) .*got int"):
            make(5)
        with pytest.raises(ValueError, match=rf"Kernel.{who}: signature: 'struct Unknown n': "
                                             "unknown parameter type"):
            make("float* p, struct Unknown n")
    k = kernarg.Kernel.from_handle(0x4000, signature="float* p")
    assert type(k.signature) is kernarg.Signature and k.signature.types == ("float*",)
    sig = kernarg.Signature("float* p")
    assert kernarg.Kernel.from_handle(0x4000, signature=sig).signature is sig


def test_options_may_be_one_str():
    # tuple("-DN=3") would be NVRTC options "-", "D", "N" ...: one str is one option.
    from kernarg._nvrtc import normalize_options

    assert normalize_options("-DWITH_N") == ("-DWITH_N",)
    assert normalize_options(b"-lineinfo") == (b"-lineinfo",)
    assert normalize_options(["-a", "-b"]) == ("-a", "-b")
    src = '#ifndef WITH_N\n#error WITH_N is not defined\n#endif\nextern "C" __global__ ' \
          "void k(int n) {}"
    assert kernarg.Signature.from_source(src, "k", options="-DWITH_N").types == ("int",)
    with pytest.raises(kernarg.NvrtcError, match="WITH_N is not defined"):
        kernarg.Signature.from_source(src, "k")


def _core_config(**fields):
    """A stand-in for a cuda.core LaunchConfig (one with a cluster needs a driver to build)."""
    cls = type("LaunchConfig", (), {"__module__": "cuda.core._launch_config"})
    config = cls()
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def test_launch_reads_cuda_core_configs_as_cuda_core_defines_them():
    from kernarg._launch import _config_from

    own = kernarg.LaunchConfig(2, 32)
    assert _config_from(own) is own
    c = _core_config(grid=(4, 1, 1), block=(32, 2, 1), cluster=None, shmem_size=256,
                     is_cooperative=False, programmatic_stream_serialization=False)
    cfg = _config_from(c)
    assert (cfg.grid, cfg.block, cfg.shmem, cfg.cluster) == ((4, 1, 1), (32, 2, 1), 256, None)
    assert not cfg.cooperative and not cfg.pdl
    assert _config_from(c) is cfg                       # converted once, found again
    c.grid = (8, 1, 1)                                  # cuda.core configs are mutable
    assert _config_from(c).grid == (8, 1, 1)
    c.grid = (8, 1, 1)                                  # equal values, a new tuple
    assert _config_from(c).grid == (8, 1, 1)
    c.shmem_size = None
    assert _config_from(c).shmem == 0
    # A list where cuda.core keeps tuples cannot be a cache key: converted every time.
    listed = _core_config(grid=[2, 1, 1], block=(32, 1, 1), cluster=None, shmem_size=0)
    assert _config_from(listed).grid == (2, 1, 1)
    listed.grid = [5, 1, 1]
    assert _config_from(listed).grid == (5, 1, 1)
    # With a cluster, cuda.core's grid counts clusters: the driver's grid is in blocks.
    cfg = _config_from(_core_config(grid=(3, 2, 1), cluster=(2, 1, 1), block=(64, 1, 1),
                                    shmem_size=None, is_cooperative=False,
                                    programmatic_stream_serialization=True))
    assert (cfg.grid, cfg.cluster, cfg.pdl) == ((6, 2, 1), (2, 1, 1), True)
    assert cfg.attributes == (("cluster_dimension", (2, 1, 1)),
                              ("programmatic_stream_serialization", 1))
    # cuda.core before 1.0 called is_cooperative cooperative_launch.
    cfg = _config_from(_core_config(grid=(4, 1, 1), block=(32, 1, 1), cluster=None,
                                    shmem_size=0, cooperative_launch=True))
    assert cfg.cooperative and cfg.attributes == (("cooperative", 1),)
    with pytest.raises(ValueError, match=r"block \(64, 32, 1\) has 2048 threads"):
        _config_from(_core_config(grid=(1, 1, 1), block=(64, 32, 1)))
    with pytest.raises(ValueError, match=r"cluster\[0\] is 17; it must be between 1 and 16"):
        _config_from(_core_config(grid=(3, 1, 1), block=(32, 1, 1), cluster=(17, 1, 1)))


def test_launch_reads_a_real_cuda_core_config():
    from kernarg._launch import _config_from, _config_values

    core = pytest.importorskip("cuda.core")
    try:
        c = core.LaunchConfig(grid=4, block=(32, 2), shmem_size=256)
    except Exception as exc:                # cuda.core 0.5 asks the driver for its version
        pytest.skip(f"this cuda.core needs a CUDA driver to build a LaunchConfig: {exc!r}")
    cfg = _config_from(c)
    assert (cfg.grid, cfg.block, cfg.shmem, cfg.cluster) == ((4, 1, 1), (32, 2, 1), 256, None)
    assert _config_from(c) is cfg
    c.grid = (8, 1, 1)
    assert _config_from(c).grid == (8, 1, 1)
    assert _config_from(core.LaunchConfig(grid=1, block=1)).shmem == 0
    # A C extension's config (cuda.core's is one) is read through its fields' C getters, not
    # looked up by name: the two must agree, and every change to a field must be seen.
    values, fast = _config_values(c)
    assert values == _config_values(c, by_name=True)[0]
    if not type(c).__flags__ & (1 << 9):        # not a heap type (a Python class)
        assert fast
    c.block, c.shmem_size, c.is_cooperative = (64, 1, 1), 512, True
    cfg = _config_from(c)
    assert (cfg.grid, cfg.block, cfg.shmem, cfg.cooperative) == ((8, 1, 1), (64, 1, 1), 512,
                                                                True)
    c.is_cooperative, c.programmatic_stream_serialization = False, True
    assert _config_from(c).pdl and not _config_from(c).cooperative
    c.cluster = (2, 1, 1)                       # the grid counts clusters now
    assert (_config_from(c).grid, _config_from(c).cluster) == ((16, 1, 1), (2, 1, 1))
    assert _config_values(c)[0] == _config_values(c, by_name=True)[0]
    # The config converted last is found again by the identity of its fields, read each call:
    # two configs of one type in turn are never confused, and a loop holds no more references
    # to the fields than before it.
    other = core.LaunchConfig(grid=3, block=(32, 2), shmem_size=256)
    for _ in range(3):
        assert _config_from(other).grid == (3, 1, 1)
        assert _config_from(c).grid == (16, 1, 1)
    grid = (5, 1, 1)
    c.grid, c.cluster = grid, None
    assert _config_from(c).grid == (5, 1, 1)
    held = sys.getrefcount(grid)
    for _ in range(100):      # shmem_size is 512: its C getter makes a new int every read
        assert _config_from(c).grid == (5, 1, 1)
    assert sys.getrefcount(grid) == held
    assert _config_from(c).shmem == 512
    c.shmem_size = 1024
    assert _config_from(c).shmem == 1024


def _kept_core_configs(grids):
    """cuda.core, and a cuda.core LaunchConfig of 32 threads for each of ``grids``, of a type
    whose configs kernarg keeps (C getters); else the test is skipped, saying why."""
    core = pytest.importorskip("cuda.core")
    try:
        configs = [core.LaunchConfig(grid=g, block=32) for g in grids]
    except Exception as exc:                # cuda.core 0.5 asks the driver for its version
        pytest.skip(f"this cuda.core needs a CUDA driver to build a LaunchConfig: {exc!r}")
    if type(configs[0]).__flags__ & (1 << 9):
        pytest.skip("this cuda.core's LaunchConfig is a Python class: read by name, not kept")
    return core, configs


def test_launch_remembers_the_cuda_core_configs_it_converted():
    """A loop that launches kernels in turn, each with its own cuda.core config, finds each
    config by its fields' identity (no tuple made and hashed): kernarg remembers each config
    converted by its address and by its fields' values (in a set of four slots each, as
    kernels), so a config made anew at each launch is found too; and the four found by value
    or converted last, the last first. Each is still read every call: a config changed is
    converted again."""
    from kernarg._launch import (
        _config_addresses,
        _config_from,
        _config_keys,
        _forget_configs,
        _kernel_slots_of,
        _recent_configs,
    )

    core, configs = _kept_core_configs(range(11, 51))
    # No slot left by a config of the tests before: a config made here at the address of one
    # kept there takes that one's slot again, not its set's next in turn, so that a key alone
    # among this test's in its set could be put out by another (one of five whole-suite runs on
    # 3.14t, its failure not shown; made to fail here by converting and dropping 1-79 configs
    # first: 40 runs in 100, and none after).
    _forget_configs()

    def grids():
        return [cfg.grid[0] if cfg is not None else None for _, cfg in _recent_configs()]

    own = kernarg.LaunchConfig(1, 1)
    converted = [_config_from(c) for c in configs]
    assert [c.grid for c in converted] == [(g, 1, 1) for g in range(11, 51)]
    assert grids() == [50, 49, 48, 47]
    slots = _recent_configs()
    for c, (values, cfg) in zip(configs[:-5:-1], slots, strict=True):
        assert values[0] is c.grid and values[1] is c.block and cfg.grid == (c.grid[0], 1, 1)
    keys = [_config_keys(c) for c in configs]           # (its address, its values' key)
    assert all(by_value % 2 == 1 for _, by_value in keys) and len(set(keys)) == 40
    sets = {}
    for key in (k for pair in keys for k in pair):
        sets.setdefault(_kernel_slots_of(key)[0], []).append(key)
    alone = [i for i, pair in enumerate(keys)
             if all(len(sets[_kernel_slots_of(k)[0]]) <= 4 for k in pair)]
    assert len(alone) >= 20                 # 80 keys over 64 sets: a few share one
    remembered = _config_addresses()
    for i in alone:
        for key in keys[i]:
            assert remembered.index(key) in _kernel_slots_of(key)
    # Found again by address (or by value), none converted (which would put it first of the
    # four): each config with a key still kept (all those alone in their sets, and most
    # others; a few may have had both keys put out by later ones).
    kept = [i for i, pair in enumerate(keys) if any(k in remembered for k in pair)]
    assert set(alone) <= set(kept)
    for _ in range(3):
        for i in kept:
            assert _config_from(configs[i]) is converted[i]
            assert _config_from(own) is own         # kernarg's own: not a slot's
    assert _recent_configs() == slots               # the same four, in the same order
    # A config made anew with the values of one kept is found by its values' key (cuda.core
    # makes new grid and block tuples for each config, and code that makes its config at
    # each launch reads them), none converted.
    for i in alone:
        fresh = core.LaunchConfig(grid=11 + i, block=32)
        assert fresh.grid is not configs[i].grid and fresh.grid == configs[i].grid
        assert _config_keys(fresh)[1] == keys[i][1]
        assert _config_from(fresh) is converted[i]
    assert _recent_configs() == slots
    # A config changed after it was kept is read again: it goes first of the four, and takes
    # its own slot by address again; the one found or converted longest ago (47) is
    # forgotten by value.
    changed = configs[alone[0]]
    where = _config_addresses().index(id(changed))
    grid = changed.grid
    held = sys.getrefcount(grid)
    changed.grid = (71, 1, 1)
    assert _config_from(changed).grid == (71, 1, 1)
    assert grids() == [71, 50, 49, 48]
    assert _config_addresses()[where] == id(changed)
    assert sys.getrefcount(grid) == held - 2        # the config and its slot by address
    assert _config_from(changed).grid == (71, 1, 1)
    # Changed to the values of another kept: that one's config, found by value. Another of
    # those alone in their sets (its value key still kept: which configs those are depends on
    # the configs' addresses), and not in the set that the value key of (71, 1, 1) just took a
    # slot of (which may have put its value key out).
    took = _kernel_slots_of(_config_keys(changed)[1])[0]
    other = next(i for i in alone[1:] if _kernel_slots_of(keys[i][1])[0] != took)
    changed.grid = (11 + other, 1, 1)
    assert _config_from(changed) is converted[other] and grids() == [71, 50, 49, 48]
    # Keeping a config's field values holds references to them; slots refilled drop them.
    extra = core.LaunchConfig(grid=61, block=32)
    grid = extra.grid
    held = sys.getrefcount(grid)
    assert _config_from(extra).grid == (61, 1, 1)
    # its three slots (the four's first, by address, by value) and _foreign_configs' key
    assert sys.getrefcount(grid) == held + 4
    for g in (81, 82, 83, 84):              # values not kept: converted
        _config_from(core.LaunchConfig(grid=g, block=32))
    assert 61 not in grids()
    assert sys.getrefcount(grid) == held + 3
    extra.grid = (62, 1, 1)
    assert _config_from(extra).grid == (62, 1, 1)
    assert sys.getrefcount(grid) == held + 1        # less the config's and its slot's
    # A Python class's config, read by name, is not kept: the slots stay as they are.
    kept, kept_addresses = _recent_configs(), _config_addresses()
    _config_from(_core_config(grid=(2, 1, 1), block=(1, 1, 1), cluster=None, shmem_size=0))
    assert _recent_configs() == kept and _config_addresses() == kept_addresses


def test_forgetting_the_kept_configs_drops_each_reference_its_slots_held():
    """A config of another cuda.core type empties the slots the configs converted are kept
    in (_forget_configs does the same): every reference a slot held, to a config converted
    and to its field values, is dropped, none twice, and the configs are found again after."""
    from kernarg._launch import (
        _config_addresses,
        _config_from,
        _config_keys,
        _forget_configs,
        _recent_configs,
    )

    _, configs = _kept_core_configs(range(211, 221))
    converted = [_config_from(c) for c in configs]

    def slots_holding(i):
        """How many slots hold configs[i]'s conversion: of the last four, by its address, by
        its values' key."""
        recent = sum(cfg is converted[i] for _, cfg in _recent_configs())
        return recent + sum(_config_addresses().count(key) for key in _config_keys(configs[i]))

    held = [slots_holding(i) for i in range(10)]
    assert held[-1] == 3 and sum(held) >= 10        # the last: first of four, by address, by key
    grids = [c.grid for c in configs]

    def counts():       # (not in an assert: pytest's rewriting holds what it evaluates)
        return [(sys.getrefcount(converted[i]), sys.getrefcount(grids[i])) for i in range(10)]

    before = counts()
    _forget_configs()
    assert set(_config_addresses()) == {0}
    assert _recent_configs() == [(None, None)] * len(_recent_configs())
    after = counts()
    assert after == [(cfg - h, grid - h) for (cfg, grid), h in zip(before, held, strict=True)]
    _forget_configs()                               # empty slots: nothing to drop
    after_again = counts()
    assert after_again == after
    # Found again (in the dict of configs converted), and kept again.
    assert [_config_from(c) for c in configs] == converted
    assert all(_config_from(c) is cfg for c, cfg in zip(configs, converted, strict=True))
    assert slots_holding(9) == 3 and id(configs[9]) in _config_addresses()


def test_launch_names_what_it_cannot_take():
    with pytest.raises(TypeError, match="config must be a kernarg.LaunchConfig or a cuda.core "
                                        "LaunchConfig, got tuple"):
        kernarg.launch(None, (1, 1), 0x1234)
    cfg = kernarg.LaunchConfig(1, 1)
    for bad in (object(), 0, "k", np.float32(1.0), Decimal(0x1234), 4660.0):
        with pytest.raises(TypeError, match="kernel must be a kernarg.Kernel, a cuda.core "
                                            f"Kernel or a CUfunction/CUkernel handle, got "
                                            f"{type(bad).__name__}"):
            kernarg.launch(None, cfg, bad)
    with pytest.raises(TypeError, match="stream"):
        kernarg.launch("default", cfg, 0x1234)
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n")
    with pytest.raises(OverflowError, match="'n'"):     # packed before any driver call
        kernarg.launch(None, cfg, k, None, 2**40)
    # kernarg.launch is a fastcall C function, as Kernel.launch is: it parses its keywords
    # itself, as a def of the same signature would.
    import inspect

    assert str(inspect.signature(kernarg.launch)) == "(stream, config, kernel, *args)"
    assert "cuda.core" in kernarg.launch.__doc__
    for call, message in (
            (lambda: kernarg.launch(), "missing required argument 'stream' \\(pos 1\\)"),
            (lambda: kernarg.launch(None, cfg), "missing required argument 'kernel'"),
            (lambda: kernarg.launch(None, kernel=k), "missing required argument 'config'"),
            (lambda: kernarg.launch(None, cfg, k, stream=1), "multiple values for argument "
                                                             "'stream'"),
            (lambda: kernarg.launch(None, cfg, k, n=3), "unexpected keyword argument 'n'")):
        with pytest.raises(TypeError, match=message):
            call()
    with pytest.raises(TypeError, match="takes 2 arguments"):   # read, then packed
        kernarg.launch(kernel=k, config=cfg, stream=None)
    with pytest.raises(OverflowError, match="'n'"):
        kernarg.launch(*[None, cfg, k, None, 2**40])


def _core_kernel(handle, params=None):
    """A stand-in for a cuda.core Kernel: ``_handle``, and ``arguments_info`` (the driver's
    parameter offsets and sizes) when ``params`` is given."""
    from collections import namedtuple

    ParamInfo = namedtuple("ParamInfo", "offset size")
    attrs = {"__module__": "cuda.core._module", "_handle": handle}
    if params is not None:
        attrs["arguments_info"] = [ParamInfo(o, n) for o, n in params]
    return type("Kernel", (), attrs)()


def test_launch_wraps_a_foreign_kernel_once():
    from kernarg._launch import _kernel_for_launch, _last_foreign_addresses

    own = kernarg.Kernel.from_handle(0x1234)
    assert _kernel_for_launch(own) is own
    core = _core_kernel(0x6100)
    first = _kernel_for_launch(core)
    assert first.handle == 0x6100 and first.signature is None and first.device == -1
    assert first.param_layout is None               # no arguments_info: nothing to check
    assert _kernel_for_launch(core) is first        # found again by the object
    # Another object is wrapped on its own: its layout is its own, whatever its address.
    other = _kernel_for_launch(_core_kernel(0x6100, [(0, 8)]))
    assert other is not first and other.param_layout == ((0, 8),)
    # Ints are found by address.
    assert _kernel_for_launch(0x6200) is _kernel_for_launch(0x6200)
    assert _kernel_for_launch(0x6200).handle == 0x6200
    # The object looked up last is remembered by its address until it goes (then forgotten,
    # before the address can be reused): one that takes the address later is another kernel,
    # wrapped on its own.
    cls = type(_core_kernel(0x6500, [(0, 4)]))
    for _ in range(200):
        gone = cls()
        wrapper = _kernel_for_launch(gone)
        assert _kernel_for_launch(gone) is wrapper
        address = id(gone)
        assert address in _last_foreign_addresses()
        del gone
        assert address not in _last_foreign_addresses()
        new = cls()
        # CPython's own allocator often gives the address again (ASan's never does).
        assert id(new) != address or _kernel_for_launch(new) is not wrapper


def in_one_set(make, key=None, count=5):
    """``count`` objects from ``make(i)`` (i = 0, 1, ...) whose keys (``key(obj)``; by default
    an int's value, another object's id) kernarg.launch remembers in one set of four slots
    (_kernel_slots_of); the others made are dropped once it returns. Also for tests/gpu."""
    from kernarg._launch import _kernel_slots_of

    if key is None:
        def key(obj):
            return obj if type(obj) is int else id(obj)
    sets, enough = {}, (count - 1) * 64 + 1     # over 64 sets: one takes `count` by then
    for i in range(enough):
        obj = make(i)
        group = sets.setdefault(_kernel_slots_of(key(obj))[0], [])
        group.append(obj)
        if len(group) == count:
            return group
    raise AssertionError(f"no set of four slots took {count} of {enough}")


def test_the_sets_of_kept_kernels_and_configs_spread_addresses_of_any_stride():
    """Objects allocated side by side (kernels, configs) have addresses in arithmetic
    progression. Their sets of four slots must spread them as random keys would, whatever the
    stride: a Fibonacci hash's top bits alone put 40 keys of stride 144 or 48 in 8 or 9 sets of
    64, and five of sixteen in one set (so a loop of sixteen kernels lost some every turn).
    Sixteen keys in a row: none beyond any set's four (random keys: about one run in 2,000);
    forty: at least 20 sets (random: 29 on average)."""
    from kernarg._launch import _kernel_slots_of

    bases = [0x7F00_0000_0000 + 0x1234_5670 * k for k in range(8)]
    fewest, crowded = [], []
    for stride in [*range(16, 2049, 16), *(2**k for k in range(12, 31))]:
        for base in bases:
            sets = [_kernel_slots_of(base + i * stride)[0] for i in range(40)]
            fewest.append((len(set(sets)), stride))
            if max(sets[:16].count(s) for s in sets[:16]) > 4:
                crowded.append((stride, hex(base)))
    assert min(fewest)[0] >= 20, sorted(fewest)[:5]
    assert crowded == []


def test_launch_remembers_the_foreign_kernels_launched_in_sets_of_four():
    """Foreign kernel objects launched are remembered by address, each in one of four slots of
    a set picked by its address's hash: a loop launching a few dozen cuda.core kernels in turn
    finds each with no dict lookup (and on a free-threaded build with no section). A fifth of
    one set takes the set's oldest slot, and one that goes is forgotten at once. A kernel is
    remembered from its first launch, when it is wrapped."""
    from kernarg._launch import _kernel_for_launch, _kernel_slots_of, _last_foreign_addresses

    cls = type(_core_kernel(0x7000, [(0, 8)]))
    kernels = [cls() for _ in range(40)]
    wrappers = [_kernel_for_launch(k) for k in kernels]     # wrapped and remembered
    assert len({id(w) for w in wrappers}) == 40
    crowded = {}                            # a set given more than four of them keeps four
    for k in kernels:
        crowded.setdefault(_kernel_slots_of(id(k))[0], []).append(k)
    alone = [k for k in kernels if len(crowded[_kernel_slots_of(id(k))[0]]) <= 4]
    assert len(alone) >= 30                 # 40 over 64 sets: a few share one, seldom five
    slots = _last_foreign_addresses()
    for k in alone:
        assert slots.index(id(k)) in _kernel_slots_of(id(k))
    for _ in range(3):
        for k, w in zip(kernels, wrappers, strict=True):
            assert _kernel_for_launch(k) is w
    assert set(id(k) for k in alone) <= set(_last_foreign_addresses())
    # Five in one set: the fifth takes the slot of the first, the oldest.
    five = in_one_set(lambda i: cls())
    first = [_kernel_for_launch(k) for k in five[:4]]
    where = _last_foreign_addresses().index(id(five[0]))
    assert sorted(_last_foreign_addresses().index(id(k)) for k in five[:4]) == list(
        _kernel_slots_of(id(five[0])))
    fifth = _kernel_for_launch(five[4])
    assert _last_foreign_addresses()[where] == id(five[4])
    assert id(five[0]) not in _last_foreign_addresses()
    assert _kernel_for_launch(five[0]) is first[0]          # from the dict: the same wrapper
    assert id(five[0]) in _last_foreign_addresses()         # in the next oldest slot
    assert id(five[1]) not in _last_foreign_addresses()
    assert _kernel_for_launch(five[4]) is fifth
    gone = id(kernels[2])
    del kernels[2], wrappers[2], alone, crowded
    assert gone not in _last_foreign_addresses()


def test_launch_remembers_the_kernel_handles_launched_by_address():
    """A kernel given as a handle (an int, a cuda.bindings CUfunction or CUkernel) is
    remembered by its address, in a set of four slots by the address's hash, from its first
    launch: found again with no dict lookup (and on a free-threaded build with no section),
    the same Kernel whichever kind of handle names the address. A fifth of one set takes the
    set's oldest slot; one launched again after that is found in the dict with no weak
    reference tried. What is not an exact int or such a handle is looked up as before, and a
    bad handle is refused as before."""
    import numpy as np
    from cuda.bindings import driver

    from kernarg import _launch
    from kernarg._launch import _kernel_for_launch, _kernel_slots_of, _last_handle_addresses

    addresses = [0x7A00 + 0x10 * i for i in range(40)]
    wrappers = [_kernel_for_launch(a) for a in addresses]
    sets = {}
    for a in addresses:
        sets.setdefault(_kernel_slots_of(a)[0], []).append(a)
    alone = [a for a in addresses if len(sets[_kernel_slots_of(a)[0]]) <= 4]
    assert len(alone) >= 30
    for _ in range(3):
        for a, w in zip(addresses, wrappers, strict=True):
            assert _kernel_for_launch(a) is w
            assert _kernel_for_launch(int(str(a))) is w          # another int object
            assert _kernel_for_launch(driver.CUfunction(a)) is w
            assert _kernel_for_launch(driver.CUkernel(a)) is w
    slots = _last_handle_addresses()
    for a in alone:
        assert slots.index(a) in _kernel_slots_of(a)
    # Five in one set: the fifth takes the oldest slot; the first, launched again, comes from
    # the dict (the same Kernel) without a weak reference tried (an int takes none: the
    # TypeError cost ~1 us a launch) and takes the next oldest.
    five = in_one_set(lambda i: 0x9100000 + 0x40 * i)
    first = [_kernel_for_launch(a) for a in five]
    assert five[0] not in _last_handle_addresses()
    assert sorted(_last_handle_addresses().index(a) for a in five[1:]) == list(
        _kernel_slots_of(five[0]))

    class NoRefs:
        def ref(self, *args):
            raise AssertionError("weakref.ref tried for a kernel handle wrapped before")

    real = _launch.weakref
    _launch.weakref = NoRefs()
    try:
        assert _kernel_for_launch(five[0]) is first[0]
        assert _kernel_for_launch(driver.CUfunction(five[1])) is first[1]
    finally:
        _launch.weakref = real
    assert five[0] in _last_handle_addresses() and five[1] in _last_handle_addresses()
    # A CUfunction first: remembered by its address too.
    made = _kernel_for_launch(driver.CUfunction(0x7B08))
    assert 0x7B08 in _last_handle_addresses() and made.handle == 0x7B08
    assert _kernel_for_launch(0x7B08) is made
    # An int subclass or a numpy int: the same Kernel, from the dict, and not put in a slot.
    before = _last_handle_addresses()
    assert _kernel_for_launch(np.uint64(0x7C00)) is _kernel_for_launch(np.uint64(0x7C00))
    assert _last_handle_addresses() == before
    for bad in (0, -1, 2**64, True, 1.5):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            _kernel_for_launch(bad)
    with pytest.raises(TypeError, match="kernel must be a kernarg.Kernel, a cuda.core Kernel "
                                        "or a CUfunction/CUkernel handle, got float"):
        _kernel_for_launch(1.5)


def test_launch_checks_untyped_packs_against_a_cuda_core_kernels_parameters():
    """A cuda.core Kernel reports its parameters' offsets and sizes (arguments_info): the
    classic untyped mistake, a Python float (a double) for a float, is refused before any
    driver call, where cuda.core's own launch would pass 8 bytes for a 4-byte parameter."""
    k = _core_kernel(0x6300, [(0, 8), (8, 4), (12, 4)])      # (float* x, float a, int n)
    cfg = kernarg.LaunchConfig(1, 32)
    with pytest.raises(TypeError, match=r"argument 1 \(float\) packs as 8 bytes at offset 8, "
                                        r"but Kernel 0x6300's parameter 1 is 4 bytes"):
        kernarg.launch(None, cfg, k, None, 2.5, np.int32(3))
    with pytest.raises(TypeError, match=r"Kernel 0x6300 takes 3 arguments, got 2"):
        kernarg.launch(None, cfg, k, None, np.float32(2.5))
    # Sizes that agree at offsets that do not: the second parameter is 16-aligned (say, a
    # 4-byte __align__(16) struct), where an int32 argument packs at offset 4.
    aligned = _core_kernel(0x6400, [(0, 4), (16, 4)])
    with pytest.raises(TypeError, match=r"argument 1 \(numpy\.int32\) packs as 4 bytes at "
                                        r"offset 4, but Kernel 0x6400's parameter 1 is 4 bytes "
                                        r"at offset 16"):
        kernarg.launch(None, cfg, aligned, np.int32(1), np.int32(2))


@needs_no_driver
def test_launch_without_a_driver_is_a_cuda_error():
    cfg = kernarg.LaunchConfig(1, 32)
    with pytest.raises(kernarg.NoDriverError):
        kernarg.launch(None, cfg, 0x1234, None, 7)
    with pytest.raises(kernarg.NoDriverError):
        kernarg.launch(None, cfg, kernarg.Kernel.from_handle(0x1234), np.float32(1))
    with pytest.raises(kernarg.NoDriverError):      # the layout matches: on to the driver
        kernarg.launch(None, cfg, _core_kernel(0x6400, [(0, 8), (8, 4)]), None, np.float32(1))


@pytest.mark.parametrize("call, exc, fragment", [
    (lambda k: k.graph_node("g", 1, 1), TypeError, "graph must be an int handle, a "
     "cuda.bindings handle or a cuda.core graph object, got str"),
    (lambda k: k.graph_node(True, 1, 1), TypeError, "graph must be .* got bool"),
    (lambda k: k.graph_node(1.5, 1, 1), TypeError, "graph must be .* got float"),
    (lambda k: k.graph_node(0, 1, 1), ValueError, "graph must be a non-null handle"),
    (lambda k: k.graph_node(-4, 1, 1), ValueError, "graph must be a handle, got -4"),
    (lambda k: k.graph_node(2**64, 1, 1), ValueError, "graph must be a non-null handle below"),
    (lambda k: k.graph_node(0x99, 1, 1, after=[0x98, "n"]), TypeError, r"after\[1\] must be"),
    (lambda k: k.graph_node(0x99, 1, 1, after=0), ValueError, r"after\[0\] must be a non-null"),
    (lambda k: k.graph_node(0x99, 0, 1), ValueError, r"grid\[0\] is 0"),
    (lambda k: k.graph_node(0x99, 1, 1, shmem=-1), ValueError, "shmem must be an int"),
    (lambda k: k.graph_node(0x99, 1, 1, stream="s"), TypeError, "stream"),
    # The launch attributes, as LaunchConfig checks them; pdl is a launch's only.
    (lambda k: k.graph_node(0x99, 1, 1, cluster=2), ValueError, "not a multiple of cluster"),
    (lambda k: k.graph_node(0x99, 1, 1, mem_sync_domain="near"), ValueError,
     "mem_sync_domain must be one of 'default', 'remote', got 'near'"),
    (lambda k: k.graph_node(0x99, 1, 1, mem_sync_domain_map=(0, 300)), ValueError,
     "mem_sync_domain_map remote must be a domain id"),
    (lambda k: k.graph_node(0x99, 1, 1, access_policy=(16, 8, 2.0)), ValueError,
     "hit_ratio must be from 0 to 1"),
    (lambda k: k.graph_node(0x99, 1, 1, pdl=True), ValueError,
     r"graph_node: pdl=True needs the nodes it follows \(after=\)"),
    (lambda k: k.graph_node(0x99, 1, 1, after_launch=[0x98, 2.5]), TypeError,
     r"after_launch\[1\] must be"),
    (lambda k: k.graph_node(0x99, 1, 1, after_launch=0), ValueError,
     r"after_launch\[0\] must be a non-null"),
    (lambda k: k.graph_node(0x99, 1, 1, after=[0x97, 0x98], after_launch=0x98), ValueError,
     r"graph_node: after_launch\[0\] is in after= too: a node follows another's end or its "
     "launch, not both"),
    (lambda k: k.graph_node(0x99, 1, 1, after=_CoreGraphObject(0x98),
                            after_launch=[0x96, 0x98]), ValueError,
     r"after_launch\[1\] is in after= too"),
    # A node, once device-updatable, cannot be removed again: nothing but True or False.
    (lambda k: k.graph_node(0x99, 1, 1, device_updatable=1), TypeError,
     "graph_node: device_updatable must be True or False, got 1"),
    (lambda k: k.graph_node(0x99, 1, 1, device_updatable=None), TypeError,
     "graph_node: device_updatable must be True or False, got None"),
])
def test_graph_node_checks_its_arguments_before_the_driver(call, exc, fragment):
    # Every value is checked, with a message that names it, before anything reaches the
    # driver: the same errors with and without one.
    k = kernarg.Kernel.from_handle(0x1234, name="k")
    with pytest.raises(exc, match=fragment):
        call(k)


class _CoreGraphObject:
    """Stands in for a cuda.core graph object: its ``handle`` is what kernarg reads."""
    __module__ = "cuda.core.graph"

    def __init__(self, handle):
        self.handle = handle


@needs_no_driver
def test_graph_node_without_a_driver_says_so():
    # Every accepted form of the graph and of its nodes passes the checks, and the call then
    # needs the driver.
    from cuda.bindings import driver

    k = kernarg.Kernel.from_handle(0x1234, name="k")
    for graph, after in [(0x99, ()), (driver.CUgraph(0x99), [driver.CUgraphNode(0x98)]),
                         (_CoreGraphObject(0x99), _CoreGraphObject(driver.CUgraphNode(0x98))),
                         (_CoreGraphObject(driver.CUgraph(0x99)), None)]:
        with pytest.raises(kernarg.NoDriverError, match="no CUDA driver"):
            k.graph_node(graph, 1, 1, 7, after=after)
    for updatable in (False, True, np.bool_(True)):
        with pytest.raises(kernarg.NoDriverError, match="no CUDA driver"):
            k.graph_node(0x99, 1, 1, 7, device_updatable=updatable)
    with pytest.raises(ValueError, match="graph must be a non-null handle"):
        k.graph_node(driver.CUgraph(), 1, 1)
    with pytest.raises(TypeError, match="graph must be .* got _CoreGraphObject"):
        k.graph_node(_CoreGraphObject("nope"), 1, 1)
    # A cuda.bindings object that is no handle (int() refuses it) is named, as is int()'s why.
    for call in (lambda g: k.graph_node(g, 1, 1), k.nodes_in):
        with pytest.raises(TypeError, match=r"^graph: CUDA_KERNEL_NODE_PARAMS is not a handle "
                                            r"\(int\(\) argument must be .*\)$"):
            call(driver.CUDA_KERNEL_NODE_PARAMS())
    # nodes_in takes the same graph objects, checked the same way.
    for graph in (0x99, driver.CUgraph(0x99), _CoreGraphObject(0x99)):
        with pytest.raises(kernarg.NoDriverError, match="no CUDA driver"):
            k.nodes_in(graph)
    with pytest.raises(ValueError, match="graph must be a non-null handle"):
        k.nodes_in(driver.CUgraph())
    with pytest.raises(TypeError, match="graph must be .* got str"):
        k.nodes_in("graph")


_RELEASED_WHILE_TRACED = r"""
import sys, threading, time
from kernarg import _launch

log = []


def destroyed(keep):
    # What the driver does when a graph goes: the user object's destructor, on its own thread.
    thread = threading.Thread(target=keep.destroy)
    thread.start()
    thread.join()


class Kept:
    def __init__(self, name, then=None):
        self.name, self.then = name, then

    def __del__(self):
        log.append(self.name)
        if self.then is not None:
            destroyed(self.then)        # another graph goes while this one's arguments go
            log.append(self.name + "-on")   # a Python call, after b's pending call was added


def traced(frame, event, arg):
    if frame.f_code.co_name == "after":
        log.append(event)


def after():
    pass


b = _launch._DriverRelease(Kept("b"))
a = _launch._DriverRelease(Kept("a", then=b))
del b
if sys.argv[1] == "traced":
    sys.settrace(traced)
destroyed(a)
deadline = time.monotonic() + 30
while "b" not in log and time.monotonic() < deadline:
    for _ in range(1000):           # pending calls run at the interpreter's next check
        pass
    time.sleep(0.001)
after()                             # still traced where it was
sys.settrace(None)
print(" ".join(log), sys.gettrace())
"""


@pytest.mark.parametrize("how", ["traced", "untraced"])
def test_arguments_a_graph_drops_in_a_pending_call_do_not_hang_a_traced_interpreter(how):
    # A graph's user object (what keeps a captured launch's or a graph node's arguments
    # alive) is destroyed on the driver's thread, and its references are dropped in a pending
    # call. An argument's __del__ that runs Python code there, after another graph's pending
    # call was added, hung CPython 3.11 for ever under a trace function (a debugger,
    # coverage): kernarg now drops them untraced on 3.11. What the driver does is
    # _launch._DriverRelease's destroy, so this runs without one, in a process of its own (a
    # hang is a timeout, not a stuck suite).
    run = subprocess.run([sys.executable, "-c", _RELEASED_WHILE_TRACED, how],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    # Both arguments went, in order, and tracing was back afterwards where it was set.
    expected = "a a-on b call None" if how == "traced" else "a a-on b None"
    assert run.stdout.split() == expected.split()


def test_a_graph_let_go_after_the_interpreter_finalized_does_not_crash_the_exit():
    # The driver may run a graph's user-object destructor late (the user object is
    # CU_USER_OBJECT_NO_DESTRUCTOR_SYNC's): for a graph that went at exit, after the
    # interpreter has finalized. Asking for a pending call then crashed the process (SIGSEGV;
    # NVIDIA/cuda-python#2042 is cuda.core's); now what the graph kept goes with the process.
    # _DriverRelease.destroy_at_exit runs the destructor from a C atexit handler, after
    # Py_Finalize.
    code = ("from kernarg import _launch\n"
            "keep = _launch._DriverRelease(object())\n"
            "keep.destroy_at_exit()\n"
            "try:\n"
            "    _launch._DriverRelease(object()).destroy_at_exit()\n"
            "except RuntimeError as exc:\n"
            "    print(exc)\n"
            "print('exiting')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.stdout.splitlines() == ["cannot destroy another keep-alive at exit", "exiting"]


def test_a_driver_release_stand_in_drops_its_reference_once():
    kept = object()
    before = sys.getrefcount(kept)
    keep = kernarg._launch._DriverRelease(kept)
    assert sys.getrefcount(kept) == before + 1
    del keep                                            # never destroyed: collected
    assert sys.getrefcount(kept) == before
    keep = kernarg._launch._DriverRelease(kept)
    keep.destroy()                                      # dropped by the next pending call
    with pytest.raises(RuntimeError, match="destroyed already"):
        keep.destroy()
    for _ in range(100):
        for _ in range(1000):
            pass
        if sys.getrefcount(kept) == before:
            break
    assert sys.getrefcount(kept) == before


def test_kernel_nodes_come_from_graph_node_and_nodes_in_only():
    with pytest.raises(TypeError, match=r"KernelNode objects come from Kernel.graph_node\(...\) "
                                        r"and Kernel.nodes_in\(graph\)"):
        kernarg.KernelNode()
    assert "KernelNode" in kernarg.__all__ and kernarg.KernelNode.__module__ == "kernarg._launch"


CUBIN_SOURCE = """
namespace ns { __global__ void fill(float* x, float v) { x[threadIdx.x] = v; } }
namespace other { __global__ void fill(int* x) {} }
extern "C" __global__ void plain(int n) {}
__global__ void scale(float* x) {}
__global__ void over(int) {}
__global__ void over(float) {}
__device__ __noinline__ float twice(float x) { return 2 * x; }
__global__ void calls(float* x) { x[0] = twice(x[0]); }
"""


def _cubin(source=CUBIN_SOURCE):
    from kernarg._nvrtc import compile_program
    return compile_program(source, arch="sm_75").cubin


def test_a_cubins_kernels_are_read_from_its_symbol_table():
    # Kernels are the entry-point function symbols; a device function (twice, inlined or not)
    # is not one.
    from kernarg._images import cubin_entry_names

    cubin = _cubin()
    assert sorted(cubin_entry_names(cubin)) == sorted(
        ["_ZN2ns4fillEPff", "_ZN5other4fillEPi", "plain", "_Z5scalePf", "_Z4overi",
         "_Z4overf", "_Z5callsPf"])
    # In a fatbin, after its own headers: every uncompressed cubin's kernels, once.
    assert cubin_entry_names(b"\x50\xed\x55\xba" + bytes(60) + cubin + bytes(8) + cubin) == \
        sorted(set(cubin_entry_names(cubin)))
    # Not an image, cut short, or a section table that points past its end: nothing read.
    # (A section table offset past 2**63 raised OverflowError: found by fuzz_parse.)
    far = cubin[:0x28] + (2**64 - 1).to_bytes(8, "little") + cubin[0x30:]
    for image in (b"", b"\x7fELF", cubin[:100], cubin[:len(cubin) // 2], bytes(64), far,
                  b"\x7fELF\x01\x01" + cubin[6:], b"\x7fELF\x02\x02" + cubin[6:]):
        assert cubin_entry_names(image) is None, image[:8]
    # Many stray ELF headers in a fatbin, each claiming a section table past the end: each was
    # read entry by entry to where it ran out (quadratic in the image's size), now refused at
    # once; the real cubin after them is still read.
    stray = bytearray(64)
    stray[:6] = b"\x7fELF\x02\x01"
    stray[0x3A:0x3E] = (64).to_bytes(2, "little") + (65535).to_bytes(2, "little")
    image = b"\x50\xed\x55\xba" + bytes(stray) * 4000 + cubin
    assert cubin_entry_names(image) == sorted(set(cubin_entry_names(cubin)))


VARIABLES_SOURCE = r"""
static __constant__ float coeffs[3];
static __device__ int count = 4;
namespace { __device__ int anon = 5; }
namespace ns { static __device__ int hidden = 6; __device__ int shown = 1;
               namespace { __device__ int deep[2] = {2, 3}; } }
extern "C" __global__ void k(float* p) { p[0] = coeffs[0] + count + anon + ns::hidden
                                                + ns::shown + ns::deep[1]; }
"""


def test_get_global_finds_variables_of_internal_linkage_by_their_cpp_names():
    """Kernel.get_global's lookup in the module's image (run here on NVRTC's PTX and cubin):
    NVRTC names a variable in an anonymous namespace, or of internal linkage in a namespace,
    with a prefix made from the source (_ZN48_INTERNAL_..._GLOBAL__N_...4anonE), which
    cuModuleGetGlobal was asked for by no name a user can write."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._images import image_variable_names
    from kernarg._launch import _variable_symbol
    from kernarg._nvrtc import compile_program

    compiled = compile_program(VARIABLES_SOURCE, arch="sm_90")
    ptx = compiled.ptx.encode() + b"\0"           # as from_ptx loads it
    for image in (ptx, compiled.cubin):
        names = image_variable_names(image)
        assert {"coeffs", "count", "_ZN2ns5shownE"} <= set(names), names
        found = {n: _variable_symbol(image, n)
                 for n in ("anon", "ns::hidden", "::ns::hidden", "ns::deep")}
        assert all(s in names and "_INTERNAL_" in s for s in found.values()), found
        assert found["anon"].endswith("4anonE") and found["ns::deep"].endswith("4deepE")
        assert found["ns::hidden"] == found["::ns::hidden"]
        # What cuModuleGetGlobal finds by itself, and what is not there, are not looked up.
        for name in ("count", "deep", "hidden", "ns::nope", ""):
            assert _variable_symbol(image, name) is None, name
    assert image_variable_names(b"\xff\xfe") is None and image_variable_names(b"") is None
    assert _variable_symbol(None, "anon") is None


def test_get_global_names_the_closest_variables_when_one_is_not_found():
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._launch import _variable_hint
    from kernarg._nvrtc import compile_program

    compiled = compile_program(VARIABLES_SOURCE, arch="sm_90")
    for image in (compiled.ptx.encode() + b"\0", compiled.cubin):
        assert _variable_hint(image, "coefs") == "; did you mean 'coeffs'?"
        assert _variable_hint(image, "Count") == "; did you mean 'count'?"
        assert _variable_hint(image, "hidden") == "; did you mean 'ns::hidden'?"    # its own name
        assert _variable_hint(image, "ns::shwn") == "; did you mean 'ns::shown'?"
        assert _variable_hint(image, "zzz") == ""
    assert _variable_hint(None, "coeffs") == ""


def test_a_modules_variables_read_from_its_ptx_are_those_of_its_cubin():
    # Differential: the PTX declarations' names (a regex over .global/.const lines) against
    # the machine code's data symbols, for variables of many kinds, initialised or not.
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._images import image_variable_names
    from kernarg._nvrtc import compile_program

    src = r"""#include <cuda_fp16.h>
    __constant__ float4 c4[2] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    __device__ __half h;
    __device__ double d[2][3];
    __device__ int* p = nullptr;
    __device__ unsigned long long big = 123456789012345ULL;
    __managed__ int man;
    namespace { __constant__ char msg[] = "hello;=[]"; }
    struct S { int a; float b; };
    __device__ S s = {1, 2.0f};
    template <class T> __device__ T tv = T(3);
    template __device__ float tv<float>;
    extern "C" __global__ void k(float* o) {
        o[0] = c4[0].x + (float)h + d[0][0] + *p + big + man + msg[0] + s.b + tv<float>; }
    """
    compiled = compile_program(src, arch="sm_90")
    from_ptx = image_variable_names(compiled.ptx.encode() + b"\0")
    from_cubin = [n for n in image_variable_names(compiled.cubin) if not n.startswith(".nv.")]
    assert from_ptx == sorted(from_cubin)
    assert {"c4", "h", "d", "p", "big", "man", "s", "_Z2tvIfE"} <= set(from_ptx)
    # A relocatable cubin's variables are typed 13 (processor-specific), not STT_OBJECT, and
    # it refers to symbols it does not define (__UDT...): before, it was read as having only
    # those undefined ones, so get_global found no static or anonymous-namespace variable.
    relocatable = compile_program(src, arch="sm_90", options=("-rdc=true",))
    assert sorted(n for n in image_variable_names(relocatable.cubin)
                  if not n.startswith(".nv.")) == from_ptx


def test_relocatable_code_that_launches_kernels_is_found_to_need_the_device_runtime(
        tmp_path, monkeypatch):
    # What _linked links libcudadevrt.a for (its GPU test runs a kernel launching kernels):
    # the device runtime functions a relocatable cubin leaves undefined, and where that
    # library is.
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg import _nvrtc
    from kernarg._images import undefined_functions
    from kernarg._launch import _device_runtime_calls
    from kernarg._nvrtc import compile_program, cudadevrt_library, nvrtc_version

    src = ("__global__ void child(int* p) { p[threadIdx.x] = 1; }\n"
           'extern "C" __global__ void parent(int* p) { child<<<1, 4>>>(p); }\n')
    with pytest.raises(kernarg.NvrtcError, match=r"kernel that launches kernels compiles only "
                                                 r"as relocatable code: pass options=\('-rdc"):
        compile_program(src, arch="sm_90")
    cubin = compile_program(src, arch="sm_90", options=("-rdc=true",)).cubin
    calls = _device_runtime_calls(cubin)
    assert calls and all(c.startswith("__cudaCDP") for c in calls), calls
    assert set(calls) <= set(undefined_functions(cubin))
    plain = compile_program("__device__ int g;\n" + src.split("\n")[0], arch="sm_90",
                            options=("-rdc=true",)).cubin
    assert _device_runtime_calls(plain) == [] and undefined_functions(b"") == []
    found = cudadevrt_library()
    if found is not None:       # pip's nvidia-cuda-runtime ships it (CUDA 13's wheels do)
        with open(found, "rb") as f:
            assert f.read(8) == b"!<arch>\n"
    # Else a toolkit's, of NVRTC's major version: CUDA_HOME's lib64.
    root = tmp_path / "toolkit"
    (root / "include").mkdir(parents=True)
    (root / "lib64").mkdir()
    (root / "include" / "cuda_runtime_api.h").write_text(
        f"#define CUDART_VERSION {nvrtc_version()[0] * 1000 + 20}\n")
    (root / "lib64" / "libcudadevrt.a").write_bytes(b"!<arch>\n")
    monkeypatch.setattr(_nvrtc, "cuda_include_dir", lambda: None)
    monkeypatch.setenv("CUDA_HOME", str(root))
    assert cudadevrt_library() == str(root / "lib64" / "libcudadevrt.a")
    (root / "include" / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 9020\n")
    monkeypatch.setattr(_nvrtc, "DEFAULT_TOOLKIT", str(tmp_path / "none"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert cudadevrt_library() is None      # another major version's is not taken


def test_relocatable_cubins_are_told_from_loadable_ones():
    # What _load_image links before loading (its GPU test runs it end to end).
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")
    from kernarg._images import is_relocatable_cubin
    from kernarg._nvrtc import compile_program

    src = 'extern "C" __global__ void k(int* p) { p[0] = 1; }'
    assert is_relocatable_cubin(compile_program(src, arch="sm_90", options=("-rdc=true",)).cubin)
    assert not is_relocatable_cubin(compile_program(src, arch="sm_90").cubin)
    assert not is_relocatable_cubin(b"\x7fELF") and not is_relocatable_cubin(b"")


def test_from_cubin_finds_a_cpp_kernel_by_its_name_before_loading():
    from kernarg._launch import _cubin_entry

    cubin = _cubin()
    assert _cubin_entry(cubin, "ns::fill") == "_ZN2ns4fillEPff"
    assert _cubin_entry(cubin, "::other::fill") == "_ZN5other4fillEPi"
    assert _cubin_entry(cubin, "scale") == "_Z5scalePf"
    assert _cubin_entry(cubin, "plain") == "plain"
    assert _cubin_entry(cubin, "_Z4overf") == "_Z4overf"
    with pytest.raises(LookupError, match=r"kernel 'fill' not found in the image's symbols .*; "
                                          r"did you mean 'ns::fill' or 'other::fill'\?$"):
        _cubin_entry(cubin, "fill")
    with pytest.raises(LookupError, match=r"kernel 'over' is overloaded"):
        _cubin_entry(cubin, "over")
    with pytest.raises(LookupError, match=r"kernel 'twice' not found in the image's symbols"):
        _cubin_entry(cubin, "twice")
    # An image whose symbols cannot be read (compressed, say): the driver is asked for the
    # name as given.
    assert _cubin_entry(b"\x50\xed\x55\xba" + bytes(100), "ns::fill") == "ns::fill"
    # Kernel.from_cubin reads the table before the driver is asked (here: there is none).
    with pytest.raises(LookupError, match=r"did you mean 'ns::fill' or 'other::fill'\?$"):
        kernarg.Kernel.from_cubin(cubin, "fill")


# ---------------------------------------------------------------------------------------------
# The hint attributes: cluster scheduling, preferred cluster, memory synchronisation domain,
# shared memory carveout, access policy window. Each is checked in LaunchConfig, reported by
# `attributes`, and laid out in the CUlaunchAttribute array as cuda.h lays it out.

# cuda.h's values (the same in CUDA 12.8 and 13).
ATTR_ACCESS_POLICY_WINDOW, ATTR_CLUSTER_DIMENSION, ATTR_CLUSTER_SCHEDULING = 1, 4, 5
ATTR_MEM_SYNC_DOMAIN, ATTR_PREFERRED_CLUSTER, ATTR_CARVEOUT = 10, 11, 14


def test_hint_attributes_are_laid_out_as_cuda_h_says():
    import struct

    c = kernarg.LaunchConfig((8, 4), 32, cluster=(2, 2), cluster_scheduling="load_balancing",
                             preferred_cluster=(4, 4), mem_sync_domain="remote",
                             shmem_carveout=np.uint8(25),
                             access_policy=(0x7F00_0000_1000, 2**20, 0.25, "normal"))
    assert c.cluster_scheduling == "load_balancing" and c.preferred_cluster == (4, 4, 1)
    assert c.mem_sync_domain == "remote" and c.shmem_carveout == 25
    assert type(c.shmem_carveout) is int
    assert c.access_policy == (0x7F00_0000_1000, 2**20, 0.25, "normal", "streaming")
    assert c.attributes == (
        ("cluster_dimension", (2, 2, 1)),
        ("cluster_scheduling_policy_preference", "load_balancing"),
        ("preferred_cluster_dimension", (4, 4, 1)), ("mem_sync_domain", "remote"),
        ("preferred_shared_memory_carveout", 25),
        ("access_policy_window", (0x7F00_0000_1000, 2**20, 0.25, "normal", "streaming")))
    raw = c._raw_attributes()
    assert [rid for rid, _ in raw] == [ATTR_CLUSTER_DIMENSION, ATTR_CLUSTER_SCHEDULING,
                                       ATTR_PREFERRED_CLUSTER, ATTR_MEM_SYNC_DOMAIN,
                                       ATTR_CARVEOUT, ATTR_ACCESS_POLICY_WINDOW]
    assert all(len(value) == 64 for _, value in raw)
    values = [value for _, value in raw]
    assert struct.unpack_from("<3I", values[0]) == (2, 2, 1)
    assert struct.unpack_from("<i", values[1]) == (2,)        # LOAD_BALANCING
    assert struct.unpack_from("<3I", values[2]) == (4, 4, 1)
    assert struct.unpack_from("<i", values[3]) == (1,)        # MEM_SYNC_DOMAIN_REMOTE
    assert struct.unpack_from("<I", values[4]) == (25,)
    # CUaccessPolicyWindow: void* base_ptr, size_t num_bytes, float hitRatio, then the hit and
    # miss CUaccessProperty (NORMAL 0, STREAMING 1, PERSISTING 2).
    assert struct.unpack_from("<QQfii", values[5]) == (0x7F00_0000_1000, 2**20, 0.25, 0, 1)
    # The other names, and the defaults of a window: all its lines persisting, misses streamed.
    c = kernarg.LaunchConfig(1, 1, cluster_scheduling="spread", mem_sync_domain="default",
                             shmem_carveout=0, access_policy=(16, 0))
    assert c.access_policy == (16, 0, 1.0, "persisting", "streaming")
    values = [value for _, value in c._raw_attributes()]
    assert struct.unpack_from("<i", values[0]) == (1,)        # SPREAD
    assert struct.unpack_from("<i", values[1]) == (0,)
    assert struct.unpack_from("<I", values[2]) == (0,)
    assert struct.unpack_from("<QQfii", values[3]) == (16, 0, 1.0, 2, 1)
    # "default" is asked for, not left out: it overrides what the stream's attributes say.
    assert ("cluster_scheduling_policy_preference", "default") in kernarg.LaunchConfig(
        1, 1, cluster_scheduling="default").attributes
    assert kernarg.LaunchConfig(1, 1)._raw_attributes() == ()


def test_a_domain_map_is_two_domain_ids_laid_out_as_cuda_h_says():
    # CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: a CUlaunchMemSyncDomainMap, two unsigned chars
    # (default_, then remote), from a pair or a dict of the two names, any integers.
    c = kernarg.LaunchConfig(1, 1, mem_sync_domain="remote",
                             mem_sync_domain_map={"remote": np.uint8(3), "default": 2})
    assert c.mem_sync_domain_map == (2, 3)
    assert all(type(d) is int for d in c.mem_sync_domain_map)
    assert c.attributes == (("mem_sync_domain", "remote"), ("mem_sync_domain_map", (2, 3)))
    assert c._raw_attributes()[1] == (9, b"\x02\x03".ljust(64, b"\0"))
    assert c == kernarg.LaunchConfig(1, 1, mem_sync_domain="remote", mem_sync_domain_map=[2, 3])
    assert c != kernarg.LaunchConfig(1, 1, mem_sync_domain="remote", mem_sync_domain_map=(3, 2))
    assert kernarg.LaunchConfig(1, 1, mem_sync_domain_map=(255, 0))._raw_attributes() == \
        ((9, b"\xff".ljust(64, b"\0")),)


def test_an_access_policy_window_takes_a_dict_and_any_pointer_argument():
    from producers import CAIObject, DLPackProducer, cai

    by_name = kernarg.LaunchConfig(1, 1, access_policy=dict(
        base=0x1000, num_bytes=np.int64(4096), hit_ratio=np.float32(0.5), miss="normal"))
    assert by_name.access_policy == (0x1000, 4096, 0.5, "persisting", "normal")
    assert by_name == kernarg.LaunchConfig(1, 1, access_policy=[0x1000, 4096, 0.5,
                                                                "persisting", "normal"])
    # The base as the pointer the object would be as an argument: its CUDA Array Interface's,
    # a DLPack tensor's data + byte_offset (whose capsule is let go at once).
    assert kernarg.LaunchConfig(1, 1, access_policy=(CAIObject(cai(0xA000)), 64)) \
        .access_policy[0] == 0xA000
    producer = DLPackProducer(0xB000, byte_offset=0x40)
    c = kernarg.LaunchConfig(1, 1, access_policy=(producer, 64))
    assert c.access_policy[0] == 0xB040 and producer.exported == producer.deleted == 1
    assert kernarg.LaunchConfig(1, 1, access_policy=(np.uint64(0x2000), 64)).access_policy[0] \
        == 0x2000
    # A producer whose interface raises: its error, of its class, naming the base.
    broken = CAIObject(RuntimeError("the device was lost"))
    with pytest.raises(RuntimeError, match=r"access_policy base \(producers.CAIObject\): "
                                           "reading __cuda_array_interface__ raised"):
        kernarg.LaunchConfig(1, 1, access_policy=(broken, 64))


@pytest.mark.parametrize("kwargs, exc, fragment", [
    (dict(cluster_scheduling="round_robin"), ValueError,
     "cluster_scheduling must be one of 'default', 'spread', 'load_balancing', got "
     "'round_robin'"),
    (dict(cluster_scheduling=1), TypeError, "cluster_scheduling must be one of .*got 1"),
    (dict(mem_sync_domain="local"), ValueError,
     "mem_sync_domain must be one of 'default', 'remote', got 'local'"),
    (dict(mem_sync_domain=True), TypeError, "mem_sync_domain must be one of"),
    (dict(mem_sync_domain_map=1), TypeError,
     r"mem_sync_domain_map must be a pair \(default, remote\) of domain ids or a dict of "
     "those names, got 1"),
    (dict(mem_sync_domain_map=(0, 1, 2)), TypeError, "mem_sync_domain_map must be a pair"),
    (dict(mem_sync_domain_map={"default": 0}), TypeError,
     "mem_sync_domain_map must map both 'default' and 'remote' to a domain id"),
    (dict(mem_sync_domain_map={"default": 0, "remote": 1, "near": 2}), TypeError,
     "mem_sync_domain_map must map both"),
    (dict(mem_sync_domain_map=(0, 256)), ValueError,
     "mem_sync_domain_map remote must be a domain id from 0 to the device's domain count - 1, "
     "got 256"),
    (dict(mem_sync_domain_map=(-1, 0)), ValueError, "mem_sync_domain_map default must be"),
    (dict(mem_sync_domain_map=(True, 0)), TypeError,
     "mem_sync_domain_map default must be an int, got bool"),
    (dict(mem_sync_domain_map=(0, 1.0)), TypeError,
     "mem_sync_domain_map remote must be an int, got float"),
    (dict(shmem_carveout=101), ValueError,
     "shmem_carveout must be a percentage .* from 0 to 100, got 101"),
    (dict(shmem_carveout=-1), ValueError, "shmem_carveout .*got -1"),
    (dict(shmem_carveout=50.0), TypeError, "shmem_carveout must be an int, got float"),
    (dict(shmem_carveout=True), TypeError, "shmem_carveout must be an int, got bool"),
    (dict(preferred_cluster=2), ValueError,
     r"preferred_cluster \(2, 1, 1\) needs a cluster"),
    (dict(grid=8, cluster=2, preferred_cluster=3), ValueError,
     r"preferred_cluster \(3, 1, 1\) must be a multiple of cluster \(2, 1, 1\) .*axis 0 is 3"),
    (dict(grid=(2, 2, 4), cluster=(1, 1, 2), preferred_cluster=(1, 1, 4)), ValueError,
     r"equal to it on axis 2 \(axis 2 is 4\)"),
    (dict(grid=12, cluster=2, preferred_cluster=8), ValueError,
     r"grid \(12, 1, 1\) is not a multiple of preferred_cluster \(8, 1, 1\) on axis 0"),
    (dict(grid=8, cluster=2, preferred_cluster=0), ValueError,
     r"preferred_cluster\[0\] is 0; it must be between 1"),
    (dict(grid=8, cluster=2, preferred_cluster="4"), TypeError,
     "preferred_cluster must be an int or a tuple of 1 to 3 ints"),
    (dict(access_policy=0x1000), TypeError,
     r"access_policy must be a tuple \(base, num_bytes\[, hit_ratio\[, hit\[, miss\]\]\]\) "
     "or a dict of those names, got 4096"),
    (dict(access_policy=(0x1000,)), TypeError, "access_policy must be a tuple"),
    (dict(access_policy=(1, 2, 0.5, "normal", "normal", 6)), TypeError,
     "access_policy must be a tuple"),
    (dict(access_policy=dict(base=1, size=2)), TypeError,
     r"access_policy has no field 'size' \(its fields: base, num_bytes, hit_ratio, hit, miss\)"),
    (dict(access_policy=dict(base=1)), TypeError, "access_policy must give num_bytes"),
    (dict(access_policy=(-1, 16)), ValueError,
     "access_policy base must be an address between 0 and 2\\*\\*64-1, got -1"),
    (dict(access_policy=(2**64, 16)), ValueError, "access_policy base must be an address"),
    (dict(access_policy=(None, 16)), TypeError,
     r"access_policy base must be an address \(int\) or a pointer argument .*got None"),
    (dict(access_policy=(1.5, 16)), TypeError, "access_policy base must be an address"),
    (dict(access_policy=(True, 16)), TypeError, "access_policy base must be an address"),
    (dict(access_policy=(np.float32(1), 16)), TypeError,
     r"access_policy base must be an address \(int\) or a pointer argument, got "
     "numpy.float32, which kernarg packs as 4 bytes"),
    (dict(access_policy=(np.zeros(4), 16)), TypeError,
     r"access_policy base \(numpy.ndarray\): the memory is on the CPU"),
    (dict(access_policy=(object(), 16)), TypeError,
     r"access_policy base \(object\): unsupported kernel argument"),
    (dict(access_policy=(16, -1)), ValueError,
     "access_policy num_bytes must be between 0 and 2\\*\\*64-1, got -1"),
    (dict(access_policy=(16, 1.0)), TypeError, "access_policy num_bytes must be an int"),
    (dict(access_policy=(16, 8, 1.5)), ValueError,
     "access_policy hit_ratio must be from 0 to 1, got 1.5"),
    (dict(access_policy=(16, 8, float("nan"))), ValueError, "hit_ratio must be from 0 to 1"),
    (dict(access_policy=(16, 8, "half")), TypeError,
     "access_policy hit_ratio must be a number from 0 to 1, got 'half'"),
    (dict(access_policy=(16, 8, True)), TypeError, "hit_ratio must be a number"),
    (dict(access_policy=(16, 8, object())), TypeError, "hit_ratio must be a number"),
    (dict(access_policy=(16, 8, 0.5, "sticky")), ValueError,
     "access_policy hit must be one of 'normal', 'streaming', 'persisting', got 'sticky'"),
    (dict(access_policy=(16, 8, 0.5, "normal", "persisting")), ValueError,
     "access_policy miss must be 'normal' or 'streaming', got 'persisting'"),
    (dict(access_policy=(16, 8, 0.5, "normal", 2)), TypeError,
     "access_policy miss must be one of"),
])
def test_hint_attribute_errors_name_the_keyword_and_what_it_takes(kwargs, exc, fragment):
    kwargs = dict(kwargs)
    grid = kwargs.pop("grid", 1)
    with pytest.raises(exc, match=fragment):
        kernarg.LaunchConfig(grid, 1, **kwargs)
    # Kernel.launch and Kernel.prepare check them alike, before any driver call.
    k = kernarg.Kernel.from_handle(0x1234)
    with pytest.raises(exc, match=fragment):
        k.launch(grid, 1, 1, **kwargs)
    with pytest.raises(exc, match=fragment):
        k.prepare(grid, 1, **kwargs)


def test_hint_attributes_make_configs_that_pickle_compare_and_replace():
    import copy
    import pickle

    c = kernarg.LaunchConfig(8, 32, cluster=2, cluster_scheduling="spread", preferred_cluster=4,
                             mem_sync_domain="remote", shmem_carveout=10,
                             access_policy=(0x1000, 64, 0.5))
    for again in [pickle.loads(pickle.dumps(c, protocol))
                  for protocol in range(pickle.HIGHEST_PROTOCOL + 1)] + [copy.deepcopy(c)]:
        assert again == c and hash(again) == hash(c) and again.attributes == c.attributes
        assert again._raw_attributes() == c._raw_attributes()
    apart = [kernarg.LaunchConfig(8, 32, cluster=2, **field) for field in (
        dict(), dict(cluster_scheduling="spread"), dict(cluster_scheduling="default"),
        dict(preferred_cluster=4), dict(preferred_cluster=8), dict(mem_sync_domain="remote"),
        dict(shmem_carveout=0), dict(shmem_carveout=1), dict(access_policy=(0x1000, 64)),
        dict(access_policy=(0x1000, 64, 0.5)), dict(mem_sync_domain_map=(0, 1)),
        dict(mem_sync_domain_map=(1, 0)), dict(nvlink_util_centric=True),
        dict(nvlink_util_centric=False), dict(cluster_size_mode="default"),
        dict(cluster_size_mode="require_portable"), dict(shmem_mode="default"),
        dict(shmem_mode="prefer_oversized"))]
    assert len(set(apart)) == len(apart)
    # A pickle of a config from before these fields (seven of them, fourteen before
    # mem_sync_domain_map, fifteen before nvlink_util_centric) still loads.
    remake, fields = c.__reduce__()
    assert len(fields) == 18
    assert remake(*fields[:7]) == kernarg.LaunchConfig(8, 32, cluster=2)
    assert remake(*fields[:14]) == c
    assert remake(*fields[:15]) == c
    more = c.__replace__(preferred_cluster=None, access_policy=dict(base=0x2000, num_bytes=8))
    assert more.preferred_cluster is None and more.access_policy[:2] == (0x2000, 8)
    assert more.mem_sync_domain == "remote" and c.preferred_cluster == (4, 1, 1)
    with pytest.raises(ValueError, match="preferred_cluster .* needs a cluster"):
        c.__replace__(cluster=None)


def test_launch_and_prepare_take_the_hint_attributes():
    import inspect

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    names = ["cluster_scheduling", "preferred_cluster", "mem_sync_domain", "shmem_carveout",
             "access_policy", "launch_completion_event", "programmatic_event",
             "mem_sync_domain_map", "nvlink_util_centric", "cluster_size_mode", "shmem_mode"]
    assert list(inspect.signature(kernarg.Kernel.launch).parameters)[-11:] == names
    assert list(inspect.signature(k.prepare).parameters)[-11:] == names
    attributes = dict(cluster=2, cluster_scheduling="spread", preferred_cluster=4,
                      mem_sync_domain="remote", shmem_carveout=30, access_policy=(0x1000, 64))
    p = k.prepare(8, 32, **attributes)
    assert p.config == kernarg.LaunchConfig(8, 32, **attributes)
    # None asks for nothing: such a launch takes the path of a launch without attributes,
    # whose errors are its own (the grid checked in C).
    with pytest.raises(ValueError, match=r"grid\[0\] is 0"):
        k.launch(0, 1, None, 1, cluster_scheduling=None, access_policy=None)
    if not HAS_DRIVER:
        # Everything was accepted and checked; only the driver is missing.
        with pytest.raises(kernarg.NoDriverError):
            k.launch(8, 32, None, 1, **attributes)
        with pytest.raises(kernarg.NoDriverError):
            p(None, 1)


# The launch attributes of CUDA 13 (session 68), each as cuda.h 13.5 numbers it and its value:
# (keyword, value given, the value read back, CUlaunchAttributeID, the union's first 4 bytes).
CUDA13_ATTRIBUTES = [
    ("nvlink_util_centric", True, True, 16, 1),
    ("nvlink_util_centric", np.False_, False, 16, 0),     # (False is passed: it overrides)
    ("cluster_size_mode", "default", "default", 17, 0),
    ("cluster_size_mode", "require_portable", "require_portable", 17, 1),
    ("cluster_size_mode", "allow_non_portable", "allow_non_portable", 17, 2),
    ("shmem_mode", "default", "default", 18, 0),
    ("shmem_mode", "require_portable", "require_portable", 18, 1),
    ("shmem_mode", "allow_non_portable", "allow_non_portable", 18, 2),
    ("shmem_mode", "allow_oversized", "allow_oversized", 18, 3),
    ("shmem_mode", "prefer_oversized", "prefer_oversized", 18, 4),
]


@pytest.mark.parametrize("keyword, given, read, attr_id, code", CUDA13_ATTRIBUTES)
def test_the_cuda13_attributes_reach_the_attribute_array_as_cuda_h_lays_them_out(
        keyword, given, read, attr_id, code):
    # cydriver of cuda-bindings 12.x names none of them: kernarg writes cuda.h 13's ids and
    # values itself, so the lower-bounds build passes them as the 13.x one does.
    c = kernarg.LaunchConfig(8, 32, cluster=2, **{keyword: given})
    assert getattr(c, keyword) == read and type(getattr(c, keyword)) is type(read)
    name = {16: "nvlink_util_centric_scheduling", 17: "portable_cluster_size_mode",
            18: "shared_memory_mode"}[attr_id]
    assert c.attributes == (("cluster_dimension", (2, 1, 1)), (name, read))
    raw_id, value = c._raw_attributes()[1]
    assert raw_id == attr_id and value == struct.pack("<I", code) + bytes(60)
    try:
        from cuda.bindings import driver
    except ImportError:
        return
    ids = {16: "CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING",
           17: "CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE",
           18: "CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE"}
    enum = getattr(driver.CUlaunchAttributeID, ids[attr_id], None)
    if enum is not None:            # (cuda-bindings 13.x: its numbers are kernarg's)
        assert int(enum) == attr_id


def test_the_cuda13_attributes_refuse_what_cuda_h_does_not_define():
    for keyword, value, error, message in (
            ("nvlink_util_centric", 1, TypeError, "nvlink_util_centric must be True or False"),
            ("nvlink_util_centric", "yes", TypeError, "must be True or False.*got 'yes'"),
            ("cluster_size_mode", "portable", ValueError,
             "cluster_size_mode must be one of 'default', 'require_portable', "
             "'allow_non_portable', got 'portable'"),
            ("shmem_mode", "oversized", ValueError,
             "shmem_mode must be one of 'default', 'require_portable', 'allow_non_portable', "
             "'allow_oversized', 'prefer_oversized', got 'oversized'"),
            ("shmem_mode", 3, TypeError, "shmem_mode must be one of")):
        with pytest.raises(error, match=message):
            kernarg.LaunchConfig(8, 32, **{keyword: value})
    # A portable cluster has at most 8 blocks: more, with require_portable, is refused before
    # any driver is asked; allowed otherwise (over 8 needs the kernel's opt-in, at launch).
    with pytest.raises(ValueError, match=r"cluster \(4, 4, 1\) has 16 blocks; "
                                         "cluster_size_mode='require_portable' allows at most 8"):
        kernarg.LaunchConfig((8, 8), 32, cluster=(4, 4), cluster_size_mode="require_portable")
    assert kernarg.LaunchConfig((8, 8), 32, cluster=(4, 2),
                                cluster_size_mode="require_portable").cluster == (4, 2, 1)
    assert kernarg.LaunchConfig((8, 8), 32, cluster=(4, 4),
                                cluster_size_mode="allow_non_portable").cluster == (4, 4, 1)


def test_launch_prepare_and_graph_node_take_the_cuda13_attributes():
    import inspect

    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    attributes = dict(nvlink_util_centric=False, cluster_size_mode="allow_non_portable",
                      shmem_mode="allow_oversized")
    p = k.prepare(8, 32, cluster=2, **attributes)
    assert p.config == kernarg.LaunchConfig(8, 32, cluster=2, **attributes)
    assert [n for n in inspect.signature(k.graph_node).parameters][-4:] == \
        list(attributes) + ["device_updatable"]
    with pytest.raises(ValueError, match="cluster_size_mode='require_portable' allows at most"):
        k.launch(16, 32, None, 1, cluster=16, cluster_size_mode="require_portable")
    if not HAS_DRIVER:
        with pytest.raises(kernarg.NoDriverError):
            k.launch(8, 32, None, 1, **attributes)


def test_producer_sync_is_switched_by_a_bool_and_starts_from_the_environment():
    assert kernarg.set_producer_sync(False) is True          # on unless the environment says
    try:
        assert kernarg.set_producer_sync(np.False_) is False
        assert kernarg.set_producer_sync(True) is False
    finally:
        kernarg.set_producer_sync(True)
    for bad in (0, 1, "no", None):
        with pytest.raises(TypeError, match="set_producer_sync: enabled must be a bool, got "
                                            f"{type(bad).__name__}"):
            kernarg.set_producer_sync(bad)
    assert kernarg.set_producer_sync(True) is True              # the refusals changed nothing
    # KERNARG_CUDA_ARRAY_INTERFACE_SYNC, read at import: any integer 0 turns the waits off;
    # unset, empty, another integer or a word kernarg cannot read keeps them.
    code = "import kernarg; print(kernarg.set_producer_sync(True))"
    for value, on in (("0", False), (" 00 ", False), ("1", True), ("2", True), ("", True),
                      ("off", True), (None, True)):
        env = dict(os.environ)
        env.pop("KERNARG_CUDA_ARRAY_INTERFACE_SYNC", None)
        if value is not None:
            env["KERNARG_CUDA_ARRAY_INTERFACE_SYNC"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        assert out == str(on), (value, out)
    # `python -m kernarg info` says which.
    env = dict(os.environ, KERNARG_CUDA_ARRAY_INTERFACE_SYNC="0")
    out = subprocess.run([sys.executable, "-m", "kernarg", "info"], env=env,
                         capture_output=True, text=True).stdout
    assert "waits for producer streams: off; KERNARG_CUDA_ARRAY_INTERFACE_SYNC=0" in out


class _CoreEvent:
    """Stands in for a cuda.core Event: its ``handle`` and ``is_timing_enabled`` are read."""
    __module__ = "cuda.core._event"

    def __init__(self, handle, timing=False):
        self.handle = handle
        self.is_timing_enabled = timing


def test_event_attributes_take_any_event_and_are_laid_out_as_cuda_h_says():
    import copy
    import pickle
    import struct
    import weakref

    from cuda.bindings import driver

    ATTR_PROGRAMMATIC_EVENT, ATTR_LAUNCH_COMPLETION_EVENT = 7, 12
    core = _CoreEvent(driver.CUevent(0xE2))
    c = kernarg.LaunchConfig(1, 1, launch_completion_event=0xE1,
                             programmatic_event=(core, True))
    assert c.launch_completion_event == 0xE1 and c.programmatic_event == (0xE2, True)
    assert c.attributes == (("launch_completion_event", 0xE1),
                            ("programmatic_event", (0xE2, True)))
    raw = c._raw_attributes()
    assert [rid for rid, _ in raw] == [ATTR_LAUNCH_COMPLETION_EVENT, ATTR_PROGRAMMATIC_EVENT]
    # {CUevent event; int flags} and {CUevent event; int flags; int triggerAtBlockStart}.
    assert struct.unpack_from("<Qi", raw[0][1]) == (0xE1, 0)
    assert struct.unpack_from("<Qii", raw[1][1]) == (0xE2, 0, 1)
    plain = kernarg.LaunchConfig(1, 1, programmatic_event=driver.CUevent(0xE2))
    assert plain.programmatic_event == (0xE2, False)
    assert struct.unpack_from("<Qii", plain._raw_attributes()[0][1]) == (0xE2, 0, 0)
    # Equal by handle; the config holds the objects given, copies are the config itself, and
    # a config with fields replaced keeps holding them.
    assert c == kernarg.LaunchConfig(1, 1, launch_completion_event=driver.CUevent(0xE1),
                                     programmatic_event=(0xE2, True))
    assert hash(plain) == hash(kernarg.LaunchConfig(1, 1, programmatic_event=0xE2))
    assert copy.copy(c) is c and copy.deepcopy(c) is c
    wider = c.__replace__(block=64)
    assert wider.block == (64, 1, 1) and wider.programmatic_event == (0xE2, True)
    held = _CoreEvent(0xE3)
    alive = weakref.ref(held)
    kept = kernarg.LaunchConfig(1, 1, launch_completion_event=held).__replace__(grid=2)
    del held
    gc.collect()
    assert alive() is not None and kept.launch_completion_event == 0xE3
    del kept
    gc.collect()
    assert alive() is None
    with pytest.raises(TypeError, match="with an event .* cannot be pickled: an event handle "
                                        "is valid in its process only"):
        pickle.dumps(c)
    assert pickle.loads(pickle.dumps(kernarg.LaunchConfig(1, 1))) == kernarg.LaunchConfig(1, 1)


@pytest.mark.parametrize("kwargs, exc, fragment", [
    (dict(launch_completion_event=0), ValueError,
     "launch_completion_event must be a non-null handle"),
    (dict(launch_completion_event=-1), ValueError, "launch_completion_event must be a handle"),
    (dict(launch_completion_event="e"), TypeError,
     "launch_completion_event must be an int handle, a cuda.bindings handle or a cuda.core "
     "Event, got str"),
    (dict(launch_completion_event=_CoreEvent(0xE1, timing=True)), ValueError,
     r"launch_completion_event must be an event without timing \(CU_EVENT_DISABLE_TIMING\), "
     "got a cuda.core Event with timing enabled"),
    (dict(programmatic_event=(0xE1, 1)), TypeError,
     r"programmatic_event must be an event or a tuple \(event, trigger_at_block_start: bool\)"),
    (dict(programmatic_event=(0xE1, True, 0)), TypeError, "programmatic_event must be"),
    (dict(programmatic_event=(0, True)), ValueError, "programmatic_event must be a non-null"),
    (dict(programmatic_event=1.5), TypeError, "programmatic_event must be an int handle"),
])
def test_event_attribute_errors_name_the_keyword(kwargs, exc, fragment):
    with pytest.raises(exc, match=fragment):
        kernarg.LaunchConfig(1, 1, **kwargs)
    k = kernarg.Kernel.from_handle(0x1234)
    with pytest.raises(exc, match=fragment):
        k.launch(1, 1, 1, **kwargs)
    with pytest.raises(exc, match=fragment):
        k.prepare(1, 1, **kwargs)
    # A graph's kernel node takes neither (cuda.h: valid for launches only).
    with pytest.raises(TypeError, match="unexpected keyword"):
        k.graph_node(0x99, 1, 1, **kwargs)


def test_launches_with_attributes_check_each_config_they_are_given():
    # Kernel.launch keeps the configs of its last four launches with attributes, for the same
    # (immutable) objects; anything else is checked again: other values, and values that can
    # change between launches (a list), which are never kept.
    k = kernarg.Kernel.from_handle(0x1234, signature="float* out, int n", name="k")
    expect = pytest.raises(kernarg.NoDriverError) if not HAS_DRIVER else None

    def launch(grid, **attributes):
        if expect is None:
            return
        with pytest.raises(kernarg.NoDriverError):
            k.launch(grid, 32, None, 1, **attributes)

    grid = [8]
    for _ in range(2):
        launch(8, cluster=2, mem_sync_domain="remote")
        launch(grid, cluster=2)
    grid[0] = 3                                         # the same list, now not a multiple
    with pytest.raises(ValueError, match=r"grid \(3, 1, 1\) is not a multiple of cluster"):
        k.launch(grid, 32, None, 1, cluster=2)
    with pytest.raises(ValueError, match=r"grid \(8, 1, 1\) is not a multiple of cluster "
                                         r"\(16, 1, 1\)"):
        k.launch(8, 32, None, 1, cluster=16, mem_sync_domain="remote")
    with pytest.raises(ValueError, match="shmem_carveout .*got 200"):
        k.launch(8, 32, None, 1, cluster=2, mem_sync_domain="remote", shmem_carveout=200)
    launch(8, cluster=2, mem_sync_domain="remote")      # and the first again: still good
    window = [0x1000, 64]
    launch(1, access_policy=window)
    window[1] = -1
    with pytest.raises(ValueError, match="access_policy num_bytes must be between 0"):
        k.launch(1, 32, None, 1, access_policy=window)


# A reference encoder of the launch attributes, from cuda.h's CUlaunchAttributeValue union
# (each value at offset 0 of 64 bytes, the rest zero), in the order LaunchConfig passes them.
_SCHEDULING = {"default": 0, "spread": 1, "load_balancing": 2}
_DOMAINS = {"default": 0, "remote": 1}
_PROPERTIES = {"normal": 0, "streaming": 1, "persisting": 2}
_CLUSTER_SIZE_MODES = {"default": 0, "require_portable": 1, "allow_non_portable": 2}
_SHMEM_MODES = {"default": 0, "require_portable": 1, "allow_non_portable": 2,
                "allow_oversized": 3, "prefer_oversized": 4}


def _reference_attributes(kw):
    import struct

    out = []

    def put(attr_id, fmt, *values):
        out.append((attr_id, struct.pack(fmt, *values).ljust(64, b"\0")))

    def dims(v):
        v = (v,) if isinstance(v, int) else tuple(v)
        return v + (1,) * (3 - len(v))

    if kw.get("cluster") is not None:
        put(4, "<3I", *dims(kw["cluster"]))
    if kw.get("cooperative"):
        put(2, "<i", 1)
    if kw.get("pdl"):
        put(6, "<i", 1)
    if kw.get("priority") is not None:
        put(8, "<i", kw["priority"])
    if kw.get("cluster_scheduling") is not None:
        put(5, "<i", _SCHEDULING[kw["cluster_scheduling"]])
    if kw.get("preferred_cluster") is not None:
        put(11, "<3I", *dims(kw["preferred_cluster"]))
    if kw.get("mem_sync_domain") is not None:
        put(10, "<i", _DOMAINS[kw["mem_sync_domain"]])
    if kw.get("mem_sync_domain_map") is not None:
        put(9, "<BB", *kw["mem_sync_domain_map"])     # CUlaunchMemSyncDomainMap: default_, remote
    if kw.get("nvlink_util_centric") is not None:
        put(16, "<I", int(kw["nvlink_util_centric"]))
    if kw.get("cluster_size_mode") is not None:
        put(17, "<i", _CLUSTER_SIZE_MODES[kw["cluster_size_mode"]])
    if kw.get("shmem_mode") is not None:
        put(18, "<i", _SHMEM_MODES[kw["shmem_mode"]])
    if kw.get("shmem_carveout") is not None:
        put(14, "<I", kw["shmem_carveout"])
    if kw.get("access_policy") is not None:
        base, nbytes, ratio, hit, miss = kw["access_policy"]
        put(1, "<QQfii", base, nbytes, ratio, _PROPERTIES[hit], _PROPERTIES[miss])
    if kw.get("launch_completion_event") is not None:
        put(12, "<Qi", kw["launch_completion_event"], 0)
    if kw.get("programmatic_event") is not None:
        event, at_start = kw["programmatic_event"]
        put(7, "<Qii", event, 0, int(at_start))
    return tuple(out)


@st.composite
def _configs(draw):
    """Valid LaunchConfig keywords: a grid that every cluster and preferred cluster divides."""
    kw = {}
    cluster = draw(st.none() | st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
                                         st.sampled_from([1, 2])))
    grid = (16, 8, 4)
    if cluster is not None:
        kw["cluster"] = cluster
        if draw(st.booleans()):
            kw["preferred_cluster"] = (cluster[0] * draw(st.sampled_from([1, 2, 4])),
                                       cluster[1] * draw(st.sampled_from([1, 2, 4])),
                                       cluster[2])
    kw["cooperative"] = draw(st.booleans())
    kw["pdl"] = draw(st.booleans())
    kw["priority"] = draw(st.none() | st.integers(-2**31, 2**31 - 1))
    kw["cluster_scheduling"] = draw(st.none() | st.sampled_from(sorted(_SCHEDULING)))
    kw["mem_sync_domain"] = draw(st.none() | st.sampled_from(sorted(_DOMAINS)))
    kw["mem_sync_domain_map"] = draw(st.none() | st.tuples(st.integers(0, 255),
                                                           st.integers(0, 255)))
    kw["nvlink_util_centric"] = draw(st.none() | st.booleans())
    portable = cluster is None or cluster[0] * cluster[1] * cluster[2] <= 8
    kw["cluster_size_mode"] = draw(st.none() | st.sampled_from(
        sorted(_CLUSTER_SIZE_MODES) if portable else ["default", "allow_non_portable"]))
    kw["shmem_mode"] = draw(st.none() | st.sampled_from(sorted(_SHMEM_MODES)))
    kw["shmem_carveout"] = draw(st.none() | st.integers(0, 100))
    if draw(st.booleans()):
        kw["access_policy"] = (draw(st.integers(0, 2**64 - 1)), draw(st.integers(0, 2**64 - 1)),
                               draw(st.floats(0.0, 1.0, width=32)),
                               draw(st.sampled_from(sorted(_PROPERTIES))),
                               draw(st.sampled_from(["normal", "streaming"])))
    kw["launch_completion_event"] = draw(st.none() | st.integers(1, 2**64 - 1))
    if draw(st.booleans()):
        kw["programmatic_event"] = (draw(st.integers(1, 2**64 - 1)), draw(st.booleans()))
    return grid, kw


@settings(max_examples=300, deadline=None)
@given(_configs())
def test_launch_attributes_match_a_reference_encoder(config):
    # Every combination of attributes, byte for byte against the reference above, and named
    # in the same order; the config it makes again from its fields is the same.
    grid, kw = config
    c = kernarg.LaunchConfig(grid, 32, **kw)
    assert c._raw_attributes() == _reference_attributes(kw)
    assert [name for name, _ in c.attributes] == [
        {1: "access_policy_window", 2: "cooperative", 4: "cluster_dimension",
         5: "cluster_scheduling_policy_preference", 6: "programmatic_stream_serialization",
         7: "programmatic_event", 8: "priority", 9: "mem_sync_domain_map",
         10: "mem_sync_domain",
         11: "preferred_cluster_dimension", 12: "launch_completion_event",
         14: "preferred_shared_memory_carveout", 16: "nvlink_util_centric_scheduling",
         17: "portable_cluster_size_mode", 18: "shared_memory_mode"}[attr_id]
        for attr_id, _ in _reference_attributes(kw)]
    assert c.__replace__() == c


def test_launch_configs_and_prepared_launches_are_initialised_once():
    """A LaunchConfig is a value, and a PreparedLaunch's call reads its kernel, config and
    stream without a lock on a free-threaded build (and the driver reads the config's
    attributes with the GIL released): __init__ called again on one in use would change them
    under a launch, so it is refused, and the object keeps its fields."""
    cfg = kernarg.LaunchConfig((2, 3), 64, shmem=128, cooperative=True)
    with pytest.raises(TypeError, match="a LaunchConfig cannot be initialised again"):
        cfg.__init__(1, 1)
    assert (cfg.grid, cfg.block, cfg.shmem, cfg.cooperative) == ((2, 3, 1), (64, 1, 1), 128, True)
    assert cfg == kernarg.LaunchConfig((2, 3), 64, shmem=128, cooperative=True)
    bare = kernarg.Kernel.__new__(kernarg.Kernel)
    p = kernarg.PreparedLaunch(bare, cfg, 7)
    with pytest.raises(TypeError, match="a PreparedLaunch cannot be initialised again: get a "
                                        r"new one from Kernel.prepare\(...\)"):
        p.__init__(bare, kernarg.LaunchConfig(1, 1), 9)
    assert p.config is cfg and p.stream == 7
