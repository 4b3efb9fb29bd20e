"""`deskhand knowledge …` (app/cli/knowledge.py): adding a folder indexes it with progress on
stderr, refusals are one plain line, status names each file that could not be indexed, and
Ctrl-C stops a run that the next one finishes. Real documents, the real index and embedder;
the Ctrl-C test runs the command line as its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.cli import main
from app.core.settings import SettingsStore
from tests.test_documents import write_pdf

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Place:
    home: Path
    user: Path
    docs: Path

    def run(self, *args: str) -> int:
        return main(["--home", str(self.home), "knowledge", *args])


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Place]:
    user = tmp_path / "user"
    docs = user / "Documents"
    docs.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.delenv("DESKHAND_HOME", raising=False)
    home = tmp_path / "deskhand-home"
    home.mkdir()

    def allow(settings: object) -> None:
        settings.files.allowed_roots = [str(docs)]  # type: ignore[attr-defined]

    SettingsStore(home / "settings.json").update(allow)
    yield Place(home, user, docs)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_add_indexes_the_folder_and_says_what_is_searchable(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    write(place.docs / "a.md", "# Garden\n\nPlant the tulips in October.\n")
    write(place.docs / "sub" / "b.txt", "The invoice is due at the end of the month.")
    assert place.run("add", str(place.docs)) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"Added knowledge folder 1: {place.docs}",
        "Folder 1: 2 files, 2 passages, 0.0 MB indexed",
    ]
    assert "folder 1: looking for changes" in err
    assert err.strip().endswith("folder 1: up to date")


def test_add_refuses_what_may_not_be_knowledge_in_one_plain_line(
    place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    assert place.run("add", str(outside)) == 2
    _, err = capsys.readouterr()
    assert err.startswith(f"deskhand: knowledge: '{outside}' is outside the folders Deskhand")
    assert len(err.strip().splitlines()) == 1
    assert place.run("add", str(place.docs), "--conversation", "nope") == 2
    assert "there is no conversation 'nope'" in capsys.readouterr().err
    assert place.run("list") == 0
    assert "No knowledge folders yet" in capsys.readouterr().out


def test_a_folder_for_one_conversation_is_listed_with_its_conversation(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.core.store import Store

    store = Store(place.home / "deskhand.db")
    conversation = store.create_conversation("Trip")
    store.close()
    write(place.docs / "trip.txt", "Pack the tent.")
    assert place.run("add", str(place.docs), "--conversation", conversation, "--json") == 0
    added = json.loads(capsys.readouterr().out)
    assert (added["id"], added["conversation"]) == (1, conversation)
    assert place.run("list", "--json") == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["conversation"] == conversation and row["files"] == 1


def test_status_names_each_file_that_could_not_be_indexed_and_why(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    write(place.docs / "fine.txt", "fine words")
    locked = write_pdf(place.docs / "locked.pdf", ["hidden"], password="pw")
    assert place.run("add", str(place.docs)) == 0
    capsys.readouterr()
    assert place.run("status") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Search by meaning: builtin:wordllama-256"
    assert out[1].startswith(f"1  {place.docs}  (everywhere): 1 file, 1 passage, 0.0 MB, 1 problem")
    assert out[2] == f"    {locked}: it is encrypted: open it, or save a copy without a password"
    assert place.run("status", "1", "--json") == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["problems"] == [
        {
            "path": str(locked),
            "reason": "it is encrypted: open it, or save a copy without a password",
        }
    ]


def test_pause_resume_reindex_and_remove_a_folder(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    write(place.docs / "one.txt", "first")
    assert place.run("add", str(place.docs)) == 0
    assert place.run("pause", "1") == 0
    assert "Paused knowledge folder 1" in capsys.readouterr().out
    write(place.docs / "two.txt", "second")
    assert place.run("status", "--watch") == 0  # a paused folder is left as it is
    out, err = capsys.readouterr()
    assert "(everywhere, paused): 1 file" in out and "folder 1: paused" in err
    assert place.run("resume", "1") == 0
    assert "Folder 1: 2 files" in capsys.readouterr().out
    assert place.run("reindex", "1") == 0
    assert "Folder 1: 2 files, 2 passages" in capsys.readouterr().out
    assert place.run("remove", "1") == 0
    assert capsys.readouterr().out == f"Removed knowledge folder 1 ({place.docs}) and its index\n"
    assert place.run("reindex", "1") == 2
    assert capsys.readouterr().err == (
        "deskhand: knowledge: there is no knowledge folder 1 (see `deskhand knowledge list`)\n"
    )


def test_status_watch_indexes_what_changed_first(
    place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    write(place.docs / "old.txt", "old words")
    assert place.run("add", str(place.docs)) == 0
    write(place.docs / "new.txt", "new words about kites")
    (place.docs / "old.txt").unlink()
    capsys.readouterr()
    assert place.run("status", "--watch") == 0
    out, err = capsys.readouterr()
    assert "folder 1: up to date" in err
    assert "(everywhere): 1 file, 1 passage" in out


def test_ctrl_c_stops_indexing_and_the_next_run_goes_on_from_there(place: Place) -> None:
    paragraph = "Notes on the river crossing, the ferry times and the weather. " * 40
    total = 300
    for i in range(total):
        write(place.docs / f"n{i:03d}.txt", f"note {i}\n\n" + f"{paragraph}\n\n" * 6)
    env = {**os.environ, "HOME": str(place.user), "PYTHONPATH": str(ROOT)}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    argv = [sys.executable, "-m", "app.cli", "--home", str(place.home), "knowledge"]
    child = subprocess.Popen(
        [*argv, "add", str(place.docs)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline().startswith("Added knowledge folder 1")
    for line in child.stderr:  # stopped once indexing has begun
        if line.startswith(f"folder 1: indexing 0 of {total} files"):
            break
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "Stopped: indexing goes on where it stopped the next time" in err

    listed = subprocess.run([*argv, "list", "--json"], cwd=ROOT, env=env, capture_output=True)
    (row,) = json.loads(listed.stdout)
    assert row["files"] < total
    done = subprocess.run(
        [*argv, "status", "--watch"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    left = total - row["files"]  # only the files not indexed yet are read
    assert f"folder 1: indexing 0 of {left} files" in done.stderr
    assert f"(everywhere): {total} files, " in done.stdout
