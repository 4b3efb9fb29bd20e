"""The tool contract: what a category declares and what an implementation gets and returns.

This module is imported at start-up, so it imports nothing heavy.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # types only: spec.py is imported at start-up and imports nothing heavy
    from integrations.spec import Account, AccountDirectory
    from tools.registry import ToolRegistry
    from tools.session import ToolSession
    from tools.views import (
        JobsView,
        KnowledgeServiceView,
        MemoryServiceView,
        ReminderBookView,
        SettingsView,
        SkillLibraryView,
        TaskBookView,
    )

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class DeferredParams(BaseModel):
    """Base for parameter models: pydantic builds a model's validator and schema on first
    use instead of at import, so reading ~110 manifests costs half as much (the first
    request and the window need only a few of them)."""

    model_config = ConfigDict(defer_build=True)


class Operation(StrEnum):
    """What a tool does to the world; drives the approval policy."""

    READ = "read"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    EXECUTE = "execute"


class ToolError(Exception):
    """An expected failure with a message meant for the model and the user (no traceback)."""


class ToolCancelled(Exception):
    """Raised inside a tool body by `ToolContext.check_cancelled()` once the call is cancelled."""


ImplFn = Callable[[Any, "ToolContext"], Any]


@dataclass(frozen=True)
class Escalation:
    """Why one call must ask although its operations would not (returned by an `escalate`
    hook; a plain string means the same as `Escalation(reason)`).

    `coverable`: an allow rule with an argument matcher that matches this call (this folder,
    this site, this account, this command) may waive it; a broad "any arguments" rule never
    does. `never_covered`: no rule and no `--yes` waives it (e.g. making a file executable);
    without a person at a terminal or window it is refused.
    `egress`: the call sends data out of the machine (to `site`).
    """

    reason: str
    never_covered: bool = False
    egress: bool = False
    site: str | None = None

    @property
    def coverable(self) -> bool:
        return not self.never_covered


@dataclass(frozen=True)
class CommandPart:
    """One simple command of a command line, as rules see it (the shell tool's subject)."""

    #: Its words as the shell passes them, joined with shell quoting ("git status --short").
    text: str
    #: What "Always allow" proposes for it ("git status").
    prefix: str
    #: It runs code the model can write (`npm test`, `make`, `pytest`): a rule for it
    #: applies to one folder only.
    in_folder: bool = False
    #: How many of its leading words an allow rule's prefix may have to cover it: the rest
    #: are operands or options known to be inert (tools/shell/programs.py). Empty: only a
    #: rule for exactly this command covers it.
    lengths: tuple[int, ...] = ()
    #: "Always allow" proposes a rule for exactly this command (not a prefix).
    exact: bool = False
    #: Every folder it may run in and every folder or file its path operands name,
    #: resolved; a rule bound to a folder covers it only when all are inside. Empty: the
    #: call's own folder.
    folders: tuple[str, ...] = ()
    #: Its words as the program gets them, for deny and ask rules (which match a plain
    #: prefix even when no allow rule could cover the command).
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subject:
    """What a call acts on, for rules with argument matchers and for the approval card.

    Returned by a manifest's `subject` hook (built-in tools only); Deskhand derives it from
    well-known argument names otherwise. `paths` are resolved absolute paths, `site` is
    scheme://host:port, `account` is "<integration> · <account label>" style text.
    """

    paths: tuple[str, ...] = ()
    site: str | None = None
    account: str | None = None
    command: str | None = None
    #: Every simple command of a command line (after unwrapping `env`, `sh -c`…): a call
    #: runs without asking only when each one is covered by an allow rule.
    commands: tuple[CommandPart, ...] = ()
    #: The command may use the network (data may leave the machine).
    network: bool = False
    #: Plain words: where the call acts ("Docker · prod-host", "GitHub · work").
    target: str | None = None


@dataclass(frozen=True)
class ToolManifest:
    """A cheap declaration of one tool. `impl` is "module:function" or a callable."""

    name: str
    category: str
    description: str
    params: type[BaseModel]
    operations: frozenset[Operation] = frozenset({Operation.READ})
    impl: str | ImplFn = ""
    requires: tuple[str, ...] = ()
    integration: str | None = None
    timeout: float = 60.0
    #: Run on a dedicated thread instead of the shared pool (e.g. "browser").
    thread: str | None = None
    #: The body is a coroutine function awaited on the agent's own loop instead of a pool
    #: thread: for a tool that drives other async work and mostly waits (`delegate_agent`
    #: runs a whole agent loop; a pool thread held that long could starve its own calls).
    #: It must never block the loop.
    on_loop: bool = False
    #: After Stop, how long the body may take to end what it started elsewhere (a command
    #: in a container) and say how that went; the turn waits that long at most.
    stop_grace: float = 0.5
    #: Optional "module:function" (args, ctx) -> str describing exactly what a call will
    #: do (e.g. a diff); shown when asking the user for approval. Must not change anything.
    preview: str | ImplFn | None = None
    #: Optional "module:function" (args, ctx) -> str | None: a reason this particular call
    #: must ask the user even though its operations would not (e.g. a browser navigating to
    #: a site not visited before). It can only make a call stricter, never looser.
    escalate: str | ImplFn | None = None
    #: Optional "module:function" (args, ctx) -> Subject: what the call acts on (paths, site,
    #: account, command), for argument rules and the approval card. Honoured for built-in
    #: tools only; third-party sources cannot describe their own calls into a rule's reach.
    subject: str | ImplFn | None = None
    #: Optional "module:function" (args, ctx) -> str: a one-line plain-language summary of
    #: the call for the approval card ("Remind you 'Stretch' at 20:15 today").
    summary_line: str | ImplFn | None = None

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be snake_case")
        if not self.operations:
            raise ValueError(f"tool {self.name} declares no operation")
        object.__setattr__(self, "operations", frozenset(Operation(o) for o in self.operations))

    @property
    def summary(self) -> str:
        """The first sentence of the description (the one-liner shown when browsing)."""
        text = self.description.strip()
        match = re.search(r"(?<=[.!?])\s", text)
        return text[: match.start()] if match else text

    @property
    def read_only(self) -> bool:
        return self.operations == {Operation.READ}

    def json_schema(self) -> dict[str, Any]:
        schema = self.params.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        schema.setdefault("type", "object")
        return schema


@dataclass
class ToolResult:
    ok: bool
    content: str
    data: Any = None
    error: str | None = None
    attachments: list[str] = field(default_factory=list)
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "content": self.content,
            "data": self.data,
            "error": self.error,
            "attachments": list(self.attachments),
        }

    @classmethod
    def failure(cls, message: str, data: Any = None) -> ToolResult:
        return cls(ok=False, content=f"Error: {message}", error=message, data=data)


@dataclass
class Progress:
    call_id: str
    message: str
    fraction: float | None = None


class ToolContext:
    """What a running tool may use. Tools never touch Qt; progress hops to the loop."""

    def __init__(
        self,
        *,
        call_id: str = "",
        home: Path,
        settings: SettingsView | None = None,
        progress_sink: Callable[[Progress], None] | None = None,
        account_resolver: Callable[[str], Account] | None = None,
        integration: str | None = None,
        cancel_event: threading.Event | None = None,
        registry: ToolRegistry | None = None,
        session: ToolSession | None = None,
        accounts: AccountDirectory | None = None,
        services: Mapping[str, object] | None = None,
        confirm: Callable[..., bool] | None = None,
        egress_rule: Callable[[str], bool] | None = None,
        egress_deny: Callable[[str], bool] | None = None,
        secret_values: Callable[[], Iterable[str]] = lambda: (),
        headless: bool = True,
        delegate: Callable[[str, str], Awaitable[ToolResult]] | None = None,
        jobs: JobsView | None = None,
    ) -> None:
        """`confirm`, `egress_rule` (site → an allow rule naming it covers this tool) and
        `egress_deny` (site → a deny rule for this tool names it) come from the call
        pipeline; without them nothing is confirmed, covered or refused by a rule."""
        self.call_id = call_id
        self._confirm = confirm
        self._egress_rule = egress_rule
        self._egress_deny = egress_deny
        #: What the tool reported after it was stopped (set by the runner), if anything.
        self.late_result: ToolResult | None = None
        #: A command-line run: no window to ask the user which folders to use.
        self.headless = headless
        self.home = home
        self.settings = settings
        self._progress_sink = progress_sink
        self._account_resolver = account_resolver
        self._integration = integration
        self.cancel_event = cancel_event or threading.Event()
        #: The tool registry and the conversation's tool session (used by discovery tools).
        self.registry = registry
        self.session = session
        #: The account directory (integrations.spec.AccountDirectory), for tools that list or
        #: switch accounts.
        self.accounts = accounts
        self._services: Mapping[str, object] = services if services is not None else {}
        #: Every secret value Deskhand knows (the tripwire's), for tools that must keep them
        #: out of what they start (the terminal's child environment).
        self.secret_values = secret_values
        #: (agent name, task) → the sub-agent's result: given by the pipeline to Deskhand's
        #: own `delegate_agent` in a conversation that may delegate (never to a sub-agent).
        self.delegate = delegate
        #: The conversation's background jobs (None in a sub-agent, or where there are none).
        self.jobs = jobs

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise ToolCancelled("cancelled")

    def progress(self, message: str, fraction: float | None = None) -> None:
        if self._progress_sink is not None:
            self._progress_sink(Progress(self.call_id, message, fraction))

    def confirm(self, summary: str, detail: str = "", *, never_covered: bool = False) -> bool:
        """Asks the user, from inside a running tool (a pool thread), whether something the
        call is about to do may happen (e.g. a page sending a form during a click). Blocks
        until the user answers; False when nobody can be asked. `never_covered`: not even
        `--yes` answers it (a person must; refused without one). Never call it from the
        loop."""
        if self._confirm is None:
            return False
        if never_covered:
            return bool(self._confirm(summary, detail, never_covered))
        return bool(self._confirm(summary, detail))

    def egress_covered(self, site: str) -> bool:
        """True when the user has a rule allowing this tool to send data to `site`."""
        return bool(self._egress_rule and self._egress_rule(site))

    def egress_refused(self, site: str) -> bool:
        """True when a deny rule forbids this tool to send data to `site` (no question)."""
        return bool(self._egress_deny and self._egress_deny(site))

    @overload
    def service(self, name: Literal["reminders"]) -> ReminderBookView: ...
    @overload
    def service(self, name: Literal["tasks"]) -> TaskBookView: ...
    @overload
    def service(self, name: Literal["memory"]) -> MemoryServiceView: ...
    @overload
    def service(self, name: Literal["skills"]) -> SkillLibraryView: ...
    @overload
    def service(self, name: Literal["knowledge"]) -> KnowledgeServiceView: ...
    @overload
    def service(self, name: str) -> object: ...

    def service(self, name: str) -> object:
        """An app service a tool category needs (e.g. "reminders"), handed in by the app.
        What each category expects of its service is a Protocol in tools/views.py, typed
        here by name; app/core/tool_services.py has mypy check that the app's conform."""
        try:
            return self._services[name]
        except KeyError:
            raise ToolError(f"the {name} service is not available here") from None

    def account(self, integration: str | None = None, named: str | None = None) -> Account:
        """The active account of this tool's integration (or of `integration`), or the one
        `named` (id or label) when a tool lets the model choose; secrets filled in."""
        name = integration or self._integration
        if name is None:
            raise ToolError("this tool is not tied to an integration")
        if named:
            if self.accounts is None:
                raise ToolError("choosing an account is not available here")
            try:
                account = self.accounts.find(name, named)
            except LookupError as exc:
                raise ToolError(str(exc.args[0]) if exc.args else str(exc)) from None
            with_secrets = getattr(self.accounts, "with_secrets", None)
            return with_secrets(account) if with_secrets is not None else account
        if self._account_resolver is None:
            raise ToolError(f"no account is configured for {name}")
        return self._account_resolver(name)
