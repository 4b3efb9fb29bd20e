"""The message composer: multi-line input, send/stop button, file attachments; with MCP
servers running, their resources can be attached and their prompts typed as "/" commands.

MCP is optional and loaded late: the composer asks `set_mcp`'s source for the manager each
time (None until servers were started) and imports its MCP pieces (`app.ui.mcp_picker`,
`app.core.mcp.catalog`) only then. Server requests run off the GUI thread.

Pasting an image, or a text longer than `app.core.pasted.BIG_PASTE_CHARS`, attaches it as a
file kept in the home's `pasted` folder (given as `home`); Ctrl+Shift+V pastes plain text.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QMimeData,
    QModelIndex,
    QPoint,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QImage,
    QImageWriter,
    QKeyEvent,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QCompleter,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.icons import line_icon

if TYPE_CHECKING:
    from app.core.mcp.catalog import PromptEntry, ResourceEntry
    from app.ui.mcp_picker import McpChip, PromptForm, ResourcePicker

log = logging.getLogger(__name__)

MAX_LINES_VISIBLE = 10
PLACEHOLDER = "Ask Deskhand to do something…"
#: What the message box holds while "/" commands are offered: one word starting with "/".
SLASH = re.compile(r"/[^\s/]*")
#: Returns the MCP manager, or None while no server was started (nothing is imported).
McpSource = Callable[[], Any]
#: Image data a paste may carry besides Qt's own (a GIF gives its first frame).
IMAGE_FORMATS = ("image/png", "image/jpeg", "image/webp", "image/gif")


class ComposerEdit(QPlainTextEdit):
    """Enter sends and Shift+Enter breaks the line (or Ctrl+Enter sends, by setting)."""

    submitted = Signal()
    filesDropped = Signal(list)
    #: A key the user typed was handled (the "/" completion follows the text).
    typed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.send_key = "enter"
        #: The "/" completion, once prompts were offered; its popup takes Enter, Tab, Esc.
        self.completer: QCompleter | None = None
        #: Asked first with what is pasted or dropped (not files); True when it took it.
        self.paste_hook: Callable[[QMimeData], bool] | None = None
        self.setAcceptDrops(True)
        self.setTabChangesFocus(True)
        self.setAccessibleName("Message")
        self._placeholders = (PLACEHOLDER, PLACEHOLDER)
        self.set_send_key("enter")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.document().contentsChanged.connect(self._fit_height)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self._fit_height()

    def set_send_key(self, send_key: str) -> None:
        self.send_key = send_key
        hint = "Enter" if send_key == "enter" else "Ctrl+Enter"
        other = "Shift+Enter" if send_key == "enter" else "Enter"
        keys = f"{hint} to send, {other} for a new line"
        self._placeholders = (f"{PLACEHOLDER}  ({keys})", PLACEHOLDER)
        self.setAccessibleDescription(keys[0].upper() + keys[1:])
        self._fit_placeholder()

    def _fit_placeholder(self) -> None:
        """The placeholder with its key hint where it fits on one line, else without."""
        long, short = self._placeholders
        room = self.viewport().width() - 2 * self.document().documentMargin() - 4
        fits = self.fontMetrics().horizontalAdvance(long) <= room
        text = long if fits else short
        if self.placeholderText() != text:
            self.setPlaceholderText(text)

    def _fit_height(self) -> None:
        """Grows with the text from one line up to MAX_LINES_VISIBLE, then scrolls."""
        lines = max(1, min(MAX_LINES_VISIBLE, int(self.document().size().height())))
        margins = self.contentsMargins().top() + self.contentsMargins().bottom()
        doc_margin = int(self.document().documentMargin() * 2)
        self.setFixedHeight(self.fontMetrics().lineSpacing() * lines + margins + doc_margin + 6)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_placeholder()
        self._fit_height()  # wrapping changes the line count

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self._popup_takes(event):
            event.ignore()
            return
        if _is_plain_paste(event):
            clipboard = QGuiApplication.clipboard()
            self.insertPlainText(clipboard.text() if clipboard is not None else "")
            self.typed.emit()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            sends = (self.send_key == "enter" and not shift and not ctrl) or (
                self.send_key == "ctrl_enter" and ctrl
            )
            if sends:
                self.submitted.emit()
                return
            if self.send_key == "enter" and shift:
                self.insertPlainText("\n")
                return
        super().keyPressEvent(event)
        self.typed.emit()

    def _popup_takes(self, event: QKeyEvent) -> bool:
        keys = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Tab, Qt.Key.Key_Backtab)
        popup = self.completer.popup() if self.completer is not None else None
        return popup is not None and popup.isVisible() and event.key() in (*keys, Qt.Key.Key_Escape)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        has_image = source.hasImage() or any(source.hasFormat(f) for f in IMAGE_FORMATS)
        return source.hasUrls() or has_image or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = [u.toLocalFile() for u in source.urls() if u.isLocalFile()]
        if files:
            self.filesDropped.emit(files)
            return
        if self._hook_takes(source):
            return
        super().insertFromMimeData(source)

    def _hook_takes(self, source: QMimeData) -> bool:
        """A bug in the hook must not take the paste down with it (nor the app: an error
        escaping a Qt override can end the process)."""
        try:
            return self.paste_hook is not None and self.paste_hook(source)
        except Exception:
            log.exception("taking a paste failed")
            return False

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if files:
            self.filesDropped.emit(files)
            event.acceptProposedAction()
        else:
            super().dropEvent(event)


class AttachmentChip(QFrame):
    """A file to send; `name` names it when its file name would not (a paste)."""

    removed = Signal(str)

    def __init__(self, path: str, parent: QWidget | None = None, *, name: str = "") -> None:
        super().__init__(parent)
        self.path = path
        self.setObjectName("attachmentChip")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 2, 4, 2)
        layout.setSpacing(4)
        label = QLabel(name or Path(path).name)
        self.label = label
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setToolTip(path)
        close = QToolButton()
        close.setObjectName("chipClose")
        close.setIcon(line_icon("close"))
        close.setIconSize(QSize(12, 12))
        close.setAutoRaise(True)
        close.setToolTip("Remove attachment")
        close.setAccessibleName(f"Remove {label.text()}")
        close.clicked.connect(lambda: self.removed.emit(self.path))
        layout.addWidget(label)
        layout.addWidget(close)


class Composer(QFrame):
    """Emits `sendRequested(text, attachments)`; the Send button turns into Stop while busy."""

    sendRequested = Signal(str, list)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None, *, home: Path | None = None) -> None:
        """`home`: the Deskhand home, where pasted images and long texts are kept; without
        it a paste goes into the box as text (images are not taken)."""
        super().__init__(parent)
        self.setObjectName("composer")
        self._home = home
        self._busy = False
        #: While the window starts: Send keeps the text and sends it once released.
        self._holding = False
        self._send_when_released = False
        self.attachments: list[str] = []
        self._mcp: McpSource | None = None
        self.mcp_chips: list[McpChip] = []
        self.prompt_form: PromptForm | None = None
        self.picker: ResourcePicker | None = None
        self.attach_menu: QMenu | None = None
        self._prompts: list[PromptEntry] = []
        self._tasks: set[asyncio.Future[None]] = set()
        self.edit = ComposerEdit()
        self.attach_button = QToolButton()
        self.attach_button.setIcon(line_icon("plus"))
        self.attach_button.setIconSize(QSize(18, 18))
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setToolTip("Attach files (or drop them here)")
        self.attach_button.setAccessibleName("Attach files")
        self.attach_button.setAutoRaise(True)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(False)
        self.send_button.setToolTip("Send (Enter)")
        self._chips = QHBoxLayout()
        self._chips.setContentsMargins(0, 0, 0, 0)
        self._chips.setSpacing(6)
        self._chips.addStretch(1)
        chips_box = QWidget()
        chips_box.setLayout(self._chips)
        # many chips are clipped rather than widening the window
        chips_box.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._chips_box = chips_box
        chips_box.hide()
        #: Why a paste was not attached, until the text changes, a paste is taken or a send.
        self.problem = QLabel()
        self.problem.setObjectName("composerProblem")
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setWordWrap(True)
        self.problem.setProperty("role", "error")
        self.problem.hide()

        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.edit, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(6)
        layout.addWidget(self.problem)
        layout.addWidget(chips_box)
        layout.addLayout(row)
        self._layout = layout

        self.edit.submitted.connect(self.submit)
        self.edit.filesDropped.connect(self.add_attachments)
        self.edit.typed.connect(self._offer_prompts)
        self.edit.textChanged.connect(self.clear_problem)  # typing on puts it away
        self.edit.paste_hook = self._take_paste
        self.send_button.clicked.connect(self._on_button)
        self.attach_button.clicked.connect(self._on_attach)

    # ---- state --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop generating (Esc)" if busy else self._send_tip())
        self.send_button.setProperty("stop", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)

    def set_send_key(self, send_key: str) -> None:
        """ "enter" or "ctrl_enter": which key sends (the placeholder and tooltips say so)."""
        self.edit.set_send_key(send_key)
        if not self._busy:
            self.send_button.setToolTip(self._send_tip())

    def _send_tip(self) -> str:
        return "Send (Enter)" if self.edit.send_key == "enter" else "Send (Ctrl+Enter)"

    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str) -> None:
        self.edit.setPlainText(text)
        cursor = self.edit.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.edit.setTextCursor(cursor)

    # ---- actions ------------------------------------------------------------------------

    def hold(self, holding: bool) -> None:
        """While the window is still starting, typing works and Send waits: the message
        goes as soon as `hold(False)` (nothing is lost, nothing is sent twice)."""
        self._holding = holding
        if not holding and self._send_when_released:
            self._send_when_released = False
            self.submit()

    def submit(self) -> None:
        """Sends the text and the attachments; waits (sends nothing) while a resource is
        still being read. A resource that could not be read is not sent."""
        if self._holding:
            self._send_when_released = bool(self.text().strip() or self.attachments)
            return
        if self._busy or any(chip.state == "reading" for chip in self.mcp_chips):
            return
        text = self.text().strip()
        files = list(self.attachments)
        files += [path for chip in self.mcp_chips if chip.ready for path in chip.paths]
        if not text and not files:
            return
        self.sendRequested.emit(text, files)
        self.edit.clear()
        self.clear_attachments()
        self.clear_problem()

    def _on_button(self) -> None:
        if self._busy:
            self.stopRequested.emit()
        else:
            self.submit()

    def _on_attach(self) -> None:
        """The + button: the file dialog, or with MCP servers running, a menu of both."""
        if self.mcp_manager() is None:
            self._pick_files()
            return
        if self.attach_menu is not None:
            self.attach_menu.deleteLater()
        menu = QMenu(self)
        menu.addAction("Files…", self._pick_files)
        menu.addAction("From an MCP server…", self.open_resource_picker)
        self.attach_menu = menu
        menu.popup(self.attach_button.mapToGlobal(QPoint(0, -menu.sizeHint().height() - 4)))

    def _pick_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Attach files", "", attach_filter())
        self.add_attachments(files)

    def add_attachments(self, files: list[str]) -> None:
        for path in files:
            if path and path not in self.attachments and Path(path).is_file():
                self._add_chip(path)
        self._show_chips()

    def _add_chip(self, path: str, label: str = "") -> None:
        self.attachments.append(path)
        chip = AttachmentChip(path, name=label)
        chip.removed.connect(self.remove_attachment)
        self._chips.insertWidget(self._chips.count() - 1, chip)

    # ---- pasting: images and long texts become attachments -------------------------------

    def set_home(self, home: Path | None) -> None:
        """Where pasted content is kept (`<home>/pasted/`); None: pastes stay text."""
        self._home = home

    def _take_paste(self, source: QMimeData) -> bool:
        """An image (when no text comes with it, as with cells copied from a spreadsheet)
        or a long text becomes an attachment; True when the paste was taken."""
        from app.core.pasted import is_big_paste, save_pasted_image, save_pasted_text, text_label

        home = self._home
        if home is None:
            return False
        text = source.text() if source.hasText() else ""
        image = None if text.strip() else pasted_image(source)
        if image is not None:
            png = png_bytes(image)
            label = f"Pasted image ({image.width()}×{image.height()})"
            self._attach_pasted(lambda: save_pasted_image(home, png), label)
            return True
        if is_big_paste(text):
            self._attach_pasted(lambda: save_pasted_text(home, text), text_label(text))
            return True
        return False

    def _attach_pasted(self, save: Callable[[], Path], label: str) -> None:
        from app.core.pasted import PasteRefused

        try:
            path = save()
        except PasteRefused as exc:
            self.show_problem(str(exc))
            return
        except OSError as exc:
            log.warning("could not keep pasted content", exc_info=exc)
            self.show_problem(f"The pasted content could not be saved: {exc.strerror or exc}")
            return
        self.clear_problem()
        self._add_chip(str(path), label)
        self._show_chips()

    def show_problem(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.show()

    def clear_problem(self) -> None:
        if not self.problem.isHidden():
            self.problem.hide()
            self.problem.clear()

    def remove_attachment(self, path: str) -> None:
        if path in self.attachments:
            self.attachments.remove(path)
        for i in reversed(range(self._chips.count())):
            item = self._chips.itemAt(i)
            widget = item.widget() if item is not None else None
            if isinstance(widget, AttachmentChip) and widget.path == path:
                widget.deleteLater()
                self._chips.takeAt(i)
        self._show_chips()

    def clear_attachments(self) -> None:
        for path in list(self.attachments):
            self.remove_attachment(path)
        for chip in list(self.mcp_chips):
            self.remove_mcp_chip(chip)

    def _show_chips(self) -> None:
        self._chips_box.setVisible(bool(self.attachments or self.mcp_chips))

    # ---- MCP: resources as attachments, prompts as "/" commands ---------------------------

    def set_mcp(self, source: McpSource | None) -> None:
        """Where the MCP manager comes from (e.g. the runtime's, once started)."""
        self._mcp = source

    def mcp_manager(self) -> Any:
        """The MCP manager when it has servers to run, else None."""
        manager = self._mcp() if self._mcp is not None else None
        return manager if manager is not None and manager.enabled() else None

    def open_resource_picker(self) -> ResourcePicker | None:
        """The popup listing the ready servers' resources; picking one attaches it."""
        from app.ui.mcp_picker import ResourcePicker, place_above

        manager = self.mcp_manager()
        if manager is None:
            return None
        if self.picker is not None:
            self.picker.deleteLater()
        self.picker = ResourcePicker(manager.resources(), self)
        self.picker.picked.connect(self.attach_resource)
        place_above(self.picker, self, self.attach_button)
        return self.picker

    def attach_resource(self, entry: ResourceEntry) -> McpChip:
        """Adds a chip for `entry` and reads it off the GUI thread; the chip then holds the
        files to send, or says why nothing will be."""
        from app.ui.mcp_picker import McpChip

        chip = McpChip(entry)
        chip.removed.connect(self.remove_mcp_chip)
        self.mcp_chips.append(chip)
        self._chips.insertWidget(self._chips.count() - 1, chip)
        self._show_chips()
        self._spawn(self._read(chip))
        return chip

    async def _read(self, chip: McpChip) -> None:
        from app.core.mcp.catalog import read_for_message
        from app.ui.off_gui import off_gui
        from tools.spec import ToolCancelled, ToolError

        manager = self.mcp_manager()
        try:
            if manager is None:
                raise ToolError("the MCP servers were stopped")
            attached = await off_gui(read_for_message, manager, chip.entry, chip.cancel)
        except ToolCancelled:
            return
        except Exception as exc:  # a bug or a broken server must not break the composer
            if not isinstance(exc, ToolError):
                log.warning("reading MCP resource %s failed", chip.entry.uri, exc_info=exc)
            if chip in self.mcp_chips:  # not removed meanwhile
                chip.set_error(str(exc) if isinstance(exc, ToolError) else "reading it failed")
        else:
            if chip in self.mcp_chips:
                chip.set_ready(attached.paths, attached.skipped)

    def remove_mcp_chip(self, chip: McpChip) -> None:
        chip.cancel.set()
        if chip in self.mcp_chips:
            self.mcp_chips.remove(chip)
            self._chips.removeWidget(chip)
            chip.deleteLater()
        self._show_chips()

    def _offer_prompts(self) -> None:
        """While the box holds only "/word", completes the MCP prompts' commands."""
        completer = self.edit.completer
        manager = self.mcp_manager() if SLASH.fullmatch(self.text()) else None
        prompts = manager.prompts() if manager is not None else []
        if not prompts:
            if completer is not None:
                _hide_popup(completer)
            return
        completer = self._completer(prompts)
        completer.setCompletionPrefix(self.text().removeprefix("/"))
        if completer.completionCount() == 0:
            _hide_popup(completer)
            return
        rect = self.edit.cursorRect()
        rect.setWidth(max(360, min(560, self.edit.width() - rect.x())))
        completer.complete(rect)
        popup = completer.popup()
        if popup is None:  # complete() makes one; None only if Qt could not
            return
        popup.setCurrentIndex(completer.completionModel().index(0, 0))
        # above the message box, inside the window, rather than below it off the window
        popup.move(self.edit.mapToGlobal(QPoint(rect.x(), -popup.height() - 4)))

    def _completer(self, prompts: list[PromptEntry]) -> QCompleter:
        from app.ui.mcp_picker import fit_popup, prompt_model, slash_completer

        completer = self.edit.completer
        if completer is None:
            completer = slash_completer(self.edit)
            # PySide6's stubs omit SignalInstance.__getitem__, which picks an overload
            completer.activated[QModelIndex].connect(self._prompt_chosen)  # type: ignore[index]
            self.edit.completer = completer
        if prompts != self._prompts or completer.model() is None:
            self._prompts = list(prompts)
            completer.setModel(prompt_model(self._prompts, completer))
            fit_popup(completer, self._prompts)
        return completer

    def _prompt_chosen(self, index: QModelIndex) -> None:
        from app.ui.mcp_picker import ENTRY_ROLE

        position = index.data(ENTRY_ROLE)
        if isinstance(position, int) and 0 <= position < len(self._prompts):
            self.choose_prompt(self._prompts[position])

    def choose_prompt(self, entry: PromptEntry) -> PromptForm:
        """Clears the "/" text and shows the prompt's form (its arguments, if any); a prompt
        without arguments is fetched at once. Nothing is sent."""
        from app.ui.mcp_picker import PromptForm

        self.close_prompt_form()
        self.edit.clear()
        form = PromptForm(entry)
        form.submitted.connect(lambda values: self._fill(form, values))
        form.cancelled.connect(self.close_prompt_form)
        self.prompt_form = form
        self._layout.insertWidget(self._layout.indexOf(self._chips_box) + 1, form)
        form.show()
        if entry.arguments:
            form.focus_first()
        else:
            self._fill(form, {})
        return form

    def close_prompt_form(self) -> None:
        form, self.prompt_form = self.prompt_form, None
        if form is not None:
            form.cancel.set()
            self._layout.removeWidget(form)
            form.deleteLater()
            self.edit.setFocus()

    def _fill(self, form: PromptForm, values: dict[str, str]) -> None:
        from app.core.mcp.catalog import check_arguments
        from tools.spec import ToolError

        try:
            check_arguments(form.entry, values)
        except ToolError as exc:
            form.show_error(str(exc))
            return
        form.set_busy(True)
        self._spawn(self._get_prompt(form, values))

    async def _get_prompt(self, form: PromptForm, values: dict[str, str]) -> None:
        from app.core.mcp.catalog import fill_prompt
        from app.ui.off_gui import off_gui
        from tools.spec import ToolCancelled, ToolError

        manager = self.mcp_manager()
        try:
            if manager is None:
                raise ToolError("the MCP servers were stopped")
            text = await off_gui(fill_prompt, manager, form.entry, values, form.cancel)
        except ToolCancelled:
            return
        except Exception as exc:
            if not isinstance(exc, ToolError):
                log.warning("getting MCP prompt %s failed", form.entry.command, exc_info=exc)
            if form is self.prompt_form:
                form.set_busy(False)
                form.show_error(str(exc) if isinstance(exc, ToolError) else "getting it failed")
            return
        if form is not self.prompt_form:
            return  # cancelled or replaced meanwhile
        self.close_prompt_form()
        current = self.text().strip()
        self.set_text(f"{text}\n\n{current}" if current else text)
        self.edit.setFocus()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Waits for the reads and prompt requests under way (for tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _is_plain_paste(event: QKeyEvent) -> bool:
    """Ctrl+Shift+V: the clipboard's text into the box, whatever its size."""
    wanted = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    return event.key() == Qt.Key.Key_V and event.modifiers() == wanted


def pasted_image(source: QMimeData) -> QImage | None:
    """The image a paste carries: Qt's own image data, else PNG, JPEG, WebP or GIF bytes."""
    if source.hasImage():
        data = source.imageData()
        image = data.toImage() if isinstance(data, QPixmap) else data
        if isinstance(image, QImage) and not image.isNull():
            return image
    for kind in IMAGE_FORMATS:
        if source.hasFormat(kind):
            image = QImage.fromData(source.data(kind))
            if not image.isNull():
                return image
    return None


def png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QImageWriter(buffer, QByteArray(b"png"))
    if not writer.write(image):
        raise OSError(f"the image could not be converted to PNG ({writer.errorString()})")
    return bytes(buffer.data().data())


def _hide_popup(completer: QCompleter) -> None:
    popup = completer.popup()
    if popup is not None:
        popup.hide()


def attach_filter() -> str:
    """The file dialog's choices: everything, documents and images (each kind), any file."""
    from app.core.documents import SUPPORTED

    kinds = [*SUPPORTED, ("Images", ("*.png", "*.jpg", "*.jpeg", "*.gif", "*.webp"))]
    every = " ".join(p for _, patterns in kinds for p in patterns)
    each = [f"{name} ({' '.join(patterns)})" for name, patterns in kinds]
    return ";;".join([f"Documents and images ({every})", *each, "All files (*)"])
