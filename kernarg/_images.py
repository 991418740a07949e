"""The kernels and variables a CUDA machine-code image defines, read from its ELF symbol table.

A cubin is an ELF64 file. Each kernel is a function symbol (``STT_FUNC``) marked as an entry
point in its ``st_other`` byte (``STO_CUDA_ENTRY``, 0x10), named as its ``.entry`` is in the
PTX it came from: C++ kernels by their mangled names (``_ZN2ns1fEf``). Each ``__device__``
or ``__constant__`` variable is a data symbol (``STT_OBJECT``; in a relocatable cubin, type 13,
processor-specific), named as in the PTX. Undefined symbols (references to other images) are
not the image's. A fatbin
holds cubins (and PTX) after its own headers; uncompressed cubins are found in it by their
ELF magic, and compressed ones not at all. Only names are read: nothing here decides what
the driver loads.
"""
import re
import struct

__all__ = ["cubin_entry_names", "cubin_variable_names", "image_variable_names",
           "is_relocatable_cubin", "undefined_functions"]

_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = b"\x50\xed\x55\xba"     # 0xBA55ED50, little-endian
_ET_REL = 1
_SHT_SYMTAB = 2
_STT_OBJECT = 1
_STT_FUNC = 2
# A variable of a relocatable cubin (-rdc=true, -dc): its symbols are typed STT_LOPROC (13), not
# STT_OBJECT, until the linker places them.
_STT_CUDA_OBJECT = 13
_STO_CUDA_ENTRY = 0x10


def _wanted_entry(st_info: int, st_other: int) -> bool:
    return st_info & 0xF == _STT_FUNC and bool(st_other & _STO_CUDA_ENTRY)


def _wanted_variable(st_info: int, st_other: int) -> bool:
    return st_info & 0xF in (_STT_OBJECT, _STT_CUDA_OBJECT)


# The longest symbol name read (a C++ template kernel's mangled name can run to thousands of
# characters; an image with a longer one is read as unreadable, and the driver asked instead).
_MAX_NAME = 1 << 16


def _elf_entries(image: bytes, start: int, wanted=_wanted_entry,
                 budget: list | None = None, undefined: bool = False) -> list[str] | None:
    """The names of the symbols ``wanted(st_info, st_other)`` picks (by default the kernels)
    of the ELF64 little-endian file at ``start`` in ``image``, or None where it is not one or
    is cut short; ``undefined``: the undefined symbols (``st_shndx`` 0) instead of the defined
    ones. ``budget``: a one-item list, the symbol entries left to read in the whole
    image; the tables of a well-formed one do not overlap, so they hold no more than
    ``len(image) // 24`` entries in all, and tables that claim more (each the whole image
    again) are not read: the cost stays linear in the image's size."""
    if budget is None:
        budget = [len(image) // 24]
    try:
        if image[start + 4] != 2 or image[start + 5] != 1:    # ELFCLASS64, ELFDATA2LSB
            return None
        shoff, = struct.unpack_from("<Q", image, start + 0x28)
        shentsize, shnum = struct.unpack_from("<HH", image, start + 0x3A)
        if shentsize < 64 or start + shoff + shnum * shentsize > len(image):
            return None     # (checked first: a table read entry by entry to where it is cut
                            # short costs each of many stray ELF magics in a fatbin as much)
        sections = [struct.unpack_from("<IIQQQQIIQQ", image, start + shoff + i * shentsize)
                    for i in range(shnum)]
        names = []
        for _, kind, _, _, offset, size, link, _, _, entsize in sections:
            if kind != _SHT_SYMTAB or entsize != 24 or link >= shnum:
                continue
            strings = start + sections[link][4]
            if size // 24 > budget[0]:
                return None
            budget[0] -= size // 24
            for k in range(size // 24):
                st_name, st_info, st_other, st_shndx = struct.unpack_from(
                    "<IBBH", image, start + offset + 24 * k)
                if (st_shndx == 0) != undefined or not wanted(st_info, st_other):
                    continue        # (an undefined symbol: one the image refers to, not has)
                end = image.find(b"\0", strings + st_name, strings + st_name + _MAX_NAME)
                if end < 0:
                    return None
                names.append(image[strings + st_name:end].decode("ascii"))
        return names
    except (struct.error, IndexError, ValueError, OverflowError, UnicodeDecodeError):
        return None


def cubin_entry_names(image: bytes, wanted=_wanted_entry) -> list[str] | None:
    """The kernels (entry symbols) of a cubin, or of the uncompressed cubins in a fatbin; None
    where none could be read (not an image, compressed, or malformed). ``wanted`` picks other
    symbols instead (cubin_variable_names)."""
    if image[:4] == _ELF_MAGIC:
        return _elf_entries(image, 0, wanted) or None
    names, at, budget = [], image.find(_ELF_MAGIC), [len(image) // 24]
    while at >= 0:
        names += _elf_entries(image, at, wanted, budget) or []
        at = image.find(_ELF_MAGIC, at + 4)
    return sorted(set(names)) or None


def cubin_variable_names(image: bytes) -> list[str] | None:
    """The ``__device__`` and ``__constant__`` variables (data symbols) of a cubin, or of the
    uncompressed cubins in a fatbin; None where none could be read."""
    return cubin_entry_names(image, _wanted_variable)


# A module-scope variable in PTX: optional linkage directives, then the state space, then the
# type and attributes, the name, and any array extents, before an initializer or the end. The
# name starts where no word goes on (else a long name with nothing after it is tried from each
# of its characters: quadratic).
_PTX_VARIABLE = re.compile(
    r"^[ \t]*(?:\.(?:visible|extern|weak|common)[ \t]+)*\.(?:global|const)[ \t]"
    r"[^;=\n]*?(?<![\w$%])([A-Za-z_$%][\w$]*)[ \t]*(?:\[[^\]\n]*\][ \t]*)*[=;]", re.M)


def image_variable_names(image: bytes) -> list[str] | None:
    """The ``__device__`` and ``__constant__`` variables of an image cuModuleLoadData took: a
    cubin or fatbin (their symbols), or PTX text (its ``.global`` and ``.const``
    declarations); None where none could be read."""
    if image[:4] in (_ELF_MAGIC, _FATBIN_MAGIC):
        return cubin_variable_names(image)
    try:
        text = image.rstrip(b"\0").decode()
    except UnicodeDecodeError:
        return None
    return sorted(set(_PTX_VARIABLE.findall(text))) or None


def _wanted_undefined_function(st_info: int, st_other: int) -> bool:
    return st_info & 0xF == _STT_FUNC


def undefined_functions(image: bytes) -> list[str]:
    """The functions a relocatable cubin calls and does not define (its undefined ``STT_FUNC``
    symbols: those of the CUDA device runtime, ``__cudaCDP2...``, for a kernel that launches
    kernels), for the linker to find elsewhere; ``[]`` where there are none or ``image`` is not
    a cubin that can be read."""
    if image[:4] != _ELF_MAGIC:
        return []
    return _elf_entries(image, 0, _wanted_undefined_function, undefined=True) or []


def is_relocatable_cubin(image: bytes) -> bool:
    """Whether ``image`` is a relocatable cubin (ELF type ET_REL: NVRTC's output with
    ``-rdc=true`` or ``-dc``, nvcc's with ``-dc``), which the driver loads only once linked."""
    return image[:4] == _ELF_MAGIC and image[16:18] == _ET_REL.to_bytes(2, "little")
