"""The MCP tools cache (app/core/mcp/cached.py, known_tools.py) never keeps a token, nor a
plain hash of one: its key of each mcp.json entry is an HMAC under the home's own random
key, and the server's trust fingerprint leaves secrets out. A changed token still makes the
cached list unusable (the server may then act for another account)."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path
from typing import Any

from app.core.mcp.cached import KEY_FILE, cached_tools, entry_hash, server_fingerprint
from app.core.mcp.config import ServerConfig
from app.core.paths import mcp_path
from app.core.sources import mcp_server_fingerprint
from tests.test_mcp_cached_tools import SERVER, list_once, no_call, write_servers

TOKEN = "hunter2"  # weak: a plain hash of it would fall to the first guesses
OTHER = "letmein"


def token_entry(markers: Path, token: str) -> dict[str, Any]:
    """A test server given `token` in every place mcp.json allows a literal secret."""
    return {
        "command": sys.executable,
        "args": [SERVER, "stdio", f"--token={token}", "--api-key", token],
        "env": {"MCP_TEST_MARKERS": str(markers), "API_TOKEN": token},
        "headers": {"Authorization": f"Bearer {token}"},
    }


def plain_hashes(entry: dict[str, Any], token: str) -> list[str]:
    """Unsalted hashes of the token, and of the entry and identity it is part of, as an
    offline guesser would compute them."""
    canonical = json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    identity = mcp_server_fingerprint(
        command=entry["command"], args=entry["args"], env=entry["env"], url=None
    )
    return [
        hashlib.sha256(token.encode()).hexdigest(),
        hashlib.sha256(f"Bearer {token}".encode()).hexdigest(),
        hashlib.sha256(canonical.encode()).hexdigest(),  # the former entry key
        identity.removeprefix("sha256:"),  # the former trust fingerprint (args in plain)
    ]


def test_the_cache_file_holds_no_token_and_no_plain_hash_of_one(home: Path, markers: Path) -> None:
    entry = token_entry(markers, TOKEN)
    write_servers(home, {"srv": entry})
    list_once(home)
    found, missing = cached_tools(home, mcp_path(home), no_call)
    assert missing == [] and "mcp__srv__echo" in {m.name for m in found["srv"].manifests}

    text = (home / "mcp-known-tools.json").read_text("utf-8")
    assert TOKEN not in text
    for digest in plain_hashes(entry, TOKEN):
        assert digest not in text
    record = json.loads(text)["srv"]
    assert record["entry"].startswith("hmac-sha256:")

    key = home / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text("ascii") not in text


def test_a_changed_token_makes_the_cached_tools_unusable(home: Path, markers: Path) -> None:
    write_servers(home, {"srv": token_entry(markers, TOKEN)})
    list_once(home)
    write_servers(home, {"srv": token_entry(markers, OTHER)})
    found, missing = cached_tools(home, mcp_path(home), no_call)
    assert found == {} and missing == ["srv"]
    # still the same server to trust: a rotated token is not a new program
    before = server_fingerprint("srv", token_entry(markers, TOKEN))
    assert before is not None and before == server_fingerprint("srv", token_entry(markers, OTHER))


def test_the_same_entry_in_two_homes_is_stored_under_different_keys(tmp_path: Path) -> None:
    entry = token_entry(tmp_path, TOKEN)
    one, two = tmp_path / "one", tmp_path / "two"
    first = entry_hash(one, entry)
    assert first.startswith("hmac-sha256:")
    assert entry_hash(one, entry) == first  # stable in its home
    assert entry_hash(two, entry) != first
    assert entry_hash(one, token_entry(tmp_path, OTHER)) != first


def test_a_damaged_key_is_replaced_and_an_unwritable_home_caches_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    entry = token_entry(tmp_path, TOKEN)
    (home / KEY_FILE).write_text("not a key", "ascii")
    key = entry_hash(home, entry)
    assert key.startswith("hmac-sha256:")
    assert len(bytes.fromhex((home / KEY_FILE).read_text("ascii"))) == 32
    assert stat.S_IMODE((home / KEY_FILE).stat().st_mode) == 0o600

    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert entry_hash(blocked, entry) == ""  # no key: the cache keeps no offers


def test_records_written_with_plain_hashes_are_dropped(home: Path, markers: Path) -> None:
    """A cache from before keyed entries: another server's record (a plain hash of its
    entry) goes when the file is next written."""
    old = {"entry": hashlib.sha256(b"{}").hexdigest(), "offers": [], "fingerprint": "x"}
    (home / "mcp-known-tools.json").write_text(json.dumps({"gone": old}), "utf-8")
    write_servers(home, {"srv": token_entry(markers, TOKEN)})
    list_once(home)
    data = json.loads((home / "mcp-known-tools.json").read_text("utf-8"))
    assert set(data) == {"srv"}


def test_the_trust_fingerprint_marks_secret_arguments() -> None:
    def fingerprint(*args: str) -> str:
        return ServerConfig("s", "stdio", command="srv", args=args).fingerprint()

    assert fingerprint("--token=one") == fingerprint("--token=two")
    assert fingerprint("--api-key", "one") == fingerprint("--api-key", "two")
    assert fingerprint("--token=one") != fingerprint("--port=1")
    assert fingerprint("--port=1") != fingerprint("--port=2")  # not a secret: identity
