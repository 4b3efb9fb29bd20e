"""Reading a GGUF model file's header: what model it is and how much memory it needs.

Parsed by hand with struct rather than with the gguf package's GGUFReader: the reader maps
the whole file and builds a numpy view per vocabulary entry (seconds on a large vocabulary,
and a mapped file cannot be deleted on Windows while open). Only the metadata is read here;
the tensor data is never touched, so this is fast on multi-gigabyte files.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_MAX_KV = 1 << 20  # far more than any real file; guards against garbage counts
_MAX_KEY = 1 << 16
_MAX_TEXT = 1 << 16  # a kept text value (name, architecture); longer is not a real header
_MAX_ITEMS = 1 << 23  # strings in arrays, all told: 30x a large vocabulary, ~1 s to skip

# GGUF value types: id -> struct code (fixed-size scalars)
_SCALARS: dict[int, str] = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING = 8
_ARRAY = 9

# llama.cpp's llama_ftype (general.file_type) numbers, as in the gguf package's LlamaFileType.
_FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}

# Keys whose values are kept (everything else, e.g. the vocabulary, is skipped unread).
_WANTED_SUFFIXES = (
    ".context_length",
    ".block_count",
    ".embedding_length",
    ".attention.head_count",
    ".attention.head_count_kv",
)
_WANTED = {"general.architecture", "general.name", "general.file_type"}


class GgufError(ValueError):
    """A file that cannot be used as a GGUF model; the message names the file."""


@dataclass(frozen=True)
class GgufInfo:
    """What the header of a GGUF file says about the model in it."""

    path: Path
    size: int
    architecture: str
    name: str | None
    context_length: int | None
    block_count: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | None
    file_type: str | None
    chat_template: bool

    def kv_bytes_per_token(self) -> int | None:
        """f16 K and V cache bytes per context token; None when the header lacks the sizes."""
        blocks, embed, heads = self.block_count, self.embedding_length, self.head_count
        if not blocks or not embed or not heads:
            return None
        kv_heads = self.head_count_kv or heads
        return 2 * blocks * (embed // heads * kv_heads) * 2


class _Truncated(Exception):
    """The header ends before it should."""


class _Reader:
    """Reads header values from a buffered file, never past its end."""

    def __init__(self, fh: BinaryIO, size: int, endian: str) -> None:
        self.fh = fh
        self.size = size
        self.endian = endian
        self.items_left = _MAX_ITEMS

    def read(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise _Truncated
        return data

    def skip(self, n: int) -> None:
        if self.fh.tell() + n > self.size:
            raise _Truncated
        self.fh.seek(n, 1)

    def scalar(self, code: str) -> int | float | bool:
        value: int | float | bool
        (value,) = struct.unpack(self.endian + code, self.read(struct.calcsize(code)))
        return value

    def u32(self) -> int:
        return int(self.scalar("I"))

    def u64(self) -> int:
        return int(self.scalar("Q"))

    def string_length(self) -> int:
        length = self.u64()
        if self.fh.tell() + length > self.size:
            raise _Truncated
        return length

    def string(self) -> str:
        length = self.string_length()
        if length > _MAX_TEXT:
            raise ValueError(f"a text value is {length:,} bytes long")
        return self.read(length).decode("utf-8", errors="replace")

    def skip_value(self, vtype: int) -> None:
        if vtype in _SCALARS:
            self.skip(struct.calcsize(_SCALARS[vtype]))
        elif vtype == _STRING:
            self.skip(self.string_length())
        elif vtype == _ARRAY:
            self._skip_array()
        else:
            raise ValueError(f"unknown value type {vtype}")

    def _skip_array(self) -> None:
        etype, count = self.u32(), self.u64()
        if etype in _SCALARS:
            self.skip(count * struct.calcsize(_SCALARS[etype]))
            return
        if etype != _STRING:  # llama.cpp refuses arrays of arrays too
            raise ValueError(f"an array holds values of type {etype}")
        if count * 8 > self.size - self.fh.tell():
            raise _Truncated
        if count > self.items_left:
            raise ValueError(f"its arrays hold more than {_MAX_ITEMS:,} strings")
        self.items_left -= count
        self._skip_strings(count)

    def _skip_strings(self, count: int) -> None:
        """Skip `count` strings: the hot loop of a header (the vocabulary), kept lean."""
        left = self.size - self.fh.tell()
        length_of = struct.Struct(self.endian + "Q").unpack
        read, seek = self.fh.read, self.fh.seek
        for _ in range(count):
            data = read(8)
            if len(data) != 8:
                raise _Truncated
            (length,) = length_of(data)
            left -= 8 + length
            if left < 0:
                raise _Truncated
            seek(length, 1)

    def value(self, vtype: int) -> int | float | bool | str | None:
        """A scalar or string value; arrays are skipped and give None."""
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        self.skip_value(vtype)
        return None


def _endian(version_bytes: bytes) -> tuple[str, int]:
    """The byte order the file was written in, and its version."""
    (little,) = struct.unpack("<I", version_bytes)
    if little in _VERSIONS:
        return "<", little
    (big,) = struct.unpack(">I", version_bytes)
    if big in _VERSIONS:
        return ">", big
    return "<", little


def _read_metadata(reader: _Reader, label: str) -> dict[str, int | float | bool | str | None]:
    """The wanted key/values of the header; stops before the tensor descriptions."""
    reader.u64()  # tensor count
    kv_count = reader.u64()
    if kv_count > _MAX_KV:
        raise GgufError(f"{label} is not a usable GGUF model file (its header is damaged)")
    found: dict[str, int | float | bool | str | None] = {}
    for _ in range(kv_count):
        key_length = reader.string_length()
        if key_length > _MAX_KEY:
            raise GgufError(f"{label} is not a usable GGUF model file (its header is damaged)")
        key = reader.read(key_length).decode("utf-8", errors="replace")
        vtype = reader.u32()
        if key == "tokenizer.chat_template":
            reader.skip_value(vtype)
            found[key] = True
        elif key in _WANTED or key.endswith(_WANTED_SUFFIXES):
            found[key] = reader.value(vtype)
        else:
            reader.skip_value(vtype)
    return found


def _int(meta: dict[str, int | float | bool | str | None], key: str) -> int | None:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def read_gguf_info(path: Path) -> GgufInfo:
    """The header of a GGUF file; GgufError (naming the file) when it is not one."""
    path = Path(path)
    label = path.name
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise GgufError(f"{label} is not a GGUF model file (it is not a file)")
        with path.open("rb") as fh:
            magic = fh.read(4)
            if magic != _MAGIC:
                if len(magic) < 4:
                    raise GgufError(f"{label} is not a GGUF model file (it is empty or too short)")
                raise GgufError(f"{label} is not a GGUF model file (it does not start with GGUF)")
            version_bytes = fh.read(4)
            if len(version_bytes) < 4:
                raise _Truncated
            endian, version = _endian(version_bytes)
            if version not in _VERSIONS:
                raise GgufError(
                    f"{label} is a GGUF file of version {version}, which is not supported "
                    "(versions 2 and 3 are)"
                )
            meta = _read_metadata(_Reader(fh, size, endian), label)
    except _Truncated:
        raise GgufError(
            f"{label} is not a complete GGUF model file (its header is cut short)"
        ) from None
    except ValueError as exc:
        if isinstance(exc, GgufError):
            raise
        raise GgufError(
            f"{label} is not a usable GGUF model file (its header is damaged: {exc})"
        ) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise GgufError(f"{label} could not be read: {reason}") from exc
    return _info(path, size, meta, label)


def _info(
    path: Path, size: int, meta: dict[str, int | float | bool | str | None], label: str
) -> GgufInfo:
    """The GgufInfo for a header's metadata."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GgufError(f"{label} is not a usable GGUF model file (it names no architecture)")
    name = meta.get("general.name")
    file_type = _int(meta, "general.file_type")
    return GgufInfo(
        path=path,
        size=size,
        architecture=arch,
        name=name if isinstance(name, str) and name else None,
        context_length=_int(meta, f"{arch}.context_length"),
        block_count=_int(meta, f"{arch}.block_count"),
        embedding_length=_int(meta, f"{arch}.embedding_length"),
        head_count=_int(meta, f"{arch}.attention.head_count"),
        head_count_kv=_int(meta, f"{arch}.attention.head_count_kv"),
        file_type=_FILE_TYPES.get(file_type) if file_type is not None else None,
        chat_template=bool(meta.get("tokenizer.chat_template")),
    )
