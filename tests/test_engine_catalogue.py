"""The curated model catalogue: well-formed entries, a pick that fits the machine, and a
broken entry that costs only itself."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from app.core.engine.catalogue import (
    CATALOGUE_FILE,
    LICENCES,
    PURPOSES,
    TOOLS,
    Machine,
    catalogue,
    find,
    load_catalogue,
    recommend,
    this_machine,
)

GB = 1024**3


def machine(gb: float, *, vram_gb: float = 0, gpu: str | None = None) -> Machine:
    total = int(gb * GB)
    return Machine(ram_total=total, ram_available=total // 2, vram=int(vram_gb * GB), gpu=gpu)


def test_every_entry_is_well_formed() -> None:
    models = catalogue()
    assert len(models) == len(json.loads(CATALOGUE_FILE.read_text())["models"])
    assert len({m.id for m in models}) == len(models)
    for m in models:
        assert re.fullmatch(r"[0-9a-f]{64}", m.sha256), m.id
        assert re.fullmatch(r"[0-9a-f]{40}", m.revision), m.id
        assert m.size > 0 and m.ram_bytes > m.size, m.id
        assert m.licence in LICENCES and m.tools in TOOLS and m.purpose in PURPOSES, m.id
        assert m.file.endswith(".gguf") and m.repo.count("/") == 1, m.id
        assert m.context > 0 and m.name and m.notes, m.id


def test_it_offers_chat_models_that_call_tools_and_an_embedding_model() -> None:
    chat = [m for m in catalogue() if m.purpose == "chat"]
    assert 4 <= len(chat) <= 7
    assert any(m.tools == "good" for m in chat)
    embedding = [m for m in catalogue() if m.purpose == "embedding"]
    assert embedding and all(m.tools == "none" for m in embedding)


def test_find_looks_up_by_id_ignoring_case() -> None:
    first = catalogue()[0]
    assert find(first.id.upper()) == first
    assert find("no-such-model") is None


@pytest.mark.parametrize(
    ("gb", "expected"),
    [
        (2, "qwen2.5-0.5b"),
        (4, "qwen2.5-1.5b"),
        (8, "phi-4-mini"),
        (16, "qwen2.5-7b"),
        (64, "qwen2.5-7b"),
    ],
)
def test_recommend_picks_the_largest_chat_model_that_fits_in_60_percent_of_memory(
    gb: int, expected: str
) -> None:
    pick = recommend(machine(gb))
    assert pick is not None and pick.id == expected
    assert pick.ram_bytes <= 0.6 * gb * GB
    assert pick.tools != "none" and pick.purpose == "chat"


def test_recommend_falls_back_to_the_smallest_and_then_to_nothing() -> None:
    smallest = min((m for m in catalogue() if m.purpose == "chat"), key=lambda m: m.ram_bytes)
    tight = Machine(ram_total=smallest.ram_bytes + 1, ram_available=0, vram=0, gpu=None)
    assert recommend(tight) == smallest
    assert recommend(machine(0.5)) is None


def test_recommend_sizes_to_the_graphics_memory_when_a_gpu_is_known() -> None:
    pick = recommend(machine(64, vram_gb=4, gpu="NVIDIA test card"))
    assert pick is not None and pick.ram_bytes <= 0.9 * 4 * GB
    assert pick.id != "qwen2.5-7b"


def test_recommend_an_embedding_model() -> None:
    pick = recommend(machine(8), purpose="embedding")
    assert pick is not None and pick.purpose == "embedding"


def test_this_machine_reports_its_memory() -> None:
    here = this_machine()
    assert here.ram_total > 0
    assert 0 < here.ram_available <= here.ram_total
    assert here.vram >= 0


def test_a_broken_entry_is_skipped_and_the_others_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    doc = json.loads(CATALOGUE_FILE.read_text())
    good = doc["models"][:2]
    bad_sha = dict(good[0], id="bad-sha", sha256="not-a-hash")
    bad_tools = dict(good[0], id="bad-tools", tools="excellent")
    duplicate = dict(good[1])
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({"models": [bad_sha, *good, "junk", bad_tools, duplicate]}))
    with caplog.at_level(logging.WARNING):
        models = load_catalogue(path)
    assert [m.id for m in models] == [good[0]["id"], good[1]["id"]]
    assert "bad-sha" in caplog.text and "sha256" in caplog.text
    assert "bad-tools" in caplog.text and "tools" in caplog.text
    assert "number 4" in caplog.text
    assert "used twice" in caplog.text


def test_an_unreadable_catalogue_gives_no_models(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "catalogue.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert load_catalogue(path) == ()
    assert "catalogue.json" in caplog.text


def test_a_download_mirror_must_be_a_whole_address() -> None:
    from app.core.settings import EngineSettings

    mirror = EngineSettings(endpoint=" https://mirror.example/ ")
    assert mirror.endpoint == "https://mirror.example"
    assert EngineSettings(endpoint="").endpoint == ""
    with pytest.raises(ValueError, match="whole address, starting with https://"):
        # as the Settings form checks it (a hand-edited file falls back to the default)
        EngineSettings.model_validate(
            {"endpoint": "mirror.example"}, context={"strict_ranges": True}
        )
    assert EngineSettings.model_validate({"endpoint": "mirror.example"}).endpoint == ""
