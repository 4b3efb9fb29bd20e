"""A column of choices painted like compact combo boxes, with one real combo box made only
while the user chooses (the Tools page's Approval column).

A styled QComboBox per row costs 5–10 ms to build; a hundred rows made the Tools page slow.
Here each cell holds its choice as data (`CHOICE_ROLE`, the label as display text) and is
painted by the style as a combo box would be (`paint`). Opening a cell for editing — the
view's `edit` — makes one `ChoiceEditor` showing its list; picking commits the choice, and
the editor goes when the list closes (Esc leaves the choice as it was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRect,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (
    QAbstractItemDelegate,
    QAbstractItemView,
    QApplication,
    QComboBox,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionComboBox,
    QStyleOptionViewItem,
    QWidget,
)

#: The value of the choice a cell holds (its display text is the choice's label).
CHOICE_ROLE = Qt.ItemDataRole.UserRole + 10
ModelIndex = QModelIndex | QPersistentModelIndex
#: The (label, value) pairs a cell offers, in order.
Offered = Callable[[ModelIndex], Sequence[tuple[str, str]]]
#: The editor's accessible name for a cell.
Describe = Callable[[ModelIndex], str]
#: Room left and right of the box in its cell.
MARGINS = (4, 10)


class ChoiceEditor(QComboBox):
    """The one combo box that exists while a cell is being chosen. `finished` is emitted
    after its list closed (a pick, Esc, a click elsewhere) and the pick was applied."""

    finished = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setProperty("compact", True)
        self.view().setMinimumWidth(230)  # the list shows the choices in full
        self._after_list = QTimer(self)
        self._after_list.setSingleShot(True)
        # the list hides before the combo applies the pick: look once both are done
        self._after_list.timeout.connect(self.finished.emit)
        # the list's window, not `hidePopup`: Esc closes the window without calling it
        self.view().window().installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Hide and watched is self.view().window():
            self._after_list.start(0)
        return super().eventFilter(watched, event)


def template_combo(parent: QWidget) -> QComboBox:
    """A hidden combo box styled as the editor is: the painter asks the (style-sheet)
    style for this widget's look."""
    combo = QComboBox(parent)
    combo.setProperty("compact", True)
    combo.hide()
    return combo


class ChoiceDelegate(QStyledItemDelegate):
    """Paints a cell as a compact combo box showing its label, and makes its editor."""

    def __init__(self, view: QAbstractItemView, offered: Offered, describe: Describe) -> None:
        super().__init__(view)
        self._view = view
        self._offered = offered
        self._describe = describe
        self._template = template_combo(view)
        self.editor: ChoiceEditor | None = None

    # -- painting --

    def box_rect(self, cell: QRect) -> QRect:
        """Where the box sits in its cell: the combo's own height, centred."""
        height = min(self._template.sizeHint().height(), cell.height())
        left, right = MARGINS
        top = cell.top() + (cell.height() - height) // 2
        return QRect(cell.left() + left, top, cell.width() - left - right, height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex) -> None:
        if index.data(CHOICE_ROLE) is None:  # not a choice (a category row)
            super().paint(painter, option, index)
            return
        cell = QStyleOptionViewItem(option)
        self.initStyleOption(cell, index)
        cell.text = ""
        view_style = self._view.style()
        view_style.drawControl(QStyle.ControlElement.CE_ItemViewItem, cell, painter, self._view)
        self._paint_box(painter, option, index)

    def _paint_box(
        self, painter: QPainter, option: QStyleOptionViewItem, index: ModelIndex
    ) -> None:
        combo = self._template
        box = QStyleOptionComboBox()
        box.initFrom(combo)
        row_state = option.state
        state = QStyle.StateFlag.State_None
        editable = bool(index.flags() & Qt.ItemFlag.ItemIsEditable)
        if editable and row_state & QStyle.StateFlag.State_Enabled:
            state |= QStyle.StateFlag.State_Enabled
            if row_state & QStyle.StateFlag.State_MouseOver:
                state |= QStyle.StateFlag.State_MouseOver
            if self._is_current_row(index) and self._view.hasFocus():
                state |= QStyle.StateFlag.State_HasFocus  # where Enter opens the list
        box.state = state
        box.rect = self.box_rect(option.rect)
        box.currentText = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        box.editable = False
        box.frame = True
        style = combo.style()
        painter.save()
        style.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, box, painter, combo)
        style.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, box, painter, combo)
        painter.restore()

    def _is_current_row(self, index: ModelIndex) -> bool:
        current = self._view.currentIndex()
        return current.row() == index.row() and current.parent() == index.parent()

    # -- the editor --

    def createEditor(
        self, parent: QWidget, option: QStyleOptionViewItem, index: ModelIndex
    ) -> QWidget:
        editor = ChoiceEditor(parent)
        editor.setAccessibleName(self._describe(index))
        for label, value in self._offered(index):
            editor.addItem(label, value)
        editor.finished.connect(lambda: self._finish(editor))
        self.editor = editor
        return editor

    def setEditorData(self, editor: QWidget, index: ModelIndex) -> None:
        if isinstance(editor, QComboBox):
            editor.setCurrentIndex(max(0, editor.findData(index.data(CHOICE_ROLE))))

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index: ModelIndex) -> None:
        if not isinstance(editor, QComboBox) or editor.currentIndex() < 0:
            return
        value = editor.currentData()
        if value == index.data(CHOICE_ROLE):
            return  # nothing chosen: no change reported
        model.setData(index, value, CHOICE_ROLE)
        model.setData(index, editor.currentText(), Qt.ItemDataRole.DisplayRole)

    def updateEditorGeometry(
        self, editor: QWidget, option: QStyleOptionViewItem, index: ModelIndex
    ) -> None:
        editor.setGeometry(self.box_rect(option.rect))

    def _finish(self, editor: ChoiceEditor) -> None:
        if editor is not self.editor:
            return
        self.commitData.emit(editor)
        self.closeEditor.emit(editor, QAbstractItemDelegate.EndEditHint.NoHint)

    def destroyEditor(self, editor: QWidget, index: ModelIndex) -> None:
        if editor is self.editor:
            self.editor = None
        if _holds_focus(editor):
            self._view.setFocus()  # back on the row the choice was opened from
        super().destroyEditor(editor, index)


def _holds_focus(editor: QWidget) -> bool:
    """Whether the focus is nowhere, or in `editor` or its list (another window)."""
    widget = QApplication.focusWidget()
    while widget is not None:
        if widget is editor:
            return True
        widget = widget.parentWidget()
    return QApplication.focusWidget() is None
