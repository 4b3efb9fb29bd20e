"""The buttons of a tool card waiting for approval: real, focusable push buttons.

Only pending cards have one, so a long conversation holds no widgets per message.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from app.core.approval import Decision


class ApprovalBar(QWidget):
    decided = Signal(str)  # a Decision value

    def __init__(self, tool: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("approvalBar")
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.buttons: dict[Decision, QPushButton] = {}
        for decision, label, tip in (
            (Decision.ALLOW_ONCE, "Allow once", f"Run {tool} this time"),
            (Decision.ALWAYS_ALLOW, "Always allow this tool", f"Run {tool} without asking"),
            (Decision.DENY, "Deny", f"Do not run {tool}; the model is told you declined"),
        ):
            button = QPushButton(label, self)
            button.setObjectName(f"approval_{decision.value}")
            button.setToolTip(tip)
            button.setAccessibleName(f"{label}: {tool}")
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            button.setAutoDefault(True)  # Enter activates the focused button
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            if decision == Decision.ALLOW_ONCE:
                button.setProperty("accent", True)
            button.clicked.connect(lambda _=False, d=decision: self.decided.emit(d.value))
            layout.addWidget(button)
            self.buttons[decision] = button
        layout.addStretch(1)

    def first(self) -> QPushButton:
        return self.buttons[Decision.ALLOW_ONCE]

    def last(self) -> QPushButton:
        return self.buttons[Decision.DENY]
