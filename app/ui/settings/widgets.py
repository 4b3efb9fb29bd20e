"""Small widgets and helpers the settings pages share."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

ROW_HEIGHT = 32  # an input's height under the theme: labels match it to line up


def repolish(widget: QWidget) -> None:
    """Apply the style sheet again after a property it matches on changed."""
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def set_role(label: QLabel, role: str) -> None:
    """Switch a label's `role` style property (muted/ok/error) and re-polish it."""
    label.setProperty("role", role)
    repolish(label)


def set_invalid(widget: QWidget, invalid: bool) -> None:
    if bool(widget.property("invalid")) == invalid:
        return
    widget.setProperty("invalid", invalid)
    repolish(widget)


def role_label(text: str, role: str, *, wrap: bool = False) -> QLabel:
    """A label styled by its `role` (heading, section, muted, error…)."""
    label = QLabel(text)
    label.setProperty("role", role)
    label.setWordWrap(wrap)
    return label


def muted_label(text: str, *, wrap: bool = True) -> QLabel:
    return role_label(text, "muted", wrap=wrap)


def form_label(text: str, width: int | None = None) -> QLabel:
    """A form label as tall as the inputs, so its text is centred on the field."""
    label = QLabel(text)
    label.setMinimumHeight(ROW_HEIGHT)
    label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if width is not None:
        label.setMinimumWidth(width)
    return label


def form_layout(
    parent: QWidget, margins: tuple[int, int, int, int], spacing: tuple[int, int]
) -> QFormLayout:
    """A form with right-aligned labels; `spacing` is (horizontal, vertical)."""
    form = QFormLayout(parent)
    form.setContentsMargins(*margins)
    form.setHorizontalSpacing(spacing[0])
    form.setVerticalSpacing(spacing[1])
    form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return form


def field_row(*widgets: QWidget) -> QWidget:
    """The first widget stretches; the others (buttons) keep their width."""
    box = QWidget()
    layout = QHBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(8)
    for i, w in enumerate(widgets):
        layout.addWidget(w, 1 if i == 0 else 0)
    return box


def natural_width(widget: QWidget) -> QWidget:
    """Keep a field at its natural width instead of stretching across the form."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(widget)
    row.addStretch(1)
    widget.setMinimumWidth(240)
    return box


def plural(count: int, noun: str) -> str:
    """`1 model`, `3 models`."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def window_heading(title: str, button: QPushButton) -> tuple[QHBoxLayout, QLabel]:
    """The top of a tool window (Reminders, Tasks): a heading over a muted line (returned,
    to fill in later), and the window's main button on the right."""
    head = QHBoxLayout()
    titles = QVBoxLayout()
    titles.setSpacing(2)
    titles.addWidget(role_label(title, "heading"))
    subtitle = muted_label("", wrap=False)
    titles.addWidget(subtitle)
    head.addLayout(titles, 1)
    head.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
    return head, subtitle
