"""Knowledge folders indexed (app/core/knowledge/indexer.py, service.py, watch.py): real
documents written here by real writers, the real index (SQLite, FTS5, sqlite-vec) and the
built-in embedder; a kill is a real SIGKILL of a child process and a full disk a real tiny
file system (bubblewrap's --size tmpfs)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from app.core.documents import MAX_FILE_BYTES
from app.core.knowledge import indexer
from app.core.knowledge.embedding import BUILTIN_NAME, Embedder, builtin_embedder
from app.core.knowledge.indexer import DELETED, FolderGuard, Progress, eta, plan
from app.core.knowledge.service import DISK_FULL, NO_FOLDERS, REEMBED, KnowledgeService
from app.core.knowledge.watch import MAX_SCAN_SHARE, Schedule
from app.core.settings import ProviderAccount, Settings
from tests.conftest import service_unavailable
from tests.fixtures_runtime import RuntimeFactory
from tests.test_documents import write_docx, write_pdf, write_scanned_pdf, write_xlsx
from tests.test_knowledge_embedding import EmbeddingsServer, server  # noqa: F401
from tools.redact import REDACTED, TRIPWIRE

ROOT = Path(__file__).resolve().parents[1]
#: How long a test waits for the indexer before it calls it hung.
WAIT = 60.0


# ---- set-up --------------------------------------------------------------------------------


class Recording:
    """The built-in embedder, noting every text it embeds; with `hold`, the call embedding
    a text that contains it waits (`reached` set) until `release` is set."""

    def __init__(self, hold: str | None = None) -> None:
        self.inner = builtin_embedder()
        self.texts: list[str] = []
        self.hold = hold
        self.reached = threading.Event()
        self.release = threading.Event()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        if self.hold is not None and any(self.hold in t for t in texts):
            self.hold = None  # once
            self.reached.set()
            assert self.release.wait(WAIT), "the test never released the embedder"
        return self.inner.embed(texts)

    def embedded(self, word: str) -> int:
        """How many embedded texts contained `word`."""
        return sum(word in t for t in self.texts)


@dataclass
class Place:
    """A user's home with an allowed Documents folder, and Deskhand's home beside it."""

    user: Path
    docs: Path
    home: Path
    settings: Settings
    made: list[KnowledgeService] = field(default_factory=list)

    def service(self, embedder: Embedder | None = None, **options: Any) -> KnowledgeService:
        make = (lambda name, dim: embedder) if embedder is not None else None
        service = KnowledgeService(
            self.home, settings=lambda: self.settings, embedder=make, **options
        )
        self.made.append(service)
        return service


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    user = tmp_path / "user"
    docs = user / "Documents"
    docs.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))  # protected places are the test user's
    home = tmp_path / "deskhand-home"
    home.mkdir()
    settings = Settings()
    settings.files.allowed_roots = [str(docs)]
    made = Place(user, docs, home, settings)
    yield made
    for service in made.made:
        service.close()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def index_all(service: KnowledgeService) -> None:
    """Start the worker for one round over every folder and wait for it."""
    service.start(watch=False)
    assert service.wait_idle(WAIT)


def only(service: KnowledgeService) -> int:
    (folder,) = service.all_folders()
    return folder.id


def indexed_paths(service: KnowledgeService, folder_id: int) -> set[str]:
    return set(service._open()[0].file_states(folder_id))


def problems(service: KnowledgeService, folder_id: int) -> dict[str, str]:
    return {Path(p).name: reason for p, reason in service.problems(folder_id)}


def texts(hits: Sequence[Any]) -> str:
    return "\n".join(h.text for h in hits)


# ---- what is indexed -----------------------------------------------------------------------


def test_a_folder_of_documents_is_searchable_with_where_each_passage_is(place: Place) -> None:
    write_pdf(
        place.docs / "manual.pdf",
        ["Unpack the box carefully.", "To reset the router hold the pinhole button ten seconds."],
    )
    write_docx(place.docs / "report.docx")
    (place.docs / "money").mkdir()
    write_xlsx(place.docs / "money" / "budget.xlsx")
    write(place.docs / "notes" / "trip.md", "# Packing\n\nBring sunscreen and a water bottle.\n")
    service = place.service()
    folder = service.add_folder(str(place.docs))
    index_all(service)

    stats = service.stats(folder.id)
    assert (stats.files, stats.problems) == (4, 0)
    hit = service.search("reset the router", k=3)[0]
    assert (Path(hit.path).name, hit.location) == ("manual.pdf", "page 2")
    assert "pinhole" in hit.text
    budget = service.search("rent", k=8)
    assert any(h.location == "sheet Budget" and "Rent" in h.text for h in budget)
    assert [h.location for h in service.read(str(place.docs / "manual.pdf"), "page 1")] == [
        "page 1"
    ]
    assert service.progress()[folder.id].state == "idle"


def test_hidden_folders_packages_links_and_protected_places_are_never_indexed(
    place: Place, tmp_path: Path
) -> None:
    docs = place.docs
    write(docs / "kept.txt", "visible words about gardening")
    write(docs / ".git" / "config.txt", "hidden repository words")
    write(docs / ".secret-notes.txt", "hidden file words")
    write(docs / "node_modules" / "pkg" / "readme.md", "package words")
    write(docs / "env" / "pyvenv.cfg", "home = /usr")
    write(docs / "env" / "lib" / "notes.txt", "virtual environment words")
    write(docs / "private" / "diary.txt", "protected folder words")
    write(docs / "shell" / "fish_history", "- cmd: ls")  # protected by its name
    write(docs / "~$report.docx", "an office lock file")
    outside = write(tmp_path / "elsewhere" / "outside.txt", "words from outside")
    (docs / "link.txt").symlink_to(outside)
    (docs / "linked-folder").symlink_to(outside.parent)
    place.settings.files.denied_paths = [str(docs / "private")]
    service = place.service()
    folder = service.add_folder(str(docs))
    index_all(service)

    assert indexed_paths(service, folder.id) == {str(docs / "kept.txt")}
    assert problems(service, folder.id) == {}


def test_deskhands_own_folder_inside_a_knowledge_folder_is_skipped(place: Place) -> None:
    home = place.docs / "deskhand"
    write(home / "notes.txt", "Deskhand's own words")
    write(place.docs / "mine.txt", "the user's words")
    service = KnowledgeService(home, settings=lambda: place.settings)
    place.made.append(service)
    folder = service.add_folder(str(place.docs))
    index_all(service)
    assert indexed_paths(service, folder.id) == {str(place.docs / "mine.txt")}


def test_only_folders_inside_the_allowed_ones_may_be_added(place: Place, tmp_path: Path) -> None:
    service = place.service()
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(ValueError, match="outside the folders Deskhand may touch"):
        service.add_folder(str(outside))
    (place.docs / "shortcut").symlink_to(outside)  # a link is judged by where it points
    with pytest.raises(ValueError, match="It resolves to"):
        service.add_folder(str(place.docs / "shortcut"))
    (place.docs / "private").mkdir()
    place.settings.files.denied_paths = [str(place.docs / "private")]
    with pytest.raises(ValueError, match="protected location"):
        service.add_folder(str(place.docs / "private"))
    with pytest.raises(ValueError, match="does not exist"):
        service.add_folder(str(place.docs / "missing"))
    write(place.docs / "photo.raw", "").write_bytes(b"\0\1\2" * 100)
    with pytest.raises(ValueError, match="not a document Deskhand reads"):
        service.add_folder(str(place.docs / "photo.raw"))
    sub = place.docs / "sub"
    sub.mkdir()
    service.add_folder(str(place.docs))
    with pytest.raises(ValueError, match="already searchable in every conversation"):
        service.add_folder(str(sub))
    place.settings.files.allowed_roots = []
    with pytest.raises(ValueError) as caught:
        service.add_folder(str(sub))
    assert str(caught.value) == NO_FOLDERS
    assert [Path(f.path) for f in service.all_folders()] == [place.docs]


def test_a_folder_no_longer_allowed_is_neither_indexed_nor_searched(place: Place) -> None:
    write(place.docs / "plans.txt", "the lighthouse renovation plans")
    service = place.service()
    folder = service.add_folder(str(place.docs))
    index_all(service)
    assert service.search("lighthouse")
    place.settings.files.allowed_roots = [str(place.user / "Other")]
    assert service.search("lighthouse") == []
    service.reindex(folder.id)
    index_all(service)
    ended = service.progress()[folder.id]
    assert ended.state == "error" and "no longer inside the folders" in ended.message


def test_a_single_document_can_be_knowledge(place: Place) -> None:
    write(place.docs / "a.txt", "apples")
    one = write(place.docs / "b.txt", "bananas are yellow")
    service = place.service()
    folder = service.add_folder(str(one))
    index_all(service)
    assert indexed_paths(service, folder.id) == {str(one)}


# ---- secrets -------------------------------------------------------------------------------


@pytest.fixture
def known_secret() -> Iterator[str]:
    value = "Zq8vLw3nR5tY7uI9oP1aS2dF4gH6jK"
    TRIPWIRE.remember([value])
    yield value
    TRIPWIRE.forget(value)


def test_a_key_in_a_file_is_neither_indexed_nor_findable_but_its_other_words_are(
    place: Place, known_secret: str
) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # shaped like a GitHub token
    write(
        place.docs / "setup.md",
        "# Deploy notes\n\nThe staging pipeline uses the token "
        f"{token} and the database password {known_secret} for the nightly backup.\n",
    )
    recording = Recording()
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    index_all(service)

    (chunk,) = service.read(str(place.docs / "setup.md"))
    assert "nightly backup" in chunk.text and REDACTED in chunk.text
    for secret in (token, known_secret):
        assert secret[4:12] not in chunk.text
        assert not any(secret[4:12] in t for t in recording.texts)  # never embedded
        assert service._open()[0].search_text(secret, 5, [folder.id]) == []
    assert service.search("backup of the staging database")[0].path.endswith("setup.md")
    # the stored vector is the redacted text's: nothing of the key is in it either
    index = service._open()[0]
    nearest = index.search_vector(builtin_embedder().embed([chunk.text])[0], 1)
    assert nearest[0].chunk_id == chunk.chunk_id and nearest[0].score > 0.999


# ---- incremental, resumable, stoppable -----------------------------------------------------


def test_only_changed_files_are_read_again_and_deleted_ones_leave_the_index(
    place: Place,
) -> None:
    for word in ("amber", "birch", "cedar", "dune"):
        write(place.docs / f"{word}.txt", f"{word} is the word of this file")
    recording = Recording()
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    index_all(service)
    assert {w: recording.embedded(w) for w in ("amber", "birch", "cedar", "dune")} == dict.fromkeys(
        ("amber", "birch", "cedar", "dune"), 1
    )

    write(place.docs / "birch.txt", "birch changed: now it speaks of elm bark")
    (place.docs / "cedar.txt").unlink()
    write(place.docs / "fern.txt", "fern is new")
    index_all(service)  # a rescan, as the watcher makes one
    assert [recording.embedded(w) for w in ("amber", "birch", "dune", "fern")] == [1, 2, 1, 1]
    assert {Path(p).name for p in indexed_paths(service, folder.id)} == {
        "amber.txt",
        "birch.txt",
        "dune.txt",
        "fern.txt",
    }
    assert "cedar" not in texts(service.search("cedar"))
    assert "elm bark" in texts(service.search("birch"))


def test_a_rescan_finds_changes_made_while_the_service_watches(place: Place) -> None:
    write(place.docs / "first.txt", "the first file about owls")
    service = place.service(rescan_seconds=0.05)
    folder = service.add_folder(str(place.docs))
    done = threading.Event()

    def heard(progress: Progress) -> None:
        if progress.state == "idle" and len(indexed_paths(service, folder.id)) == 2:
            done.set()

    service.subscribe(heard)
    service.start()  # watches: rescans every 50 ms here
    assert service.wait_idle(WAIT)
    write(place.docs / "second.txt", "a second file about herons")
    assert done.wait(WAIT)
    assert "herons" in texts(service.search("herons"))


KILL_CHILD = """
import sys, threading
from pathlib import Path
from app.core.knowledge.embedding import builtin_embedder
from app.core.knowledge.service import KnowledgeService
from app.core.settings import Settings

home, docs = Path(sys.argv[1]), sys.argv[2]
settings = Settings()
settings.files.allowed_roots = [docs]
inner = builtin_embedder()

class Gate:
    name, dim, calls = inner.name, inner.dim, 0
    def embed(self, texts):
        Gate.calls += 1
        if Gate.calls == 6:  # file six is read and chunked, not yet stored
            print("blocked", flush=True)
            threading.Event().wait()
        return inner.embed(texts)

service = KnowledgeService(home, settings=lambda: settings, embedder=lambda n, d: Gate())
service.add_folder(docs)
service.start(watch=False)
service.wait_idle()
print("finished", flush=True)
"""


def test_a_killed_run_resumes_where_it_stopped_without_redoing_finished_files(
    place: Place,
) -> None:
    words = [f"word{i:02d}" for i in range(40)]
    for word in words:
        write(place.docs / f"{word}.txt", f"This file is about {word} and nothing else.")
    child = subprocess.Popen(
        [sys.executable, "-c", KILL_CHILD, str(place.home), str(place.docs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(place.user)},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "blocked"
    child.send_signal(signal.SIGKILL)
    assert child.wait(WAIT) == -signal.SIGKILL

    recording = Recording()
    service = place.service(recording)
    folder_id = only(service)
    done_before = {Path(p).stem for p in indexed_paths(service, folder_id)}
    assert len(done_before) == 5  # committed one by one; the sixth was never stored
    index_all(service)
    assert service.stats(folder_id).files == 40
    assert service.stats(folder_id).chunks == 40  # no file twice, none half
    for word in words:
        assert recording.embedded(word) == (0 if word in done_before else 1), word


def test_pause_stops_between_embedding_batches_and_resume_goes_on(place: Place) -> None:
    for i in range(3):
        write(place.docs / f"small{i}.txt", f"small file number {i}")
    long_text = "\n\n".join(f"Paragraph {i} of the long file, marker{i}. " * 20 for i in range(200))
    write(place.docs / "long.txt", long_text)
    recording = Recording(hold="marker0")  # its first batch waits for the test
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    service.start()
    assert recording.reached.wait(WAIT)
    service.pause(folder.id)
    recording.release.set()
    assert service.wait_idle(WAIT)

    assert service.progress()[folder.id].state == "paused"
    assert str(place.docs / "long.txt") not in indexed_paths(service, folder.id)
    assert recording.embedded("marker199") == 0  # stopped after the batch under way
    assert service.all_folders()[0].paused  # remembered, also by the next start
    service.resume(folder.id)
    assert service.wait_idle(WAIT)
    assert str(place.docs / "long.txt") in indexed_paths(service, folder.id)
    assert service.progress()[folder.id].state == "idle"
    assert all(recording.embedded(f"number {i}") == 1 for i in range(3))


def test_cancel_stops_the_run_and_the_folder_waits_until_reindexed(place: Place) -> None:
    for i in range(4):
        write(place.docs / f"f{i}.txt", f"file {i} says cancel{i}")
    recording = Recording(hold="cancel")
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    seen: list[Progress] = []
    service.subscribe(seen.append)
    service.start()
    assert recording.reached.wait(WAIT)
    service.cancel(folder.id)
    recording.release.set()
    assert service.wait_idle(WAIT)
    assert seen[-1].state == "cancelled"
    assert service.stats(folder.id).files == 0
    service.reindex(folder.id)
    assert service.wait_idle(WAIT)
    assert service.stats(folder.id).files == 4
    assert not service.all_folders()[0].paused


def test_progress_tells_files_and_bytes_and_an_eta(place: Place) -> None:
    sizes = 0
    for i in range(5):
        sizes += write(place.docs / f"p{i}.txt", f"progress file {i} " * (i + 1)).stat().st_size
    recording = Recording(hold="progress file 3")
    service = place.service(recording)
    seen: list[Progress] = []
    service.subscribe(seen.append)
    folder = service.add_folder(str(place.docs))
    service.start(watch=False)
    assert recording.reached.wait(WAIT)
    now = service.progress()[folder.id]
    assert (now.state, now.current) == ("indexing", str(place.docs / "p3.txt"))
    assert now.files_total == 5 and now.bytes_total == sizes
    recording.release.set()
    assert service.wait_idle(WAIT)
    states = [p.state for p in seen]
    assert states[0] == "scanning" and "indexing" in states and states[-1] == "idle"
    last = seen[-1]
    assert (last.files_done, last.files_total) == (5, 5)
    assert (last.bytes_done, last.bytes_total) == (sizes, sizes)
    assert last.folder_id == folder.id and last.current is None
    assert eta(10.0, 25, 100) == 30.0  # 25 bytes in 10 s: 75 more take 30 s
    assert eta(0.1, 25, 100) is None  # too soon to tell
    assert eta(3.0, 100, 100) == 0.0


def test_rescans_never_take_more_than_a_small_share_of_the_time() -> None:
    now = [0.0]
    schedule = Schedule(60.0, clock=lambda: now[0])
    schedule.take()
    schedule.scanned(0.5)
    assert schedule.interval() == 60.0
    schedule.scanned(10.0)  # a huge folder: 10 s per scan
    assert schedule.interval() == 10.0 / MAX_SCAN_SHARE
    assert not schedule.pending()
    schedule.ask([3])
    assert schedule.take() == (False, {3})


# ---- bad input -----------------------------------------------------------------------------


def test_bad_files_each_get_a_plain_reason_and_good_ones_are_indexed(place: Place) -> None:
    import zipfile

    docs = place.docs
    write(docs / "good.txt", "a perfectly good file about tulips")
    write_pdf(docs / "locked.pdf", ["secret"], password="hunter2")
    write_scanned_pdf(docs / "scan.pdf")
    whole = write_docx(docs / "whole.docx")
    (docs / "cut.docx").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with zipfile.ZipFile(docs / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"\0" * (40 * 1024 * 1024))
    with (docs / "huge.txt").open("wb") as fh:
        fh.truncate(2 * 1024**3)  # 2 GB, sparse: refused by its size before a byte is read
    service = place.service()
    folder = service.add_folder(str(docs))
    started = time.monotonic()
    index_all(service)

    found = problems(service, folder.id)
    assert found["locked.pdf"] == "it is encrypted: open it, or save a copy without a password"
    assert found["scan.pdf"].startswith("it has no text layer (a scan?)")
    assert "damaged" in found["cut.docx"]
    assert "zip bomb" in found["bomb.docx"]
    assert found["huge.txt"].startswith("it is 2.0 GB, more than the 200 MB Deskhand indexes")
    assert {Path(p).name for p in indexed_paths(service, folder.id)} == {"good.txt", "whole.docx"}
    assert time.monotonic() - started < 30
    # problems are not read again until the file changes; fixing one clears its problem
    write(docs / "cut.docx", "").write_bytes(whole.read_bytes())
    index_all(service)
    assert "cut.docx" not in problems(service, folder.id)
    assert "locked.pdf" in problems(service, folder.id)
    assert str(docs / "cut.docx") in indexed_paths(service, folder.id)


def test_a_file_over_the_size_limit_is_never_opened(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = place.docs / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    opened: list[str] = []
    real_open = open

    def spying_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spying_open)
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: spying_open(self, *a, **k))
    service = place.service(isolate=False)  # patched here, not in a child
    folder = service.add_folder(str(place.docs))
    index_all(service)
    assert str(big) not in opened
    assert "more than the 200 MB" in problems(service, folder.id)["big.txt"]


def test_a_file_deleted_mid_index_is_named_and_the_rest_is_indexed(place: Place) -> None:
    for word in ("alder", "beech", "chestnut", "dogwood", "elder"):
        write(place.docs / f"{word}.txt", f"{word} tree notes")
    recording = Recording(hold="tree notes")  # the first file's embedding waits
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    service.start(watch=False)
    assert recording.reached.wait(WAIT)
    first = next(
        w for w in ("alder", "beech", "chestnut", "dogwood", "elder") if recording.embedded(w)
    )
    gone = next(w for w in ("alder", "beech", "chestnut", "dogwood", "elder") if w != first)
    (place.docs / f"{gone}.txt").unlink()  # planned, not read yet
    recording.release.set()
    assert service.wait_idle(WAIT)

    assert problems(service, folder.id) == {f"{gone}.txt": DELETED}
    assert service.stats(folder.id).files == 4
    index_all(service)  # the next rescan: it is gone, so is its problem
    assert problems(service, folder.id) == {}


def test_a_file_swapped_for_a_link_to_a_protected_file_after_the_walk_is_not_read(
    place: Place,
) -> None:
    write(place.user / ".ssh" / "notes.txt", "the protected diary of keys")
    for word in ("aspen", "baobab", "cypress"):
        write(place.docs / f"{word}.txt", f"{word} grove notes")
    recording = Recording(hold="grove notes")  # the first file's embedding waits
    service = place.service(recording)
    folder = service.add_folder(str(place.docs))
    service.start(watch=False)
    assert recording.reached.wait(WAIT)
    first = next(w for w in ("aspen", "baobab", "cypress") if recording.embedded(w))
    swapped = place.docs / f"{next(w for w in ('aspen', 'baobab', 'cypress') if w != first)}.txt"
    swapped.unlink()
    swapped.symlink_to(place.user / ".ssh" / "notes.txt")  # planned, not read yet
    recording.release.set()
    assert service.wait_idle(WAIT)
    index_all(service)  # and the next round skips the link

    assert recording.embedded("diary") == 0
    assert str(swapped) not in indexed_paths(service, folder.id)
    assert "diary" not in texts(service.search("protected diary of keys"))


def test_a_folder_of_100000_files_is_scanned_in_bounded_time_and_memory(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    for d in range(100):  # empty files, made with as few system calls as can be
        sub = place.docs / f"d{d:03d}"
        sub.mkdir()
        folder_fd = os.open(sub, os.O_RDONLY)
        try:
            for i in range(1000):
                os.close(os.open(f"n{i:04d}.txt", os.O_CREAT | os.O_WRONLY, dir_fd=folder_fd))
        finally:
            os.close(folder_fd)
    made = time.monotonic() - started
    service = place.service()
    folder = service.add_folder(str(place.docs))
    index = service._open()[0]
    sandbox = service._sandbox()
    tracemalloc.start()
    started = time.monotonic()
    todo = plan(index, folder.id, place.docs, FolderGuard(sandbox, place.docs), skip={})
    seconds = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with capsys.disabled():
        print(
            f"\n100,000 files: made in {made:.1f} s; scanned in {seconds:.2f} s, "
            f"peak {peak / 2**20:.1f} MiB traced"
        )
    assert len(todo.changed) == 100_000
    assert seconds < 30
    assert peak < 64 * 2**20  # about 300 bytes a file: the plan, not the files' contents


def test_a_folder_over_the_document_cap_says_how_much_is_searchable(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexer, "MAX_FOLDER_FILES", 5)
    for i in range(8):
        write(place.docs / f"doc{i}.txt", f"document {i}")
    service = place.service(isolate=False)  # patched here, not in a child
    folder = service.add_folder(str(place.docs))
    index_all(service)
    assert service.stats(folder.id).files == 5
    reason = dict(service.problems(folder.id))[str(place.docs)]
    assert reason.startswith("it holds more than 5 documents: only that many are searchable")


def test_a_full_disk_pauses_indexing_and_loses_nothing(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        write(place.docs / f"disk{i}.txt", f"disk file {i} about quinces{i}")
    service = place.service(isolate=False)  # patched here, not in a child
    index = service._open()[0]
    real_replace = index.replace_file
    calls = [0]

    def full_after_three(*args: Any) -> None:
        calls[0] += 1
        if calls[0] > 3:
            raise OSError(28, "No space left on device")
        real_replace(*args)

    monkeypatch.setattr(index, "replace_file", full_after_three)
    folder = service.add_folder(str(place.docs))
    index_all(service)
    ended = service.progress()[folder.id]
    assert (ended.state, ended.message) == ("paused", DISK_FULL)
    assert service.stats(folder.id).files == 3
    monkeypatch.setattr(index, "replace_file", real_replace)  # room again
    service.resume(folder.id)
    index_all(service)
    assert service.stats(folder.id).files == 6


DISK_CHILD = """
import json, sys
from pathlib import Path
from app.core.knowledge.service import KnowledgeService
from app.core.settings import Settings

home, docs = Path(sys.argv[1]), sys.argv[2]
filler = home / "filler"
filler.write_bytes(b"x" * 1_500_000)  # room to free later
settings = Settings()
settings.files.allowed_roots = [docs]
service = KnowledgeService(home, settings=lambda: settings)
folder = service.add_folder(docs)
service.start(watch=False)
service.wait_idle()
ended = service.progress()[folder.id]
index = service._open()[0]
states = index.file_states(folder.id)
report = {
    "state": ended.state, "message": ended.message,
    "files": service.stats(folder.id).files,
    "whole": all(index.chunks_of(p) for p in states),
    "found": bool(service.search("orchard")),
}
filler.unlink()
service.resume(folder.id)
service.start(watch=False)
service.wait_idle()
report["files_after"] = service.stats(folder.id).files
report["integrity"] = index._db.execute("PRAGMA integrity_check").fetchone()[0]
print(json.dumps(report))
"""


def test_a_full_disk_for_real_pauses_with_plain_words_and_loses_nothing(
    place: Place, tmp_path: Path
) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None or sys.platform != "linux":
        service_unavailable("the full-disk test needs bubblewrap on Linux")
    assert bwrap is not None
    small = tmp_path / "small"
    small.mkdir()
    paragraph = "The orchard keeps apples, pears and plums in long rows. " * 20
    for i in range(40):
        write(place.docs / f"orchard{i:02d}.txt", f"file {i}\n\n" + f"{paragraph}\n\n" * 16)
    argv = [bwrap, "--dev-bind", "/", "/", "--size", str(3 * 2**20), "--tmpfs", str(small)]
    argv += [sys.executable, "-c", DISK_CHILD, str(small), str(place.docs)]
    done = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOME": str(place.user)},
    )
    if done.returncode != 0 and "bwrap" in done.stderr and "No space" not in done.stderr:
        service_unavailable(f"bubblewrap cannot make a file system here: {done.stderr[:200]}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["state"], report["message"]) == ("paused", DISK_FULL)
    assert 0 < report["files"] < 40
    assert report["whole"] and report["found"]
    assert report["files_after"] > report["files"]
    assert report["integrity"] == "ok"


# ---- attachments and the embedder ----------------------------------------------------------


def test_an_attached_document_is_searchable_in_its_conversation_only(
    place: Place, tmp_path: Path
) -> None:
    pages = [f"Chapter {i}: the history of harbour number {i}." for i in range(1, 30)]
    pages[16] = "Chapter 17: the lighthouse keeper logged every storm in a blue ledger."
    (tmp_path / "downloads").mkdir()
    attached = write_pdf(tmp_path / "downloads" / "harbours.pdf", pages)  # not an allowed folder
    service = place.service()
    folder = service.add_attachment("conv-a", attached)
    assert folder.conversation_id == "conv-a"

    hit = service.search("who wrote down the storms", conversation_id="conv-a")[0]
    assert (hit.location, Path(hit.path).name) == ("page 17", "harbours.pdf")
    assert service.search("who wrote down the storms", conversation_id="conv-b") == []
    assert service.search("who wrote down the storms") == []
    page = service.read(str(attached), "page 17", conversation_id="conv-a")
    assert "blue ledger" in texts(page)
    assert service.read(str(attached), conversation_id="conv-b") == []


def test_an_attachment_that_cannot_be_read_says_why_and_leaves_nothing(
    place: Place, tmp_path: Path
) -> None:
    locked = write_pdf(tmp_path / "locked.pdf", ["secret"], password="pw")
    service = place.service()
    with pytest.raises(ValueError, match=r"locked\.pdf: it is encrypted"):
        service.add_attachment("conv-a", locked)
    assert service.all_folders() == []
    ssh = write(place.user / ".ssh" / "notes.txt", "keys")
    with pytest.raises(ValueError, match="protected place"):
        service.add_attachment("conv-a", ssh)


def test_switching_the_embedder_re_embeds_in_the_background_with_progress(
    make_runtime: RuntimeFactory,
    server: EmbeddingsServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    for i in range(3):
        write(docs / f"r{i}.txt", f"report {i} on river levels")
    account = ProviderAccount(kind="openai", label="Local", base_url=server.base_url, model="m")
    runtime = make_runtime(accounts=[account], roots=[docs])
    knowledge = runtime.knowledge
    knowledge.add_folder(str(docs))
    seen: list[Progress] = []
    knowledge.subscribe(seen.append)
    knowledge.start()
    assert knowledge.wait_idle(WAIT)
    assert knowledge.embedder_name == BUILTIN_NAME and server.requests == []

    def use_provider(settings: Settings) -> None:
        settings.knowledge.embedder = "provider"
        settings.knowledge.provider = account.id
        settings.knowledge.model = "nomic-embed-text"

    runtime.settings = runtime.settings_store.update(use_provider)
    assert knowledge.wait_idle(WAIT)
    wanted = f"provider:{account.id}:nomic-embed-text"
    assert knowledge.embedder_name == wanted
    reembed = [p for p in seen if p.folder_id == REEMBED]
    assert reembed[-1].state == "idle" and reembed[-1].files_done == reembed[-1].files_total == 3
    embedded = {t for r in server.requests for t in r["input"]}
    assert {f"report {i} on river levels" for i in range(3)} <= embedded
    assert not knowledge._open()[0].needs_reembed()
    assert "river" in texts(knowledge.search("river levels"))

    asked = len(server.requests)
    again = KnowledgeService(
        runtime.home, settings=lambda: runtime.settings, provider=runtime._embeddings_provider
    )
    try:
        assert again.embedder_name == wanted  # opened as it was left, with no request
        assert len(server.requests) == asked
    finally:
        again.close()


# ---- the runtime ---------------------------------------------------------------------------


def test_the_runtime_builds_knowledge_only_when_used_and_closes_it(
    make_runtime: RuntimeFactory, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write(docs / "a.txt", "alpha")
    runtime = make_runtime(roots=[docs])
    assert "knowledge" not in runtime.__dict__
    assert not (runtime.home / "knowledge.db").exists()
    service = runtime.knowledge
    assert runtime.knowledge is service
    service.add_folder(str(docs))
    runtime.close()
    with pytest.raises(RuntimeError, match="closed"):
        service.folders()


def test_importing_the_service_loads_no_index_or_embedder() -> None:
    code = (
        "import sys, app.core.runtime, app.core.knowledge.service; "
        "print(sorted(m for m in ('apsw', 'sqlite_vec', 'numpy', 'tokenizers') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---- the indexing child process ------------------------------------------------------------


def test_indexing_runs_in_a_child_process_that_exits_when_the_round_is_done(
    place: Place,
) -> None:
    write(place.docs / "otters.txt", "Otters hold hands while they sleep.")
    service = place.service()
    children: list[list[str]] = []
    service.subscribe(
        lambda _p: children.append([c.name for c in multiprocessing.active_children()])
    )
    service.add_folder(str(place.docs))
    index_all(service)
    assert any("deskhand-knowledge-indexer" in names for names in children)
    assert multiprocessing.active_children() == []  # its memory went back with it
    assert "Otters" in texts(service.search("otters"))


def test_a_child_killed_inside_a_file_costs_that_file_only_and_the_rest_is_indexed(
    place: Place,
) -> None:
    """As the OOM killer or a crashing parser would: SIGKILL while the child reads it."""
    heavy = place.docs / "heavy"
    light = place.docs / "light"
    big = write(
        heavy / "big.txt", "\n\n".join(f"Paragraph {i} about alpacas. " * 30 for i in range(3000))
    )
    for word in ("ibis", "kestrel", "lapwing"):
        write(light / f"{word}.txt", f"notes on the {word}")
    service = place.service()
    killed: list[int] = []

    def kill_inside_big(progress: Progress) -> None:
        if progress.current == str(big) and not killed:
            (child,) = multiprocessing.active_children()
            killed.append(child.pid or 0)
            os.kill(child.pid or 0, signal.SIGKILL)

    service.subscribe(kill_inside_big)
    first = service.add_folder(str(heavy))
    second = service.add_folder(str(light))
    index_all(service)
    assert killed
    assert "stopped Deskhand's indexer" in problems(service, first.id)["big.txt"]
    assert service.stats(first.id).files == 0
    assert service.stats(second.id).files == 3  # a new child went on
    assert "kestrel" in texts(service.search("kestrel"))
    index_all(service)  # skipped until it changes
    assert service.stats(first.id).files == 0
    big.write_text("A short file about alpacas now.", encoding="utf-8")
    index_all(service)
    assert service.stats(first.id).files == 1


def test_a_folder_removed_while_a_child_indexes_it_gets_no_file_stored_after(
    place: Place,
) -> None:
    for i in range(40):
        write(place.docs / f"note{i:02d}.txt", f"note {i} about herons and egrets " * 50)
    service = place.service()
    folder = service.add_folder(str(place.docs))
    removed = threading.Event()

    def remove_once_indexing(progress: Progress) -> None:
        if progress.state == "indexing" and not removed.is_set():
            removed.set()
            threading.Thread(target=service.remove_folder, args=(folder.id,)).start()

    service.subscribe(remove_once_indexing)
    index_all(service)
    assert removed.is_set()
    assert service.all_folders() == []
    index = service._open()[0]
    assert index.file_states(folder.id) == {}
    assert service.search("herons") == []


def test_a_rescan_with_nothing_changed_starts_no_child_and_a_change_starts_one(
    place: Place,
) -> None:
    note = write(place.docs / "otters.txt", "Otters hold hands while they sleep.")
    service = place.service()
    service.add_folder(str(place.docs))
    index_all(service)
    seen: list[tuple[str, list[str]]] = []
    service.subscribe(
        lambda p: seen.append((p.state, [c.name for c in multiprocessing.active_children()]))
    )
    index_all(service)  # the periodic rescan: nothing changed
    assert seen == []
    note.write_text("Otters hold hands while they sleep, and float on their backs.", "utf-8")
    index_all(service)
    assert any("deskhand-knowledge-indexer" in names for _state, names in seen)
    assert "float on their backs" in texts(service.search("otters floating"))
