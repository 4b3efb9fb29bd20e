"""`deskhand ask` sends its first request to the model before the rest of Deskhand has
loaded (the settings model, the tools, the agent: about 150 ms), and loads them while the
model reads it.

How: the last `ask` whose inputs were the same left a *recipe* — the URL, headers and
body of its first request, with the prompt and the time line cut out and the API key left
out. The inputs are hashed: settings.json, mcp.json, the cached MCP tool lists, the tool
packs folder, the skills, the command's flags, Deskhand's own code, and which key and
proxy variables are set. A later `ask` with the same hash fills in its prompt, its time
line and the key, and sends at once. The agent, once loaded, builds its first request as
always; the provider takes the early response only when that request is exactly the one
sent early (URL, headers, body: `EarlyRequest.claim`), else it drops it, sends its own and
a new recipe is kept. So a stale recipe costs one wasted request, never a wrong answer.

What the early request never does: carry a prompt that holds a known secret (the agent
would have redacted it); go out when memories could be added to the request (which ones
depends on the prompt); send a key other than the one `SecretStore.api_key_for` gives for
the same account and URL as last time. The recipe holds no prompt and no key; it lives in
the home next to settings.json, with the same protection (a hand that can rewrite it can
rewrite settings.json), and is written 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlsplit

from app.core.paths import db_path, mcp_path, settings_path, tools_dir

if TYPE_CHECKING:
    import httpx

    from app.core.providers.base import ProviderConfig
    from app.core.secrets import SecretStore

log = logging.getLogger(__name__)

RECIPE_FILE = "ask-first-request.json"
#: Bump when the recipe's meaning changes: older recipes are then ignored.
FORMAT = 1
#: Stands for the prompt in a kept body (a JSON object where a string was: unambiguous).
PROMPT_MARK = {"\u0000": "prompt"}
#: Stand for the time line inside a string, and the key inside a header value.
TIME_MARK = "\u0000time\u0000"
KEY_MARK = "\u0000key\u0000"
#: What httpx-sse adds to a streamed request (`aconnect_sse`): the early request must be
#: byte for byte the provider's.
SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
#: Seconds the loading waits, at most, for the early request to be written (so the
#: imports do not slow the sending down on the interpreter lock).
SEND_HEAD_START = 0.05
_MEMORY_QUERY = "SELECT EXISTS(SELECT 1 FROM memories)"
_CODE_FOLDERS = ("app", "tools", "integrations", "resources")
#: A bigger file is no recipe (it is read on every `ask`).
MAX_RECIPE_BYTES = 16 << 20


# ---- what the first request depends on ------------------------------------------------


#: Files of the home the first request is made from (the tools offered, their sources'
#: trust, the rules that hide tools, the skills and MCP servers listed).
_HOME_FILES = ("settings.json", "mcp.json", "mcp-known-tools.json", "trust.json", "rules.json")
#: The connected accounts decide which integrations' tools are offered.
_ACCOUNTS_QUERY = (
    "SELECT (SELECT json_group_array(json_array(id, integration, label, fields))"
    " FROM (SELECT * FROM integration_accounts ORDER BY id)),"
    " (SELECT json_group_array(json_array(integration, account_id))"
    " FROM (SELECT * FROM integration_active ORDER BY integration))"
)
#: Past this many files under one folder, no recipe: stamping them would slow every `ask`.
MAX_STAMPED_FILES = 20_000


class _TooManyFiles(Exception):
    pass


def environment_names() -> tuple[str, ...]:
    """Which key, proxy and Deskhand variables are set (never their values). Taken once,
    when the `ask` begins: loading Deskhand takes some out of the environment (the
    keyring's passphrase)."""
    return tuple(
        name
        for name in sorted(os.environ)
        if name.startswith("DESKHAND_") or name.endswith(("_API_KEY", "_PROXY", "_proxy"))
    )


def inputs_fingerprint(
    home: Path, flags: Sequence[str | None], env_names: Sequence[str] | None = None
) -> str | None:
    """A hash of everything the first request of a new conversation is made from, but the
    prompt, the time and the secrets' values (read again each time); None when there is
    too much to stamp (then no recipe is used or kept)."""
    digest = hashlib.sha256(f"{FORMAT}\0{sys.version}\0{home}\0".encode())
    for flag in flags:
        digest.update(f"{flag!r}\0".encode())
    for name in _HOME_FILES:
        digest.update(_file_bytes(home / name) + b"\0")
    digest.update(_accounts(home).encode() + b"\0")
    try:
        _stamp_tree(digest, tools_dir(home))
        for folder in (home / "skills", *_skill_folders(home)):
            _stamp_skills(digest, folder)
        root = Path(__file__).resolve().parents[2]
        for name in _CODE_FOLDERS:
            _stamp_tree(digest, root / name)
    except _TooManyFiles:
        return None
    _stamp_installed(digest)
    for name in environment_names() if env_names is None else env_names:
        digest.update(f"{name}\0".encode())
    return digest.hexdigest()


def _file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"-"


def _stamp_tree(digest: Any, folder: Path) -> None:
    """Names, sizes and change times of the files under `folder` (not their bytes). A link
    is stamped by what it points at, never followed into: a link loop, or one to a big
    tree, must not make every `ask` slow."""
    pending, seen = [folder], 0
    while pending:
        current = pending.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            digest.update(f"{current}:-\0".encode())
            continue
        for entry in entries:
            if entry.name == "__pycache__":
                continue
            seen += 1
            if seen > MAX_STAMPED_FILES:
                raise _TooManyFiles(str(folder))
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                    continue
                info = entry.stat(follow_symlinks=True)
            except OSError:
                digest.update(f"{entry.path}:-\0".encode())
                continue
            digest.update(f"{entry.path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())


def _stamp_skills(digest: Any, folder: Path) -> None:
    """What the skills loader reads: each `<folder>/<skill>/SKILL.md` (through links, as
    the loader follows them), not the rest of the skill's files."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError:
        digest.update(f"{folder}:-\0".encode())
        return
    if len(names) > MAX_STAMPED_FILES:
        raise _TooManyFiles(str(folder))
    for name in names:
        path = folder / name / "SKILL.md"
        try:
            info = path.stat()
            digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
        except OSError:
            digest.update(f"{path}:-\0".encode())


def _stamp_installed(digest: Any) -> None:
    """The installed distributions (their dist-info folders' names carry the versions):
    a tool pack installed as a package (entry points) changes them."""
    for entry in sorted({os.path.realpath(entry or ".") for entry in sys.path}):
        try:
            names = sorted(n for n in os.listdir(entry) if n.endswith(".dist-info"))
        except OSError:
            continue
        if names:  # (how the process was started changes sys.path, not what is installed)
            digest.update(f"{entry}\0{'|'.join(names)}\0".encode())


def _accounts(home: Path) -> str:
    path = db_path(home)
    if not path.exists():
        return json.dumps(["[]", "[]"])  # as a new store's empty tables read
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            return json.dumps(db.execute(_ACCOUNTS_QUERY).fetchone())
    except sqlite3.Error:
        return "?"


def _skill_folders(home: Path) -> list[Path]:
    try:
        raw = json.loads(_file_bytes(settings_path(home)))
        folders = raw.get("skills", {}).get("folders", [])
        return [Path(str(f)).expanduser() for f in folders if isinstance(f, str)]
    except (ValueError, AttributeError, TypeError):
        return []


def memories_absent(home: Path) -> bool:
    """No memory could be added to a request (the agent adds those the prompt calls up,
    which only the loaded app can choose): the store has none, or there is no store yet."""
    path = db_path(home)
    if not path.exists():
        return True
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            return not db.execute(_MEMORY_QUERY).fetchone()[0]
    except sqlite3.Error:
        return False


# ---- the recipe -------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """The first request of the last `ask` with these inputs, prompt, time and key cut out."""

    fingerprint: str
    url: str
    headers: dict[str, str]
    key_source: tuple[str, str, str] | None
    key_mode: str
    timeout: tuple[float, float]
    payload: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "url": self.url,
            "headers": self.headers,
            "key_source": list(self.key_source) if self.key_source else None,
            "key_mode": self.key_mode,
            "timeout": list(self.timeout),
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, data: Any) -> Recipe | None:
        try:
            if data["format"] != FORMAT:
                return None
            source = data["key_source"]
            headers = data["headers"]
            if not all(isinstance(v, str) for v in headers.values()):
                return None
            timeout = (float(data["timeout"][0]), float(data["timeout"][1]))
            if not all(math.isfinite(t) and t > 0 for t in timeout):
                return None
            return cls(
                fingerprint=str(data["fingerprint"]),
                url=str(data["url"]),
                headers=dict(headers),
                key_source=(str(source[0]), str(source[1]), str(source[2])) if source else None,
                key_mode=str(data["key_mode"]),
                timeout=timeout,
                payload=data["payload"],
            )
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            return None


def load_recipe(home: Path, fingerprint: str) -> Recipe | None:
    raw = _read_regular(home / RECIPE_FILE, MAX_RECIPE_BYTES)
    try:
        recipe = Recipe.from_json(json.loads(raw)) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return recipe if recipe is not None and recipe.fingerprint == fingerprint else None


def _read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (no symlink, FIFO or device: they could hang or flood)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return file.read(limit + 1)


def save_recipe(home: Path, recipe: Recipe | None) -> None:
    """Keeps `recipe` (0600, replaced whole), or removes the old one for None."""
    path = home / RECIPE_FILE
    try:
        if recipe is None:
            path.unlink(missing_ok=True)
            return
        fd, temporary = tempfile.mkstemp(dir=home, prefix=f".{RECIPE_FILE}.")  # 0600, new
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(recipe.to_json(), out)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:  # a missing recipe only means a slower next `ask`
        log.info("could not keep the first request's recipe: %s", exc)


def cut_out(payload: Any, prompt: str, time_line: str, secret: str | None) -> Any | None:
    """`payload` with its prompt and its time line marked, or None unless the prompt is in
    the last message and nowhere else, the time line is there once, and no secret is."""
    counts = {"prompt": 0, "placed": 0, "time": 0}

    def walk(value: Any, last: bool) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, last) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, last) for v in value]
        if isinstance(value, str):
            if secret and secret in value:
                raise ValueError("a secret in the body")
            if value == prompt:
                counts["prompt"] += 1
                counts["placed"] += last
                return dict(PROMPT_MARK)
            if time_line in value:
                counts["time"] += value.count(time_line)
                return value.replace(time_line, TIME_MARK)
        return value

    messages = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(messages, list) or not messages:
        return None
    try:
        template = {k: walk(v, False) for k, v in payload.items() if k != "messages"}
        template["messages"] = [walk(m, False) for m in messages[:-1]]
        template["messages"].append(walk(messages[-1], True))
    except ValueError:
        return None
    template = {k: template[k] for k in payload}  # the keys in their order
    return template if counts == {"prompt": 1, "placed": 1, "time": 1} else None


def _canonical(
    url: str, headers: Mapping[str, str], payload: Any, timeout: tuple[float, float]
) -> str:
    """A request as JSON text: equal only when what goes on the wire is (key order, and
    1 against 1.0 against true, count; Python's `==` would let them pass)."""
    return json.dumps([url, list(headers.items()), payload, list(timeout)], ensure_ascii=False)


def _only_the_prompt(payload: Any) -> bool:
    """The body's messages are the system prompt (if sent as a message) and the prompt:
    anything else (a memory note the agent added) is not for the next `ask`."""
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(messages, list) or not messages:
        return False
    return all(isinstance(m, dict) and m.get("role") == "system" for m in messages[:-1])


def fill_in(template: Any, prompt: str, time_line: str) -> Any:
    if template == PROMPT_MARK:
        return prompt
    if isinstance(template, dict):
        return {k: fill_in(v, prompt, time_line) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_in(v, prompt, time_line) for v in template]
    if isinstance(template, str):
        return template.replace(TIME_MARK, time_line)
    return template


def _headers_cut_out(headers: Mapping[str, str], secret: str | None) -> dict[str, str] | None:
    if not secret:
        return dict(headers)
    cut = {name: value.replace(secret, KEY_MARK) for name, value in headers.items()}
    return cut if any(KEY_MARK in value for value in cut.values()) else None


# ---- the early request ------------------------------------------------------------------


class _Owner:
    """The account a key belongs to, as `SecretStore.api_key_for` looks it up."""

    def __init__(self, account_id: str, base_url: str) -> None:
        self.id, self.base_url = account_id, base_url


class EarlyRequest:
    """One `ask`'s first request: maybe already sent (`begin`), claimed by the provider
    (once), and the recipe for the next `ask` kept when the one sent was not the one the
    agent wanted."""

    def __init__(
        self, home: Path, fingerprint: str, prompt: str, time_line: str, recordable: bool
    ) -> None:
        self.home, self.fingerprint = home, fingerprint
        self.prompt, self.time_line = prompt, time_line
        self._recordable = recordable
        #: URL, headers, body and (connect, read) timeouts of the request sent early, as
        #: JSON text (`_canonical`).
        self._sent: str | None = None
        #: The secret store the early request was prepared with (read once): the loaded
        #: app takes it over (`Runtime(secrets=…)`) rather than reading the keyring again.
        self.secrets: SecretStore | None = None
        self._task: asyncio.Task[httpx.Response] | None = None
        self._client: httpx.AsyncClient | None = None
        self._written = asyncio.Event()
        self._claimed = False
        #: Still no memory and the same inputs as when the ask began (`begin` sets it): else
        #: the agent's request may hold what the fingerprint does not stand for.
        self.recheck: Callable[[], bool] | None = None
        #: The secret store's mode (`SecretStore.mode`), set once the settings are read.
        self.key_mode: str = "auto"

    @property
    def sent(self) -> bool:
        return self._task is not None

    def send(self, recipe: Recipe, headers: dict[str, str], payload: Any) -> None:
        import httpx

        from app.core.providers.http_client import new_client

        connect, read = recipe.timeout
        timeout = httpx.Timeout(read, connect=connect)
        self._client = new_client(recipe.url, timeout)
        try:
            request = self._client.build_request(
                "POST",
                recipe.url,
                headers=headers | SSE_HEADERS,
                json=payload,
                timeout=timeout,
                extensions={"trace": self._trace},
            )
        except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as exc:
            log.info("the kept first request cannot be sent: %s", type(exc).__name__)
            return
        self._sent = _canonical(recipe.url, headers, payload, recipe.timeout)
        self._task = asyncio.get_running_loop().create_task(self._client.send(request, stream=True))

    async def _trace(self, event: str, _info: Any) -> None:
        if event.endswith(".send_request_body.complete"):
            self._written.set()

    async def wait_written(self, timeout: float) -> None:
        """Until the request is on the wire, or `timeout` seconds, or it failed."""
        if self._task is None:
            return
        waits = {asyncio.ensure_future(self._written.wait()), self._task}
        _done, pending = await asyncio.wait(
            waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for waiter in pending - {self._task}:
            waiter.cancel()

    def claim(
        self, url: str, headers: Mapping[str, str], payload: dict[str, Any], config: ProviderConfig
    ) -> asyncio.Task[httpx.Response] | None:
        """The early response when this is the request sent early; None for any other
        (and for every request after the first)."""
        if self._claimed:
            return None
        self._claimed = True
        wanted = _canonical(url, headers, payload, (config.connect_timeout, config.read_timeout))
        if self._task is not None and self._sent == wanted:
            task, self._task = self._task, None
            log.info("the first request went out before the app had loaded")
            return task
        if self._task is not None:
            log.info("the early first request was not the one wanted: sent again")
        self._drop()
        if self._recordable and (self.recheck is None or self.recheck()):
            save_recipe(self.home, self._recipe(url, headers, payload, config))
        return None

    def _recipe(
        self, url: str, headers: Mapping[str, str], payload: Any, config: ProviderConfig
    ) -> Recipe | None:
        from app.core.mcp.secret_shapes import secret_spans

        secret = config.api_key
        if secret and config.key_source is None:
            return None
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None or secret_spans(url):
            return None  # a password or token in the address: never kept on disk
        if not _only_the_prompt(payload):
            return None
        cut_headers = _headers_cut_out(headers, secret)
        template = cut_out(payload, self.prompt, self.time_line, secret)
        if cut_headers is None or template is None:
            return None
        return Recipe(
            fingerprint=self.fingerprint,
            url=url,
            headers=cut_headers,
            key_source=config.key_source if secret else None,
            key_mode=self.key_mode,
            timeout=(config.connect_timeout, config.read_timeout),
            payload=template,
        )

    def _drop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if not task.done():
            task.cancel()
        elif task.exception() is None:
            asyncio.get_running_loop().create_task(task.result().aclose())

    async def aclose(self) -> None:
        self._drop()
        if self._client is not None:
            await self._client.aclose()


def begin(
    home: Path, prompt: str, flags: Sequence[str | None], *, new_conversation: bool
) -> EarlyRequest:
    """Sends the first request now when a recipe for these inputs exists and nothing
    forbids it; the returned request is handed to the provider either way (it keeps the
    recipe for the next time). Needs a running event loop."""
    from app.core.time_line import current_time_line

    env_names = environment_names()
    fingerprint = inputs_fingerprint(home, flags, env_names)
    recordable = fingerprint is not None and new_conversation and memories_absent(home)
    early = EarlyRequest(home, fingerprint or "", prompt, current_time_line(), recordable)
    early.recheck = lambda: (
        memories_absent(home) and inputs_fingerprint(home, flags, env_names) == fingerprint
    )
    recipe = load_recipe(home, fingerprint) if recordable and fingerprint else None
    if recipe is not None:
        prepared = _prepare(recipe, home, prompt, early.time_line, flags)
        if prepared is not None:
            headers, payload, early.secrets = prepared
            early.send(recipe, headers, payload)
    return early


def _prepare(
    recipe: Recipe, home: Path, prompt: str, time_line: str, flags: Sequence[str | None] = ()
) -> tuple[dict[str, str], Any, SecretStore] | None:
    """The headers and body to send, with the secret store read for them (the loaded app
    takes it over: one keyring read, one passphrase), or None when the prompt holds a
    secret the loaded app would redact or the key cannot be read as last time."""
    from app.core.keyring_fallback import KeyringMode
    from app.core.providers.urls import origin
    from app.core.secrets import SecretStore, SecretStoreError
    from tools.redact import Redactor

    # the server the command names now (`--base-url`, else the active account's), and
    # whose key goes there: the recipe must agree with both
    source = _expected_key_source(home, flags)
    target = origin(recipe.url)
    if source is None or target is None or target != origin(source[2]):
        return None
    if recipe.key_source is not None and recipe.key_source != source:
        return None
    mcp_secrets = _mcp_credentials(home)
    if mcp_secrets is None:
        return None
    mode = next((m for m in get_args(KeyringMode) if m == recipe.key_mode), None)
    if mode is None:
        return None
    store = SecretStore(mode=mode, home=home)
    store.start_loading()
    store.wait_loaded()
    if store.load_error:
        return None
    key: str | None = None
    if recipe.key_source is not None:
        account_id, account_url, url = recipe.key_source
        try:
            key = store.api_key_for(_Owner(account_id, account_url), url)
        except SecretStoreError:
            return None
    wants_key = any(KEY_MARK in value for value in recipe.headers.values())
    if wants_key != bool(key):
        return None
    if Redactor({*store.known_values(), *mcp_secrets}).text(prompt) != prompt:
        return None
    headers = {name: value.replace(KEY_MARK, key or "") for name, value in recipe.headers.items()}
    return headers, fill_in(recipe.payload, prompt, time_line), store


def _expected_key_source(home: Path, flags: Sequence[str | None]) -> tuple[str, str, str] | None:
    """The key's account as `Runtime.provider_config` picks it now (the active account, or
    "cli" for another server or provider kind): (account id, its base URL, where the request
    goes). None when unsure."""
    from app.core.providers.urls import origin

    kind, base_url = (*flags, None, None)[:2]
    try:
        raw = json.loads(_file_bytes(settings_path(home)))
        active = raw.get("active_provider")
        accounts: list[Any] = raw.get("providers", [])
        account: Any = next((a for a in accounts if active and a.get("id") == active), None)
        if account is not None and kind not in (None, account.get("kind")):
            account = None
        account_url = account.get("base_url") if account is not None else None
        url = base_url or account_url
        if not isinstance(url, str) or not url:
            return None  # a default cloud URL: the loaded app decides
        if account is None or not isinstance(account_url, str):
            return ("cli", url, url)
        if origin(url) != origin(account_url):
            return ("cli", url, url)
        return (str(account.get("id")), account_url, url)
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None


def _mcp_credentials(home: Path) -> list[str] | None:
    """At least the literal secrets the loaded app's tripwire learns from mcp.json
    (`ServerConfig.credential_values`, with the same pydantic-free functions), found in
    every entry's fields whatever their spelling (`url`, `serverUrl`, `clientSecret`…):
    each string under a credential-looking name (an Authorization header's credential),
    the secret parts of any other string and of any list of arguments. None when mcp.json
    is not JSON (nothing goes early)."""
    from app.core.mcp.secret_shapes import credential_values_of

    raw_bytes = _file_bytes(mcp_path(home))
    if raw_bytes == b"-":
        return []
    try:
        stack: list[Any] = [json.loads(raw_bytes)]
    except (ValueError, RecursionError):
        return None
    out: list[str] = []
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            texts = [t for v in value if (t := _text(v)) is not None]
            out += credential_values_of({}, {}, texts, None, None)
            stack += [v for v in value if isinstance(v, dict | list)]
        elif isinstance(value, dict):
            named = {str(k): t for k, v in value.items() if (t := _text(v)) is not None}
            out += credential_values_of(named, {}, [], None, None)
            stack += [v for v in value.values() if isinstance(v, dict | list)]
    return out


def _text(value: Any) -> str | None:
    """A value as mcp.json's reader takes it as text: numbers and booleans as their JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None
