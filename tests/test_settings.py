"""Settings models, the settings file (atomic, never a secret) and the home folder."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, ValidationError

from app.core import paths
from app.core.settings import (
    STRICT,
    ProviderAccount,
    SecretInSettingsError,
    Settings,
    SettingsStore,
    find_secret_keys,
    looks_like_credential,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _store(home: Path) -> SettingsStore:
    return SettingsStore(paths.settings_path(home))


def _sample() -> Settings:
    s = Settings()
    local = ProviderAccount(kind="openai", label="Ollama", base_url="http://127.0.0.1:11434/v1")
    claude = ProviderAccount(
        kind="anthropic", label="Claude", base_url="https://api.anthropic.com", model="claude-x"
    )
    s.providers = [local, claude]
    s.active_provider = claude.id
    s.files.allowed_roots = ["/srv/projects"]
    s.approvals.always_allow = ["fs_read_*"]
    s.approvals.deny = ["docker_*"]
    s.tools.disabled = ["browser_open"]
    s.tools.exposure = "browse"
    s.general.theme = "dark"
    s.general.send_key = "ctrl_enter"
    s.max_steps = 7
    s.system_prompt = "Be brief. 🙂"
    return s


# ---- models ----------------------------------------------------------------------------


def test_defaults() -> None:
    s = Settings()
    assert s.version == 1
    assert s.providers == [] and s.active_provider is None
    assert s.files.allowed_roots == [] and s.files.denied_paths == []
    assert s.approvals.always_allow == [] and s.approvals.deny == []
    assert s.tools.disabled == [] and s.tools.exposure == "auto"
    assert (s.general.theme, s.general.start_minimized, s.general.send_key) == (
        "system",
        False,
        "enter",
    )
    assert s.max_steps == 25 and s.system_prompt is None
    assert s.active_provider_account() is None


def test_provider_ids_are_short_and_unique() -> None:
    ids = {ProviderAccount(kind="openai", label="x", base_url="u").id for _ in range(50)}
    assert len(ids) == 50
    assert all(0 < len(i) <= 12 for i in ids)


def test_active_provider_account() -> None:
    s = _sample()
    account = s.active_provider_account()
    assert account is not None and account.label == "Claude"
    s.active_provider = "gone"
    assert s.active_provider_account() is None


def test_invalid_assignment_is_rejected() -> None:
    s = Settings()
    with pytest.raises(ValidationError):
        s.general.theme = "purple"  # type: ignore[assignment]


# ---- the file -----------------------------------------------------------------------------


def test_missing_file_gives_defaults_without_writing(home: Path) -> None:
    assert _store(home).load() == Settings()
    assert not paths.settings_path(home).exists()


def test_round_trip(home: Path) -> None:
    store = _store(home)
    original = _sample()
    store.save(original)
    loaded = SettingsStore(store.path).load()
    assert loaded == original
    assert loaded.active_provider_account() == original.providers[1]


def test_unknown_keys_are_ignored(home: Path) -> None:
    path = paths.settings_path(home)
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "max_steps": 9,
                "from_the_future": {"x": 1},
                "general": {"theme": "light", "new_knob": True},
            }
        )
    )
    s = _store(home).load()
    assert s.max_steps == 9 and s.general.theme == "light"
    assert not list(home.glob("*.corrupt-*"))


def test_update_mutates_and_persists(home: Path) -> None:
    store = _store(home)
    store.save(_sample())

    def allow(s: Settings) -> None:
        s.approvals.always_allow.append("docker_list_containers")

    saved = store.update(allow)
    assert "docker_list_containers" in saved.approvals.always_allow
    assert "docker_list_containers" in store.load().approvals.always_allow

    store.update(lambda s: Settings(max_steps=3))  # returning a replacement also works
    assert store.load() == Settings(max_steps=3)


def test_failed_replace_leaves_old_file_intact(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(home)
    original = _sample()
    store.save(original)
    before = store.path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk on fire")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", broken_replace)
        with pytest.raises(OSError, match="disk on fire"):
            store.save(Settings(max_steps=1))

    assert store.path.read_bytes() == before
    assert sorted(p.name for p in home.iterdir()) == ["settings.json"]  # no temp file left
    assert store.load() == original


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"\xff\xfe garbage",
        b'["a list"]',
        b'"just text"',
    ],
)
def test_corrupt_file_is_kept_aside_and_defaults_used(
    home: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = paths.settings_path(home)
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        assert _store(home).load() == Settings()

    kept = list(home.glob("settings.json.corrupt-*"))
    assert len(kept) == 1
    assert kept[0].read_bytes() == content  # nothing the user wrote is lost
    assert not path.exists()
    assert any(str(kept[0]) in r.getMessage() for r in caplog.records)


def test_second_corrupt_file_does_not_overwrite_the_first(home: Path) -> None:
    store = _store(home)
    for content in (b"{one", b"{two"):
        store.path.write_bytes(content)
        store.load()
    kept = sorted(p.read_bytes() for p in home.glob("settings.json.corrupt-*"))
    assert kept == [b"{one", b"{two"]


class _LeakySettings(Settings):
    api_key: str = "sk-123"


class _NestedLeak(Settings):
    extras: dict[str, Any] = Field(
        default_factory=lambda: {"github": [{"label": "work", "accessToken": "ghp_x"}]}
    )


@pytest.mark.parametrize(
    ("model", "where"),
    [(_LeakySettings(), "api_key"), (_NestedLeak(), "extras.github[0].accessToken")],
)
def test_refuses_secret_looking_keys(home: Path, model: Settings, where: str) -> None:
    store = _store(home)
    store.save(Settings(max_steps=4))
    before = store.path.read_bytes()
    with pytest.raises(SecretInSettingsError, match=re.escape(where)):
        store.save(model)
    assert store.path.read_bytes() == before


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "API-Key",
        "password",
        "db_password",
        "token",
        "accessToken",
        "refresh_token",
        "client_secret",
        "secret",
        "private_key",
        "Authorization",
        "credentials",
    ],
)
def test_credential_names(key: str) -> None:
    assert looks_like_credential(key)


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "send_key",
        "start_minimized",
        "always_allow",
        "secretary",
        "author",
        "base_url",
        "label",
        "keyboard",
        "tokenizer",
    ],
)
def test_ordinary_names(key: str) -> None:
    assert not looks_like_credential(key)


def test_real_settings_have_no_secret_keys() -> None:
    assert find_secret_keys(_sample().model_dump(mode="json")) == []


@posix_only
def test_file_mode_is_0600(home: Path) -> None:
    store = _store(home)
    store.path.write_text("{}")
    store.path.chmod(0o644)
    store.save(_sample())
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


# ---- the home folder ------------------------------------------------------------------------


def test_home_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESKHAND_HOME", str(tmp_path / "from-env"))
    assert paths.deskhand_home(tmp_path / "override") == (tmp_path / "override").resolve()
    assert paths.deskhand_home() == (tmp_path / "from-env").resolve()
    assert (tmp_path / "override").is_dir() and (tmp_path / "from-env").is_dir()

    monkeypatch.delenv("DESKHAND_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform != "linux":
        pytest.skip("platformdirs honours XDG_DATA_HOME on Linux only")
    assert paths.deskhand_home() == (tmp_path / "xdg" / "Deskhand").resolve()


@posix_only
def test_home_is_created_private(tmp_path: Path) -> None:
    home = paths.deskhand_home(tmp_path / "a" / "home")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_path_helpers(tmp_path: Path) -> None:
    assert paths.db_path(tmp_path) == tmp_path / "deskhand.db"
    assert paths.settings_path(tmp_path) == tmp_path / "settings.json"
    assert paths.mcp_path(tmp_path) == tmp_path / "mcp.json"
    assert paths.tools_dir(tmp_path) == tmp_path / "tools"
    assert paths.logs_dir(tmp_path) == tmp_path / "logs"


# ---- what the settings form relies on ------------------------------------------------------


def test_font_size_is_0_or_8_to_24() -> None:
    assert Settings().general.font_size == 0
    for ok in (0, 8, 14, 24):
        assert Settings.model_validate({"general": {"font_size": ok}}, context=STRICT)
    for bad in (1, 7, 25, -1):
        with pytest.raises(ValidationError):
            Settings.model_validate({"general": {"font_size": bad}}, context=STRICT)


def test_a_number_out_of_range_in_the_file_gets_its_default(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = paths.settings_path(home)
    path.write_text(
        json.dumps(
            {
                "max_steps": 0,
                "general": {"theme": "dark", "font_size": 3},
                "browser": {"idle_close_seconds": 0, "headless": False},
                "shell": {"timeout": 99999, "sandbox": "off"},
            }
        )
    )
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        s = _store(home).load()
    assert (s.max_steps, s.general.font_size, s.browser.idle_close_seconds) == (25, 0, 300)
    assert s.shell.timeout == 120
    assert (s.general.theme, s.browser.headless, s.shell.sandbox) == ("dark", False, "off")
    assert not list(home.glob("*.corrupt-*"))  # the rest of the file is kept
    assert not list(home.glob("*.repaired-*"))  # a number lost is no loss worth a copy
    assert any("max_steps is out of range" in r.getMessage() for r in caplog.records)


ACCOUNT = {"id": "a1", "kind": "openai", "label": "Mine", "base_url": "http://x/v1"}


@pytest.mark.parametrize(
    ("section", "value", "read"),
    [
        ("general", {"theme": "Dark"}, lambda s: s.general.theme == "system"),
        ("general", {"font_size": "big"}, lambda s: s.general.font_size == 0),
        ("general", {"send_key": None}, lambda s: s.general.send_key == "enter"),
        ("general", "dark", lambda s: s.general == Settings().general),
        ("max_steps", "many", lambda s: s.max_steps == 25),
        ("files", {"allowed_roots": "/srv/one"}, lambda s: s.files.allowed_roots == []),
        ("browser", {"headless": [1], "idle_close_seconds": 60}, lambda s: s.browser.headless),
        ("active_provider", 7, lambda s: s.active_provider is None),
        ("providers", {"a1": ACCOUNT}, lambda s: s.providers == []),
    ],
)
def test_a_wrong_field_in_the_file_gets_its_default_and_the_rest_loads(
    home: Path, section: str, value: Any, read: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = paths.settings_path(home)
    data: dict[str, Any] = {"providers": [ACCOUNT], "active_provider": "a1", "max_steps": 9}
    data["shell"] = {"sandbox": "off"}
    data[section] = value
    original = json.dumps(data).encode()
    path.write_bytes(original)
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        s = _store(home).load()

    assert read(s)
    assert s.shell.sandbox == "off"  # the rest of the file is kept
    if section != "providers":
        assert [a.label for a in s.providers] == ["Mine"]
    if section != "max_steps":
        assert s.max_steps == 9
    if section == "browser":
        assert s.browser.idle_close_seconds == 60  # the section's other fields too
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "is not valid" in warned and "using its default" in warned
    assert path.read_bytes() == original  # not set aside
    assert not list(home.glob("*.corrupt-*"))
    copies = list(home.glob("settings.json.repaired-*"))
    assert [c.read_bytes() for c in copies] == [original]  # what the next save rewrites
    _store(home).load()
    assert len(list(home.glob("settings.json.repaired-*"))) == 1  # once per content


def test_a_wrong_choice_names_the_field_in_the_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    paths.settings_path(home).write_text(json.dumps({"general": {"theme": "Dark"}}))
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        _store(home).load()
    notes = [r.getMessage() for r in caplog.records if "general.theme" in r.getMessage()]
    assert len(notes) == 1 and "'Dark'" in notes[0]  # once, with what was there


def test_a_bad_provider_account_is_left_out_named_and_the_others_kept(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = dict(ACCOUNT)
    odd_format = {**ACCOUNT, "id": "a2", "label": "Odd", "tool_format": "json"}
    gemini = {**ACCOUNT, "id": "a3", "label": "Gemini", "kind": "gemini"}
    numbered = {**ACCOUNT, "id": 4, "label": "Numbered"}  # a new id would lose its key
    path = paths.settings_path(home)
    original = json.dumps({"providers": [good, gemini, odd_format, "x", numbered]}).encode()
    path.write_bytes(original)
    with caplog.at_level(logging.WARNING, logger="app.core.settings"):
        s = _store(home).load()

    assert [(a.id, a.label, a.tool_format) for a in s.providers] == [
        ("a1", "Mine", "auto"),
        ("a2", "Odd", "auto"),
    ]
    warned = [r.getMessage() for r in caplog.records]
    dropped = [m for m in warned if "it was left out" in m]
    assert len(dropped) == 3
    assert any("providers[1]" in m and "'Gemini'" in m and "'a3'" in m for m in dropped)
    assert any("providers[3]" in m for m in dropped)
    assert any("providers[4]" in m and "'Numbered'" in m for m in dropped)
    assert any("'Odd'" in m and "tool_format" in m and "default" in m for m in warned)
    copies = list(home.glob("settings.json.repaired-*"))
    assert [c.read_bytes() for c in copies] == [original]  # the dropped accounts are in it
    assert any(str(copies[0]) in m for m in warned)


def test_a_bad_item_of_a_list_of_folders_is_left_out(home: Path) -> None:
    paths.settings_path(home).write_text(
        json.dumps({"files": {"allowed_roots": ["/srv/a", 3, "/srv/b"], "folders_chosen": True}})
    )
    s = _store(home).load()
    assert s.files.allowed_roots == ["/srv/a", "/srv/b"] and s.files.folders_chosen


def test_the_form_still_sees_a_wrong_choice_as_an_error() -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate({"general": {"theme": "Dark"}}, context=STRICT)
    with pytest.raises(ValidationError):
        Settings.model_validate({"providers": [{"kind": "gemini"}]}, context=STRICT)


def test_an_older_file_loads_unchanged(home: Path) -> None:
    sample = _sample()
    older = sample.model_dump(mode="json")
    del older["general"]["font_size"]  # written before the setting existed
    paths.settings_path(home).write_text(json.dumps(older))
    loaded = _store(home).load()
    assert loaded == sample
    assert loaded.model_dump(mode="json", exclude={"general": {"font_size"}}) == older


def test_a_wrong_choice_in_settings_json_keeps_the_other_settings(tmp_path: Path) -> None:
    """`"theme": "Dark"` (a capital letter) does not set the whole file aside: the field
    gets its default, as out-of-range numbers do, and the providers stay."""
    path = tmp_path / "settings.json"
    account = {"id": "a", "kind": "openai", "label": "Mine", "base_url": "http://x/v1"}
    path.write_text(
        json.dumps({"providers": [account], "active_provider": "a", "general": {"theme": "Dark"}})
    )
    settings = SettingsStore(path).load()
    assert [a.label for a in settings.providers] == ["Mine"]
    assert settings.general.theme == "system"
