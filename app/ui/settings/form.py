"""Settings forms built from a pydantic model (as napari builds its preferences).

`SettingsForm(Model, value)` shows one input per plain field, in the model's order:

| field type                          | input                                         |
|-------------------------------------|-----------------------------------------------|
| `bool`                              | a check box titled with the field's title     |
| `Literal[...]` / an `Enum`          | a combo box; labels from `{"labels": {...}}`  |
| `int` / `float` (`ge`/`le` bounds)  | a spin box within the bounds                  |
| `str` (`str | None`: empty is None) | a line edit; `{"path": "file"/"folder"}` adds Browse… |
| `str` with `{"multiline": True}`    | a plain-text editor spanning the form         |
| `list[str]`                         | a plain-text editor, one entry per line       |

Labels and help come from `Field(title=..., description=...)`; `json_schema_extra` may add
`"ui": False` (not shown), `"labels"`/`"help"` (a choice's option names and explanations),
`"suffix"`, `"step"`, `"zero_label"` (what 0 means), `"placeholder"`. Every change is
validated by the model itself (with `app.core.settings.STRICT`, so out-of-range numbers are
errors) and an error is shown in plain words under its field. `FormPage` is a settings page
made of such forms, each editing one part of `Settings`.
"""

from __future__ import annotations

import enum
import functools
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, Union, get_args, get_origin, overload

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.core.runtime import Runtime
from app.core.settings import STRICT, Settings
from app.ui.settings.page import Patch, SettingsPage
from app.ui.settings.widgets import (
    ROW_HEIGHT,
    field_row,
    form_label,
    form_layout,
    muted_label,
    role_label,
    set_invalid,
)

M = TypeVar("M", bound=BaseModel)
#: The input widget an `Editor` holds.
W_co = TypeVar("W_co", bound=QWidget, covariant=True)
QW = TypeVar("QW", bound=QWidget)
LABEL_WIDTH = 130  # as the custom pages' forms
INT_MAX = 2**31 - 1


class FormInvalid(ValueError):
    """`SettingsForm.value()` on a form whose values the model refuses."""


# ---- what a field is ---------------------------------------------------------------------


def extra(info: FieldInfo) -> dict[str, Any]:
    """The field's `json_schema_extra` as a dict (empty when not a dict)."""
    value = info.json_schema_extra
    return dict(value) if isinstance(value, dict) else {}


def shown(info: FieldInfo) -> bool:
    return extra(info).get("ui", True) is not False


def title(name: str, info: FieldInfo) -> str:
    return info.title or name.replace("_", " ").capitalize()


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _bounds(info: FieldInfo) -> tuple[float | None, float | None]:
    low: float | None = None
    high: float | None = None
    for item in info.metadata:
        low = getattr(item, "ge", low)
        high = getattr(item, "le", high)
        if getattr(item, "gt", None) is not None:
            low = item.gt + 1
        if getattr(item, "lt", None) is not None:
            high = item.lt - 1
    return low, high


def option_label(value: Any) -> str:
    raw = value.name if isinstance(value, enum.Enum) else str(value)
    return raw.replace("_", " ").capitalize()


def plain_error(error: Any) -> str:
    """One pydantic error as a short sentence for the user."""
    kind: str = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    if kind in ("greater_than_equal", "greater_than"):
        return f"Use {_number(ctx.get('ge', ctx.get('gt')))} or more."
    if kind in ("less_than_equal", "less_than"):
        return f"Use {_number(ctx.get('le', ctx.get('lt')))} or less."
    if kind == "value_error":
        return str(ctx.get("error") or error["msg"].removeprefix("Value error, "))
    if kind.startswith("int_"):
        return "Enter a whole number."
    if kind.startswith("float_"):
        return "Enter a number."
    if kind in ("literal_error", "enum"):
        return "Choose one of the options."
    if kind == "string_too_long":
        return f"Use at most {_number(ctx.get('max_length'))} characters."
    if kind in ("string_too_short", "missing"):
        return "This cannot be empty."
    return str(error["msg"]).rstrip(".") + "."


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


# ---- one input per field -------------------------------------------------------------------


class Editor(Generic[W_co]):
    """One field's input: `widget` takes the value, `row` is what the form shows."""

    widget: W_co
    row: QWidget
    spans = False  # the row spans the form (its label sits above it)

    def get(self) -> Any:
        raise NotImplementedError

    def set(self, value: Any) -> None:
        raise NotImplementedError

    def on_change(self, callback: Callable[[], None]) -> None:
        raise NotImplementedError

    def block(self, blocked: bool) -> None:
        self.widget.blockSignals(blocked)


class CheckEditor(Editor[QCheckBox]):
    def __init__(self, text: str) -> None:
        self.widget = self.row = QCheckBox(text)
        self.widget.setMinimumHeight(ROW_HEIGHT)

    def get(self) -> bool:
        return self.widget.isChecked()

    def set(self, value: Any) -> None:
        self.widget.setChecked(bool(value))

    def on_change(self, callback: Callable[[], None]) -> None:
        self.widget.toggled.connect(lambda _: callback())


class ChoiceEditor(Editor[QComboBox]):
    def __init__(self, options: Sequence[Any], labels: dict[Any, str]) -> None:
        combo = QComboBox()
        for value in options:
            key = value.value if isinstance(value, enum.Enum) else value
            combo.addItem(labels.get(key, option_label(value)), value)
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        combo.setMinimumWidth(240)  # its natural width (the longest option) when there is room
        self.widget = combo
        self.row = _natural(combo)

    def get(self) -> Any:
        return self.widget.currentData()

    def set(self, value: Any) -> None:
        self.widget.setCurrentIndex(max(0, self.widget.findData(value)))

    def on_change(self, callback: Callable[[], None]) -> None:
        self.widget.currentIndexChanged.connect(lambda _: callback())


class NumberEditor(Editor[QSpinBox | QDoubleSpinBox]):
    def __init__(self, kind: type, low: float | None, high: float | None, hints: dict[str, Any]):
        spin: QSpinBox | QDoubleSpinBox
        if kind is float:
            spin = QDoubleSpinBox()
            spin.setRange(-1e12 if low is None else low, 1e12 if high is None else high)
        else:
            spin = QSpinBox()
            spin.setRange(
                -INT_MAX if low is None else int(low), INT_MAX if high is None else int(high)
            )
            spin.setGroupSeparatorShown(spin.maximum() >= 10_000)
        if "step" in hints:
            spin.setSingleStep(hints["step"])
        spin.setSuffix(hints.get("suffix", ""))
        if "zero_label" in hints and spin.minimum() == 0:
            spin.setSpecialValueText(hints["zero_label"])
        spin.setMinimumWidth(130)
        spin.setKeyboardTracking(True)
        spin.lineEdit().setTextMargins(4, 0, 0, 0)
        self.kind = kind
        self.widget = spin
        self.row = _natural(spin)

    def get(self) -> Any:
        return self.kind(self.widget.value())

    def set(self, value: Any) -> None:
        self.widget.setValue(value)

    def on_change(self, callback: Callable[[], None]) -> None:
        self.widget.valueChanged.connect(lambda _: callback())


class LineEditor(Editor[QLineEdit]):
    def __init__(self, optional: bool, hints: dict[str, Any]) -> None:
        edit = QLineEdit()
        edit.setPlaceholderText(hints.get("placeholder", ""))
        self.optional = optional
        self.widget = edit
        self.path = hints.get("path")
        if self.path in ("file", "folder"):
            self.browse = QPushButton("Browse…")
            self.browse.setAutoDefault(False)
            self.browse.clicked.connect(self._browse)
            self.row = field_row(edit, self.browse)
        else:
            self.row = edit

    def _browse(self) -> None:
        edit = self.widget
        if self.path == "folder":
            chosen = QFileDialog.getExistingDirectory(edit, "Choose a folder", edit.text())
        else:
            chosen, _ = QFileDialog.getOpenFileName(edit, "Choose a program", edit.text())
        if chosen:
            edit.setText(chosen)

    def get(self) -> str | None:
        text = self.widget.text()
        return None if self.optional and not text.strip() else text

    def set(self, value: Any) -> None:
        self.widget.setText("" if value is None else str(value))

    def on_change(self, callback: Callable[[], None]) -> None:
        self.widget.textChanged.connect(lambda _: callback())


class TextEditor(Editor[QPlainTextEdit]):
    """A multi-line text, or a list of strings one per line (`lines`)."""

    spans = True

    def __init__(self, optional: bool, lines: bool, hints: dict[str, Any]) -> None:
        edit = QPlainTextEdit()
        edit.setPlaceholderText(hints.get("placeholder", ""))
        edit.setMinimumHeight(120)
        edit.setTabChangesFocus(True)
        edit.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.optional, self.lines = optional, lines
        self.widget = self.row = edit

    def get(self) -> Any:
        text = self.widget.toPlainText()
        if self.lines:
            return [line.strip() for line in text.splitlines() if line.strip()]
        return None if self.optional and not text.strip() else text

    def set(self, value: Any) -> None:
        text = "\n".join(value) if self.lines else ("" if value is None else str(value))
        self.widget.setPlainText(text)

    def on_change(self, callback: Callable[[], None]) -> None:
        self.widget.textChanged.connect(callback)


def _natural(widget: QWidget) -> QWidget:
    """The input at its natural width, not stretched across the form."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(widget)
    row.addStretch(1)
    return box


def make_editor(name: str, info: FieldInfo) -> Editor[QWidget]:
    """The input for one field; TypeError for a type the form cannot edit."""
    hints = extra(info)
    annotation, optional = _unwrap_optional(info.annotation)
    origin = get_origin(annotation)
    if annotation is bool:
        return CheckEditor(title(name, info))
    if origin is Literal:
        return ChoiceEditor(get_args(annotation), hints.get("labels", {}))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return ChoiceEditor(list(annotation), hints.get("labels", {}))
    if annotation in (int, float):
        return NumberEditor(annotation, *_bounds(info), hints)
    if annotation is str:
        if hints.get("multiline"):
            return TextEditor(optional, lines=False, hints=hints)
        return LineEditor(optional, hints)
    if origin is list and get_args(annotation) == (str,):
        return TextEditor(optional=False, lines=True, hints=hints)
    raise TypeError(f"the settings form has no input for {name}: {info.annotation!r}")


# ---- the form ------------------------------------------------------------------------------


@dataclass
class _Row:
    editor: Editor[QWidget]
    help: QLabel | None
    error: QLabel
    options_help: dict[Any, str]
    description: str


class SettingsForm(QWidget, Generic[M]):
    """Inputs for the plain fields of `model`, starting from `value`.

    `changed` fires on every edit (after the form validated it); `value()` is the validated
    model, `problem()` the first error in plain words, `changes()` what differs from the
    last `load()`."""

    changed = Signal()

    def __init__(
        self,
        model: type[M],
        value: M,
        *,
        fields: Sequence[str] | None = None,
        label_width: int = LABEL_WIDTH,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.model = model
        infos = model.model_fields
        names = list(fields) if fields is not None else [n for n in infos if shown(infos[n])]
        unknown = [n for n in names if n not in infos]
        if unknown:
            raise KeyError(f"{model.__name__} has no field {', '.join(unknown)}")
        self.names: tuple[str, ...] = tuple(names)
        self._label_width = label_width
        self._rows: dict[str, _Row] = {}
        self._errors: dict[str, str] = {}
        self.layout_form = form_layout(self, margins=(0, 0, 0, 0), spacing=(16, 12))
        for name in self.names:
            self._add(name, infos[name])
        self.load(value)

    # -- building --

    def _add(self, name: str, info: FieldInfo) -> None:
        editor = make_editor(name, info)
        editor.widget.setObjectName(f"field_{name}")
        hints = extra(info)
        options_help = dict(hints.get("help", {}))
        description = info.description or ""
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        label_text = "" if isinstance(editor, CheckEditor) else title(name, info)
        if editor.spans:
            column.addWidget(role_label(label_text, "section"))
        column.addWidget(editor.row, 1 if editor.spans else 0)
        help_label = None
        if description or options_help:
            help_label = muted_label(description)
            help_label.setTextFormat(Qt.TextFormat.PlainText)
            if isinstance(editor, CheckEditor):
                help_label.setContentsMargins(_check_indent(editor.widget), 0, 0, 0)
            column.addWidget(help_label)
        error = role_label("", "error", wrap=True)
        error.setTextFormat(Qt.TextFormat.PlainText)
        error.setObjectName(f"error_{name}")
        error.hide()
        column.addWidget(error)
        if editor.spans:
            self.layout_form.addRow(box)
        else:
            label = form_label(label_text, self._label_width)
            label.setFixedHeight(ROW_HEIGHT)
            label.setWordWrap(False)
            self.layout_form.addRow(label, box)
        row = _Row(editor, help_label, error, options_help, description)
        self._rows[name] = row
        editor.on_change(functools.partial(self._edited, name))

    def add_row(self, label: str, widget: QWidget) -> QLabel:
        """A custom row (a status, a button) in the form's columns; returns its label."""
        caption = form_label(label, self._label_width)
        self.layout_form.addRow(caption, widget)
        return caption

    # -- values --

    @overload
    def editor(self, name: str) -> QWidget: ...
    @overload
    def editor(self, name: str, kind: type[QW]) -> QW: ...
    def editor(self, name: str, kind: type[QWidget] = QWidget) -> QWidget:
        """The input widget of `name` (QCheckBox, QComboBox, QSpinBox, QLineEdit…); with
        `kind`, checked to be one (TypeError otherwise)."""
        widget = self._rows[name].editor.widget
        if not isinstance(widget, kind):
            raise TypeError(
                f"the input of {name} is a {type(widget).__name__}, not {kind.__name__}"
            )
        return widget

    def error_label(self, name: str) -> QLabel:
        return self._rows[name].error

    @property
    def saved(self) -> M:
        """The value of the last `load()` (the baseline `changes()` compares with)."""
        return self._saved

    def raw(self) -> dict[str, Any]:
        """What the inputs hold, not validated."""
        return {name: row.editor.get() for name, row in self._rows.items()}

    def load(self, value: M) -> None:
        """Show `value` and make it the baseline (no `changed` signal)."""
        self._saved = value
        for name, row in self._rows.items():
            row.editor.block(True)
            try:
                row.editor.set(getattr(value, name))
            finally:
                row.editor.block(False)
            self._show_help(name)
        self._validate()

    def value(self) -> M:
        """The model with the form's values, validated; FormInvalid if it is refused."""
        result = self._validate()
        if result is None:
            raise FormInvalid(self.problem() or "The form has a problem.")
        return result

    def problem(self) -> str | None:
        """The first field's error as "Title: what is wrong", or None."""
        self._validate()
        for name in self.names:
            if name in self._errors:
                return f"{title(name, self.model.model_fields[name])}: {self._errors[name]}"
        return self._errors.get("", None)

    def has_changes(self) -> bool:
        saved = self._saved
        return any(value != getattr(saved, name) for name, value in self.raw().items())

    def changes(self) -> dict[str, Any]:
        """Validated values that differ from the baseline (empty when the form is invalid)."""
        result = self._validate()
        if result is None:
            return {}
        return {
            name: getattr(result, name)
            for name in self.names
            if getattr(result, name) != getattr(self._saved, name)
        }

    # -- validation --

    def _edited(self, name: str) -> None:
        self._show_help(name)
        self._validate()
        self.changed.emit()

    def _validate(self) -> M | None:
        data = self._saved.model_dump()
        data.update(self.raw())
        try:
            result = self.model.model_validate(data, context=STRICT)
        except ValidationError as exc:
            self._set_errors(_by_field(exc, self.names))
            return None
        self._set_errors({})
        return result

    def _set_errors(self, errors: dict[str, str]) -> None:
        self._errors = errors
        for name, row in self._rows.items():
            text = errors.get(name, "")
            row.error.setText(text)
            row.error.setVisible(bool(text))
            set_invalid(row.editor.widget, bool(text))

    def _show_help(self, name: str) -> None:
        row = self._rows[name]
        if row.help is None:
            return
        option = row.options_help.get(row.editor.get(), "")
        row.help.setText(" ".join(t for t in (option, row.description) if t))


def _by_field(exc: ValidationError, names: Sequence[str]) -> dict[str, str]:
    """The first error of each shown field; others (not shown) under ""."""
    found: dict[str, str] = {}
    for error in exc.errors():
        loc = error["loc"]
        key = str(loc[0]) if loc and loc[0] in names else ""
        found.setdefault(key, plain_error(error))
    return found


def _check_indent(box: QWidget) -> int:
    """How far a check box's text starts from its left edge (help lines up with it)."""
    style = box.style()
    width = style.pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth, None, box)
    spacing = style.pixelMetric(QStyle.PixelMetric.PM_CheckBoxLabelSpacing, None, box)
    return width + spacing


# ---- pages made of forms -------------------------------------------------------------------


@dataclass
class Section:
    """A form and the part of `Settings` it edits (`part(settings)` is that sub-model)."""

    form: SettingsForm[Any]
    part: Callable[[Settings], BaseModel]


class FormPage(SettingsPage):
    """A settings page whose settings are forms: problems, changes and the patch come from
    them. Subclasses call `add_form` while building."""

    reports_edits = True

    def __init__(self, runtime: Runtime, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runtime = runtime
        self.sections: list[Section] = []

    def add_form(
        self,
        layout: QVBoxLayout,
        group: str | QGroupBox | None,
        part: Callable[[Settings], M],
        fields: Sequence[str] | None = None,
    ) -> SettingsForm[M]:
        """A form for `fields` of `part(settings)` (all shown fields when None), added to
        `layout` in a new group box titled `group`, or into the group box `group` made
        earlier, or bare (None)."""
        value = part(self.runtime.settings)
        form: SettingsForm[M] = SettingsForm(type(value), value, fields=fields)
        if group is None:
            layout.addWidget(form)
        elif isinstance(group, QGroupBox):
            inner_layout = group.layout()
            if inner_layout is None:  # a group box made without a layout gets a column
                inner_layout = QVBoxLayout(group)
            inner_layout.addWidget(form)
        else:
            box = QGroupBox(group)
            inner = QVBoxLayout(box)
            inner.setContentsMargins(14, 16, 14, 12)
            inner.setSpacing(12)
            inner.addWidget(form)
            layout.addWidget(box)
        form.changed.connect(self.edited)
        self.sections.append(Section(form, part))
        return form

    def problem(self) -> str | None:
        for section in self.sections:
            if problem := section.form.problem():
                return problem
        return None

    def has_changes(self) -> bool | None:
        return any(section.form.has_changes() for section in self.sections)

    def patch(self) -> Patch:
        edits = [(section.part, section.form.changes()) for section in self.sections]

        def apply(settings: Settings) -> None:
            for part, changes in edits:
                target = part(settings)
                for name, value in changes.items():
                    setattr(target, name, value)

        return apply

    def mark_saved(self, settings: Settings) -> None:
        for section in self.sections:
            section.form.load(section.part(settings))
