"""Offsets and sizes from kernarg.pack equal what NVRTC assigns to the same parameter types.

No GPU is needed: NVRTC compiles to PTX, whose .param list gives the compiler's layout.
"""
import random

import ml_dtypes
import numpy as np
import pytest

import kernarg

import reference
from nvrtc_oracle import kernels_layout
from test_handler import CTYPES_VALUES, NUMPY_SCALARS

kernarg.register(reference.Pointer, lambda p: p.address)

ALL_KINDS = (
    [True, 7, 2**63 + 5, -1.5, 2 - 3j, None, reference.Pointer(0x1000), ml_dtypes.bfloat16(2.0),
     np.array([(1, 2.0)], dtype=np.dtype([("a", np.int8), ("b", np.float64)], align=True))[0],
     np.array([(1, 2, 3)], dtype=np.dtype([("a", np.int16), ("b", np.int8), ("c", np.int32)],
                                          align=True))[0],
     # Aligned structs rewrapped as numpy.record and numpy.void dtypes, whose dtype.alignment
     # numpy gives as 1: kernarg packed them at 1, where the kernel does not read them.
     np.rec.array(np.array([(1, 2.0)], dtype=np.dtype([("a", np.int8), ("b", np.float64)],
                                                       align=True)))[0],
     np.ones(1, np.dtype((np.void, np.dtype([("x", np.float32), ("n", np.int16)],
                                            align=True))))[0]]
    + NUMPY_SCALARS + CTYPES_VALUES
)


def _ids(v):
    return type(v).__name__


def _oracle(cases: dict[str, tuple]) -> dict[str, tuple]:
    structs: dict[str, str] = {}
    decls = {name: [reference.c_type(v, structs) for v in args] for name, args in cases.items()}
    return kernels_layout(decls, prelude="\n".join(structs.values()))


def test_each_kind_alone_and_after_a_byte():
    cases = {}
    for i, v in enumerate(ALL_KINDS):
        cases[f"alone{i}"] = (v,)
        cases[f"after{i}"] = (np.int8(1), v, np.int8(2))
    expected = _oracle(cases)
    for name, args in cases.items():
        block = kernarg.pack(args)
        offsets, sizes, nbytes = expected[name]
        assert (block.offsets, block.sizes, block.nbytes) == (offsets, sizes, nbytes), (
            f"{name}: {[_ids(a) for a in args]}")


def test_all_kinds_together():
    args = tuple(ALL_KINDS)
    offsets, sizes, nbytes = _oracle({"k": args})["k"]
    block = kernarg.pack(args)
    assert block.offsets == offsets and block.sizes == sizes and block.nbytes == nbytes


@pytest.mark.parametrize("seed", range(3))
def test_random_mixes(seed):
    rng = random.Random(seed)
    cases = {f"mix{seed}_{i}": tuple(rng.choice(ALL_KINDS) for _ in range(rng.randint(1, 24)))
             for i in range(100)}
    expected = _oracle(cases)
    for name, args in cases.items():
        block = kernarg.pack(args)
        assert (block.offsets, block.sizes, block.nbytes) == expected[name], name
