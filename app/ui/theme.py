"""Light and dark themes: Fusion, a calm neutral palette with one accent, and a small stylesheet.

`apply_theme(app, "system")` follows the OS colour scheme (Qt ≥ 6.5 reports it through
`QStyleHints.colorScheme()`) and keeps following it when it changes. Setting the palette
and stylesheet on the QApplication restyles every open window at once.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.core.settings_file import ThemeMode

Effective = Literal["light", "dark"]


@dataclass(frozen=True)
class Colors:
    window: str
    sidebar: str
    surface: str  # inputs, lists, text areas
    alt_surface: str  # alternate rows, hovered items
    text: str
    muted: str  # secondary text, placeholders
    disabled: str
    border: str
    border_strong: str
    button: str
    button_hover: str
    accent: str
    accent_hover: str
    accent_text: str
    selection_soft: str  # selected item background in lists when an accent block is too loud
    success: str
    error: str
    tooltip: str


LIGHT = Colors(
    window="#f4f5f7",
    sidebar="#eaecef",
    surface="#ffffff",
    alt_surface="#f7f8fa",
    text="#1d2127",
    muted="#5f6773",
    disabled="#a3a9b2",
    border="#d5d9df",
    border_strong="#b9bfc8",
    button="#ffffff",
    button_hover="#eef0f3",
    accent="#2f6fdb",
    accent_hover="#255fc2",
    accent_text="#ffffff",
    selection_soft="#dde8fb",
    success="#1e7f45",
    error="#c4322b",
    tooltip="#2b2f36",
)

DARK = Colors(
    window="#1e2024",
    sidebar="#191b1e",
    surface="#26292e",
    alt_surface="#2b2e34",
    text="#e7e9ec",
    muted="#9aa1ab",
    disabled="#5f656e",
    border="#3a3e45",
    border_strong="#4b5059",
    button="#2d3036",
    button_hover="#363a41",
    accent="#3574e8",
    accent_hover="#4a86f0",
    accent_text="#ffffff",
    selection_soft="#2c3d5c",
    success="#4cc27a",
    error="#ff6b63",
    tooltip="#3a3e45",
)


def colors(effective: Effective) -> Colors:
    return DARK if effective == "dark" else LIGHT


def system_scheme() -> Effective:
    """The OS colour scheme; "light" when the platform does not say."""
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else None
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def build_palette(c: Colors) -> QPalette:
    pal = QPalette()
    R = QPalette.ColorRole
    roles = {
        R.Window: c.window,
        R.WindowText: c.text,
        R.Base: c.surface,
        R.AlternateBase: c.alt_surface,
        R.ToolTipBase: c.tooltip,
        R.ToolTipText: "#f4f5f7",
        R.PlaceholderText: c.muted,
        R.Text: c.text,
        R.Button: c.button,
        R.ButtonText: c.text,
        R.BrightText: c.error,
        R.Light: c.surface,
        R.Midlight: c.alt_surface,
        R.Mid: c.border,
        R.Dark: c.border_strong,
        R.Shadow: "#000000",
        R.Highlight: c.accent,
        R.HighlightedText: c.accent_text,
        R.Link: c.accent,
        R.LinkVisited: c.accent_hover,
        R.Accent: c.accent,
    }
    for role, value in roles.items():
        pal.setColor(QPalette.ColorGroup.All, role, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for role in (R.WindowText, R.Text, R.ButtonText, R.PlaceholderText):
        pal.setColor(disabled, role, QColor(c.disabled))
    pal.setColor(disabled, R.Base, QColor(c.window))
    pal.setColor(disabled, R.Button, QColor(c.window))
    pal.setColor(disabled, R.Highlight, QColor(c.border_strong))
    return pal


# ---- glyphs for the stylesheet --------------------------------------------------------

_SVGS = {
    "down": '<path d="M3 4.5l3 3 3-3" {stroke}/>',
    "up": '<path d="M3 7.5l3-3 3 3" {stroke}/>',
    "check": '<path d="M2.6 6.3l2.2 2.2 4.6-4.8" {stroke}/>',
    "partial": '<path d="M3 6h6" {stroke}/>',
}
_STROKE = (
    'fill="none" stroke="{color}" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round"'
)
_glyph_dir: Path | None = None


def _glyph(name: str, color: str) -> str:
    """Path of a small SVG glyph in `color`, written once per process.

    Stylesheets take images only by URL, and a styled combo box or check box loses the
    style's own arrows and ticks, so we draw our own."""
    global _glyph_dir
    if _glyph_dir is None:
        _glyph_dir = Path(tempfile.mkdtemp(prefix="deskhand-theme-"))
        atexit.register(shutil.rmtree, _glyph_dir, True)
    path = _glyph_dir / f"{name}-{color.lstrip('#')}.svg"
    if not path.exists():
        body = _SVGS[name].format(stroke=_STROKE.format(color=color))
        path.write_text(
            '<svg xmlns="http://www.w3.org/2000/svg" width="12" height="12" '
            f'viewBox="0 0 12 12">{body}</svg>',
            encoding="utf-8",
        )
    return path.as_posix()


def build_stylesheet(c: Colors) -> str:
    """Rounded inputs and buttons, comfortable padding; colours come from `c`."""
    down, down_off = _glyph("down", c.muted), _glyph("down", c.disabled)
    up, up_off = _glyph("up", c.muted), _glyph("up", c.disabled)
    check, partial = _glyph("check", c.accent_text), _glyph("partial", c.accent_text)
    return f"""
QToolTip {{
    color: #f4f5f7; background: {c.tooltip}; border: none; padding: 5px 8px;
    border-radius: 6px;
}}
QLineEdit, QPlainTextEdit, QTextEdit, QComboBox, QSpinBox, QDoubleSpinBox {{
    background: {c.surface}; color: {c.text};
    border: 1px solid {c.border}; border-radius: 6px;
    padding: 5px 8px; min-height: 20px;
    selection-background-color: {c.accent}; selection-color: {c.accent_text};
}}
QLineEdit:hover, QComboBox:hover, QSpinBox:hover {{ border-color: {c.border_strong}; }}
QLineEdit:focus, QPlainTextEdit:focus, QTextEdit:focus, QComboBox:focus, QSpinBox:focus {{
    border: 1px solid {c.accent};
}}
QLineEdit[invalid="true"] {{ border: 1px solid {c.error}; }}
QLineEdit:disabled, QComboBox:disabled, QSpinBox:disabled {{
    background: {c.window}; color: {c.disabled};
}}
QComboBox {{ padding-right: 26px; }}
QComboBox[compact="true"] {{ padding: 2px 26px 2px 8px; min-height: 20px; }}
QComboBox::drop-down {{
    subcontrol-origin: padding; subcontrol-position: center right;
    width: 26px; border: none;
}}
QComboBox::down-arrow {{ image: url({down}); width: 12px; height: 12px; }}
QComboBox::down-arrow:disabled {{ image: url({down_off}); }}
QComboBox QAbstractItemView {{
    background: {c.surface}; border: 1px solid {c.border}; padding: 4px;
    selection-background-color: {c.selection_soft}; selection-color: {c.text};
    outline: 0;
}}
QSpinBox {{ padding-right: 24px; }}
QSpinBox::up-button, QSpinBox::down-button {{
    subcontrol-origin: border; width: 22px; border: none; background: transparent;
}}
QSpinBox::up-button {{ subcontrol-position: top right; margin-top: 3px; }}
QSpinBox::down-button {{ subcontrol-position: bottom right; margin-bottom: 3px; }}
QSpinBox::up-arrow {{ image: url({up}); width: 10px; height: 10px; }}
QSpinBox::down-arrow {{ image: url({down}); width: 10px; height: 10px; }}
QSpinBox::up-arrow:disabled, QSpinBox::up-arrow:off {{ image: url({up_off}); }}
QSpinBox::down-arrow:disabled, QSpinBox::down-arrow:off {{ image: url({down_off}); }}
QPushButton, QToolButton {{
    background: {c.button}; color: {c.text};
    border: 1px solid {c.border}; border-radius: 6px; padding: 5px 14px;
    min-height: 20px;
}}
QToolButton {{ padding: 5px 8px; }}
QPushButton:hover, QToolButton:hover {{
    background: {c.button_hover}; border-color: {c.border_strong};
}}
QPushButton:pressed, QToolButton:pressed {{ background: {c.border}; }}
QPushButton:disabled, QToolButton:disabled {{
    color: {c.disabled}; background: {c.window}; border-color: {c.border};
}}
QPushButton[accent="true"], QPushButton#primaryButton {{
    background: {c.accent}; color: {c.accent_text}; border-color: {c.accent};
    font-weight: 600;
}}
QPushButton[accent="true"]:hover, QPushButton#primaryButton:hover {{
    background: {c.accent_hover}; border-color: {c.accent_hover};
}}
QPushButton[accent="true"]:disabled, QPushButton#primaryButton:disabled {{
    background: {c.border}; border-color: {c.border}; color: {c.disabled};
}}
QPushButton[hasMenu="true"] {{ padding-right: 28px; }}
QPushButton::menu-indicator {{
    image: url({down}); subcontrol-origin: padding; subcontrol-position: center right;
    width: 12px; height: 12px; right: 10px;
}}
QPushButton::menu-indicator:disabled {{ image: url({down_off}); }}
QCheckBox {{ spacing: 8px; }}
QCheckBox::indicator, QTreeView::indicator, QListView::indicator {{
    width: 14px; height: 14px; border: 1px solid {c.border_strong}; border-radius: 4px;
    background: {c.surface};
}}
QCheckBox::indicator:hover, QTreeView::indicator:hover {{ border-color: {c.accent}; }}
QCheckBox::indicator:checked, QTreeView::indicator:checked, QListView::indicator:checked {{
    background: {c.accent}; border-color: {c.accent}; image: url({check});
}}
QCheckBox::indicator:indeterminate, QTreeView::indicator:indeterminate {{
    background: {c.accent}; border-color: {c.accent}; image: url({partial});
}}
QCheckBox::indicator:disabled, QTreeView::indicator:disabled {{
    background: {c.window}; border-color: {c.border};
}}
QCheckBox::indicator:checked:disabled, QTreeView::indicator:checked:disabled {{
    background: {c.border_strong}; border-color: {c.border_strong};
}}
QListView, QTreeView, QTableView {{
    background: {c.surface}; color: {c.text};
    border: 1px solid {c.border}; border-radius: 8px; outline: 0;
    alternate-background-color: {c.alt_surface};
}}
QListView::item, QTreeView::item {{ padding: 4px 2px; border-radius: 4px; }}
QListView::item:hover, QTreeView::item:hover {{ background: {c.alt_surface}; }}
QListView::item:selected, QTreeView::item:selected {{
    background: {c.selection_soft}; color: {c.text};
}}
QHeaderView::section {{
    background: {c.surface}; color: {c.muted}; border: none;
    border-bottom: 1px solid {c.border}; padding: 6px 8px; font-weight: 600;
}}
QHeaderView {{ background: transparent; border: none; }}
QScrollBar:vertical {{ background: transparent; width: 10px; margin: 2px; }}
QScrollBar::handle:vertical {{
    background: {c.border_strong}; border-radius: 3px; min-height: 24px;
}}
QScrollBar:horizontal {{ background: transparent; height: 10px; margin: 2px; }}
QScrollBar::handle:horizontal {{
    background: {c.border_strong}; border-radius: 3px; min-width: 24px;
}}
QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; }}
QScrollBar::add-page, QScrollBar::sub-page {{ background: transparent; }}
QGroupBox {{
    background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px;
    margin-top: 26px; padding: 8px 6px 6px 6px;
}}
QGroupBox::title {{
    subcontrol-origin: margin; subcontrol-position: top left; left: 2px; top: 0px;
    padding: 0 0 6px 0; color: {c.text}; font-weight: 600;
}}
QLabel[role="muted"] {{ color: {c.muted}; }}
QLabel[role="section"] {{ font-weight: 600; }}
QLabel[role="heading"] {{ font-size: 14pt; font-weight: 600; }}
QLabel[role="ok"] {{ color: {c.success}; }}
QLabel[role="error"] {{ color: {c.error}; }}
QFrame#settingsSide {{ background: {c.sidebar}; border-right: 1px solid {c.border}; }}
QListWidget#settingsNav {{ background: transparent; border: none; }}
QListWidget#settingsNav::item {{ padding: 0 12px; border-radius: 6px; color: {c.text}; }}
QListWidget#settingsNav::item:selected {{ background: {c.accent}; color: {c.accent_text}; }}
QListWidget#settingsNav::item:hover:!selected {{ background: {c.button_hover}; }}
"""


class _SchemeFollower(QObject):
    """Re-applies the theme when the OS scheme changes while the mode is "system"."""

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self.mode: ThemeMode = "system"
        self.effective: Effective | None = None
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self._on_scheme_changed)

    def _on_scheme_changed(self, *_: object) -> None:
        app = self.parent()
        if self.mode == "system" and isinstance(app, QApplication):
            apply_theme(app, "system")


def _follower(app: QApplication) -> _SchemeFollower:
    found = app.findChild(_SchemeFollower)
    return found if isinstance(found, _SchemeFollower) else _SchemeFollower(app)


def current_theme(app: QApplication) -> Effective | None:
    """The effective theme last applied with `apply_theme`, None before the first call."""
    found = app.findChild(_SchemeFollower)
    return found.effective if isinstance(found, _SchemeFollower) else None


def apply_theme(app: QApplication, mode: ThemeMode) -> Effective:
    """Style the whole application; returns the effective "light" or "dark"."""
    follower = _follower(app)
    follower.mode = mode
    effective: Effective = system_scheme() if mode == "system" else mode
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    c = colors(effective)
    if follower.effective != effective or app.styleSheet() == "":
        app.setPalette(build_palette(c))
        app.setStyleSheet(build_stylesheet(c) + window_stylesheet(c))
    follower.effective = effective
    return effective


def window_stylesheet(c: Colors) -> str:
    """The main window's own pieces: sidebar, header, composer, undo bar, setup card,
    starter prompts, the Reminders view (tabs, lists, the date-time field), and the tray's
    balloon where Qt draws it itself (a light-yellow box whatever the theme: its text and
    close button must stay dark on it)."""
    down, down_off = _glyph("down", c.muted), _glyph("down", c.disabled)
    return f"""
#sidebar {{ background: {c.sidebar}; }}
#sidebar QListView {{ background: transparent; border: none; }}
#sidebar QListView::item {{ padding: 7px 8px; margin: 1px 0; border-radius: 6px; }}
#sidebar QListView::item:selected {{ background: {c.selection_soft}; color: {c.text}; }}
#sidebarHint {{ color: {c.muted}; padding: 12px; }}
QPushButton#newChatButton {{ text-align: left; padding: 7px 12px; font-weight: 600; }}
QLineEdit#renameEditor {{ padding: 3px 6px; }}
#chatHeader {{ background: {c.surface}; border-bottom: 1px solid {c.border}; }}
#chatHeader QToolButton, #attachmentChip QToolButton {{
    background: transparent; border: 1px solid transparent; padding: 4px; min-height: 0;
}}
#chatHeader QToolButton:hover, #attachmentChip QToolButton:hover {{
    background: {c.button_hover}; border-color: {c.border};
}}
#attachmentChip QToolButton {{ padding: 1px; border-radius: 8px; }}
#starterHeading {{ font-size: 15pt; font-weight: 600; color: {c.text}; }}
#chatTitle {{ font-weight: 600; }}
#modelLabel {{ color: {c.muted}; }}
#composer {{ background: {c.window}; border-top: 1px solid {c.border}; }}
#composer QPlainTextEdit {{ border-radius: 10px; padding: 6px 10px; }}
QToolButton#attachButton {{ font-size: 15px; font-weight: 600; padding: 4px 10px; }}
QPushButton#sendButton {{
    background: {c.accent}; color: {c.accent_text}; border-color: {c.accent};
    font-weight: 600; padding: 6px 18px;
}}
QPushButton#sendButton:hover {{ background: {c.accent_hover}; border-color: {c.accent_hover}; }}
QPushButton#sendButton[stop="true"] {{
    background: {c.surface}; color: {c.error}; border-color: {c.error};
}}
#attachmentChip {{
    background: {c.surface}; border: 1px solid {c.border}; border-radius: 12px;
}}
#undoBar {{ background: {c.selection_soft}; border-top: 1px solid {c.border}; }}
QPushButton#linkButton {{
    background: transparent; border: none; color: {c.accent}; font-weight: 600;
}}
#setupCard {{
    background: {c.surface}; border: 1px solid {c.border}; border-radius: 12px;
}}
#setupTitle {{ font-size: 17px; font-weight: 600; }}
#setupStatus {{ color: {c.muted}; }}
QDateTimeEdit, QDateEdit, QTimeEdit {{
    background: {c.surface}; color: {c.text};
    border: 1px solid {c.border}; border-radius: 6px;
    padding: 5px 30px 5px 8px; min-height: 20px;
    selection-background-color: {c.accent}; selection-color: {c.accent_text};
}}
QDateTimeEdit:hover {{ border-color: {c.border_strong}; }}
QDateTimeEdit:focus {{ border: 1px solid {c.accent}; }}
QDateTimeEdit:disabled {{ background: {c.window}; color: {c.disabled}; }}
QDateTimeEdit::drop-down {{
    subcontrol-origin: padding; subcontrol-position: center right;
    width: 26px; border: none;
}}
QDateTimeEdit::down-arrow {{ image: url({down}); width: 12px; height: 12px; }}
QDateTimeEdit::down-arrow:disabled {{ image: url({down_off}); }}
QCalendarWidget QWidget#qt_calendar_navigationbar {{ background: {c.surface}; }}
QCalendarWidget QToolButton {{ border: none; background: transparent; font-weight: 600; }}
QCalendarWidget QToolButton:hover {{ background: {c.button_hover}; }}
QCalendarWidget QAbstractItemView {{
    border: none; border-radius: 0; selection-background-color: {c.accent};
    selection-color: {c.accent_text};
}}
#remindersView {{ background: {c.window}; }}
#newReminderForm {{
    background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px;
}}
QTabWidget#reminderTabs::pane {{ border: none; }}
QTabWidget#reminderTabs QTabBar {{ qproperty-drawBase: 0; }}
QTabWidget#reminderTabs QTabBar::tab {{
    background: transparent; color: {c.muted}; border: none;
    border-bottom: 2px solid transparent; padding: 6px 12px; margin: 0 4px 6px 0;
}}
QTabWidget#reminderTabs QTabBar::tab:hover:!selected {{ color: {c.text}; }}
QTabWidget#reminderTabs QTabBar::tab:selected {{
    color: {c.text}; border-bottom: 2px solid {c.accent};
}}
QLabel#reminderEmpty {{
    background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px; padding: 24px;
}}
#remindersView QPushButton:checked {{
    background: {c.selection_soft}; border-color: {c.accent};
}}
QTreeWidget#reminderList::item {{ padding: 5px 4px; border-radius: 0; }}
QTreeWidget#reminderList::item:selected {{ background: {c.selection_soft}; color: {c.text}; }}
QBalloonTip QLabel {{ color: #1d2127; }}
QBalloonTip QPushButton {{
    background: transparent; border: none; padding: 0; min-height: 0; border-radius: 0;
}}
"""
