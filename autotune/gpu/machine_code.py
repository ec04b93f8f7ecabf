"""What a record names as "the kernel that ran": a hash of the compiled machine code.

A template may be reworded, split into includes or have a dead branch removed; where NVRTC still
emits the same instructions, every record measured on the old text still measures the kernel
that runs now. So a record keeps a digest of the cubin's code (`code_digest`), and
`check --static` compares that, not the source text.
"""

from __future__ import annotations

import hashlib
import struct

NONCE = "autotune_nonce_"  # compile.py's extra kernel
_KEPT = (".text.", ".nv.constant", ".nv.shared.", ".nv.global", ".nv.local.")
_NOBITS = 8  # SHT_NOBITS: a section with a size and no bytes in the file


class NotACubin(ValueError):
    """The bytes are not a well-formed 64-bit ELF image."""

    pass


def sections(cubin: bytes) -> list[tuple[str, int, bytes | None, int]]:
    """Return (name, type, bytes or None for NOBITS, size) of each section of a 64-bit ELF image."""
    if cubin[:5] != b"\x7fELF\x02" or len(cubin) < 64:
        raise NotACubin("not a 64-bit ELF image")
    try:
        shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        if shentsize < 64 or shoff + shnum * shentsize > len(cubin) or shstrndx >= shnum:
            raise NotACubin("the section table lies outside the image")
        heads = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        names_at = heads[shstrndx][4]
        out = []
        for name_off, typ, _flags, _addr, off, size, *_ in heads:
            start = names_at + name_off
            name = cubin[start : cubin.index(b"\0", start)].decode("ascii")
            data = None if typ == _NOBITS else cubin[off : off + size]
            if data is not None and len(data) != size:
                raise NotACubin(f"section {name} runs past the end of the image")
            out.append((name, typ, data, size))
        return out
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise NotACubin(f"a damaged ELF image ({exc})") from None


# The digest covers, for each kernel of the module: its instructions (`.text.<kernel>`), its
# parameter bank (`.nv.constant0.<kernel>`, sizes and offsets of the arguments), its other constant
# and global data, and its static shared memory (`.nv.shared.<kernel>`, by size: no bytes). It
# leaves out the ELF bookkeeping that moves when an unrelated kernel is added to the module: the
# symbol and string tables, relocation tables, and `.nv.info.*` (attribute records that name
# symbols by index). Registers and spills, which `.nv.info` also holds, are compared on their own
# from ptxas's report.
# On the GPU machines NVRTC can serve a module from its cache with an empty log; compile.py then
# appends an empty `autotune_nonce_*` kernel to get ptxas's report. That kernel's sections are left
# out, so its cubin digests as the one without it.
def code_digest(cubin: bytes) -> str:
    """Return 16 hex digits naming the machine code of every kernel in `cubin`."""
    h = hashlib.sha256()
    kept = sorted(
        (name, typ, data, size)
        for name, typ, data, size in sections(cubin)
        if name.startswith(_KEPT) and NONCE not in name
    )
    for name, typ, data, size in kept:
        h.update(f"{name}\0{typ}\0{size}\0".encode())
        if data is not None:
            h.update(data)
    return h.hexdigest()[:16]
