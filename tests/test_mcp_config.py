"""mcp.json checked entry by entry: a bad entry is named with its field in plain
words and the others load and run; `mcp list` shows both, and a server that exits at start
shows its last stderr lines (redacted, control characters visible)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from app.core.mcp import stderr
from app.core.mcp.config import (
    EntryError,
    McpConfigError,
    ServerConfig,
    import_servers,
    load_config,
    parse_servers,
    read_config,
    read_servers_block,
)
from app.core.mcp.status import ServerState, Status

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def write_config(home: Path, servers: dict[str, Any]) -> Path:
    path = home / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), "utf-8")
    return path


def problems_of(entry: Any, name: str = "github") -> list[tuple[str | None, str]]:
    config = parse_servers({name: entry})
    assert config.servers == [] and config.names == [name]
    return [(p.field, p.message) for p in config.problems]


# ---- one entry --------------------------------------------------------------------------------

BAD_FIELDS: list[tuple[dict[str, Any], str | None, str]] = [
    (
        {"command": "npx", "timeout": "fast"},
        "timeout",
        "server 'github': timeout must be a number of seconds between 1 and 3600 (got 'fast')",
    ),
    ({"command": "npx", "timeout": 0}, "timeout", "between 1 and 3600 (got 0)"),
    ({"command": "npx", "timeout": -5}, "timeout", "between 1 and 3600 (got -5)"),
    ({"command": "npx", "timeout": 86400}, "timeout", "between 1 and 3600 (got 86400)"),
    ({"command": "npx", "timeout": True}, "timeout", "between 1 and 3600 (got true)"),
    ({"command": "npx", "timeout": float("inf")}, "timeout", "between 1 and 3600 (got Infinity)"),
    ({"command": "npx", "disabled": "yes"}, "disabled", "must be true or false (got 'yes')"),
    ({"command": "npx", "disabled": 1}, "disabled", "disabled must be true or false (got 1)"),
    ({"command": ["npx"]}, "command", "command must be the program to run, as text (got a list)"),
    ({"command": "   "}, "command", "command must not be empty"),
    ({"command": "npx", "args": "-y srv"}, "args", "must be a list of text arguments (got text)"),
    ({"command": "npx", "args": ["-y", {}]}, "args[1]", "argument 2 must be text (got an object)"),
    ({"command": "npx", "env": ["A=1"]}, "env", 'env must be an object of NAME: "value" pairs'),
    (
        {"command": "npx", "env": {"PORT": [8080]}},
        "env.PORT",
        "the environment variable 'PORT' must have a text value (got a list)",
    ),
    ({"command": "npx", "cwd": 7}, "cwd", "cwd must be a folder path, as text (got a number)"),
    ({"url": "ftp://files.example/mcp"}, "url", "url must be an http:// or https:// address"),
    ({"url": "https://"}, "url", "url must be an http:// or https:// address"),
    ({"url": 443}, "url", "url must be an http:// or https:// address (got a number)"),
    (
        {"url": "https://x.example/mcp", "headers": {"Accept": {"json": True}}},
        "headers.Accept",
        "the header 'Accept' must have a text value (got an object)",
    ),
    (
        {"type": "websocket", "url": "https://x.example/mcp"},
        "type",
        "type must be one of stdio, http (also written streamable-http) or sse (got 'websocket')",
    ),
    ({"transport": "grpc", "command": "npx"}, "transport", "transport must be one of stdio"),
    ({"type": 3, "command": "npx"}, "type", "type must be one of stdio"),
    ({"type": "stdio", "url": "https://x.example/mcp"}, "command", "no 'command' to run"),
    ({"type": "sse", "command": "npx"}, "url", "type is 'sse' but there is no 'url'"),
    (
        {"type": "sse", "transport": "stdio", "command": "npx", "url": "https://x/sse"},
        "type",
        "'type' and 'transport' name different transports; keep one",
    ),
    ({"args": ["-y"]}, None, "needs either 'command' (a local server) or 'url' (a remote one)"),
    ({"comand": "npx"}, None, "needs either 'command'"),
]


@pytest.mark.parametrize(("entry", "field", "words"), BAD_FIELDS)
def test_each_bad_field_is_named_in_plain_words(
    entry: dict[str, Any], field: str | None, words: str
) -> None:
    ((where, message),) = problems_of(entry)
    assert where == field
    assert message.startswith("server 'github': ")
    assert words in message
    with pytest.raises(EntryError) as raised:  # the settings form's check says the same
        ServerConfig.from_json("github", entry)
    assert str(raised.value) == message
    assert isinstance(raised.value, McpConfigError)


def test_an_entry_that_is_not_an_object_or_has_no_name() -> None:
    assert problems_of(["npx"], "fs") == [
        (
            None,
            "server 'fs': must be an object with a 'command' (a local server) or a 'url' "
            "(a remote one) (got a list)",
        )
    ]
    assert problems_of("npx -y fs", "fs")[0][1].endswith("(got text)")
    assert "empty name" in problems_of({"command": "npx"}, " ")[0][1]


def test_every_bad_field_of_one_entry_is_reported() -> None:
    found = problems_of({"command": "npx", "timeout": "fast", "disabled": "no", "env": []})
    assert [f for f, _ in found] == ["env", "disabled", "timeout"]


def test_what_claude_desktop_cursor_and_others_write_is_accepted() -> None:
    config = parse_servers(
        {
            "desktop": {"command": "npx", "args": ["-y", "srv", "--port", 8080], "env": {"N": 3}},
            "code": {"type": "stdio", "command": "uvx", "args": ["srv"]},
            "cursor": {"url": "https://x.example/mcp", "headers": {"X-Debug": True}},
            "cline": {
                "type": "streamableHttp",
                "url": "https://x.example/mcp",
                "timeout": 60,
                "autoApprove": ["read"],
                "disabled": False,
            },
            "vscode": {"type": "http", "url": "https://x.example/events/sse"},
            "legacy": {"url": "https://x.example/sse"},
            "typed_sse": {"transport": "SSE", "url": "https://x.example/events"},
            "windsurf": {"serverUrl": "https://x.example/mcp"},
            "nulls": {"command": "srv", "args": None, "env": None, "timeout": None},
            "slow": {"command": "srv", "timeout": 3600, "disabled": True},
        }
    )
    assert config.problems == []
    by_name = {s.name: s for s in config.servers}
    assert by_name["desktop"].args == ("-y", "srv", "--port", "8080")
    assert by_name["desktop"].env == {"N": "3"}
    assert by_name["code"].transport == "stdio"
    assert by_name["cursor"].transport == "http"
    assert by_name["cursor"].headers == {"X-Debug": "true"}
    assert by_name["cline"].transport == "http" and by_name["cline"].timeout == 60.0
    assert by_name["vscode"].transport == "http"  # an explicit type wins over a /sse path
    assert by_name["legacy"].transport == "sse"
    assert by_name["typed_sse"].transport == "sse"
    assert by_name["windsurf"].url == "https://x.example/mcp"
    assert by_name["nulls"].args == () and by_name["nulls"].timeout == 120.0
    assert by_name["slow"].timeout == 3600.0 and by_name["slow"].disabled


def test_a_secret_in_a_badly_shaped_field_is_never_quoted() -> None:
    entries = {
        "a": {"url": "https://x.example/mcp", "headers": f"Authorization: Bearer {GITHUB_TOKEN}"},
        "b": {"url": f"ftp://me:{GITHUB_TOKEN}@files.example/mcp"},
        "c": {"command": "srv", "args": [["--token", GITHUB_TOKEN]]},
        "d": {"command": "srv", "env": {"GITHUB_TOKEN": [GITHUB_TOKEN]}},
        "e": {"command": GITHUB_TOKEN, "type": "sse"},
        "f": {"command": [GITHUB_TOKEN]},
    }
    config = parse_servers(entries)
    assert sorted({p.name for p in config.problems}) == sorted(entries)
    for problem in config.problems:
        assert GITHUB_TOKEN not in json.dumps(problem.to_json()), problem


def test_control_characters_in_a_quoted_value_are_shown_not_sent() -> None:
    ((_, message),) = problems_of({"command": "x", "timeout": "\x1b[2J\u202eslow"})
    assert "\x1b" not in message and "\u202e" not in message
    assert "⟨U+001B⟩[2J⟨U+202E⟩slow" in message


# ---- the whole file ---------------------------------------------------------------------------


def test_good_entries_load_next_to_bad_ones(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(
        tmp_path,
        {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]},
            "github": {"command": "npx", "timeout": "fast"},
            "remote": {"url": "https://x.example/mcp"},
            "socket": {"type": "websocket", "url": "wss://x.example"},
        },
    )
    config = read_config(path)
    assert [s.name for s in config.servers] == ["fs", "remote"]
    assert config.names == ["fs", "github", "remote", "socket"]
    assert [p.name for p in config.problems] == ["github", "socket", "socket"]
    assert config.problems_of("fs") == [] and config.server("github") is None
    assert {p.field for p in config.problems_of("socket")} == {"type", "url"}
    # the old entry point keeps working: the usable servers, the others logged
    caplog.set_level(logging.WARNING, logger="app.core.mcp.config")
    assert [s.name for s in load_config(path)] == ["fs", "remote"]
    assert "server 'github': timeout must be a number of seconds" in caplog.text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{\n  "mcpServers": {\n    "fs": {"command": "npx",}\n  }\n}', "line 3 column 29"),
        ('{"mcpServers": {"fs": {"command": "npx"}}', "line 1 column 42"),
        ("[1, 2]", "expected a JSON object (got a list)"),
        ('{"mcpServers": ["fs"]}', "mcpServers must be an object (got a list)"),
    ],
)
def test_an_unreadable_file_is_one_clear_error(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, "utf-8")
    with pytest.raises(McpConfigError) as raised:
        read_config(path)
    assert words in str(raised.value) and str(path) in str(raised.value)


def test_a_file_that_is_not_text_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"mcpServers": {"\xff\xfe": {}}}')
    with pytest.raises(McpConfigError, match="is not UTF-8 text"):
        read_config(path)
    assert read_config(tmp_path / "missing.json").servers == []
    (tmp_path / "null.json").write_text('{"mcpServers": null}', "utf-8")
    assert read_config(tmp_path / "null.json").names == []


def test_keyring_references_and_placeholders_still_resolve(tmp_path: Path) -> None:
    store = {
        "mcp/gh/GITHUB_TOKEN": GITHUB_TOKEN,
        "mcp/api/Authorization": "Bearer abc123456",
        "mcp/api/host": "api.internal.example",
        "mcp/gh/arg1": "s3cret-arg",
    }
    path = write_config(
        tmp_path,
        {
            "gh": {
                "command": "srv",
                "args": ["--key=${keyring:mcp/gh/arg1}"],
                "env": {"GITHUB_TOKEN": "keyring:mcp/gh/GITHUB_TOKEN", "LOG": "1"},
            },
            "api": {
                "url": "https://${keyring:mcp/api/host}/mcp",
                "headers": {"Authorization": "keyring:mcp/api/Authorization"},
            },
            "broken": {"command": "srv", "env": {"GITHUB_TOKEN": "keyring:mcp/broken/missing"}},
        },
    )
    config = read_config(path)
    assert config.problems == []  # a reference is checked when the server starts
    servers = {s.name: s for s in config.servers}
    assert servers["gh"].env["GITHUB_TOKEN"] == "keyring:mcp/gh/GITHUB_TOKEN"  # not resolved
    gh = servers["gh"].resolved(store.get)
    assert gh.env == {"GITHUB_TOKEN": GITHUB_TOKEN, "LOG": "1"}
    assert gh.args == ("--key=s3cret-arg",)
    api = servers["api"].resolved(store.get)
    assert api.url == "https://api.internal.example/mcp"
    assert api.headers == {"Authorization": "Bearer abc123456"}
    assert servers["api"].credential_values() == []  # references are not literal secrets
    with pytest.raises(McpConfigError, match="'mcp/broken/missing', which does not exist"):
        servers["broken"].resolved(store.get)


def test_import_leaves_out_invalid_entries_and_says_why(tmp_path: Path) -> None:
    source = write_config(
        tmp_path,
        {
            "fs": {"command": "npx", "args": ["-y", "server-filesystem"]},
            "github": {"command": "npx", "env": {"GITHUB_TOKEN": GITHUB_TOKEN}, "timeout": "fast"},
        },
    )
    target = tmp_path / "home" / "mcp.json"
    stored: dict[str, str] = {}
    report = import_servers(target, source, set_secret=stored.__setitem__)
    assert report.added == ["fs"]
    assert [p.message for p in report.invalid] == [
        "server 'github': timeout must be a number of seconds between 1 and 3600 (got 'fast')"
    ]
    assert list(read_servers_block(target)) == ["fs"]
    assert stored == {}  # the invalid entry's secret was not touched
    assert report.to_json()["invalid"][0]["field"] == "timeout"

    only_bad = write_config(tmp_path / "home", {"x": {"url": "ftp://x"}})
    before = target.read_bytes()
    with pytest.raises(EntryError, match="server 'x': url must be"):
        import_servers(target, only_bad)
    assert target.read_bytes() == before


def test_invalid_state_shape() -> None:
    (problem,) = parse_servers({"gh": {"command": "x", "timeout": "fast"}}).problems
    state = ServerState.invalid("gh", [problem])
    assert state.status is Status.INVALID and state.error == problem.message
    data = state.copy().to_json()
    assert data["status"] == "invalid" and data["tools"] == [] and data["stderr"] == []
    assert data["problems"] == [problem.to_json()]


# ---- a server's stderr ------------------------------------------------------------------------


def test_kept_stderr_lines_are_bounded_redacted_and_visible() -> None:
    from app.core.secrets import remember_secret

    remember_secret("known-secret-4711")
    pipe = stderr.StderrPipe("noisy-test")
    script = (
        # a filler no stored secret is made of (other tests store long runs of "x")
        "import sys; w = sys.stderr.write; w('.' * 100000 + '\\n'); "
        f"w('using {GITHUB_TOKEN} and known-secret-4711\\n'); w('\\x1b]0;owned\\x07 bye\\n')"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=pipe.writer)
    pipe.close()
    assert proc.wait(30) == 0
    lines = stderr.recent("noisy-test", limit=100)  # waits for the closed pipe to drain
    assert lines[-2] == "using [redacted] and [redacted]"
    assert lines[-1] == "⟨U+001B⟩]0;owned⟨U+0007⟩ bye"
    # the endless line was read in pieces; only the newest KEPT_LINES lines stay
    assert len(lines) == stderr.KEPT_LINES
    assert all(line == "." * stderr.MAX_LINE for line in lines[:-2])
    assert len(stderr.recent("noisy-test", limit=3)) == 3
    stderr.forget("noisy-test")
    assert stderr.recent("noisy-test") == []


def test_the_newest_ended_start_is_shown() -> None:
    def start(text: str, *, end: bool) -> tuple[stderr.StderrPipe, subprocess.Popen[bytes]]:
        pipe = stderr.StderrPipe("flaky-test")
        wait = "" if end else "; sys.stdin.read()"
        code = f"import sys; sys.stderr.write({text!r} + '\\n'); sys.stderr.flush(){wait}"
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stderr=pipe.writer, stdin=subprocess.PIPE
        )
        pipe.close()
        if end:
            proc.communicate(timeout=30)
        return pipe, proc

    start("first attempt: port 8080 in use", end=True)
    start("second attempt: port 8080 in use", end=True)
    assert stderr.recent("flaky-test") == ["second attempt: port 8080 in use"]
    _, running = start("third attempt: starting", end=False)
    try:
        # the start under way has not ended: the last one that did says why it stopped
        assert stderr.recent("flaky-test", settle=0) == ["second attempt: port 8080 in use"]
    finally:
        running.communicate(b"", timeout=30)
    assert stderr.recent("flaky-test") == ["third attempt: starting"]
    stderr.forget("flaky-test")


# ---- deskhand mcp list ------------------------------------------------------------------------


def test_cli_lists_a_bad_entry_next_to_a_running_server_and_a_crashed_one(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    markers = tmp_path / "markers"
    markers.mkdir()
    crash = (
        "import os, sys; w = sys.stderr.write; w('starting up\\n');"
        " w('using token ' + os.environ['API_TOKEN'] + '\\n');"
        " w('\\x1b[31mfatal: cannot open /data/db.sqlite\\n'); sys.exit(3)"
    )
    write_config(
        home,
        {
            "good": {
                "command": sys.executable,
                "args": [SERVER, "stdio"],
                "env": {"MCP_TEST_MARKERS": str(markers)},
            },
            "github": {"command": "npx", "timeout": "fast"},
            "crashy": {
                "command": sys.executable,
                "args": ["-c", crash],
                "env": {"API_TOKEN": "lit-token-55aa77"},
            },
            "socket": {"type": "websocket", "url": "wss://x.example"},
        },
    )
    assert main(["mcp", "list", "--wait", "30"]) == 1  # an entry is invalid
    out = capsys.readouterr().out
    lines = out.splitlines()
    good = lines.index(next(line for line in lines if line.startswith("good  ")))
    assert lines[good] == "good  [stdio]  ready"
    assert any(line.startswith("  tools: ") and "echo" in line for line in lines[good:])
    github = lines.index("github  [not started: mcp.json entry is invalid]")
    assert lines[github + 1] == (
        "  problem: timeout must be a number of seconds between 1 and 3600 (got 'fast')"
    )
    assert "socket  [not started: mcp.json entry is invalid]" in lines
    assert (
        "  problem: type must be one of stdio, http (also written streamable-http) or sse"
        " (got 'websocket')" in lines
    )
    # failed, or already starting again (the runtime retries with backoff)
    crashy = lines.index(next(line for line in lines if line.startswith("crashy  [stdio]  ")))
    assert lines[crashy].split()[-1] in {"failed", "restarting", "starting"}
    tail = lines[crashy:]
    assert tail[1].startswith("  error: ")
    assert "  the server's last output (stderr):" in tail
    assert "    starting up" in tail
    assert "    using token [redacted]" in tail
    assert "    ⟨U+001B⟩[31mfatal: cannot open /data/db.sqlite" in tail
    assert "lit-token-55aa77" not in out and "\x1b" not in out
    assert [line.split("  ")[0] for line in lines if line and not line.startswith(" ")] == [
        "good",
        "github",
        "crashy",
        "socket",
    ]

    assert main(["mcp", "list", "--json", "--wait", "30"]) == 1
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert list(listed) == ["good", "github", "crashy", "socket"]
    assert listed["good"]["status"] == "ready" and "echo" in listed["good"]["tools"]
    assert listed["good"]["problems"] == []
    assert listed["github"]["status"] == "invalid"
    assert listed["github"]["problems"] == [
        {
            "name": "github",
            "field": "timeout",
            "message": "server 'github': timeout must be a number of seconds between 1 and 3600 "
            "(got 'fast')",
        }
    ]
    assert {p["field"] for p in listed["socket"]["problems"]} == {"type", "url"}
    assert listed["crashy"]["status"] in {"failed", "restarting", "starting"}
    assert listed["crashy"]["error"] and listed["crashy"]["problems"] == []
    assert "using token [redacted]" in listed["crashy"]["stderr"]


def test_cli_with_only_good_entries_exits_zero(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    write_config(home, {"off": {"command": "nothing", "disabled": True}})
    assert main(["mcp", "list", "--json"]) == 0
    (off,) = json.loads(capsys.readouterr().out)
    assert off["status"] == "disabled" and off["problems"] == []


def test_cli_import_names_the_entries_it_left_out(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    source = write_config(
        tmp_path, {"fs": {"command": "fs-server"}, "web": {"url": "gopher://x.example"}}
    )
    assert main(["mcp", "import", str(source)]) == 1
    said = capsys.readouterr()
    assert "  + fs" in said.out
    assert "not imported: server 'web': url must be an http:// or https:// address" in said.err
    assert read_servers_block(home / "mcp.json") == {"fs": {"command": "fs-server"}}
    assert main(["mcp", "import", str(source), "--json", "--overwrite"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == ["fs"] and [p["name"] for p in report["invalid"]] == ["web"]


# ---- names and secrets the keyring cannot take -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("gh\u0000", "U+0000"),
        ("gh\u001b[31m", "U+001B"),
        ("g\u200bh", "U+200B"),
        ("gh\u202e", "U+202E"),
        ("gh\u2028x", "U+2028"),
        ("gh\ud800", "U+D800"),
    ],
)
def test_a_name_with_an_invisible_or_control_character_is_refused(name: str, code: str) -> None:
    ((field, message),) = problems_of({"command": "npx"}, name)
    assert field is None
    assert message.endswith(
        f"the name holds an invisible or control character ({code}); type the name again without it"
    )
    assert "\u202e" not in message and "\u0000" not in message  # the name is escaped


def test_names_in_any_script_are_fine() -> None:
    config = parse_servers({n: {"command": "npx"} for n in ("café", "日本語", "my server", "🙂")})
    assert config.problems == [] and len(config.servers) == 4


def test_every_unprintable_character_of_a_key_part_is_escaped() -> None:
    from app.core.mcp.config import keyring_key

    assert keyring_key("gh", "TOK\u0000EN") == "mcp/gh/TOK%00EN"
    assert keyring_key("gh", "A\u200bB") == "mcp/gh/A%E2%80%8BB"
    assert keyring_key("gh", "A\u00a0B") == "mcp/gh/A%C2%A0B"  # not the ambiguous %A0
    assert keyring_key("café", "K") == "mcp/café/K"  # printable text stays readable
    names = ["a b", "a%20b", "a/b", "a%2Fb", "a\u3000b", "a%E3%80%80b", "a\u2028b", "x\ud800"]
    keys = [keyring_key(n, "K") for n in names]
    assert len(set(keys)) == len(names)  # reversible: no two names share a key
    assert all(k.isprintable() and not any(c.isspace() for c in k) for k in keys)
    assert all(k.count("/") == 2 for k in keys)


def test_a_server_whose_secret_the_keyring_refuses_is_not_imported(tmp_path: Path) -> None:
    other = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    source = write_config(
        tmp_path,
        {
            "gh": {"command": "npx", "env": {"GITHUB_TOKEN": GITHUB_TOKEN}},
            "fs": {"command": "npx", "args": [f"--token={other}"]},
        },
    )
    (tmp_path / "home").mkdir()
    target = write_config(tmp_path / "home", {"gh": {"command": "old-gh"}})
    stored: dict[str, str] = {}

    def refuse_gh(ref: str, value: str) -> None:
        if ref.startswith("mcp/gh/"):
            raise RuntimeError("Could not save it to the system keyring: the keyring is locked.")
        stored[ref] = value

    report = import_servers(target, source, set_secret=refuse_gh, overwrite=True)
    assert report.added == ["fs"] and report.moved_to_keyring == ["fs.args[0]"]
    (problem,) = report.invalid
    assert (problem.name, problem.field) == ("gh", "env.GITHUB_TOKEN")
    assert problem.message == (
        "server 'gh': could not store its secret in the keyring: could not save it to the "
        "system keyring: the keyring is locked; nothing was written for it"
    )
    written = target.read_text("utf-8")
    assert GITHUB_TOKEN not in written and other not in written
    assert read_servers_block(target)["gh"] == {"command": "old-gh"}  # not replaced
    assert list(stored.values()) == [other]


def test_a_refusal_never_quotes_the_secret(tmp_path: Path) -> None:
    source = write_config(tmp_path, {"gh": {"command": "npx", "env": {"TOKEN": GITHUB_TOKEN}}})

    def leaky(ref: str, value: str) -> None:
        raise ValueError(f"bad value {value!r}\nsecond line")

    target = tmp_path / "home" / "mcp.json"
    report = import_servers(target, source, set_secret=leaky)
    (problem,) = report.invalid
    assert GITHUB_TOKEN not in problem.message and "\n" not in problem.message
    assert "bad value '…' second line" in problem.message
    assert not target.exists()


def test_cli_import_refuses_a_server_the_keyring_cannot_take(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cli import main
    from app.core.secrets import SecretStore, SecretStoreError

    def locked(self: SecretStore, key: str, value: str) -> None:
        raise SecretStoreError(f"Could not save '{key}' to the system keyring: it is locked.")

    monkeypatch.setattr(SecretStore, "set", locked)
    source = write_config(
        tmp_path,
        {"fs": {"command": "fs-server"}, "gh": {"command": "npx", "env": {"TOKEN": GITHUB_TOKEN}}},
    )
    assert main(["mcp", "import", str(source)]) == 1
    said = capsys.readouterr()
    assert "  + fs" in said.out and "gh" not in said.out
    assert (
        "not imported: server 'gh': could not store its secret in the keyring: it is locked; "
        "nothing was written for it"
    ) in said.err
    assert GITHUB_TOKEN not in (home / "mcp.json").read_text("utf-8")
    assert read_servers_block(home / "mcp.json") == {"fs": {"command": "fs-server"}}


def test_an_oauth_client_secret_moves_to_the_keyring_too(tmp_path: Path) -> None:
    secret = "cs-9f8e7d6c5b4a3210"
    auth = {"clientId": "deskhand", "clientSecret": secret, "issuer": "https://id.example"}
    source = write_config(tmp_path, {"wiki": {"url": "https://wiki.example/mcp", "auth": auth}})
    target = tmp_path / "home" / "mcp.json"
    stored: dict[str, str] = {}
    report = import_servers(target, source, set_secret=stored.__setitem__)
    assert report.moved_to_keyring == ["wiki.auth.clientSecret"]
    assert secret not in target.read_text("utf-8")
    wiki = ServerConfig.from_json("wiki", read_servers_block(target)["wiki"])
    assert wiki.credential_values() == []
    assert wiki.resolved(stored.get).auth.client_secret == secret
