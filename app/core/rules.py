"""Approval rules: which calls run without asking, which always ask, which are refused.

A rule = a tool pattern and a source pattern (what the tool really is: its name and where
it comes from, never a category a third party claims) + an optional argument matcher (a
folder or path glob, a site, an account, a command prefix) + a decision + a scope (this
conversation, or always). Deny beats ask beats allow. Rules live in `<home>/rules.json`,
which no tool can read or write; the user sees and removes them in Settings and with
`deskhand rules`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePath
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from app.core.mcp.manifests import PREFIX as MCP_PREFIX
from app.core.mcp.manifests import slug
from tools.spec import CommandPart, Subject

log = logging.getLogger(__name__)

RULES_FILE = "rules.json"
BUILTIN = "builtin"


class RuleDecision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Scope(StrEnum):
    CONVERSATION = "conversation"
    ALWAYS = "always"
    #: Only the runs of one scheduled task (its permission profile); removed with the task.
    TASK = "task"


MatcherKind = Literal["any", "folder", "path", "site", "account", "command"]


class Matcher(BaseModel):
    """What the call's arguments must be for the rule to apply. `any` matches every call."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: MatcherKind = "any"
    #: folder: a folder, taken literally (every path of the call is inside it; what
    #: "Always allow" proposes); path: a folder or a glob the user wrote; site: scheme://host:port
    #: (a "*" may stand for a subdomain); account: the account as the card names it;
    #: command: a command ("git status"), extended only by what its program's allow-list of
    #: inert options and operands permits (`covers_part`).
    value: str = ""
    #: command only: the rule applies in this folder (and below) only. Required for commands
    #: that run code the model can write (`npm test`, `make`): see CommandPart.in_folder.
    folder: str = ""
    #: command only: the command may use the network (else a call asking for it is not
    #: covered: data could leave the machine).
    network: bool = False
    #: command only: the rule covers exactly this command, not a prefix of it.
    exact: bool = False

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """`folder` and `network` are written only when set (they mean nothing elsewhere)."""
        data: dict[str, object] = handler(self)
        for key, unset in (("folder", ""), ("network", False), ("exact", False)):
            if data.get(key) == unset:
                data.pop(key, None)
        return data

    @property
    def narrow(self) -> bool:
        return self.kind != "any"

    def covers_part(self, part: CommandPart, subject: Subject) -> bool:
        """An allow rule covers one simple command of a line: the rule is exactly its words,
        or (not `exact`) a prefix after which come only operands and options known to be
        inert (`part.lengths`, by allow-list: tools/shell/programs.py); in its folder when
        the rule names one (and it must for model-written code) — every folder the command
        may run in and every path operand of it; with the network only when the rule
        allows it."""
        if self.kind != "command" or not _command_covers(self, part):
            return False
        if subject.network and not self.network:
            return False
        if self.folder:
            places = part.folders or subject.paths
            return bool(places) and all(_inside(self.folder, p) for p in places)
        return not part.in_folder

    def names_part(self, part: CommandPart) -> bool:
        """A deny or ask rule names one simple command when its words start with the
        rule's: stricter rules match widely, even a command no allow rule could cover."""
        wanted = _words(self.value)
        if self.kind != "command" or not wanted:
            return False
        words = list(part.words) if part.words else _words(part.text)
        if words is None:
            return False
        return words == wanted if self.exact else words[: len(wanted)] == wanted

    def matches(self, subject: Subject, *, allowing: bool = True) -> bool:
        """Whether the call is what the matcher names. `allowing` False (deny and ask
        rules): a command rule names a command by its words' prefix."""
        match self.kind:
            case "any":
                return True
            case "folder":
                paths = subject.paths
                return bool(paths) and all(_inside(self.value, p) for p in paths)
            case "path":
                paths = subject.paths
                return bool(paths) and all(_path_matches(self.value, p) for p in paths)
            case "site":
                return subject.site is not None and _site_matches(self.value, subject.site)
            case "account":
                return subject.account is not None and subject.account == self.value
            case "command":
                if subject.commands:
                    if not allowing:
                        return any(self.names_part(part) for part in subject.commands)
                    return all(self.covers_part(part, subject) for part in subject.commands)
                if subject.command is None:
                    return False
                if allowing:
                    return _one_string_covers(self, subject.command)
                return _command_matches(self.value, subject.command)
        return False

    def describe(self) -> str:
        match self.kind:
            case "any":
                return "with any arguments"
            case "folder" | "path":
                return f"in {self.value}"
            case "site":
                return f"on {self.value}"
            case "account":
                return f"for {self.value}"
            case "command":
                where = f" in {self.folder}" if self.folder else ""
                net = ", network allowed" if self.network else ""
                if self.exact:
                    return f"for exactly “{self.value}”{where}{net}"
                return f"for commands starting with “{self.value}”{where}{net}"
        return self.value


def _site_matches(pattern: str, site: str) -> bool:
    """Literal (an IPv6 site's brackets are not a character class), or with `*` standing
    for one or more subdomain labels: "https://*.example.com:443"."""
    pattern, site = pattern.lower(), site.lower()
    if "*" not in pattern:
        return site == pattern
    parts = [re.escape(p) for p in pattern.split("*")]
    return re.fullmatch(r"[a-z0-9.-]+".join(parts), site) is not None


def _path_matches(pattern: str, path: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return _inside(pattern, path)


def _inside(folder: str, path: str) -> bool:
    """`path` is `folder` or inside it; no character of either is a wildcard."""
    base, candidate = PurePath(folder), PurePath(path)
    return candidate == base or base in candidate.parents


#: A command given as one string (docker exec, kubectl exec) with these may run more than its
#: first command (`git status; rm -rf ~`), so no prefix covers it. The shell tool parses its
#: lines as bash would and gives each simple command as its own `CommandPart`, quoted.
_SHELL_SYNTAX = frozenset(";&|`$<>(){}\n\r*?[]!#~'\"\\")


def _command_covers(matcher: Matcher, part: CommandPart) -> bool:
    """The rule is exactly the part's words, or a prefix of a length the part allows."""
    wanted, words = _words(matcher.value), _words(part.text)
    if not wanted or words is None:
        return False
    if wanted == words:
        return True
    return not matcher.exact and len(wanted) in part.lengths and words[: len(wanted)] == wanted


def _one_string_covers(matcher: Matcher, command: str) -> bool:
    """A command given as one string (docker exec, kubectl exec): exactly the rule, or the
    rule followed by operands and options known to be inert for that program."""
    from tools.shell.programs import coverage

    wanted, words = _words(matcher.value), _words(command)
    if not wanted or words is None or words[: len(wanted)] != wanted:
        return False
    if not _all_quoted(command, "*?[]{}"):
        return False  # a pattern or brace may become options (`*`, `{--x,}`)
    if len(words) == len(wanted):
        return True
    return not matcher.exact and len(wanted) in coverage(words, len(wanted)).lengths


def _command_matches(prefix: str, command: str) -> bool:
    """`command`'s words start with `prefix`'s words. Both are split as the shell splits
    quoted words (a CommandPart's text is shlex-quoted); a command with shell syntax outside
    quotes never matches."""
    wanted, words = _words(prefix), _words(command)
    if not wanted or words is None:
        return False
    return words[: len(wanted)] == wanted


def _words(text: str) -> list[str] | None:
    import shlex

    if any(ch in text for ch in "\n\r\0"):
        return None  # a line break separates commands, even inside some quoting mistakes
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        lexer.commenters = ""
        words = list(lexer)
    except ValueError:
        return None
    if any(w and all(ch in ";&|<>()" for ch in w) for w in words):
        return None  # an operator outside quotes: more than one command
    if any(ch in "`$" for ch in text.replace("\\$", "")) and not _all_quoted(text):
        return None
    return words


def _all_quoted(text: str, special: str = "`$") -> bool:
    """Every `$`/backtick (or other `special` character) sits inside single quotes
    (shlex.quote's output): no expansion.
    Outside single quotes a backslash escapes the next character (`\\'` is no quote)."""
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and not inside:
            escaped = True
        elif ch == "'":
            inside = not inside
        elif ch in special and not inside:
            return False
    return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Rule(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    #: A tool name or a glob over names ("fs_write_file", "docker_*", "*").
    tool: str
    #: Where the tool comes from: "builtin", "mcp:<server>", "pack:<file>",
    #: "entrypoint:<distribution>", "skill:<name>"; globs allowed ("mcp:*").
    source: str = BUILTIN
    matcher: Matcher = Field(default_factory=Matcher)
    decision: RuleDecision
    scope: Scope = Scope.ALWAYS
    #: Set for scope "conversation": the conversation the rule belongs to.
    conversation_id: str | None = None
    #: Set for scope "task": the task whose runs the rule covers.
    task_id: str | None = None
    created: str = Field(default_factory=_now)
    #: Where the rule came from, in plain words ("Always allow on an approval card").
    origin: str = ""

    def applies_to(
        self,
        tool: str,
        source: str,
        subject: Subject,
        conversation_id: str | None,
        task_id: str | None = None,
    ) -> bool:
        if self.scope is Scope.CONVERSATION and (
            conversation_id is None or conversation_id != self.conversation_id
        ):
            return False
        if self.scope is Scope.TASK and (task_id is None or task_id != self.task_id):
            return False
        if self.scope is Scope.CONVERSATION and task_id is not None and self.decision is (
            RuleDecision.ALLOW
        ):
            # allowed while chatting in the task's conversation: no grant to its unattended
            # runs (its deny and ask rules still count)
            return False
        return (
            fnmatch.fnmatchcase(tool, self.tool)
            and fnmatch.fnmatchcase(source, self.source)
            and self.matcher.matches(subject, allowing=self.decision is RuleDecision.ALLOW)
        )

    def describe(self) -> str:
        verb = {"allow": "Allow", "ask": "Always ask for", "deny": "Never allow"}[self.decision]
        what = "every tool" if self.tool == "*" else self.tool
        where = "" if self.source == BUILTIN else f" from {self.source}"
        scope = {
            Scope.CONVERSATION: " in this conversation",
            Scope.TASK: f" in runs of task {self.task_id}",
        }.get(self.scope, "")
        return f"{verb} {what}{where} {self.matcher.describe()}{scope}"


class _RuleFile(BaseModel):
    version: int = 1
    rules: list[Rule] = Field(default_factory=list)


@dataclass(frozen=True)
class Evaluation:
    """What the rules say about one call; `rule` is the deciding one."""

    decision: RuleDecision | None
    rule: Rule | None = None

    @property
    def narrow(self) -> bool:
        return self.rule is not None and self.rule.matcher.narrow


_ORDER = (RuleDecision.DENY, RuleDecision.ASK, RuleDecision.ALLOW)


class RuleBook:
    """The rules file, written atomically on every change. Thread-safe, and safe between
    processes (the window and `deskhand tasks serve`): it is read again whenever another
    process changed it, and each change is a read-modify-write under a lock file."""

    def __init__(self, path: Path | None, rules: Iterable[Rule] = ()) -> None:
        """`path` None keeps the rules in memory only (embedders, tests)."""
        self.path = path
        self._lock = threading.RLock()
        self.load_error: str | None = None
        self._stamp: tuple[int, int] | None = None
        self._rules: list[Rule] = self._load() + list(rules)
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Another process changed the file: take its rules (an unreadable one is left
        alone here: the next start keeps it aside and asks for everything)."""
        if self.path is None:
            return
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        with self._lock:
            if stamp is None:
                self._rules, self._stamp = [], None
                return
            try:
                self._rules = _RuleFile.model_validate(json.loads(self.path.read_bytes())).rules
                self._stamp = stamp
            except (OSError, ValueError, ValidationError) as exc:
                log.warning("cannot read %s again: %s", self.path, exc)

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """One read-modify-write: no other process writes between the read and the write."""
        if self.path is None:
            with self._lock:
                yield
            return
        from filelock import FileLock

        with self._lock, FileLock(str(self.path) + ".lock", timeout=10):
            self._refresh()
            yield

    def _load(self) -> list[Rule]:
        if self.path is None:
            return []
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc)
            return []
        try:
            return _RuleFile.model_validate(json.loads(raw)).rules
        except (ValueError, ValidationError) as exc:
            # Keep the unreadable file for the user; no rule means every call asks (safe).
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
            kept = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
            os.replace(self.path, kept)
            self.load_error = f"the rules file was unreadable ({exc}); it was kept as {kept}"
            log.warning("%s", self.load_error)
            return []

    def _save(self) -> None:
        from app.core.atomic_file import atomic_write

        if self.path is None:
            return
        text = _RuleFile(rules=self._rules).model_dump_json(indent=2) + "\n"
        atomic_write(self.path, text.encode("utf-8"), mode=0o600)
        self._stamp = self._file_stamp()

    # ---- queries -----------------------------------------------------------------

    def rules(self) -> list[Rule]:
        self._refresh()
        with self._lock:
            return list(self._rules)

    def get(self, rule_id: str) -> Rule | None:
        self._refresh()
        with self._lock:
            return next((r for r in self._rules if r.id == rule_id), None)

    def evaluate(
        self,
        tool: str,
        source: str,
        subject: Subject,
        conversation_id: str | None = None,
        task_id: str | None = None,
    ) -> Evaluation:
        """What the rules say; task-scoped rules count only for a run of `task_id`."""
        if len(subject.commands) > 1:
            return self._evaluate_parts(tool, source, subject, conversation_id, task_id)
        self._refresh()
        with self._lock:
            matching = [
                r
                for r in self._rules
                if r.applies_to(tool, source, subject, conversation_id, task_id)
            ]
        for decision in _ORDER:
            found = [r for r in matching if r.decision is decision]
            if found:
                # among allow rules prefer a narrow one: it may waive an escalation
                found.sort(key=lambda r: not r.matcher.narrow)
                return Evaluation(decision, found[0])
        return Evaluation(None)

    def _evaluate_parts(
        self,
        tool: str,
        source: str,
        subject: Subject,
        conversation_id: str | None,
        task_id: str | None,
    ) -> Evaluation:
        """A command line of several simple commands: a deny for any one denies it, an ask
        for any one asks, and it is allowed only when every one is allowed (by one rule or
        several)."""
        from dataclasses import replace

        found = [
            self.evaluate(
                tool, source, replace(subject, commands=(part,)), conversation_id, task_id
            )
            for part in subject.commands
        ]
        for decision in (RuleDecision.DENY, RuleDecision.ASK):
            hit = next((e for e in found if e.decision is decision), None)
            if hit is not None:
                return hit
        if all(e.decision is RuleDecision.ALLOW for e in found):
            # narrow only when every part is: a broad rule must not ride on a narrow one
            broad = [e for e in found if not e.narrow]
            return broad[0] if broad else found[0]
        return Evaluation(None)

    # ---- changes -----------------------------------------------------------------

    def add(self, rule: Rule) -> Rule:
        with self._changing():
            for existing in self._rules:
                if _same(existing, rule):
                    return existing
            self._rules.append(rule)
            self._save()
            return rule

    def add_many(self, rules: Iterable[Rule]) -> None:
        with self._changing():
            for rule in rules:
                if not any(_same(r, rule) for r in self._rules):
                    self._rules.append(rule)
            self._save()

    def remove(self, rule_id: str) -> Rule | None:
        with self._changing():
            rule = next((r for r in self._rules if r.id == rule_id), None)
            if rule is None:
                return None
            self._rules = [r for r in self._rules if r.id != rule_id]
            self._save()
            return rule

    def for_task(self, task_id: str) -> list[Rule]:
        self._refresh()
        with self._lock:
            return [r for r in self._rules if r.scope is Scope.TASK and r.task_id == task_id]

    def replace_task_rules(self, task_id: str, rules: Iterable[Rule]) -> list[Rule]:
        """The task's permission profile, as its own rules, in one write: the old ones go."""
        new = [r.model_copy(update={"scope": Scope.TASK, "task_id": task_id}) for r in rules]
        with self._changing():
            kept = [r for r in self._rules if not (r.scope is Scope.TASK and r.task_id == task_id)]
            self._rules = kept + new
            self._save()
        return new

    def remove_task_rules(self, task_id: str) -> int:
        with self._changing():
            before = len(self._rules)
            self._rules = [
                r for r in self._rules if not (r.scope is Scope.TASK and r.task_id == task_id)
            ]
            removed = before - len(self._rules)
            if removed:
                self._save()
            return removed

    def rewrite(
        self, drop: Callable[[Rule], bool], add: Callable[[list[Rule]], Iterable[Rule]]
    ) -> None:
        """One read-modify-write: the rules `drop` picks go, then the rules `add` makes from
        those that are left are added (a dropped rule the same as an added one stays as it
        was: its id, date and origin)."""
        with self._changing():
            kept = [r for r in self._rules if not drop(r)]
            dropped = [r for r in self._rules if drop(r)]
            new: list[Rule] = []
            for rule in add(list(kept)):
                if not any(_same(r, rule) for r in kept + new):
                    new.append(next((d for d in dropped if _same(d, rule)), rule))
            if kept + new == self._rules:
                return
            self._rules = kept + new
            self._save()


def _same(a: Rule, b: Rule) -> bool:
    return (
        a.tool == b.tool
        and a.source == b.source
        and a.matcher == b.matcher
        and a.decision == b.decision
        and a.scope == b.scope
        and a.conversation_id == b.conversation_id
        and a.task_id == b.task_id
    )


# ---- what Settings shows and sets for one tool or one MCP server ---------------------------

#: A call whose arguments no narrow rule covers: no path, site, account or command.
ANY_ARGUMENTS = Subject()
TOOLS_PAGE = "Settings → Tools"
SERVERS_PAGE = "Settings → MCP servers"


@dataclass(frozen=True)
class RuleChoice:
    """What a settings page shows for a tool (or a server): what `evaluate` decides for a
    call whose arguments no narrow rule covers, outside any conversation or task run, or the
    pipeline's default when no rule decides. `set_by` is the deciding rule when none of the
    page's own rules has that decision (a wildcard over tools or sources): the page shows it
    and cannot change the choice by editing one tool."""

    decision: RuleDecision
    set_by: Rule | None = None


def unruled_decision(read_only: bool) -> RuleDecision:
    """What `CallPipeline.decide` does with a call of a trusted source that no rule decides
    and nothing escalates: a read-only tool runs, any other asks."""
    return RuleDecision.ALLOW if read_only else RuleDecision.ASK


def stricter(a: RuleDecision, b: RuleDecision) -> bool:
    """`a` wins over `b` when both rules match (deny > ask > allow)."""
    return _ORDER.index(a) < _ORDER.index(b)


def _choice(
    book: RuleBook, tool: str, source: str, own: Callable[[Rule], bool], default: RuleDecision
) -> RuleChoice:
    found = book.evaluate(tool, source, ANY_ARGUMENTS)
    if found.decision is None:
        return RuleChoice(default)
    if any(
        own(r) and r.decision is found.decision and r.applies_to(tool, source, ANY_ARGUMENTS, None)
        for r in book.rules()
    ):
        return RuleChoice(found.decision)
    return RuleChoice(found.decision, found.rule)


def _set_own(
    book: RuleBook,
    own: Callable[[Rule], bool],
    rule: Rule,
    default: RuleDecision,
    choice_without: Callable[[RuleBook], RuleChoice],
) -> None:
    """Replaces the page's own rules with `rule`, or with none when the choice is the
    default and no other rule would change it."""

    def needed(rest: list[Rule]) -> list[Rule]:
        if rule.decision is default and choice_without(RuleBook(None, rest)).decision is default:
            return []
        return [rule]

    book.rewrite(own, needed)


def _own_tool_rule(rule: Rule, tool: str, source: str) -> bool:
    """The rule the Tools page writes for this tool: exactly it, any arguments, always."""
    return (
        rule.tool == tool
        and rule.source == source
        and not rule.matcher.narrow
        and rule.scope is Scope.ALWAYS
    )


def choice_for(book: RuleBook, tool: str, source: str = BUILTIN, *, read_only: bool) -> RuleChoice:
    """The Tools page's Allow / Ask / Never for one tool."""
    return _choice(
        book, tool, source, lambda r: _own_tool_rule(r, tool, source), unruled_decision(read_only)
    )


def set_choice(
    book: RuleBook,
    tool: str,
    source: str,
    choice: RuleDecision,
    *,
    read_only: bool,
    origin: str = TOOLS_PAGE,
) -> None:
    """Makes `choice` the tool's choice: its own any-argument rules are replaced by one rule
    saying `choice` (none when `choice` is the default and no wildcard rule would decide
    otherwise). A wildcard rule stricter than `choice` still wins (`choice_for` names it);
    conversation, task and narrow rules are left alone."""
    default = unruled_decision(read_only)

    def own(rule: Rule) -> bool:
        return _own_tool_rule(rule, tool, source)

    _set_own(
        book,
        own,
        Rule(tool=tool, source=source, decision=choice, origin=origin),
        default,
        lambda rest: _choice(rest, tool, source, own, default),
    )


def server_source(server: str) -> str:
    return f"mcp:{server}"


def server_tools(server: str) -> str:
    """The tool pattern naming every tool of an MCP server (how earlier versions' per-tool
    lists named them, too)."""
    return f"{MCP_PREFIX}{slug(server, camel=False)}__*"


def _own_server_rule(rule: Rule, server: str) -> bool:
    """A rule the MCP page wrote for every tool of this server, or its form from earlier
    versions' per-tool lists (`rule_from_legacy_pattern`)."""
    if rule.matcher.narrow or rule.scope is not Scope.ALWAYS:
        return False
    every = server_tools(server)
    sources = {server_source(server), server_source(slug(server, camel=False))}
    return (rule.source in sources and rule.tool in ("*", every)) or (
        rule.source == "mcp:*" and rule.tool == every
    )


def server_choice(book: RuleBook, server: str) -> RuleChoice:
    """The MCP page's Allow / Ask / Never for every tool of a server. Ask is the default,
    though a tool the server marks read-only runs without asking when no rule decides; an
    allow takes effect only once the server is trusted (Settings → Sources)."""
    # A call of "every tool": its name is the pattern itself, which only a rule naming
    # every tool of the server matches (`*`, `mcp__*`, `mcp__<server>__*`).
    return _choice(
        book,
        server_tools(server),
        server_source(server),
        lambda r: _own_server_rule(r, server),
        RuleDecision.ASK,
    )


def set_server_choice(
    book: RuleBook, server: str, choice: RuleDecision, *, origin: str = SERVERS_PAGE
) -> None:
    """Replaces the server's own any-argument rules with one for every tool of source
    `mcp:<server>` saying `choice` (none for Ask unless a wildcard rule would allow)."""
    _set_own(
        book,
        lambda r: _own_server_rule(r, server),
        Rule(tool="*", source=server_source(server), decision=choice, origin=origin),
        RuleDecision.ASK,
        lambda rest: server_choice(rest, server),
    )


def forget_server_choice(book: RuleBook, server: str) -> None:
    """A removed (or renamed) server: its own rules go, and nothing replaces them."""
    book.rewrite(lambda r: _own_server_rule(r, server), lambda _rest: ())


# ---- upgrading from per-tool lists ------------------------------------------------------


def rule_from_legacy_pattern(pattern: str, decision: RuleDecision) -> Rule:
    """Old settings held tool names, name globs or "category:<c>" patterns."""
    origin = "kept from an earlier version's per-tool setting"
    if pattern.startswith("category:"):
        category = pattern.removeprefix("category:")
        if category.startswith("mcp:"):
            return Rule(tool="*", source=category, decision=decision, origin=origin)
        return Rule(tool=f"{category}_*", decision=decision, origin=origin)
    if pattern.startswith("mcp__"):
        # tool names carry a slug of the server's name, not the name itself: the tool
        # pattern already pins the server, so any MCP source may match
        return Rule(tool=pattern, source="mcp:*", decision=decision, origin=origin)
    return Rule(tool=pattern, decision=decision, origin=origin)
