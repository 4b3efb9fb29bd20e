"""The "Sources" page: third-party tool sources — drop-in tool packs and installed tool
packages, MCP servers, skills with scripts — whether each is enabled and trusted, where it
comes from, and the buttons to change that. Changes take effect at once (trust.json), as
`deskhand sources …` does.

Until a source is trusted every call of it asks, whatever it declares. Trust belongs to
one version of the source: when it changes it shows "changed since you trusted it".
Listing never imports a pack; Enable does (once, to record its tool names).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.runtime import Runtime
from app.core.settings import Settings
from app.core.sources import describe, folder_fingerprint
from app.core.visible import one_line
from app.ui.settings.page import Patch, SettingsPage, in_thread
from app.ui.settings.widgets import muted_label
from tools.registry import ToolSource

log = logging.getLogger(__name__)
ID_ROLE = Qt.ItemDataRole.UserRole
SECTIONS = {"pack": "Tool packs", "mcp": "MCP servers", "skill": "Skills with scripts"}
SCRIPT_SUFFIXES = {".py", ".sh", ".bash", ".js", ".mjs", ".rb", ".pl", ".ps1", ".bat", ".cmd"}


@dataclass
class SourceRow:
    id: str
    section: str  # pack | mcp | skill
    title: str
    origin: str
    state: str
    #: Action name → button label, in order.
    actions: list[tuple[str, str]] = field(default_factory=list)
    source: ToolSource | None = None
    changed: bool = False


def _has_scripts(folder: Any) -> bool:
    try:
        for path in folder.rglob("*"):
            if (
                path.is_file()
                and path.name != "SKILL.md"
                and (path.suffix.lower() in SCRIPT_SUFFIXES or os.access(path, os.X_OK))
            ):
                return True
    except OSError:
        return False
    return False


def gather(runtime: Runtime) -> list[SourceRow]:
    """(worker thread) Every third-party source known now, without importing any pack or
    starting any MCP server."""
    trust = runtime.trust
    rows: list[SourceRow] = []
    for pack in runtime.listing_registry().packs:
        src = pack.source
        record = trust.record(src.id)
        enabled = trust.is_enabled(src)
        trusted = trust.is_trusted(src)
        changed = record is not None and record.enabled and record.fingerprint != src.fingerprint
        if changed:
            state = "Changed since you enabled it: disabled until you enable it again"
        elif not enabled:
            state = "Disabled (not imported)"
        else:
            state = "Enabled, trusted" if trusted else "Enabled, not trusted: every call asks"
        if record is not None and record.tool_names and enabled:
            state += f" · tools: {', '.join(record.tool_names)}"
        actions = [("enable", "Enable")] if not enabled else [("disable", "Disable")]
        if enabled:
            actions.insert(0, ("untrust", "Untrust") if trusted else ("trust", "Trust"))
        rows.append(
            SourceRow(src.id, "pack", describe(src), src.origin, state, actions, src, changed)
        )
    mcp_sources: dict[str, ToolSource] = (
        runtime.mcp.tool_sources() if runtime.started_mcp is not None else {}
    )
    for src in mcp_sources.values():
        trusted = trust.is_trusted(src)
        record = trust.record(src.id)
        changed = record is not None and record.trusted and not trusted
        if changed:
            state = f"Not trusted: {trust.why_untrusted(src).removeprefix(describe(src) + ' ')}"
        else:
            state = "Trusted" if trusted else "Not trusted: every call asks"
        action = ("untrust", "Untrust") if trusted else ("trust", "Trust")
        rows.append(
            SourceRow(src.id, "mcp", describe(src), src.origin, state, [action], src, changed)
        )
    for record in trust.records():
        if record.id.startswith("mcp:") and record.id not in {s.id for s in mcp_sources.values()}:
            name = record.id.removeprefix("mcp:")
            state = (
                "Trusted (not connected now)" if record.trusted else "Not trusted (not connected)"
            )
            actions = [("untrust", "Untrust")] if record.trusted else []
            rows.append(
                SourceRow(
                    record.id, "mcp", f"the MCP server {name!r}", record.origin, state, actions
                )
            )
    try:
        skills = runtime.skills.discover()
    except Exception as exc:  # a broken skills folder must not hide the other sources
        log.warning("could not list skills: %s", exc)
        skills = []
    for skill in skills:
        if not _has_scripts(skill.folder):
            continue
        src = ToolSource(
            "skill",
            f"skill:{skill.name}",
            fingerprint=folder_fingerprint(skill.folder),
            origin=f"the skill folder {skill.folder}",
        )
        trusted = trust.is_trusted(src)
        record = trust.record(src.id)
        changed = record is not None and record.trusted and not trusted
        state = (
            "Changed since you trusted it: every script run asks"
            if changed
            else ("Trusted" if trusted else "Not trusted: every script run asks")
        )
        action = ("untrust", "Untrust") if trusted else ("trust", "Trust")
        rows.append(
            SourceRow(src.id, "skill", describe(src), src.origin, state, [action], src, changed)
        )
    return rows


def apply_action(runtime: Runtime, row: SourceRow, action: str) -> str:
    """(worker thread) Performs one button's action; returns what to tell the user."""
    trust = runtime.trust
    if action == "untrust":
        trust.untrust(row.id)
        return f"{row.title} is no longer trusted: its calls ask again."
    if action == "disable":
        trust.disable(row.id)
        return f"{row.title} is disabled: none of its tools runs, and it is not imported again."
    if row.source is None:
        return "Connect it on the MCP servers page first."
    if action == "enable":
        names = runtime.enable_pack(row.source)
        return (
            f"{row.title} is enabled ({len(names)} tools); every call of its tools asks until "
            "you trust it."
        )
    trust.trust(row.source)
    return f"{row.title} is trusted as it is now; any change to it makes it untrusted again."


class SourcesPage(SettingsPage):
    title = "Sources"
    subtitle = (
        "Tools that do not come with Deskhand. Until you trust a source, every one of its "
        "calls asks you, whatever it says about itself. Changes here take effect at once."
    )

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.rows: list[SourceRow] = []
        self.action_buttons: dict[tuple[str, str], QPushButton] = {}
        self._task: asyncio.Task[None] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.tree = QTreeWidget()
        self.tree.setObjectName("sourcesTree")
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["Source", "State", "Where it comes from", ""])
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.setWordWrap(True)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(0, 200)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(2, 200)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.tree, 1)
        self.empty = muted_label(
            "No third-party tools: only Deskhand's own tools are installed. Tool packs in "
            "the tools folder, MCP servers you connect and skills with scripts show here."
        )
        layout.addWidget(self.empty)
        self.message = muted_label("")
        layout.addWidget(self.message)
        self.empty.hide()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> asyncio.Task[None] | None:
        """Lists the sources in a thread (a task; tests await it; None without a loop)."""
        if self._task is None or self._task.done():
            self._task = self.start_task(self._reload())
        return self._task

    async def _reload(self) -> None:
        self.show_rows(await in_thread(gather, self.runtime))

    def show_rows(self, rows: list[SourceRow]) -> None:
        self.rows = rows
        self.tree.clear()
        self.action_buttons.clear()
        for section, title in SECTIONS.items():
            mine = [r for r in rows if r.section == section]
            if not mine:
                continue
            head = QTreeWidgetItem(self.tree, [title])
            font = head.font(0)
            font.setBold(True)
            head.setFont(0, font)
            head.setFirstColumnSpanned(True)
            for row in mine:
                item = QTreeWidgetItem(
                    head,
                    [one_line(row.title, 120), one_line(row.state, 300), one_line(row.origin, 300)],
                )
                item.setData(0, ID_ROLE, row.id)
                item.setText(0, item.text(0)[:1].upper() + item.text(0)[1:])
                item.setToolTip(2, one_line(row.origin, 600))
                item.setSizeHint(3, QSize(0, 46))
                if row.changed:
                    item.setForeground(1, self.palette().brush(self.palette().ColorRole.Link))
                holder = QWidget()
                box = QHBoxLayout(holder)
                box.setContentsMargins(4, 6, 8, 6)
                box.setSpacing(6)
                for action, label in row.actions:
                    button = QPushButton(label)
                    button.setMinimumWidth(button.sizeHint().width() + 12)
                    button.setAccessibleName(f"{label} {row.title}")
                    button.clicked.connect(
                        lambda _=False, r=row, a=action: self.start_task(self.act(r, a))
                    )
                    box.addWidget(button)
                    self.action_buttons[(row.id, action)] = button
                self.tree.setItemWidget(item, 3, holder)
        self.tree.expandAll()
        self.tree.setVisible(bool(rows))
        self.empty.setVisible(not rows)

    def row(self, source_id: str) -> SourceRow | None:
        return next((r for r in self.rows if r.id == source_id), None)

    async def act(self, row: SourceRow, action: str) -> None:
        try:
            text = await in_thread(apply_action, self.runtime, row, action)
        except Exception as exc:
            text = f"Could not {action} {row.title}: {exc}"
        self.message.setText(text)
        await self._reload()

    def patch(self) -> Patch:
        def apply(settings: Settings) -> None:
            pass

        return apply
