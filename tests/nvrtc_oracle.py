"""Layout oracle: compile kernels with NVRTC (no GPU needed) and read the compiler's .param list.

PTX declares each kernel parameter with its size and alignment, in order; the parameter buffer
offsets follow from them. This is the layout cuLaunchKernel expects.
"""
from __future__ import annotations

import re

from kernarg._nvrtc import compile_to_ptx

_SCALAR_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}
_PARAM = re.compile(r"\.param\s+(?P<decl>[^,\n)]*)")


def compile_ptx(source: str) -> str:
    # Compiling is kernarg._nvrtc's job (pip NVRTC + headers); the oracle's independent part is
    # reading the compiler's .param declarations below.
    return compile_to_ptx(source, options=("--std=c++17", "-default-device"), name="oracle.cu")


def parse_params(ptx: str, kernel: str) -> list[tuple[int, int]]:
    """Return [(size, align)] of ``kernel``'s parameters, in order."""
    m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\((?P<body>[^)]*)\)", ptx)
    if m is None:
        m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\(\s*\)", ptx)
        if m is None:
            raise LookupError(f"kernel {kernel} not in PTX")
        return []
    out = []
    for pm in _PARAM.finditer(m.group("body")):
        tokens = pm.group("decl").split()
        align = None
        if tokens[0] == ".align":
            align = int(tokens[1])
            tokens = tokens[2:]
        elem = _SCALAR_BYTES[re.match(r"\.[a-z]+(\d+)", tokens[0]).group(1)]
        count = 1
        arr = re.search(r"\[(\d+)\]", pm.group("decl"))
        if arr:
            count = int(arr.group(1))
        out.append((elem * count, align if align is not None else elem))
    return out


def layout(params: list[tuple[int, int]]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    offsets, sizes, cur = [], [], 0
    for size, align in params:
        cur = (cur + align - 1) // align * align
        offsets.append(cur)
        sizes.append(size)
        cur += size
    return tuple(offsets), tuple(sizes), cur


def kernels_layout(decls: dict[str, list[str]], prelude: str = "") -> dict[str, tuple]:
    """Compile one translation unit with a kernel per entry; return name -> layout()."""
    src = ["#include <cuda_fp16.h>", "#include <cuda_bf16.h>", prelude]
    for name, types in decls.items():
        params = ", ".join(f"{t} p{i}" for i, t in enumerate(types))
        src.append(f'extern "C" __global__ void {name}({params}) {{}}')
    ptx = compile_ptx("\n".join(src))
    return {name: layout(parse_params(ptx, name)) for name in decls}


def field_offsets(source: str, structs: dict[str, list[str]]) -> dict[tuple[str, str], int]:
    """{(struct name, field): offset} as NVRTC lays ``structs`` (name -> field names) out in
    ``source``, read from the PTX of device variables initialised with each field's address
    (`generic(probe)+8`): an oracle any NVRTC gives (CUDA 12's has no __builtin_offsetof)."""
    lines, keys = [], {}
    for k, name in enumerate(structs):
        # In a union with a constexpr constructor: constant-initialised, as a __device__
        # variable must be, whatever member initialisers the struct has.
        lines.append(f"union kernarg_u{k} {{ {name} s; char c; "
                     f"constexpr kernarg_u{k}() : c(0) {{}} }};"
                     f"__device__ kernarg_u{k} kernarg_probe{k};")
        for j, field in enumerate(structs[name]):
            lines.append(f"__device__ void* kernarg_off{k}_{j} = "
                         f"(void*)&kernarg_probe{k}.s.{field};")
            keys[(k, j)] = (name, field)
    ptx = compile_ptx(source + "\n".join(lines))
    found = re.findall(r"\.u64 kernarg_off(\d+)_(\d+) = generic\(kernarg_probe\d+\)(?:\+(\d+))?;",
                       ptx)
    assert len(found) == len(keys)
    return {keys[(int(k), int(j))]: int(offset or 0) for k, j, offset in found}


def bitfield_bits(source: str, structs: dict[str, list[str]]) -> dict[tuple[str, str], int]:
    """{(struct name, bit-field): the bits of the struct's bytes it occupies, as an int whose bit
    k is the struct's byte k // 8's bit k % 8} as NVRTC lays ``structs`` (name -> bit-field
    names) out in ``source``: read from the PTX of a ``__device__`` copy of the struct
    value-initialized but for that field, set to ``~0`` (all of its bits) by a constexpr
    function. A bit-field has no address, so field_offsets cannot read it."""
    lines, keys = [], {}
    for k, name in enumerate(structs):
        for j, field in enumerate(structs[name]):
            lines.append(f"constexpr {name} kernarg_set{k}_{j}() {{ {name} s{{}}; "
                         f"s.{field} = ~0; return s; }}\n"
                         f'extern "C" __device__ const {name} kernarg_bits{k}_{j} = '
                         f"kernarg_set{k}_{j}();")
            keys[(k, j)] = (name, field)
    ptx = compile_ptx(source + "\n" + "\n".join(lines))
    out = {}
    for (k, j), key in keys.items():
        m = re.search(rf"\.b8 kernarg_bits{k}_{j}\[(\d+)\](?: = \{{([^}}]*)\}})?;", ptx)
        data = [int(v) for v in m[2].split(",")] if m[2] else []
        out[key] = int.from_bytes(bytes(data).ljust(int(m[1]), b"\0"), "little")
    return out
