"""User settings: pydantic models persisted to `<home>/settings.json` (docs/architecture.md §6).

Settings never hold a secret: API keys and passwords live in the OS keyring
(see `app.core.secrets`); `SettingsStore.save` refuses credential-looking keys.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from app.core.atomic_file import atomic_write
from app.core.providers.base import ImagesChoice
from app.core.providers.kinds import KindName
from app.core.settings_file import SendKey, ThemeMode
from tools.redact import is_credential_key

log = logging.getLogger(__name__)


def _short_id() -> str:
    return uuid.uuid4().hex[:12]


#: Validation context of the settings form: out-of-range numbers are errors to show the user.
STRICT = {"strict_ranges": True}
#: Errors of a number out of its range (their warning says so).
_OUT_OF_RANGE = frozenset({"greater_than_equal", "less_than_equal", "greater_than", "less_than"})
#: `json_schema_extra` keys the settings form reads: {"ui": False} hides a field;
#: "labels"/"help" name and explain a choice's options; "suffix", "zero_label", "step",
#: "multiline", "path" ("file"/"folder") and "placeholder" shape its input.
UI = "ui"
#: Context key under which `SettingsStore.load` collects what it repaired.
REPAIRS = "repairs"


class _Model(BaseModel):
    # Unknown keys are ignored so an older Deskhand can read a newer settings file.
    model_config = ConfigDict(extra="ignore", validate_assignment=True)
    #: Fields a hand-edited file may not get wrong: the entry holding them is left out
    #: instead (a new random `id` would lose the account's key in the keyring).
    _unforgiving: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="wrap")
    @classmethod
    def _forgive_bad_fields(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """A field of settings.json that is wrong (out of range, not one of the choices, the
        wrong type) falls back to its default, and a bad item of a list is left out, each
        with a warning, instead of the whole file being set aside; the form (STRICT) shows
        the error instead."""
        try:
            return handler(data)
        except ValidationError as exc:
            strict = bool(info.context and info.context.get("strict_ranges"))
            if strict or not isinstance(data, dict):
                raise
            repaired = cls._repaired(data, exc.errors())
            if repaired is None:
                raise
            fixed, notes = repaired
            repairs = info.context.get(REPAIRS) if info.context else None
            for kind, note in notes:
                if isinstance(repairs, list):
                    if (kind, note) in repairs:  # a section validated again by its parent
                        continue
                    repairs.append((kind, note))
                log.warning("settings: %s", note)
            return handler(fixed)

    @classmethod
    def _repaired(
        cls, data: dict[str, Any], errors: list[Any]
    ) -> tuple[dict[str, Any], list[tuple[str, str]]] | None:
        """`data` without its bad fields and list items, and a note on each ("range",
        "default" or "dropped"); None when an error cannot be repaired here."""
        fixed = dict(data)
        drop: dict[str, set[int]] = {}
        notes: list[tuple[str, str]] = []
        where = cls._place(data)
        for error in errors:
            loc = error["loc"]
            name = str(loc[0]) if loc else ""
            items = data.get(name)
            if len(loc) > 1 and isinstance(loc[1], int) and isinstance(items, list):
                if loc[1] not in drop.setdefault(name, set()):  # one note per item
                    drop[name].add(loc[1])
                    item = f"{where}{name}[{loc[1]}] {_describe_item(items[loc[1]])}"
                    why = _why(error, loc[2:])
                    notes.append(("dropped", f"{item} is not valid ({why}); it was left out"))
                continue
            field = cls.model_fields.get(name)
            if field is None or field.is_required() or name in cls._unforgiving:
                return None
            if name not in fixed:
                continue  # noted already
            del fixed[name]
            if _out_of_range(error):
                notes.append(("range", f"{where}{name} is out of range; using its default"))
            else:
                why = _why(error, loc[1:])
                notes.append(("default", f"{where}{name} is not valid ({why}); using its default"))
        for name, gone in drop.items():
            fixed[name] = [v for i, v in enumerate(data[name]) if i not in gone]
        return fixed, notes

    @classmethod
    def _place(cls, data: dict[str, Any]) -> str:
        """How a warning names this model's fields: "general." for `general.theme`."""
        return next(
            (f"{name}." for name, f in Settings.model_fields.items() if f.annotation is cls), ""
        )


def _out_of_range(error: Any) -> bool:
    """A number outside its limits (a field validator's ValueError on a number counts)."""
    number = isinstance(error["input"], int | float) and not isinstance(error["input"], bool)
    return error["type"] in _OUT_OF_RANGE or (error["type"] == "value_error" and number)


def _why(error: Any, inner: tuple[Any, ...]) -> str:
    """Pydantic's message for one error, with where inside the field and what was there."""
    at = ".".join(str(part) for part in inner)
    got = repr(error["input"])
    got = got if len(got) <= 40 else got[:39] + "…"
    return f"{at + ': ' if at else ''}{error['msg']}, got {got}"


def _describe_item(item: Any) -> str:
    """A list item as the user would recognise it: a provider account by label and id."""
    if isinstance(item, dict):
        keys = ("label", "name", "id")
        named = [f"{k} {item[k]!r}" for k in keys if isinstance(item.get(k), str)]
        return f"({', '.join(named)})" if named else "(an object)"
    shown = repr(item)
    return f"({shown if len(shown) <= 40 else shown[:39] + '…'})"


class ProviderAccount(_Model):
    """A configured model provider. Its API key is in the keyring at `provider/<id>/api_key`."""

    _unforgiving = frozenset({"id"})

    id: str = Field(default_factory=_short_id)
    kind: KindName  # the rows of app.core.providers.kinds.PROVIDER_KINDS
    label: str
    base_url: str
    model: str = ""
    #: OpenAI-compatible only: "auto" also reads tool calls models write into the text;
    #: "native" trusts only the `tool_calls` field; "none" never offers tools.
    tool_format: Literal["auto", "native", "none"] = "auto"
    #: Whether its models take images: "auto" goes by the model's name
    #: (app/core/providers/vision.py); "on" or "off" when that list is wrong for a model.
    images: ImagesChoice = "auto"

    @classmethod
    def _place(cls, data: dict[str, Any]) -> str:
        return f"the provider account {_describe_item(data)}: "


#: A sub-agent's tool entry meaning "every built-in tool that only reads".
READ_ONLY_TOOLS = "read-only"


class AgentDefinition(_Model):
    """A named sub-agent the model may hand a task to (`delegate_agent`). What it may do
    is always bounded by the parent's rules as well (app/core/delegation.py); this only
    narrows. Checked against the tools there are by `app.core.agents.problems`."""

    _unforgiving = frozenset({"id", "name"})

    id: str = Field(default_factory=_short_id)
    #: What the model and the user call it ("Researcher"); unique, ignoring case.
    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]*$")
    #: What the model reads when choosing an agent.
    description: str = Field(min_length=1, max_length=400)
    #: What the agent is told before its task (its system prompt).
    instructions: str = Field("", max_length=20_000)
    #: A provider account id and a model; None: the parent conversation's.
    provider: str | None = None
    model: str | None = None
    #: Tool names, globs (`fs_read_*`), `category:<name>` (Deskhand's own tools of that
    #: category) or "read-only" (every built-in tool that only reads).
    tools: list[str] = Field(default_factory=lambda: [READ_ONLY_TOOLS])
    #: Calls it may make without asking, as a task's profile lines (`fs_write_file,
    #: folder=/home/me/notes`): still only where the parent's rules allow them too.
    allow: list[str] = Field(default_factory=list)
    max_steps: int = Field(15, ge=1, le=200)
    max_seconds: int = Field(600, ge=5, le=24 * 3600)
    max_tokens: int = Field(200_000, ge=1_000, le=50_000_000)

    @classmethod
    def _place(cls, data: dict[str, Any]) -> str:
        return f"the agent {_describe_item(data)}: "


class FileSettings(_Model):
    #: Folders file tools may touch. Empty and not chosen yet: the window asks at first
    #: run; a headless run works in the current folder only (and says so).
    allowed_roots: list[str] = Field(default_factory=list)
    denied_paths: list[str] = Field(default_factory=list)
    #: The user answered the folder question (an empty choice stays empty).
    folders_chosen: bool = Field(False, json_schema_extra={UI: False})


class ApprovalRules(_Model):
    """Legacy per-tool lists (tool names or fnmatch patterns). Since rules.json exists they
    are moved into it at start-up and emptied; see app/core/rules.py."""

    always_allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class ToolSettings(_Model):
    disabled: list[str] = Field(default_factory=list)
    exposure: Literal["auto", "all", "browse"] = "auto"


class GeneralSettings(_Model):
    theme: ThemeMode = Field(
        "system",
        title="Theme",
        json_schema_extra={"labels": {"system": "Follow system", "light": "Light", "dark": "Dark"}},
    )
    #: Points; 0 is the system's size. The window applies it to the chat.
    font_size: int = Field(
        0,
        ge=0,
        le=24,
        title="Chat text size",
        description="The size of the conversation's text, in points.",
        json_schema_extra={"zero_label": "System default", "suffix": " pt"},
    )
    start_minimized: bool = Field(False, title="Start minimized to the tray")
    #: Mirrors the platform's autostart entry (app/core/autostart.py), set on save.
    start_at_login: bool = Field(
        False,
        title="Start Deskhand at login",
        description="Reminders and scheduled tasks then run even if you never open the window.",
    )
    send_key: SendKey = Field(
        "enter",
        title="Send message with",
        json_schema_extra={
            "labels": {"enter": "Enter (Shift+Enter for a new line)", "ctrl_enter": "Ctrl+Enter"}
        },
    )

    @field_validator("font_size")
    @classmethod
    def _readable(cls, value: int) -> int:
        if 0 < value < 8:
            raise ValueError("Use 8 points or more, or 0 for the system size.")
        return value


class BrowserSettings(_Model):
    #: A Chrome/Chromium/Edge executable; empty: look for an installed one.
    executable: str = Field(
        "",
        title="Browser program",
        description="Chrome, Chromium or Edge. Leave empty to use one that is installed.",
        json_schema_extra={"path": "file", "placeholder": "Find an installed one"},
    )
    headless: bool = Field(
        True,
        title="Work in a hidden window",
        description="Turn off to watch the browser while the assistant uses it.",
    )
    #: Ask before opening a site not visited before in the conversation.
    ask_new_sites: bool = Field(
        True,
        title="Ask before opening a new site",
        description="Once per site in each conversation.",
    )
    idle_close_seconds: int = Field(
        300,
        ge=1,
        le=86_400,
        title="Close the browser after",
        description="Seconds without use; the next browser tool opens it again.",
        json_schema_extra={"suffix": " s", "step": 30},
    )


class SkillSettings(_Model):
    #: Extra folders holding skills (each skill: a folder with SKILL.md); <home>/skills always.
    folders: list[str] = Field(default_factory=list)
    disabled: list[str] = Field(default_factory=list)


class MemorySettings(_Model):
    enabled: bool = Field(
        True,
        title="Remember things across conversations",
        description="Off: nothing new is remembered and no memories are sent to the model.",
    )
    #: How many characters of memories go into a new conversation's context.
    inject_chars: int = Field(
        2000,
        ge=0,
        le=50_000,
        title="Memories sent",
        description="At most this many characters of memories go with each conversation.",
        json_schema_extra={"suffix": " characters", "step": 500},
    )


class KnowledgeSettings(_Model):
    """Which embedder turns knowledge folders into vectors (the folders are in
    knowledge.db); changing it re-embeds everything in the background."""

    embedder: Literal["builtin", "provider", "engine"] = Field(
        "builtin",
        title="Search by meaning with",
        description="Changing this re-embeds your knowledge folders in the background.",
        json_schema_extra={
            "labels": {
                "builtin": "The built-in model (offline, recommended)",
                "provider": "A provider's embedding model",
                "engine": "An embedding model on this computer (built-in engine)",
            }
        },
    )
    #: The provider account whose `/v1/embeddings` is used (None: the active account).
    provider: str | None = Field(None, json_schema_extra={UI: False})
    #: Its embedding model, e.g. nomic-embed-text (for "engine": one of `deskhand models`).
    model: str = Field("", title="Embedding model", json_schema_extra={UI: False})


class EngineSettings(_Model):
    """The built-in engine: where its models are downloaded from, and when an unused model
    is unloaded to give its memory back."""

    endpoint: str = Field(
        "",
        title="Download models from",
        description=(
            "A mirror of Hugging Face (its address). Empty: Hugging Face itself, or the "
            "HF_ENDPOINT environment variable when it is set."
        ),
        max_length=500,
    )

    @field_validator("endpoint")
    @classmethod
    def _an_address(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith(("https://", "http://")):
            raise ValueError("Give the mirror's whole address, starting with https://.")
        return value

    idle_minutes: int = Field(
        10,
        ge=1,
        le=1440,
        title="Unload a model after",
        description="Minutes without use before the built-in engine frees a model's memory.",
        json_schema_extra={"suffix": " min"},
    )


class ConversationSettings(_Model):
    #: Older turns are summarised once a conversation's history passes this many characters.
    compact_after_chars: int = Field(
        120_000,
        ge=0,
        le=10_000_000,
        title="Summarise after",
        description=(
            "When a conversation grows longer than this, its older turns are summarised to "
            "make room. 0 never summarises."
        ),
        json_schema_extra={"suffix": " characters", "step": 10_000, "zero_label": "Never"},
    )


class ShellSettings(_Model):
    #: "auto": commands run in the OS sandbox where there is one (bubblewrap on Linux,
    #: sandbox-exec on macOS); "off": never sandboxed, and then every command asks.
    sandbox: Literal["auto", "off"] = Field(
        "auto",
        title="Run commands",
        description=(
            "In the sandbox a command can change files only in the folders you allowed "
            "(Settings\u00a0→\u00a0Tools); the rest of the system is read-only, your keys and "
            "Deskhand's own data are hidden from it, and it has no network unless a rule "
            "allows it. A command that runs without the sandbox always asks you first."
        ),
        json_schema_extra={
            "labels": {
                "auto": "Sandboxed where this system allows (recommended)",
                "off": "Never sandboxed — every command asks",
            }
        },
    )
    #: Seconds a command may run in the foreground unless the call says otherwise.
    timeout: int = Field(
        120,
        ge=1,
        le=3600,
        title="Time limit",
        description="Seconds before a command is stopped, unless a call sets its own.",
        json_schema_extra={"suffix": " s"},
    )


class SecuritySettings(_Model):
    #: "auto": the OS keyring, else (after asking) an encrypted file; never plain text.
    keyring: Literal["auto", "system", "encrypted_file"] = Field(
        "auto",
        title="Keep secrets in",
        description=(
            "Takes effect the next time Deskhand starts. Keys already stored are not moved: "
            "enter them again after switching."
        ),
        json_schema_extra={
            "labels": {
                "auto": "System keyring or encrypted file (recommended)",
                "system": "System keyring only",
                "encrypted_file": "Encrypted file only",
            },
            "help": {
                "auto": (
                    "Uses your system's keyring. If there is none, Deskhand asks whether to "
                    "use an encrypted file instead."
                ),
                "system": (
                    "Only your system's keyring (Keychain, Credential Manager, Secret "
                    "Service). Without one, keys cannot be saved."
                ),
                "encrypted_file": (
                    "A file in Deskhand's folder, encrypted with a passphrase you are asked "
                    "for once per session."
                ),
            },
        },
    )


class Settings(_Model):
    version: int = Field(1, json_schema_extra={UI: False})
    providers: list[ProviderAccount] = Field(default_factory=list)
    active_provider: str | None = None
    files: FileSettings = Field(default_factory=FileSettings)
    approvals: ApprovalRules = Field(default_factory=ApprovalRules)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    general: GeneralSettings = Field(default_factory=GeneralSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    shell: ShellSettings = Field(default_factory=ShellSettings)
    #: The user's own sub-agents (Deskhand's built-in ones are in app/core/agents.py).
    agents: list[AgentDefinition] = Field(default_factory=list, json_schema_extra={UI: False})
    max_steps: int = Field(
        25,
        ge=1,
        le=500,
        title="Max steps",
        description="Model calls per answer before the assistant stops.",
    )
    max_parallel_jobs: int = Field(
        4,
        ge=1,
        le=32,
        title="Parallel jobs",
        description="Background jobs of one conversation that run at the same time.",
    )
    #: Replaces the built-in instructions (resources/system_prompt.md) when set.
    system_prompt: str | None = Field(
        None,
        title="Instructions",
        description=(
            "What the assistant is told before every conversation. This replaces the "
            "built-in instructions; leave it empty to use them."
        ),
        json_schema_extra={"multiline": True},
    )
    #: Plain-words notices the app shows once (e.g. what changed in an upgrade).
    pending_notices: list[str] = Field(default_factory=list, json_schema_extra={UI: False})

    def active_provider_account(self) -> ProviderAccount | None:
        """The provider whose id is `active_provider`; None if unset or no longer configured."""
        if self.active_provider is None:
            return None
        return next((p for p in self.providers if p.id == self.active_provider), None)


# ---- the secret guard --------------------------------------------------------------


def looks_like_credential(key: str) -> bool:
    """True for key names such as `api_key`, `password`, `accessToken`, `client-secret`
    (whole words only: `max_tokens` or `send_key` are not credentials). The tripwire's one
    list of credential words decides."""
    return is_credential_key(key)


def find_secret_keys(data: Any, path: str = "") -> list[str]:
    """Dotted paths of every credential-looking key anywhere in a JSON-like value."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{path}.{key}" if path else str(key)
            if looks_like_credential(str(key)):
                found.append(here)
            found.extend(find_secret_keys(value, here))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found.extend(find_secret_keys(value, f"{path}[{i}]"))
    return found


class SecretInSettingsError(ValueError):
    """Raised instead of writing a credential-looking key to settings.json."""


# ---- the file store ----------------------------------------------------------------


class SettingsStore:
    """Loads and atomically saves `settings.json`. Blocking file I/O: tiny, but still
    run it in an executor from the event loop if it happens often."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()

    def load(self) -> Settings:
        """The saved settings; defaults if the file is missing or unreadable.

        A file that is not JSON, or not an object, is renamed to
        `settings.json.corrupt-<timestamp>` (so nothing the user wrote is lost) and a
        warning is logged. A wrong field gets its default and a bad list item (a provider
        account) is left out, each with a warning; the rest loads. Unless all that was wrong
        is a number out of range, a copy of the file as it was is kept first
        (`settings.json.repaired-<timestamp>`), since the next save rewrites it.
        """
        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return Settings()
            repairs: list[tuple[str, str]] = []
            try:
                settings = Settings.model_validate(json.loads(raw), context={REPAIRS: repairs})
            except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
                kept = self._set_aside()
                log.warning(
                    "settings file %s is unreadable (%s); kept it as %s and using defaults",
                    self.path,
                    _first_line(exc),
                    kept,
                )
                return Settings()
            if any(kind != "range" for kind, _ in repairs):
                self._keep_copy(raw)
            return settings

    def save(self, settings: Settings) -> None:
        """Write atomically (temp file in the same folder, fsync, `os.replace`), mode 0o600.

        Raises `SecretInSettingsError` if the dumped settings contain a key that looks
        like a credential; the existing file is then left untouched.
        """
        data = settings.model_dump(mode="json")
        bad = find_secret_keys(data)
        if bad:
            raise SecretInSettingsError(
                "refusing to write credential-looking keys to settings.json "
                f"({', '.join(bad)}); secrets belong in the OS keyring"
            )
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        with self._lock:
            atomic_write(self.path, text.encode("utf-8"), mode=0o600)

    def update(self, fn: Callable[[Settings], Settings | None]) -> Settings:
        """Load, let `fn` mutate (or return a replacement), save; returns what was saved."""
        with self._lock:
            settings = self.load()
            result = fn(settings)
            if result is not None:
                settings = result
            self.save(settings)
            return settings

    def _keep_copy(self, raw: bytes) -> None:
        """Keep `raw` (the file before its repair) beside it, once per distinct content."""
        prefix = f"{self.path.name}.repaired-"
        for kept in self.path.parent.glob(f"{glob.escape(prefix)}*"):
            with contextlib.suppress(OSError):
                if kept.read_bytes() == raw:
                    return
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        for target in _candidates(self.path.with_name(f"{prefix}{stamp}")):
            if not target.exists():
                try:
                    atomic_write(target, raw, mode=0o600)
                except OSError as exc:
                    log.warning("settings: could not keep a copy of %s: %s", self.path, exc)
                    return
                log.warning("settings: kept the file as it was in %s", target)
                return

    def _set_aside(self) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        for target in _candidates(self.path.with_name(f"{self.path.name}.corrupt-{stamp}")):
            if not target.exists():
                os.replace(self.path, target)
                return target
        raise AssertionError("unreachable")  # pragma: no cover


def _candidates(first: Path) -> Iterator[Path]:
    yield first
    n = 1
    while True:
        yield first.with_name(f"{first.name}-{n}")
        n += 1


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
