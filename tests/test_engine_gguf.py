"""Reading GGUF headers: the real SmolLM2 file, and files that are not (or not quite) GGUF."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from app.core.engine.gguf import GgufError, read_gguf_info
from tests.hf_endpoint import smollm_path


def smollm2() -> Path:
    return smollm_path()


def write_gguf(path: Path, arch: str, **ints: int) -> Path:
    """A GGUF written by llama.cpp's own writer (the gguf package), with no tensors."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_name("Tiny test model")
    for key, value in ints.items():
        writer.add_uint32(f"{arch}.{key}", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_real_smollm2_file_is_read_from_its_header() -> None:
    path = smollm2()
    info = read_gguf_info(path)
    assert info.path == path
    assert info.size == path.stat().st_size
    assert info.architecture == "llama"
    assert info.chat_template is True
    assert info.file_type == "Q4_1"
    assert info.context_length == 8192
    assert (info.block_count, info.embedding_length) == (30, 576)
    assert (info.head_count, info.head_count_kv) == (9, 3)
    assert info.name and "135M" in info.name


def test_kv_cache_per_token_counts_k_and_v_in_f16_for_every_layer() -> None:
    info = read_gguf_info(smollm2())
    # 2 (K and V) * 30 layers * (576 / 9 heads * 3 kv heads) * 2 bytes
    assert info.kv_bytes_per_token() == 2 * 30 * 192 * 2


def test_a_header_cut_short_is_refused_naming_the_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(smollm2().read_bytes()[:200_000])  # ends inside the vocabulary
    with pytest.raises(GgufError, match=r"cut\.gguf .*cut short"):
        read_gguf_info(cut)


def test_a_text_file_named_gguf_is_not_a_model(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("These are my notes, not a model.\n")
    with pytest.raises(GgufError, match=r"notes\.gguf is not a GGUF model file"):
        read_gguf_info(text)


def test_a_safetensors_file_renamed_gguf_is_not_a_model(tmp_path: Path) -> None:
    header = b'{"__metadata__":{"format":"pt"}}'
    fake = tmp_path / "model.gguf"
    fake.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    with pytest.raises(GgufError, match=r"model\.gguf is not a GGUF model file"):
        read_gguf_info(fake)


def test_an_empty_file_is_not_a_model(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(GgufError, match=r"empty\.gguf is not a GGUF model file"):
        read_gguf_info(empty)


def test_a_missing_file_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(GgufError, match=r"gone\.gguf could not be read"):
        read_gguf_info(tmp_path / "gone.gguf")


def test_a_folder_is_not_a_model(tmp_path: Path) -> None:
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    with pytest.raises(GgufError, match=r"folder\.gguf"):
        read_gguf_info(folder)


def test_an_unsupported_gguf_version_says_so(tmp_path: Path) -> None:
    old = tmp_path / "old.gguf"
    old.write_bytes(b"GGUF" + struct.pack("<I", 1) + b"\0" * 64)
    with pytest.raises(GgufError, match=r"old\.gguf .*version 1"):
        read_gguf_info(old)


def test_an_unknown_architecture_is_read_with_what_it_has(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "odd.gguf", "notanarch", block_count=4)
    info = read_gguf_info(path)
    assert info.architecture == "notanarch"
    assert info.name == "Tiny test model"
    assert info.block_count == 4
    assert info.head_count is None
    assert info.kv_bytes_per_token() is None
    assert info.chat_template is False
    assert info.file_type is None


def test_only_the_header_is_read_of_a_multi_gigabyte_file(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "big.gguf",
        "llama",
        block_count=32,
        embedding_length=4096,
        context_length=8192,
        **{"attention.head_count": 32, "attention.head_count_kv": 8},
    )
    with path.open("r+b") as fh:  # a sparse 3 GB tail stands in for the tensor data
        fh.truncate(3 * 1024**3)
    info = read_gguf_info(path)
    assert info.size == 3 * 1024**3
    assert info.kv_bytes_per_token() == 2 * 32 * 1024 * 2
    assert info.context_length == 8192


# ---- hostile headers: refused at once, without big allocations or long loops -------------


def gguf_text(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def hostile_gguf(path: Path, value: bytes, *, key: str = "general.name", gap: int = 0) -> Path:
    """A version-3 GGUF whose header holds `key` = `value` (its type and first bytes), then
    `gap` zero bytes (sparse, the rest of the value), then an architecture."""
    with path.open("wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + gguf_text(key) + value)
        fh.seek(gap, 1)
        fh.write(gguf_text("general.architecture") + struct.pack("<I", 8) + gguf_text("llama"))
    return path


def test_arrays_nested_thousands_deep_are_refused_plainly(tmp_path: Path) -> None:
    depth = 20_000
    nested = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 0, 0)
    path = hostile_gguf(tmp_path / "deep.gguf", nested, key="tokenizer.ggml.tokens")
    with pytest.raises(GgufError, match=r"deep\.gguf is not a usable GGUF model file"):
        read_gguf_info(path)


def test_a_name_gigabytes_long_is_refused_without_reading_it(tmp_path: Path) -> None:
    # the length fits the (sparse) file, so only a limit on text values stops the read
    length = 64 * 2**20
    value = struct.pack("<IQ", 8, length)
    path = hostile_gguf(tmp_path / "long.gguf", value, gap=length)
    with pytest.raises(GgufError, match=r"long\.gguf is not a usable GGUF model file"):
        read_gguf_info(path)


def test_an_array_of_millions_of_strings_is_refused_at_once(tmp_path: Path) -> None:
    count = 1 << 24  # 16 million empty strings fit a sparse 128 MiB file
    value = struct.pack("<IIQ", 9, 8, count)
    path = hostile_gguf(tmp_path / "many.gguf", value, key="tokenizer.ggml.tokens", gap=8 * count)
    with pytest.raises(GgufError, match=r"many\.gguf is not a usable GGUF model file"):
        read_gguf_info(path)


def test_an_array_of_an_unknown_type_is_refused(tmp_path: Path) -> None:
    value = struct.pack("<IIQ", 9, 4242, 3) + b"\0" * 64
    path = hostile_gguf(tmp_path / "odd.gguf", value, key="tokenizer.ggml.scores")
    with pytest.raises(GgufError, match=r"odd\.gguf is not a usable GGUF model file"):
        read_gguf_info(path)
