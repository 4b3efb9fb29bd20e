"""The tripwire knows every stored secret from start-up, without the keyring on the
start-up path: an index of names, values loaded in the background, and no keyring access
at all when nothing is stored. The real gnome-keyring where a keyring is needed."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from app.core.secrets import INDEX_FILE, SecretStore, known_secret_values, secret_key
from tools.redact import REDACTED, Redactor

ROOT = Path(__file__).resolve().parents[1]


def _value() -> str:
    return f"sk-{uuid.uuid4().hex}"


class Touched(Exception):
    pass


class TripwireKeyring(KeyringBackend):
    """Fails the test's expectations the moment anything touches it."""

    priority = 0  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def get_password(self, service: str, username: str) -> str | None:
        self.calls.append(f"get {username}")
        raise Touched(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self.calls.append(f"set {username}")
        raise Touched(username)

    def delete_password(self, service: str, username: str) -> None:
        self.calls.append(f"delete {username}")
        raise Touched(username)


class GatedKeyring(KeyringBackend):
    """An in-memory keyring whose reads wait for `gate` (a slow or locked keyring)."""

    priority = 0  # type: ignore[assignment]

    def __init__(self, items: dict[str, str] | None = None, *, open_: bool = False) -> None:
        super().__init__()
        self.items = dict(items or {})
        self.gate = threading.Event()
        if open_:
            self.gate.set()
        self.reads: list[str] = []

    def get_password(self, service: str, username: str) -> str | None:
        assert self.gate.wait(30), "the test never opened the gate"
        self.reads.append(username)
        return self.items.get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[username] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop(username, None)


def _index(home: Path) -> dict[str, object]:
    return json.loads((home / INDEX_FILE).read_text("utf-8"))


def _python(code: str, env: dict[str, str]) -> str:
    """Run `code` in a fresh interpreter (a real restart of Deskhand's process)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# ---- nothing stored: the keyring is never touched ------------------------------------------


def test_nothing_stored_never_touches_the_keyring(tmp_path: Path) -> None:
    import keyring

    tripwire = TripwireKeyring()
    saved = keyring.get_keyring()
    keyring.set_keyring(tripwire)  # what "system" / "auto" mode would use
    try:
        for mode in ("auto", "system"):
            store = SecretStore(home=tmp_path, mode=mode)  # type: ignore[arg-type]
            assert store.has_secrets is False
            store.start_loading()
            assert store.wait_loaded(timeout=0) is True  # at once, not after a timeout
            assert store.loaded and store.load_error is None
            store.known_values()
    finally:
        keyring.set_keyring(saved)
    assert tripwire.calls == []
    assert _index(tmp_path) == {"services": {"deskhand": []}}


def test_a_fresh_process_with_nothing_stored_does_not_even_import_keyring(
    tmp_path: Path,
) -> None:
    out = _python(
        f"""
        import sys
        from app.core.runtime import Runtime
        runtime = Runtime({str(tmp_path)!r})
        runtime.secrets.start_loading()
        assert runtime.secrets.wait_loaded(0)
        runtime.secrets.known_values()
        print(sorted(m for m in sys.modules if m == "keyring" or m.startswith("keyring.")))
        """,
        {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"},
    )
    assert out.strip() == "[]"


# ---- the index: names only, kept up to date ---------------------------------------------------


def test_set_and_delete_keep_a_private_index_of_names_without_values(tmp_path: Path) -> None:
    store = SecretStore(backend=GatedKeyring(open_=True), home=tmp_path)
    first, second = _value(), _value()
    store.set(secret_key("github", "a1", "token"), first)
    assert first in store.known_values()  # joins the known set at once
    store.set(secret_key("provider", "p1", "api_key"), second)
    assert store.has_secrets
    assert _index(tmp_path) == {
        "services": {"deskhand": ["github/a1/token", "provider/p1/api_key"]}
    }
    index = tmp_path / INDEX_FILE
    assert index.stat().st_mode & 0o777 == 0o600
    assert first not in index.read_text() and second not in index.read_text()

    store.delete(secret_key("github", "a1", "token"))
    assert store.stored_names() == {"provider/p1/api_key"}
    # Another store on the same home (another window, the CLI) sees the same names.
    assert SecretStore(backend=GatedKeyring(open_=True), home=tmp_path).stored_names() == {
        "provider/p1/api_key"
    }


def test_a_failed_save_does_not_enter_the_index(tmp_path: Path) -> None:
    from keyring.backends import fail

    from app.core.secrets import SecretStoreError

    store = SecretStore(backend=fail.Keyring(), home=tmp_path)
    value = _value()
    with pytest.raises(SecretStoreError):
        store.set(secret_key("github", "a1", "token"), value)
    assert value in store.known_values()  # it exists in this process: still redacted
    assert not store.has_secrets


def test_a_corrupt_index_is_rebuilt_from_deskhands_files(tmp_path: Path) -> None:
    (tmp_path / INDEX_FILE).write_text("{not json", "utf-8")
    (tmp_path / "settings.json").write_text(
        json.dumps({"providers": [{"id": "p9", "kind": "openai", "label": "x", "base_url": "u"}]})
    )
    assert SecretStore(home=tmp_path).stored_names() == {"provider/p9/api_key"}


# ---- loading in the background ------------------------------------------------------------------


def test_values_load_in_the_background_and_wait_loaded_holds_until_done(tmp_path: Path) -> None:
    value = _value()
    key = secret_key("slack", "w1", "token")
    keyring = GatedKeyring({key: value})
    SecretStore(backend=keyring, home=tmp_path).set(key, value)
    # A restart: only the index on disk says a secret exists.
    import app.core.secrets as secrets_module

    secrets_module._known.discard(value)
    store = SecretStore(backend=keyring, home=tmp_path)
    assert store.has_secrets and keyring.reads == []

    store.start_loading()  # returns at once although the keyring is stuck
    assert store.wait_loaded(timeout=0.05) is False
    assert value not in store.known_values()

    keyring.gate.set()
    assert store.wait_loaded(timeout=30) is True
    assert value in store.known_values()
    assert keyring.reads == [key]
    store.start_loading()  # idempotent: no second load
    assert keyring.reads == [key]
    encoded = base64.b64encode(f"user:{value}".encode()).decode()
    assert REDACTED in Redactor(store.known_values()).text(encoded)


def test_a_failing_keyring_ends_the_load_with_a_reason(tmp_path: Path) -> None:
    from tests.test_secrets import _Raising

    key = secret_key("github", "a1", "token")
    (tmp_path / INDEX_FILE).write_text(json.dumps({"services": {"deskhand": [key]}}))
    store = SecretStore(backend=_Raising(RuntimeError("D-Bus said no")), home=tmp_path)
    assert store.wait_loaded(timeout=30) is True  # waiters are never left hanging
    assert store.load_error and "D-Bus said no" in store.load_error
    assert store.stored_names() == {key}  # not forgotten because the keyring failed


def test_names_missing_from_the_keyring_leave_the_index(tmp_path: Path) -> None:
    gone, kept = "github/a1/token", "github/a2/token"
    (tmp_path / INDEX_FILE).write_text(json.dumps({"services": {"deskhand": [gone, kept]}}))
    memory = GatedKeyring({kept: _value()}, open_=True)
    store = SecretStore(backend=memory, home=tmp_path)
    assert store.wait_loaded(timeout=30)
    assert store.stored_names() == {kept}


def test_environment_api_keys_are_known_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = _value()
    monkeypatch.setenv("ANTHROPIC_API_KEY", value)
    store = SecretStore(home=tmp_path)
    store.start_loading()
    assert value in store.known_values()


def test_bearer_values_also_teach_the_bare_token() -> None:
    from app.core.secrets import remember_secret

    token = _value()
    remember_secret(f"Bearer {token}")
    assert token in known_secret_values()


# ---- the real keyring, across a real restart -----------------------------------------------------


@pytest.mark.keyring
def test_a_restarted_process_knows_stored_secrets_before_reading_any(
    keyring_env: dict[str, str], tmp_path: Path
) -> None:
    value = _value()
    SecretStore(home=tmp_path).set(secret_key("caldav", "c1", "password"), value)
    blob = json.dumps({"b64": base64.b64encode(f"me:{value}".encode()).decode()})
    out = _python(
        f"""
        import json, sys
        from app.core.secrets import SecretStore
        from tools.redact import Redactor
        store = SecretStore(home={str(tmp_path)!r})
        before = store.has_secrets, "keyring" in sys.modules
        store.start_loading()
        assert store.wait_loaded(30), store.load_error
        print(json.dumps({{
            "has_secrets": before[0],
            "keyring_imported_before_loading": before[1],
            "known": {value!r} in store.known_values(),
            "scrubbed": Redactor(store.known_values()).text({blob!r}),
        }}))
        """,
        keyring_env,
    )
    result = json.loads(out)
    assert result["has_secrets"] is True
    assert result["keyring_imported_before_loading"] is False
    assert result["known"] is True
    assert value not in result["scrubbed"] and REDACTED in result["scrubbed"]


@pytest.mark.keyring
def test_first_start_after_an_upgrade_derives_names_and_completes_them_from_the_keyring(
    keyring_env: dict[str, str], tmp_path: Path
) -> None:
    """No index yet: names come from settings.json, mcp.json and the accounts in the
    database; the first load adds what only the keyring lists (written by another process)."""
    from app.core.store import Store

    (tmp_path / "settings.json").write_text(
        json.dumps({"providers": [{"id": "p1", "kind": "openai", "label": "x", "base_url": "u"}]})
    )
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"gh": {"command": "x", "env": {"T": "keyring:mcp/gh/T"}}}})
    )
    db = Store(tmp_path / "deskhand.db")
    account = db.add_account("github", "work", {})
    db.close()

    old = SecretStore()  # an older Deskhand: no home, so no index
    values = {
        "provider/p1/api_key": _value(),
        "mcp/gh/T": _value(),
        f"github/{account}/token": _value(),
    }
    for key, value in values.items():
        old.set(key, value)
    external, external_key = _value(), f"slack/{uuid.uuid4().hex[:8]}/token"
    tool_env = {**os.environ, **keyring_env}
    subprocess.run(
        ["secret-tool", "store", "--label=x", "service", "deskhand", "username", external_key],
        input=external,
        env=tool_env,
        text=True,
        timeout=30,
        check=True,
    )
    try:
        import app.core.secrets as secrets_module

        for value in [*values.values(), external]:
            secrets_module._known.discard(value)  # as after a restart

        store = SecretStore(home=tmp_path)
        assert store.stored_names() == set(values)  # derived from files: no keyring yet
        assert store.wait_loaded(timeout=30) and store.load_error is None
        assert set(values.values()) | {external} <= store.known_values()
        # (the shared test keyring may hold other tests' entries too)
        assert {*values, external_key} <= store.stored_names()
        on_disk = _index(tmp_path)["services"]
        assert {*values, external_key} <= set(on_disk["deskhand"])  # type: ignore[index]
    finally:
        subprocess.run(
            ["secret-tool", "clear", "service", "deskhand", "username", external_key],
            env=tool_env,
            timeout=30,
            check=True,
        )
