"""The models a home has: registering files, removing them safely, surviving a damaged list."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from app.core.engine.gguf import GgufError
from app.core.engine.store import ModelStore


def write_gguf(path: Path, name: str = "Tiny test model") -> Path:
    """A real (tensor-less) GGUF file, written by llama.cpp's own gguf package."""
    from gguf import GGUFWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_uint32("llama.block_count", 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "home")


def download(store: ModelStore, file: str = "Qwen-Tiny-Q4_K_M.gguf") -> Path:
    """A model file where Deskhand puts its downloads."""
    return write_gguf(store.download_dir().parent / file)


def test_a_users_file_is_registered_where_it_is(store: ModelStore, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "mine" / "My Model Q4_K_M.gguf", name="My model")
    model = store.add_file(path)
    assert model.id == "my-model-q4-k-m"
    assert (model.name, model.path, model.source) == ("My model", path, "file")
    assert model.owned is False and model.size == path.stat().st_size
    assert ModelStore(store.home).models() == [model]  # persisted
    if os.name == "posix":
        assert stat.S_IMODE(store.registry.stat().st_mode) == 0o600
        assert stat.S_IMODE(store.dir.stat().st_mode) == 0o700


def test_the_same_file_added_twice_is_one_model(store: ModelStore, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "model.gguf")
    first = store.add_file(path)
    assert store.add_file(tmp_path / "." / "model.gguf") == first
    assert len(store.models()) == 1


def test_ids_are_unique_slugs(store: ModelStore, tmp_path: Path) -> None:
    a = store.add_file(write_gguf(tmp_path / "a" / "model.gguf"))
    b = store.add_file(write_gguf(tmp_path / "b" / "model.gguf"))
    assert (a.id, b.id) == ("model", "model-2")


def test_a_file_that_is_not_gguf_is_refused_naming_it(store: ModelStore, tmp_path: Path) -> None:
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    with pytest.raises(GgufError, match=r"notes\.gguf is not a GGUF model file"):
        store.add_file(notes)
    assert store.models() == []
    assert notes.exists()


def test_removing_a_users_file_never_deletes_it(store: ModelStore, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "keep-me.gguf")
    model = store.add_file(path)
    assert store.remove(model.id) == model
    assert path.is_file()
    assert store.models() == []


def test_removing_a_download_deletes_it_and_its_partial_download(store: ModelStore) -> None:
    path = download(store)
    partial = store.download_dir() / (path.name + ".5f2c9a.part")
    partial.write_bytes(b"half")
    other = store.download_dir() / "Other-Model.gguf.5f2c9a.part"
    other.write_bytes(b"someone else's")
    model = store.add_downloaded(
        "qwen-tiny", "Qwen tiny", path, "catalogue", "Qwen/Tiny-GGUF", path.name, "AB" * 32
    )
    assert model.owned and model.sha256 == "ab" * 32 and model.size == path.stat().st_size
    store.remove("QWEN-TINY")
    assert not path.exists() and not partial.exists()
    assert other.exists()
    assert store.get("qwen-tiny") is None


def test_a_download_again_replaces_its_entry(store: ModelStore) -> None:
    path = download(store)
    store.add_downloaded("qwen-tiny", "Qwen tiny", path, "catalogue", "r/x", path.name, None)
    again = store.add_downloaded(
        "qwen-tiny", "Qwen tiny", path, "catalogue", "r/x", path.name, None
    )
    assert store.models() == [again]


def test_an_edited_registry_cannot_make_it_delete_files_outside_the_models_folder(
    store: ModelStore, tmp_path: Path
) -> None:
    secret = tmp_path / "ssh" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY")
    escaping = store.dir / ".." / ".." / "ssh" / "id_rsa"
    store.add_file(write_gguf(tmp_path / "real.gguf"))  # creates the registry
    doc = json.loads(store.registry.read_text())
    for model_id, path in (("stolen", str(secret)), ("escaping", str(escaping))):
        doc["models"].append(
            {"id": model_id, "name": model_id, "path": path, "source": "catalogue",
             "repo": None, "file": "id_rsa", "size": 11, "sha256": None, "owned": True}
        )  # fmt: skip
    store.registry.write_text(json.dumps(doc))
    store.remove("stolen")
    store.remove("escaping")
    assert secret.read_text() == "PRIVATE KEY"
    assert [m.id for m in store.models()] == ["real"]


def test_a_damaged_registry_keeps_the_files_and_lists_the_downloads(
    store: ModelStore, tmp_path: Path
) -> None:
    mine = write_gguf(tmp_path / "mine.gguf")
    store.add_file(mine)
    path = download(store)
    store.add_downloaded("qwen-tiny", "Qwen tiny", path, "catalogue", "r/x", path.name, None)
    store.registry.write_text('{"models": [ {"id": "qwen-tiny", ')  # cut off mid-write
    models = store.models()
    assert [(m.path, m.owned) for m in models] == [(path, True)]
    assert mine.is_file() and path.is_file()
    assert store.registry.with_name("models.json.damaged").read_text().startswith('{"models"')
    added = store.add_file(mine)  # and it carries on, writing a good registry
    assert [m.path for m in ModelStore(store.home).models()] == [path, added.path]


def test_a_damaged_entry_is_skipped_and_the_others_kept(store: ModelStore, tmp_path: Path) -> None:
    good = store.add_file(write_gguf(tmp_path / "good.gguf"))
    doc = json.loads(store.registry.read_text())
    doc["models"] += [{"id": "no-path"}, "junk", {**doc["models"][0], "source": "elsewhere"}]
    store.registry.write_text(json.dumps(doc))
    assert store.models() == [good]


def test_resolve_by_id_name_or_file_name(store: ModelStore, tmp_path: Path) -> None:
    a = store.add_file(write_gguf(tmp_path / "a" / "alpha.gguf", name="Alpha Chat"))
    store.add_file(write_gguf(tmp_path / "b" / "b1.gguf", name="Twin"))
    store.add_file(write_gguf(tmp_path / "c" / "c1.gguf", name="Twin"))
    assert store.resolve("ALPHA") == a
    assert store.resolve("alpha chat") == a
    assert store.resolve("Alpha.gguf") == a
    assert store.resolve("twin") is None  # two models share that name
    assert store.resolve("nothing") is None
    assert store.resolve("  ") is None


def test_downloads_move_with_the_home_folder(store: ModelStore, tmp_path: Path) -> None:
    path = download(store)
    store.add_downloaded("qwen-tiny", "Qwen tiny", path, "catalogue", "r/x", path.name, None)
    moved = tmp_path / "moved-home"
    store.home.rename(moved)
    model = ModelStore(moved).get("qwen-tiny")
    assert model is not None and model.path == moved / "models" / path.name
    assert model.path.is_file()


def test_removing_an_unknown_model_says_so(store: ModelStore) -> None:
    with pytest.raises(KeyError, match="no model called ghost"):
        store.remove("ghost")


def test_partial_downloads_live_under_the_models_folder(store: ModelStore) -> None:
    assert store.download_dir() == store.home / "models" / "downloads"
    assert store.download_dir().is_dir()


def test_a_model_is_found_by_its_file_name_without_the_extension(tmp_path: Path) -> None:
    from tests.hf_endpoint import smollm_path

    own = tmp_path / "Tiny-Model.Q4_1.gguf"
    own.write_bytes(smollm_path().read_bytes())
    store = ModelStore(tmp_path / "home")
    added = store.add_file(own)
    assert store.resolve("tiny-model.q4_1") == added
    assert store.resolve("Tiny-Model.Q4_1.gguf") == added


# ---- a registry written by someone else ---------------------------------------------------


def add_entries(store: ModelStore, *entries: dict[str, object]) -> None:
    doc = json.loads(store.registry.read_text())
    for entry in entries:
        doc["models"].append(
            {"name": "x", "source": "catalogue", "repo": None, "file": None, "size": 1,
             "sha256": None, "owned": True, **entry}
        )  # fmt: skip
    store.registry.write_text(json.dumps(doc))


def test_an_entry_with_an_impossible_size_or_path_is_skipped(
    store: ModelStore, tmp_path: Path
) -> None:
    good = store.add_file(write_gguf(tmp_path / "good.gguf"))
    add_entries(
        store,
        {"id": "huge", "path": "huge.gguf", "size": 1e999},  # JSON's infinity
        {"id": "nul", "path": "nul\u0000.gguf"},
    )
    assert store.models() == [good]
    other = store.add_file(write_gguf(tmp_path / "other.gguf"))
    assert store.models() == [good, other]


def test_a_registry_nested_beyond_reason_counts_as_damaged(store: ModelStore) -> None:
    download(store)
    store.dir.mkdir(parents=True, exist_ok=True)
    store.registry.write_text('{"models": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert [m.path.name for m in store.models()] == ["Qwen-Tiny-Q4_K_M.gguf"]


def test_a_linked_downloads_folder_never_leads_deletion_outside(
    store: ModelStore, tmp_path: Path
) -> None:
    path = download(store)
    model = store.add_downloaded("qwen", "Qwen", path, "catalogue", "r/x", path.name, None)
    elsewhere = tmp_path / "documents"
    elsewhere.mkdir()
    keep = elsewhere / f"{path.name}.report.txt"  # named like a partial download
    keep.write_text("mine")
    (store.dir / "downloads").rmdir()
    (store.dir / "downloads").symlink_to(elsewhere, target_is_directory=True)
    store.remove(model.id)
    assert not path.exists()
    assert keep.read_text() == "mine"


def test_downloads_in_a_models_folder_linked_to_another_disk_can_be_removed(
    tmp_path: Path,
) -> None:
    disk = tmp_path / "big-disk" / "models"
    disk.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "models").symlink_to(disk, target_is_directory=True)
    store = ModelStore(tmp_path / "home")
    path = download(store)
    model = store.add_downloaded("qwen", "Qwen", path, "catalogue", "r/x", path.name, None)
    store.remove(model.id)
    assert not (disk / path.name).exists()
