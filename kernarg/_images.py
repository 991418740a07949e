"""The kernels a CUDA machine-code image defines, read from its ELF symbol table.

A cubin is an ELF64 file. Each kernel is a function symbol (``STT_FUNC``) marked as an entry
point in its ``st_other`` byte (``STO_CUDA_ENTRY``, 0x10), named as its ``.entry`` is in the
PTX it came from: C++ kernels by their mangled names (``_ZN2ns1fEf``). A fatbin holds cubins
(and PTX) after its own headers; uncompressed cubins are found in it by their ELF magic, and
compressed ones not at all. Only names are read: nothing here decides what the driver loads.
"""
import struct

__all__ = ["cubin_entry_names"]

_ELF_MAGIC = b"\x7fELF"
_SHT_SYMTAB = 2
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10


def _elf_entries(image: bytes, start: int) -> list[str] | None:
    """The kernel names of the ELF64 little-endian file at ``start`` in ``image``, or None
    where it is not one or is cut short."""
    try:
        if image[start + 4] != 2 or image[start + 5] != 1:    # ELFCLASS64, ELFDATA2LSB
            return None
        shoff, = struct.unpack_from("<Q", image, start + 0x28)
        shentsize, shnum = struct.unpack_from("<HH", image, start + 0x3A)
        if shentsize < 64:
            return None
        sections = [struct.unpack_from("<IIQQQQIIQQ", image, start + shoff + i * shentsize)
                    for i in range(shnum)]
        names = []
        for _, kind, _, _, offset, size, link, _, _, entsize in sections:
            if kind != _SHT_SYMTAB or entsize != 24 or link >= shnum:
                continue
            strings = start + sections[link][4]
            for k in range(size // 24):
                st_name, st_info, st_other = struct.unpack_from("<IBB", image,
                                                                start + offset + 24 * k)
                if st_info & 0xF != _STT_FUNC or not st_other & _STO_CUDA_ENTRY:
                    continue
                end = image.index(b"\0", strings + st_name)
                names.append(image[strings + st_name:end].decode("ascii"))
        return names
    except (struct.error, IndexError, ValueError, OverflowError, UnicodeDecodeError):
        return None


def cubin_entry_names(image: bytes) -> list[str] | None:
    """The kernels (entry symbols) of a cubin, or of the uncompressed cubins in a fatbin; None
    where none could be read (not an image, compressed, or malformed)."""
    if image[:4] == _ELF_MAGIC:
        return _elf_entries(image, 0) or None
    names, at = [], image.find(_ELF_MAGIC)
    while at >= 0:
        names += _elf_entries(image, at) or []
        at = image.find(_ELF_MAGIC, at + 4)
    return sorted(set(names)) or None
