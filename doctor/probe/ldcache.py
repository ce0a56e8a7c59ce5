"""The dynamic loader's view: /etc/ld.so.cache read directly (no `ldconfig -p` subprocess)."""

from __future__ import annotations

import struct

NEW_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = struct.Struct("<20sII B3xI 12x")  # magic+version, nlibs, len_strings, flags, extension offset
_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap


def parse_ld_so_cache(data: bytes) -> dict[str, list[str]]:
    """soname -> paths, in cache order. Handles the new format, alone or after the old one."""
    start = data.find(NEW_MAGIC)
    if start < 0:
        return {}
    try:
        _, nlibs, _, _, _ = _HEADER.unpack_from(data, start)
    except struct.error:
        return {}
    out: dict[str, list[str]] = {}
    offset = start + _HEADER.size
    for i in range(nlibs):
        try:
            _, key, value, _, _ = _ENTRY.unpack_from(data, offset + i * _ENTRY.size)
        except struct.error:
            break
        name, path = _cstr(data, start + key), _cstr(data, start + value)
        if name and path:
            out.setdefault(name, []).append(path)
    return out


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        return ""
    return data[offset:end].decode("utf-8", "replace")

