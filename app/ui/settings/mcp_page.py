"""The "MCP servers" page: the servers of `mcp.json` — add, edit, remove, enable — each
with its approval rule (a rule for every tool of source `mcp:<server>` in rules.json) and
its live status. Whether a server is trusted is on the Sources page.

A view: every server change is a call to the core service `McpServers`
(app.core.mcp.servers), which writes mcp.json right away, moves secrets to the keyring and
tells a running manager. Approval rules are part of the dialog's Save (written to rules.json
after settings.json). Every service call runs in a worker thread; status changes arrive on
the MCP thread and hop to Qt through a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shlex
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFontDatabase, QResizeEvent, QShowEvent, QTextOption
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.mcp.servers import (
    HIDDEN_FIELDS,
    PASTE_EXAMPLE,
    EntryError,
    EntryProblem,
    ImportReport,
    McpConfigError,
    claude_desktop_config_path,
    has_stored_token,
    validate,
)
from app.core.mcp.status import ServerState, Status
from app.core.rules import (
    RuleBook,
    RuleDecision,
    forget_server_choice,
    server_choice,
    set_server_choice,
)
from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.visible import visible
from app.ui.plain_text import plain_tooltip
from app.ui.settings.account_list import DETAIL_ROLE, AccountDelegate
from app.ui.settings.mcp_signin import NEEDS_SIGN_IN, SignInPanel, is_failure
from app.ui.settings.page import Patch, SettingsPage, in_thread, spawn
from app.ui.settings.widgets import (
    ROW_HEIGHT,
    form_label,
    form_layout,
    muted_label,
    plural,
    role_label,
    set_role,
)

log = logging.getLogger(__name__)

Rule = Literal["ask", "allow", "deny"]
RULES: list[tuple[Rule, str]] = [
    ("ask", "Ask every time"),
    ("allow", "Always allow (once trusted)"),
    ("deny", "Never"),
]
LIST_WIDTH = 176
#: The server list's width in the smallest dialog.
LIST_MIN_WIDTH = 124
LABEL_WIDTH = 92
CONNECT_WAIT = 20.0
#: The server-output box shows this many lines before it scrolls.
OUTPUT_LINES = 8
#: A longer run without spaces gets break opportunities, so a status line always wraps.
LONG_RUN = 30
SET_PLACEHOLDER = "•••••••• set (type to replace)"


RULE_OF: dict[RuleDecision, Rule] = {
    RuleDecision.ALLOW: "allow",
    RuleDecision.ASK: "ask",
    RuleDecision.DENY: "deny",
}


def current_rule(server: str, book: RuleBook) -> Rule:
    """The server's Allow / Ask / Never as the rules decide it (app.core.rules)."""
    return RULE_OF[server_choice(book, server).decision]


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """A Yes/No question (tests replace this)."""
    answer = QMessageBox.question(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def choose_config_file(parent: QWidget, start: Path) -> Path | None:
    """The file picker for importing (tests replace this)."""
    path, _ = QFileDialog.getOpenFileName(
        parent, "Import MCP servers", str(start), "JSON files (*.json);;All files (*)"
    )
    return Path(path) if path else None


# ---- the form's text <-> mcp.json entries -----------------------------------------------


def parse_pairs(text: str, sep: str) -> dict[str, str]:
    """`KEY=VALUE` (or `Name: value`) lines; blank lines and `#` comments are skipped."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if sep not in line:
            raise ValueError(f"line {number} has no “{sep}”")
        key, value = line.split(sep, 1)
        if not key.strip():
            raise ValueError(f"line {number} has no name before “{sep}”")
        out[key.strip()] = value.strip()
    return out


def quote_arg(arg: str) -> str:
    """Like shlex.quote, but readable for arguments that contain single quotes."""
    quoted = shlex.quote(arg)
    if quoted != arg and "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return quoted


def format_pairs(values: dict[str, str], sep: str) -> str:
    joiner = f"{sep} " if sep == ":" else sep
    return "\n".join(f"{k}{joiner}{v}" for k, v in values.items())


#: "SomeError: text" as the connection reports an exception (`_describe`).
_EXCEPTION_PREFIX = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Group|Exit))(?::\s*|$)")
_QUOTED = re.compile(r"""['"‘“]([^'"’”]+)['"’”]\s*$""")
_HTTP_STATUS = re.compile(r"\b([45]\d\d)\b")
_UNREACHABLE = (
    "connection refused",
    "all connection attempts failed",
    "name or service not known",
    "nodename nor servname",
    "getaddrinfo failed",
    "temporary failure in name resolution",
    "network is unreachable",
    "no route to host",
    "connecterror",
)


def plain_reason(error: str | None) -> str:
    """Why a server could not start, as one sentence in plain words: never an exception's
    type name or repr. `error` is the manager's text (already redacted); what is kept of it
    is made visible."""
    text = visible(error or "", keep_newlines=False).strip()
    found = _EXCEPTION_PREFIX.match(text)
    kind = found.group(1).rsplit(".", 1)[-1] if found else ""
    if found:
        text = text[found.end() :].strip()
    low = f"{kind} {text}".lower()
    if kind == "FileNotFoundError" or "no such file or directory" in low:
        program = _QUOTED.search(text)
        what = f"the program “{program.group(1)}”" if program else "the program"
        return f"Deskhand could not find {what}. Check the command, or install the program."
    if kind == "PermissionError" or "permission denied" in low:
        return "The program could not be run: permission denied."
    if any(word in low for word in _UNREACHABLE):
        return "Deskhand could not reach the server. Check the URL and your connection."
    if kind == "TimeoutError" or "timed out" in low or "timeout" in low:
        return "The server did not answer in time."
    status = _HTTP_STATUS.search(text) if "http" in low or "status" in low else None
    if status is not None:
        code = status.group(1)
        hint = " Check the URL." if code in ("404", "405", "410") else ""
        return f"The server answered with an error (HTTP {code}).{hint}"
    if "connection closed" in low or "closed the connection" in low or not text:
        return "The server stopped before it was ready."
    return sentence(text)


def _invalid_lines(state: ServerState) -> str:
    problems = [f"• {visible(p.detail, keep_newlines=False)}" for p in state.problems]
    return "\n".join(problems) or sentence(state.error or "")


def status_parts(state: ServerState | None, tail: list[str]) -> tuple[str, str, str, list[str]]:
    """(state line, detail, role, the server's last output lines) for a server's state;
    everything a server sent is made visible (control characters escaped)."""
    if state is None:
        return "Not connected", "", "muted", []
    if state.status is Status.READY:
        return f"Ready · {plural(len(state.tools), 'tool')}", "", "ok", []
    if state.status is Status.STARTING:
        return "Connecting…", "", "muted", []
    lines = [visible(line, keep_newlines=False) for line in state.stderr or tail]
    if state.status is Status.RESTARTING:
        detail = f"{plain_reason(state.error)} Deskhand starts it again by itself."
        return "Reconnecting…", detail, "muted", lines
    if state.status is Status.FAILED:
        # the manager's copy (one start, redacted, visible) before the page's running tail
        where = "the URL" if state.transport != "stdio" else "the command and its arguments"
        hint = f"Check {where} below, then press Retry."
        if lines:
            hint = "The server's last output below may say why. " + hint
        return "Could not start", f"{plain_reason(state.error)}\n{hint}", "error", lines
    if state.status is Status.NEEDS_SIGN_IN:
        error = visible(state.error or "")
        return NEEDS_SIGN_IN, error[:1].upper() + error[1:], "section", []
    if state.status is Status.DISABLED:
        return "Disabled", "", "muted", []
    if state.status is Status.INVALID:
        line = "This entry of mcp.json cannot be used, so it is not started:"
        hidden = all(p.field in HIDDEN_FIELDS for p in state.problems) and state.problems
        fix = (
            "Press Save server below to use the default instead."
            if hidden
            else "Press Edit to fix it."
        )
        return line, f"{_invalid_lines(state)}\n{fix}", "error", []
    return "Not connected", "", "muted", []


def status_text(state: ServerState | None, tail: list[str]) -> tuple[str, str]:
    """(text, role) for a server's state, as one plain text."""
    line, detail, role, output = status_parts(state, tail)
    text = f"{line}\n{detail}" if detail else line
    if output:
        text += "\n\nServer output (last lines):\n" + "\n".join(output)
    return text, role


def breakable(text: str) -> str:
    """`text` with zero-width spaces in long runs without spaces (paths, URLs), so a
    word-wrapped label can break them instead of growing wider than the page."""
    out: list[str] = []
    for line in text.split("\n"):
        words = []
        for word in line.split(" "):
            if len(word) > LONG_RUN:
                word = "\u200b".join(word[i : i + LONG_RUN] for i in range(0, len(word), LONG_RUN))
            words.append(word)
        out.append(" ".join(words))
    return "\n".join(out)


EMPTY_TEXT = (
    "MCP servers are small programs or web services that give the assistant more tools: "
    "search a wiki, read an issue tracker, query a database. A server runs on this computer "
    "as a command, or elsewhere at a web address. Deskhand asks before each of its tool "
    "calls until you trust the server on the Sources page."
)
#: How the server list names a state in its second line (Ready and Disabled are built).
ROW_WORDS = {
    Status.STARTING: "Connecting…",
    Status.RESTARTING: "Reconnecting…",
    Status.FAILED: "Could not start",
    Status.NEEDS_SIGN_IN: NEEDS_SIGN_IN,
    Status.INVALID: "Needs fixing",
    Status.STOPPED: "Stopped",
}


def os_reason(exc: BaseException) -> str:
    """A file or keyring failure in plain words (no exception type, no repr)."""
    if isinstance(exc, McpConfigError):
        return sentence(str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return f"the file is not valid JSON (line {exc.lineno}, column {exc.colno})."
    if isinstance(exc, PermissionError):
        return "Deskhand is not allowed to write there."
    if isinstance(exc, OSError) and exc.strerror:
        return sentence(exc.strerror)
    return plain_reason(str(exc))


class PastePanel(QWidget):
    """A box to paste a Claude Desktop-style `mcpServers` JSON into."""

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, *, cancellable: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(6)
        column.addWidget(role_label("Paste a configuration", "section"))
        column.addWidget(
            muted_label("The mcpServers JSON of Claude Desktop or a server's instructions.")
        )
        self.edit = QPlainTextEdit()
        self.edit.setObjectName("mcpPaste")
        self.edit.setPlaceholderText(PASTE_EXAMPLE)
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setFixedHeight(96)
        self.edit.setAccessibleName("Pasted MCP configuration")
        self.edit.textChanged.connect(lambda: self.show_error(""))
        column.addWidget(self.edit)
        self.error_label = role_label("", "error", wrap=True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.hide()
        column.addWidget(self.error_label)
        row = QHBoxLayout()
        row.addStretch(1)
        if cancellable:
            cancel = QPushButton("Cancel")
            cancel.clicked.connect(self.cancelled)
            row.addWidget(cancel)
        self.add_button = QPushButton("Add these servers")
        self.add_button.clicked.connect(lambda: self.submitted.emit(self.edit.toPlainText()))
        row.addWidget(self.add_button)
        column.addLayout(row)

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))


class _Bridge(QObject):
    """Carries state changes from the MCP thread to the GUI thread."""

    changed = Signal(object)


class FieldError(ValueError):
    """What the user must fix in one field of the form (`field`: name, command, args, env,
    url, headers, token, auth; None for the entry as a whole)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


#: How the form's fields are named in an mcp.json problem (`args[2]` → args).
_PROBLEM_FIELDS = {
    "name": "name",
    "token": "token",
    "command": "command",
    "args": "args",
    "env": "env",
    "url": "url",
    "headers": "headers",
    "auth": "auth",
    "type": "url",
}

AUTH_CHOICES: list[tuple[str, str]] = [
    ("oauth", "Sign in with the browser if the server asks"),
    ("token", "Access token"),
    ("none", "None"),
]
KEEP_AUTH = ("keep", "Client credentials (as set in mcp.json)")


def problem_field(field: str | None) -> str | None:
    """The form field an mcp.json problem's field belongs to (None: the entry as a whole)."""
    if not field:
        return None
    head = re.split(r"[.\[]", field, maxsplit=1)[0]
    return _PROBLEM_FIELDS.get(head)


class ServerEditor(QWidget):
    """The form for one server. A problem is shown under the field it is about."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(8)
        self.heading = role_label("", "section")
        outer.addWidget(self.heading)
        box = QWidget()
        form = form_layout(box, margins=(0, 0, 0, 0), spacing=(12, 8))
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        # in a narrow dialog a label goes above its field rather than squeezing it
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.form = form
        self._field_errors: dict[str, QLabel] = {}
        self._holders: dict[str, QWidget] = {}
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. filesystem")
        self._row("Name *", "name", self.name_edit)
        self.enabled_check = QCheckBox("Start this server")
        self.enabled_check.setChecked(True)
        self.enabled_check.setMinimumHeight(ROW_HEIGHT)
        self._row("Enabled", "enabled", self.enabled_check)
        self.transport_combo = QComboBox()
        self.transport_combo.addItem("Command (stdio)", "stdio")
        self.transport_combo.addItem("Web address (HTTP)", "http")
        self.transport_combo.currentIndexChanged.connect(lambda _: self._show_transport())
        self._row("Runs as", "transport", self.transport_combo)

        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("e.g. npx")
        self.args_edit = QLineEdit()
        self.args_edit.setPlaceholderText("e.g. -y @modelcontextprotocol/server-filesystem ~/Notes")
        self.env_edit = QPlainTextEdit()
        self.env_edit.setPlaceholderText("KEY=value, one per line")
        self.env_edit.setFixedHeight(64)
        self.env_edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("https://example.com/mcp")
        self.headers_edit = QPlainTextEdit()
        self.headers_edit.setPlaceholderText("Header-Name: value, one per line")
        self.headers_edit.setFixedHeight(56)
        self.headers_edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.auth_combo = QComboBox()
        for kind, text in AUTH_CHOICES:
            self.auth_combo.addItem(text, kind)
        self.auth_combo.setToolTip(
            "How Deskhand proves who you are to the server. Most servers that need it ask "
            "you to sign in in the browser."
        )
        self.auth_combo.currentIndexChanged.connect(lambda _: self._show_transport())
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("Sent as “Authorization: Bearer …”")
        self.token_edit.setToolTip("A fixed token the server's provider gave you.")
        self._stdio_rows = [
            self._row("Command *", "command", self.command_edit),
            self._row("Arguments", "args", self.args_edit),
            self._row("Environment", "env", self.env_edit),
        ]
        self._http_rows = [
            self._row("URL *", "url", self.url_edit),
            self._row("Headers", "headers", self.headers_edit),
            self._row("Sign-in", "auth", self.auth_combo),
        ]
        self._token_row = self._row("Access token", "token", self.token_edit)
        self.secrets_hint = muted_label(
            "Secret-looking values (…TOKEN, …KEY, PASSWORD, Authorization) go to the system "
            "keyring when you save; mcp.json keeps a keyring: reference."
        )
        self.rule_combo = QComboBox()
        for rule, text in RULES:
            self.rule_combo.addItem(text, rule)
        self.rule_combo.setToolTip("Applies to every tool of this server (saved with Save)")
        for combo in (self.transport_combo, self.rule_combo, self.auth_combo):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(6)
        self._row("Approval", "rule", self.rule_combo)
        outer.addWidget(box)
        # below the form, not in it: QFormLayout sizes a wrapped label by its widest hint
        self.secrets_hint.setContentsMargins(LABEL_WIDTH + form.horizontalSpacing(), 0, 0, 0)
        outer.addWidget(self.secrets_hint)

        self.error_label = role_label("", "error", wrap=True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.hide()
        outer.addWidget(self.error_label)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Put the form back as saved")
        self.save_button = QPushButton("Save server")
        self.save_button.setProperty("accent", True)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        outer.addLayout(buttons)
        self.original: str | None = None
        self.token_stored = False
        self._raw_auth: Any = None
        self._show_transport()

    def _row(self, text: str, key: str, widget: QWidget) -> QWidget:
        """A form row: the field with its own problem line under it (hidden until needed)."""
        holder = QWidget()
        column = QVBoxLayout(holder)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(3)
        column.addWidget(widget)
        error = role_label("", "error", wrap=True)
        error.setTextFormat(Qt.TextFormat.PlainText)
        error.hide()
        column.addWidget(error)
        self._field_errors[key] = error
        self._holders[key] = holder
        label = form_label(text, LABEL_WIDTH)
        label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        label.setContentsMargins(0, 7, 0, 0)
        label.setBuddy(widget)
        self.form.addRow(label, holder)
        for signal in ("textChanged", "currentIndexChanged"):
            if hasattr(widget, signal):
                getattr(widget, signal).connect(lambda *_, k=key: self.show_field_error(k, ""))
        return holder

    def transport(self) -> str:
        return str(self.transport_combo.currentData())

    def auth_kind(self) -> str:
        return str(self.auth_combo.currentData())

    def _show_transport(self) -> None:
        stdio = self.transport() == "stdio"
        for w in self._stdio_rows:
            self.form.setRowVisible(w, stdio)
        for w in self._http_rows:
            self.form.setRowVisible(w, not stdio)
        self.form.setRowVisible(self._token_row, not stdio and self.auth_kind() == "token")

    def open(self, name: str | None, raw: dict[str, Any], rule: Rule) -> None:
        self.original = name
        self.heading.setText(
            f"Edit “{visible(name, keep_newlines=False)}”" if name else "New MCP server"
        )
        self.name_edit.setText(name or "")
        self.enabled_check.setChecked(not raw.get("disabled", False))
        is_http = bool(raw.get("url")) and not raw.get("command")
        self.transport_combo.setCurrentIndex(1 if is_http else 0)
        self.command_edit.setText(str(raw.get("command") or ""))
        self.args_edit.setText(" ".join(quote_arg(str(a)) for a in raw.get("args") or []))
        self.env_edit.setPlainText(format_pairs(dict(raw.get("env") or {}), "="))
        self.url_edit.setText(str(raw.get("url") or ""))
        headers = {str(k): str(v) for k, v in (raw.get("headers") or {}).items()}
        self.token_stored = has_stored_token(raw)
        if self.token_stored:
            headers.pop("Authorization")
        self.headers_edit.setPlainText(format_pairs(headers, ":"))
        self.token_edit.clear()
        self.token_edit.setPlaceholderText(
            SET_PLACEHOLDER if self.token_stored else "Sent as “Authorization: Bearer …”"
        )
        self._open_auth(raw.get("auth"))
        self.rule_combo.setCurrentIndex(max(0, self.rule_combo.findData(rule)))
        self.show_error("")
        self._show_transport()

    def _open_auth(self, raw_auth: Any) -> None:
        self._raw_auth = raw_auth
        keep = self.auth_combo.findData(KEEP_AUTH[0])
        kind = raw_auth.get("type", "oauth") if isinstance(raw_auth, dict) else raw_auth
        if kind == "client_credentials":
            if keep < 0:
                self.auth_combo.addItem(KEEP_AUTH[1], KEEP_AUTH[0])
            choice = KEEP_AUTH[0]
        else:
            if keep >= 0:
                self.auth_combo.removeItem(keep)
            choice = "token" if self.token_stored else ("none" if kind == "none" else "oauth")
        self.auth_combo.setCurrentIndex(max(0, self.auth_combo.findData(choice)))

    def keeps_token(self) -> bool:
        """Whether saving keeps the access token stored for this server."""
        return self.transport() != "stdio" and self.auth_kind() == "token" and self.token_stored

    def entry(self) -> tuple[str, dict[str, Any], str | None]:
        """(name, the mcp.json entry with secrets still literal, a new access token or None).
        Raises FieldError for what the user must fix."""
        name = self.name_edit.text().strip()
        if not name:
            raise FieldError("name", "Give this server a name.")
        entry: dict[str, Any] = {}
        token = None
        if self.transport() == "stdio":
            self._stdio_entry(entry)
        else:
            token = self._http_entry(name, entry)
        if not self.enabled_check.isChecked():
            entry["disabled"] = True
        return name, entry, token

    def _stdio_entry(self, entry: dict[str, Any]) -> None:
        command = self.command_edit.text().strip()
        if not command:
            raise FieldError("command", "Enter the program that starts the server, e.g. npx.")
        try:
            args = shlex.split(self.args_edit.text())
        except ValueError as exc:
            raise FieldError("args", f"Check the quotes: {str(exc).lower()}.") from None
        entry["command"] = command
        entry["args"] = args
        try:
            env = parse_pairs(self.env_edit.toPlainText(), "=")
        except ValueError as exc:
            raise FieldError("env", f"Write one KEY=value per line: {exc}.") from None
        if env:
            entry["env"] = env

    def _http_entry(self, name: str, entry: dict[str, Any]) -> str | None:
        url = self.url_edit.text().strip()
        if not url.startswith(("http://", "https://")):
            raise FieldError("url", "The URL must start with http:// or https://.")
        entry["url"] = url
        if url.rstrip("/").endswith("/sse"):
            entry["type"] = "sse"
        try:
            headers = parse_pairs(self.headers_edit.toPlainText(), ":")
        except ValueError as exc:
            raise FieldError("headers", f"Write one Name: value per line: {exc}.") from None
        kind = self.auth_kind()
        token = self.token_edit.text().strip() or None if kind == "token" else None
        if kind == "token":
            if token is None and not self.token_stored and "Authorization" not in headers:
                raise FieldError("token", "Paste the access token, or choose another sign-in.")
            entry["auth"] = "none"  # the token is the sign-in: no browser round trip
        elif kind == "none":
            entry["auth"] = "none"
        elif kind == KEEP_AUTH[0] or isinstance(self._raw_auth, dict):
            entry["auth"] = self._raw_auth  # settings the form does not show are kept
        if headers:
            entry["headers"] = headers
        return token

    def rule(self) -> Rule:
        chosen: Rule = self.rule_combo.currentData()
        return chosen

    def show_error(self, text: str) -> None:
        """A problem of the entry as a whole (and clears the fields' problems)."""
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))
        if not text:
            for key in self._field_errors:
                self.show_field_error(key, "")

    def show_field_error(self, key: str, text: str) -> None:
        label = self._field_errors[key]
        label.setText(text)
        label.setVisible(bool(text))

    def field_error(self, key: str) -> str:
        return self._field_errors[key].text()

    def show_problem(self, exc: Exception) -> None:
        """Show a FieldError or an mcp.json EntryError next to the fields it is about, and
        move the focus to the first of them."""
        self.show_error("")
        found: list[tuple[str | None, str]] = []
        if isinstance(exc, FieldError):
            found.append((exc.field, str(exc)))
        elif isinstance(exc, EntryError):
            found += [(problem_field(p.field), sentence(p.detail)) for p in exc.problems]
        else:
            found.append((None, sentence(str(exc))))
        general = [text for key, text in found if key is None or key not in self._field_errors]
        for key, text in found:
            if key is not None and key in self._field_errors:
                self.show_field_error(key, text)
        self.error_label.setText("\n".join(general))
        self.error_label.setVisible(bool(general))
        first = next((k for k, _ in found if k in self._holders), None)
        if first is not None:
            self.focus_field(first)

    def focus_field(self, key: str) -> None:
        holder = self._holders.get(key)
        layout = holder.layout() if holder is not None else None
        item = layout.itemAt(0) if layout is not None else None
        widget = item.widget() if item is not None else None
        if widget is not None:
            widget.setFocus(Qt.FocusReason.OtherFocusReason)

    def check(self) -> bool:
        """Validate the form as Save would, showing the problems; True when it is fine."""
        try:
            name, entry, _ = self.entry()
            validate(name, entry)
        except (ValueError, McpConfigError) as exc:
            self.show_problem(exc)
            return False
        self.show_error("")
        return True


def left_out_text(problems: list[EntryProblem]) -> str:
    """What an import left out and why, one server a line (names made visible)."""
    lines = "\n".join(f"• {sentence(p.message)}" for p in problems)
    return f"Not added:\n{lines}"


def sentence(text: str) -> str:
    """Text that someone else wrote (a server, the config checker) as one readable sentence:
    control characters made visible, a capital first letter, a full stop."""
    text = visible(text, keep_newlines=False).strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", "…")) else text + "."


class McpPage(SettingsPage):
    title = "MCP servers"
    subtitle = (
        "Model Context Protocol servers give the assistant more tools. Server changes are "
        "saved to mcp.json right away; tokens are kept in the system keyring."
    )
    #: Only the approval choices wait for the dialog's Save (servers are written at once).
    reports_edits = True

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.service = runtime.mcp_servers
        self.path = self.service.path
        self.servers: dict[str, dict[str, Any]] = {}
        self.states: dict[str, ServerState] = {}
        self.rules: dict[str, Rule] = {}
        self._saved_rules: dict[str, Rule] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bridge = _Bridge(self)
        self._bridge.changed.connect(self._on_state)
        self._unsubscribe: Callable[[], None] | None = None
        #: The user pressed Add server with no server yet: show the form, not the intro.
        self._adding = False
        #: Whether the server-output box is open (the user's last choice).
        self._output_open = True
        self._build()
        self.load_error = ""
        self._loaded: asyncio.Task[None] | None = None
        self._fill()

    # -- layout --

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        self.empty_view = self._build_empty()
        outer.addWidget(self.empty_view, 1)
        self.main_view = QWidget()
        outer.addWidget(self.main_view, 1)
        root = QHBoxLayout(self.main_view)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(16)

        left = QVBoxLayout()
        left.setSpacing(6)
        self.server_list = QListWidget()
        self.server_list.setObjectName("mcpServerList")
        self.server_list.setFixedWidth(LIST_WIDTH)
        self.server_list.setItemDelegate(AccountDelegate(self.server_list))
        self.server_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.server_list.setAccessibleName("MCP servers")
        self.server_list.currentRowChanged.connect(lambda _: self._show_current())
        left.addWidget(self.server_list, 1)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Add an MCP server")
        self.add_button.clicked.connect(self.add_server)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(lambda: self._spawn(self.remove_selected()))
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        left.addLayout(row)
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("Add servers set up for Claude Desktop, or pasted JSON")
        self.import_button.setMenu(self._import_menu(self.import_button))
        left.addWidget(self.import_button)
        root.addLayout(left)

        # the status first (what the user looks for), then the form; it all scrolls, so a
        # small dialog or a long error never squeezes the form's rows together
        detail = QWidget()
        detail.setObjectName("mcpDetail")
        right = QVBoxLayout(detail)
        right.setContentsMargins(0, 0, 12, 0)  # room for the scroll bar
        right.setSpacing(8)
        self.paste_panel = PastePanel()
        self.paste_panel.submitted.connect(lambda text: self._spawn(self.import_text(text)))
        self.paste_panel.cancelled.connect(self.paste_panel.hide)
        self.paste_panel.hide()
        right.addWidget(self.paste_panel)
        self._build_status(right)
        right.addSpacing(10)
        self.editor = ServerEditor()
        self.editor.save_button.clicked.connect(lambda: self._spawn(self.save_editor()))
        self.editor.cancel_button.clicked.connect(self.cancel_edit)
        self.editor.rule_combo.currentIndexChanged.connect(lambda _: self.edited.emit())
        right.addWidget(self.editor)
        right.addStretch(1)
        area = QScrollArea()
        area.setObjectName("mcpDetailArea")
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setStyleSheet(
            "QScrollArea#mcpDetailArea, QWidget#mcpDetail { background: transparent; }"
        )
        area.setWidget(detail)
        self.detail_area = area
        root.addWidget(area, 1)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """The list gives up width first, so the form keeps room in a small dialog."""
        super().resizeEvent(event)
        width = max(LIST_MIN_WIDTH, min(LIST_WIDTH, self.width() - 290))
        if self.server_list.width() != width:
            self.server_list.setFixedWidth(width)

    def _import_menu(self, parent: QWidget) -> QMenu:
        menu = QMenu(parent)
        claude = menu.addAction("From Claude Desktop")
        claude.setToolTip(str(claude_desktop_config_path()))
        claude.triggered.connect(lambda: self._spawn(self.import_from(None)))
        from_file = menu.addAction("From a file…")
        from_file.triggered.connect(lambda: self._spawn(self.import_from_file()))
        paste = menu.addAction("Paste JSON…")
        paste.triggered.connect(self.show_paste)
        return menu

    def _build_empty(self) -> QWidget:
        """What the page shows with no server yet: what MCP servers are and how to add one."""
        view = QWidget()
        view.setObjectName("mcpEmpty")
        column = QVBoxLayout(view)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(10)
        column.addWidget(role_label("No MCP servers yet", "section"))
        column.addWidget(muted_label(EMPTY_TEXT))
        row = QHBoxLayout()
        row.setSpacing(8)
        self.empty_add_button = QPushButton("Add server…")
        self.empty_add_button.setProperty("accent", True)
        self.empty_add_button.clicked.connect(self.add_server)
        self.empty_import_button = QPushButton("Import from Claude Desktop")
        self.empty_import_button.setToolTip(str(claude_desktop_config_path()))
        self.empty_import_button.clicked.connect(lambda: self._spawn(self.import_from(None)))
        self.empty_file_button = QPushButton("Import a file…")
        self.empty_file_button.clicked.connect(lambda: self._spawn(self.import_from_file()))
        for button in (self.empty_add_button, self.empty_import_button, self.empty_file_button):
            row.addWidget(button)
        row.addStretch(1)
        column.addLayout(row)
        column.addSpacing(8)
        self.empty_paste = PastePanel(cancellable=False)
        self.empty_paste.submitted.connect(lambda text: self._spawn(self.import_text(text)))
        column.addWidget(self.empty_paste)
        self.empty_message = muted_label("")
        self.empty_message.setTextFormat(Qt.TextFormat.PlainText)
        self.empty_message.hide()
        column.addWidget(self.empty_message)
        column.addStretch(1)
        return view

    def _build_status(self, right: QVBoxLayout) -> None:
        """The selected server's state line, its detail, what fixes it, its last output
        lines (collapsible), sign-in."""
        header = QHBoxLayout()
        self.status_heading = role_label("Status", "section")
        header.addWidget(self.status_heading, 1)
        self.connect_button = QPushButton("Connect")
        self.connect_button.setToolTip("Start the enabled servers and list their tools")
        self.connect_button.clicked.connect(lambda: self._spawn(self.connect_servers()))
        header.addWidget(self.connect_button)
        right.addLayout(header)
        self.status_label = self._plain_label()
        right.addWidget(self.status_label)
        self.status_detail = self._plain_label()
        self.status_detail.setProperty("role", "muted")
        right.addWidget(self.status_detail)
        self.fix_actions = QWidget()
        actions = QHBoxLayout(self.fix_actions)
        actions.setContentsMargins(0, 2, 0, 2)
        actions.setSpacing(8)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setProperty("accent", True)
        self.retry_button.setToolTip("Start this server again")
        self.retry_button.clicked.connect(lambda: self._spawn(self.retry_current()))
        self.edit_button = QPushButton("Edit")
        self.edit_button.setToolTip("Go to this server's settings")
        self.edit_button.clicked.connect(self.edit_current)
        self.remove_server_button = QPushButton("Remove")
        self.remove_server_button.setToolTip("Remove this server from mcp.json")
        self.remove_server_button.clicked.connect(lambda: self._spawn(self.remove_selected()))
        for button in (self.retry_button, self.edit_button, self.remove_server_button):
            actions.addWidget(button)
        actions.addStretch(1)
        right.addWidget(self.fix_actions)
        self.output_heading = QToolButton()
        self.output_heading.setObjectName("mcpOutputToggle")
        self.output_heading.setCheckable(True)
        self.output_heading.setChecked(True)
        self.output_heading.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.output_heading.setAutoRaise(True)
        self.output_heading.setStyleSheet(
            "QToolButton#mcpOutputToggle { border: none; background: transparent; padding: 2px 0; }"
        )
        self.output_heading.toggled.connect(self._toggle_output)
        right.addWidget(self.output_heading)
        self.output_box = QPlainTextEdit()
        self.output_box.setObjectName("mcpServerOutput")
        self.output_box.setReadOnly(True)
        self.output_box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.output_box.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.output_box.setAccessibleName("Server output")
        right.addWidget(self.output_box)
        self.signin = SignInPanel(self.service, ask=lambda t, x: confirm(self, t, x))
        self.signin.state_changed.connect(self._on_state)
        self.signin.waiting_changed.connect(self._show_status)
        right.addWidget(self.signin)
        self.message = muted_label("")
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.hide()
        right.addWidget(self.message)

    @staticmethod
    def _plain_label() -> QLabel:
        """Server text is untrusted: never rich text, wrapped, selectable."""
        label = QLabel("")
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        spawn(self._tasks, coro)

    def cancel_tasks(self) -> None:
        """The dialog closes: cancel every task this page and its sign-in panel started and
        stop following the servers (showing the page again reads mcp.json afresh)."""
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        self.signin.cancel_tasks()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._loaded = None

    # -- loading and showing --

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.ensure_loaded()

    def ensure_loaded(self) -> asyncio.Task[None]:
        """Read mcp.json once (a task; tests await it). Started when first shown, and
        again after `cancel_tasks`."""
        if self._loaded is None:
            self._loaded = asyncio.ensure_future(self.reload())
            self._tasks.add(self._loaded)
            self._loaded.add_done_callback(self._tasks.discard)
        return self._loaded

    async def reload(self) -> None:
        """Read mcp.json (and the manager's states, if it runs) in a thread, then show them."""
        self._subscribe()  # before reading: no change falls between the two
        listing = await in_thread(self.service.read)
        self.servers, self.load_error = listing.servers, listing.error
        book = await in_thread(lambda: self.runtime.rules)
        self.rules = {name: current_rule(name, book) for name in self.servers}
        self._saved_rules = dict(self.rules)
        for state in listing.states:
            self.states[state.name] = state
        self._fill()
        self.set_message(self.load_error, error=bool(self.load_error))

    def _fill(self, select: str | None = None) -> None:
        current = select or self.current_name()
        self.server_list.blockSignals(True)
        self.server_list.clear()
        for name, raw in self.servers.items():
            item = QListWidgetItem(visible(name, keep_newlines=False))
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setData(DETAIL_ROLE, self._detail(name, raw))
            self.server_list.addItem(item)
        self.server_list.blockSignals(False)
        if self.servers:
            self._adding = False
        names = list(self.servers)
        if current in names:
            self.server_list.setCurrentRow(names.index(current))
        elif names:
            self.server_list.setCurrentRow(0)
        self._show_view()
        self._show_current()

    def _show_view(self) -> None:
        """The introduction with no server (until the user adds one), else list and form."""
        empty = not self.servers and not self._adding
        self.empty_view.setVisible(empty)
        self.main_view.setVisible(not empty)

    def _detail(self, name: str, raw: dict[str, Any]) -> str:
        if raw.get("disabled"):
            return "Disabled"
        state = self.states.get(name)
        if state is None:
            return "Not connected"
        return ROW_WORDS.get(state.status) or (
            f"Ready · {plural(len(state.tools), 'tool')}"
            if state.status is Status.READY
            else state.status.value.capitalize()
        )

    def current_name(self) -> str | None:
        item = self.server_list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def select(self, name: str) -> None:
        names = list(self.servers)
        if name in names:
            self.server_list.setCurrentRow(names.index(name))

    def _show_current(self) -> None:
        name = self.current_name()
        self.remove_button.setEnabled(name is not None)
        if name is None:
            self.editor.open(None, {}, "ask")
        else:
            self.editor.open(name, self.servers[name], self.rules.get(name, "ask"))
        self._show_status()

    def _show_status(self) -> None:
        name = self.current_name()
        raw = self.servers.get(name or "", {})
        state = self.states.get(name or "")
        output: list[str] = []
        if raw.get("disabled"):
            line, detail, role = "Disabled", "", "muted"
        else:
            line, detail, role, output = status_parts(state, self.service.output(name or ""))
        if name is None:
            line, detail, role, output = "", "", "muted", []
        self.status_heading.setVisible(name is not None)
        self.connect_button.setVisible(name is not None)
        self.status_label.setText(breakable(line))
        self.status_label.setVisible(bool(line))
        tools = state.tools if state is not None and state.status is Status.READY else []
        self.status_label.setToolTip(plain_tooltip(", ".join(tools), wrap=False))
        set_role(self.status_label, role)
        if name is not None and self.signin.waiting(name) and line == NEEDS_SIGN_IN:
            detail = ""  # "press Sign in" or the last failure, while the browser is open
        self.status_detail.setText(breakable(detail))
        self.status_detail.setVisible(bool(detail))
        failed = state is not None and is_failure(state.error)
        set_role(self.status_detail, "error" if failed else "muted")
        self._show_actions(None if raw.get("disabled") or name is None else state)
        self._show_output(output)
        self.signin.show_server(name, raw, None if raw.get("disabled") else state)

    def _show_actions(self, state: ServerState | None) -> None:
        """What fixes a server in trouble: Retry (it may work now), Edit, Remove."""
        status = state.status if state is not None else None
        trouble = status in (
            Status.FAILED,
            Status.RESTARTING,
            Status.NEEDS_SIGN_IN,
            Status.INVALID,
        )
        self.fix_actions.setVisible(trouble)
        self.retry_button.setVisible(status in (Status.FAILED, Status.RESTARTING))
        self.retry_button.setEnabled(self.service.manager_running)

    def _show_output(self, lines: list[str]) -> None:
        self.output_heading.setVisible(bool(lines))
        self.output_heading.setText(f"Server output (last {plural(len(lines), 'line')})")
        self.output_box.setVisible(bool(lines) and self._output_open)
        self._toggle_arrow()
        if self.output_box.toPlainText() != "\n".join(lines):
            self.output_box.setPlainText("\n".join(lines))
            bar = self.output_box.verticalScrollBar()
            bar.setValue(bar.maximum())  # the last lines say why it stopped
        shown = max(3, min(len(lines) + 1, OUTPUT_LINES))
        height = self.output_box.fontMetrics().lineSpacing() * shown
        self.output_box.setFixedHeight(height + 14)

    def _toggle_output(self, open_: bool) -> None:
        self._output_open = open_
        self.output_box.setVisible(open_ and not self.output_heading.isHidden())
        self._toggle_arrow()

    def _toggle_arrow(self) -> None:
        arrow = Qt.ArrowType.DownArrow if self._output_open else Qt.ArrowType.RightArrow
        self.output_heading.setArrowType(arrow)
        self.output_heading.setChecked(self._output_open)

    # -- what fixes a server --

    async def retry_current(self) -> None:
        """Start the selected server again (its state follows through the subscription)."""
        name = self.current_name()
        if name is None:
            return
        if not self.service.manager_running:
            await self.connect_servers()
            return
        self.set_message(f"Starting “{visible(name, keep_newlines=False)}” again…")
        try:
            state = await in_thread(self.service.restart, name)
        except Exception as exc:
            log.warning("restarting MCP server %s failed: %s", name, exc)
            self.set_message(f"Could not start it again: {plain_reason(str(exc))}", error=True)
            return
        self.set_message("")
        if state is not None:
            self._on_state(state)

    def edit_current(self) -> None:
        """Show the form with its problems marked, focused on the first (or on what a
        failed start most often needs: the command or the URL)."""
        if not self.editor.check():
            self.detail_area.ensureWidgetVisible(self.editor.error_label)
            return
        key = "command" if self.editor.transport() == "stdio" else "url"
        self.detail_area.ensureWidgetVisible(self.editor)
        self.editor.focus_field(key)

    def cancel_edit(self) -> None:
        """Cancel: the form as saved again (with no server, back to the introduction)."""
        if not self.servers:
            self._adding = False
            self._show_view()
        self._show_current()

    def show_paste(self) -> None:
        self.paste_panel.show()
        self.detail_area.ensureWidgetVisible(self.paste_panel)
        self.paste_panel.edit.setFocus()

    def status_line(self, name: str) -> str:
        state = self.states.get(name)
        return status_text(state, self.service.output(name))[0]

    def status_shown(self) -> str:
        """What the status area says now (zero-width break hints removed)."""
        parts = [self.status_label, self.status_detail]
        if not self.signin.isHidden():
            parts.append(self.signin.note)
        text = "\n".join(w.text() for w in parts if not w.isHidden() and w.text())
        if not self.output_box.isHidden():
            text += "\n" + self.output_box.toPlainText()
        return text.replace("\u200b", "")

    def set_message(self, text: str, *, error: bool = False) -> None:
        """A line about what the page just did (on the introduction, when it shows)."""
        for label in (self.message, self.empty_message):
            label.setText(text)
            label.setVisible(bool(text))
            set_role(label, "error" if error else "muted")

    # -- live status --

    def _subscribe(self) -> None:
        """Follow the servers' states (from when the manager exists)."""
        if self._unsubscribe is not None:
            return
        bridge = self._bridge

        def listener(state: ServerState) -> None:  # on the MCP thread
            with contextlib.suppress(RuntimeError):  # the page is gone
                bridge.changed.emit(state)

        self._unsubscribe = self.service.subscribe(listener)

    def _on_state(self, state: ServerState) -> None:
        if state.name not in self.servers:
            return
        self.states[state.name] = state
        if state.status is Status.FAILED and not state.stderr:
            self._spawn(self._add_stderr(state))
        for row in range(self.server_list.count()):
            item = self.server_list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == state.name:
                item.setData(DETAIL_ROLE, self._detail(state.name, self.servers[state.name]))
        if state.name == self.current_name():
            self._show_status()

    async def _add_stderr(self, state: ServerState) -> None:
        """A failure arrives without the server's output: read that start's last lines
        (redacted, made visible) on a worker thread and show them unless a newer state came."""
        lines = await in_thread(self.service.recent_output, state.name)
        if lines and self.states.get(state.name) is state:
            state.stderr = lines
            if state.name == self.current_name():
                self._show_status()

    async def connect_servers(self) -> None:
        """Start every enabled server not running yet; statuses follow as they change."""
        self.connect_button.setEnabled(False)
        self.set_message("Connecting…")
        try:
            self._subscribe()
            states = await in_thread(self.service.connect, CONNECT_WAIT)
            for state in states:  # signals already delivered are as new or newer
                if state.name not in self.states:
                    self._on_state(state)
            self.set_message("")
        except Exception as exc:
            log.warning("connecting MCP servers failed: %s", exc)
            self.set_message(f"Could not start the servers: {plain_reason(str(exc))}", error=True)
        finally:
            self.connect_button.setEnabled(True)

    # -- changes to mcp.json (the service writes; a running manager follows) --

    def add_server(self) -> None:
        self._adding = True
        self._show_view()
        self.server_list.clearSelection()
        self.server_list.setCurrentRow(-1)
        self.editor.open(None, {}, "ask")
        self.remove_button.setEnabled(False)
        self._show_status()  # nothing selected: no status
        self.editor.name_edit.setFocus()

    async def save_editor(self) -> bool:
        editor = self.editor
        try:
            name, entry, token = editor.entry()
        except FieldError as exc:
            editor.show_problem(exc)
            return False
        original = editor.original
        if name != original and name in self.servers:
            editor.show_problem(
                FieldError("name", "Another server already has this name. Choose another.")
            )
            return False
        keep_token = editor.keeps_token()
        rule = editor.rule()

        def work() -> Any:
            return self.service.save(
                name, entry, original=original, token=token, keep_token=keep_token
            )

        try:
            saved = await in_thread(work)
        except EntryError as exc:  # invalid, or a secret the keyring refused: nothing written
            editor.show_problem(exc)
            return False
        except Exception as exc:
            log.warning("saving MCP server %s failed: %s", name, exc)
            editor.show_error(f"Could not save: {os_reason(exc)}")
            return False
        if original is not None and original != name:
            self.rules.pop(original, None)
            self.states.pop(original, None)
        self.rules[name] = rule
        # what settings hold for this name's pattern now (a renamed server starts afresh)
        self._saved_rules.setdefault(name, current_rule(name, self.runtime.rules))
        self.states.pop(name, None)
        self.servers = saved.servers
        self._fill(select=name)
        note = (
            f" Its invalid {' and '.join(saved.dropped)} setting was removed."
            if saved.dropped
            else ""
        )
        self.set_message(f"Saved “{visible(name, keep_newlines=False)}” to {self.path.name}.{note}")
        self.edited.emit()  # its approval choice may now differ from rules.json
        return True

    async def set_enabled(self, name: str, enabled: bool) -> None:
        servers = await in_thread(self.service.set_enabled, name, enabled)
        self.states.pop(name, None)
        self.servers = servers
        self._fill(select=name)

    async def remove_selected(self) -> bool:
        name = self.current_name()
        if name is None or not confirm(
            self, "Remove MCP server", f"Remove “{name}” from mcp.json? Its tools go away."
        ):
            return False
        try:
            servers = await in_thread(self.service.remove, name)
        except Exception as exc:
            self.set_message(f"Could not remove: {os_reason(exc)}", error=True)
            return False
        self.rules.pop(name, None)
        self.states.pop(name, None)
        self.servers = servers
        self._fill()
        self.set_message(f"Removed “{visible(name, keep_newlines=False)}”.")
        self.edited.emit()
        return True

    async def import_from_file(self) -> None:
        start = claude_desktop_config_path()
        path = choose_config_file(self, start.parent if start.parent.is_dir() else Path.home())
        if path is not None:
            await self.import_from(path)

    async def import_from(self, source: Path | None) -> None:
        """Import the mcpServers of `source` (None: Claude Desktop's config here)."""
        try:
            report = await in_thread(self.service.import_file, source)
        except (McpConfigError, OSError, json.JSONDecodeError) as exc:
            self.set_message(f"Could not import: {os_reason(exc)}", error=True)
            return
        await self._imported(report)

    async def _imported(self, report: ImportReport, *, left_out_shown: bool = False) -> None:
        """mcp.json now holds what an import added: show it and say what happened (what was
        left out too, unless the paste box already says it)."""
        listing = await in_thread(self.service.read)
        self.servers = listing.servers
        book = self.runtime.rules
        for name in report.added:
            self.states.pop(name, None)
            self.rules.setdefault(name, current_rule(name, book))
            self._saved_rules.setdefault(name, self.rules[name])
        parts = [
            f"Imported {plural(len(report.added), 'server')}"
            if report.added
            else "No server was imported"
        ]
        if report.skipped:
            kept = ", ".join(visible(n, keep_newlines=False) for n in report.skipped)
            parts.append(f"kept existing {kept}")
        if report.moved_to_keyring:
            parts.append(f"{plural(len(report.moved_to_keyring), 'secret')} moved to the keyring")
        self._fill(select=report.added[0] if report.added else None)
        message = "; ".join(parts) + "."
        if report.invalid and not left_out_shown:
            message += "\n" + left_out_text(report.invalid)
        elif report.invalid:
            message += " Some were not added: see the pasted text above."
        self.set_message(message, error=bool(report.invalid))
        self.edited.emit()

    async def import_text(self, text: str) -> bool:
        """Add the servers of pasted JSON (as importing a file does: existing names are
        kept, secrets go to the keyring). Problems are shown under the box, and when a
        server was left out the box keeps the text, so nothing pasted is lost. True when
        every server was added."""
        panels = [self.empty_paste, self.paste_panel]
        try:
            report = await in_thread(self.service.import_text, text)
        except EntryError as exc:
            problems = "\n".join(f"• {sentence(p.message)}" for p in exc.problems)
            for panel in panels:
                panel.show_error(f"None of these servers can be used:\n{problems}")
            return False
        except (McpConfigError, OSError) as exc:
            for panel in panels:
                panel.show_error(f"Could not add them: {os_reason(exc)}")
            return False
        except ValueError as exc:  # not JSON of servers
            for panel in panels:
                panel.show_error(str(exc))
            return False
        if report.added or report.skipped:
            await self._imported(report, left_out_shown=True)
        if not report.invalid:
            for panel in panels:
                panel.edit.clear()
            self.paste_panel.hide()
            return True
        for panel in panels:  # the box that shows now keeps the text
            if panel.edit.toPlainText() != text:
                panel.edit.setPlainText(text)
            panel.show_error(left_out_text(report.invalid))
        if not self.main_view.isHidden():
            self.show_paste()
        return False

    # -- the dialog's Save: approval rules --

    def _current_rules(self) -> dict[str, Rule]:
        rules = dict(self.rules)
        name = self.editor.original
        if name is not None and name in rules:
            rules[name] = self.editor.rule()
        return rules

    def patch(self) -> Patch:
        """Nothing in settings.json: the rules go to rules.json in `commit`."""
        self._pending = self._changed_rules()

        def apply(settings: Settings) -> None:
            pass

        return apply

    def has_changes(self) -> bool:
        return bool(self._changed_rules())

    def _changed_rules(self) -> dict[str, Rule]:
        rules = self._current_rules()
        changed = {n: r for n, r in rules.items() if r != self._saved_rules.get(n, "ask")}
        for name, rule in self._saved_rules.items():  # removed servers: drop their rule
            if name not in rules and rule != "ask":
                changed[name] = "ask"
        return changed

    def commit(self) -> None:
        """(worker thread, after settings.json was saved) Write the changed rules."""
        book = self.runtime.rules
        for name, rule in getattr(self, "_pending", self._changed_rules()).items():
            if name in self.rules or name == self.editor.original:
                set_server_choice(book, name, RuleDecision(rule))
            else:  # removed or renamed: its rules go
                forget_server_choice(book, name)
        self._pending = {}

    def mark_saved(self, settings: Settings) -> None:
        self.rules = self._current_rules()
        self._saved_rules = dict(self.rules)
