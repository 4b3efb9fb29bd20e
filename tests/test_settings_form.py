"""The settings form generator: inputs built from a pydantic model, validated by the model,
errors shown in plain words next to their field (pytest-qt, offscreen)."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
)

from app.core.settings import (
    STRICT,
    BrowserSettings,
    ConversationSettings,
    GeneralSettings,
    MemorySettings,
    SecuritySettings,
    Settings,
    ShellSettings,
)
from app.ui.settings.form import FormInvalid, SettingsForm, plain_error, shown

pytestmark = pytest.mark.gui


class Sample(BaseModel):
    enabled: bool = Field(True, title="Turn it on", description="Explains the switch.")
    colour: Literal["red", "dark_blue"] = Field(
        "red", title="Colour", json_schema_extra={"labels": {"red": "Bright red"}}
    )
    count: int = Field(
        3,
        ge=0,
        le=12,
        title="Count",
        json_schema_extra={"zero_label": "None at all", "suffix": " items"},
    )
    program: str = Field("", title="Program", json_schema_extra={"path": "file"})
    notes: str | None = Field(None, title="Notes", json_schema_extra={"multiline": True})
    folders: list[str] = Field(default_factory=list, title="Folders")
    secret_knob: int = Field(1, json_schema_extra={"ui": False})

    @field_validator("count")
    @classmethod
    def _not_seven(cls, value: int) -> int:
        if value == 7:
            raise ValueError("Seven is unlucky: pick another number.")
        return value


@pytest.fixture
def form(qtbot: Any) -> SettingsForm[Sample]:
    form = SettingsForm(Sample, Sample())
    qtbot.addWidget(form)
    form.resize(600, 500)
    form.show()
    return form


def labels(form: SettingsForm[Any]) -> list[str]:
    return [label.text() for label in form.findChildren(QLabel) if label.text()]


def test_inputs_follow_the_field_types(form: SettingsForm[Sample]) -> None:
    assert form.names == ("enabled", "colour", "count", "program", "notes", "folders")
    check = form.editor("enabled")
    assert isinstance(check, QCheckBox) and check.text() == "Turn it on" and check.isChecked()
    combo = form.editor("colour")
    assert isinstance(combo, QComboBox)
    assert [combo.itemText(i) for i in range(combo.count())] == ["Bright red", "Dark blue"]
    assert [combo.itemData(i) for i in range(combo.count())] == ["red", "dark_blue"]
    spin = form.editor("count")
    assert isinstance(spin, QSpinBox)
    assert (spin.minimum(), spin.maximum(), spin.value()) == (0, 12, 3)
    spin.setValue(0)
    assert spin.text() == "None at all"
    assert isinstance(form.editor("program"), QLineEdit)
    assert any(b.text() == "Browse…" for b in form.findChildren(QPushButton))
    assert isinstance(form.editor("notes"), QPlainTextEdit)
    assert isinstance(form.editor("folders"), QPlainTextEdit)
    shown_labels = labels(form)
    assert {"Colour", "Count", "Program", "Notes", "Folders", "Explains the switch."} <= set(
        shown_labels
    )
    assert not any("secret" in text.lower() for text in shown_labels)  # ui: False
    with pytest.raises(KeyError):
        form.editor("secret_knob")


def test_value_is_the_validated_model(form: SettingsForm[Sample]) -> None:
    form.editor("enabled").setChecked(False)  # type: ignore[attr-defined]
    combo: QComboBox = form.editor("colour")  # type: ignore[assignment]
    combo.setCurrentIndex(combo.findData("dark_blue"))
    form.editor("count").setValue(11)  # type: ignore[attr-defined]
    form.editor("program").setText("/usr/bin/chromium")  # type: ignore[attr-defined]
    form.editor("folders").setPlainText("/a\n\n  /b  \n")  # type: ignore[attr-defined]
    value = form.value()
    assert isinstance(value, Sample)
    assert value == Sample(
        enabled=False,
        colour="dark_blue",
        count=11,
        program="/usr/bin/chromium",
        notes=None,  # empty text is "not set"
        folders=["/a", "/b"],
        secret_knob=1,
    )
    form.editor("notes").setPlainText("Be brief.")  # type: ignore[attr-defined]
    assert form.value().notes == "Be brief."


def test_changed_fires_and_changes_lists_only_what_differs(
    qtbot: Any, form: SettingsForm[Sample]
) -> None:
    assert not form.has_changes() and form.changes() == {}
    with qtbot.waitSignal(form.changed, timeout=1000):
        form.editor("count").setValue(5)  # type: ignore[attr-defined]
    assert form.has_changes() and form.changes() == {"count": 5}
    form.editor("count").setValue(3)  # type: ignore[attr-defined]
    assert not form.has_changes() and form.changes() == {}

    with qtbot.assertNotEmitted(form.changed):
        form.load(Sample(count=9))  # a new baseline is not an edit
    assert form.editor("count").value() == 9  # type: ignore[attr-defined]
    assert form.changes() == {}


def test_a_refused_value_is_shown_next_to_its_field(qtbot: Any, form: SettingsForm[Sample]) -> None:
    error = form.error_label("count")
    assert not error.isVisible()
    qtbot.keyClick(form.editor("count"), Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(form.editor("count"), "7")
    assert form.editor("count").value() == 7  # type: ignore[attr-defined]
    assert error.isVisible()
    assert error.text() == "Seven is unlucky: pick another number."
    assert error.textFormat() == Qt.TextFormat.PlainText
    assert form.editor("count").property("invalid") is True
    assert form.problem() == "Count: Seven is unlucky: pick another number."
    assert form.changes() == {}
    with pytest.raises(FormInvalid, match="unlucky"):
        form.value()

    form.editor("count").setValue(8)  # type: ignore[attr-defined]
    assert not error.isVisible() and form.problem() is None
    assert form.editor("count").property("invalid") is False


def test_option_help_follows_the_choice(qtbot: Any) -> None:
    form = SettingsForm(SecuritySettings, SecuritySettings())
    qtbot.addWidget(form)
    combo: QComboBox = form.editor("keyring")  # type: ignore[assignment]
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert texts == [
        "System keyring or encrypted file (recommended)",
        "System keyring only",
        "Encrypted file only",
    ]
    assert any("asks whether to use an encrypted file" in t for t in labels(form))
    combo.setCurrentIndex(combo.findData("encrypted_file"))
    assert any("passphrase" in t for t in labels(form))
    assert not any("asks whether" in t for t in labels(form))


def test_range_errors_read_plainly() -> None:
    for data, expected in (
        ({"max_steps": 0}, "Use 1 or more."),
        ({"max_steps": 9999}, "Use 500 or less."),
        ({"conversation": {"compact_after_chars": -1}}, "Use 0 or more."),
        ({"max_steps": "many"}, "Enter a whole number."),
        ({"general": {"theme": "purple"}}, "Choose one of the options."),
        ({"general": {"font_size": 4}}, "Use 8 points or more, or 0 for the system size."),
    ):
        with pytest.raises(ValidationError) as caught:
            Settings.model_validate(data, context=STRICT)
        assert plain_error(caught.value.errors()[0]) == expected


def test_an_unknown_type_is_refused_when_the_form_is_built(qtbot: Any) -> None:
    class Odd(BaseModel):
        pair: tuple[int, int] = (1, 2)

    with pytest.raises(TypeError, match="no input for pair"):
        SettingsForm(Odd, Odd())


@pytest.mark.parametrize(
    "model",
    [
        GeneralSettings,
        BrowserSettings,
        MemorySettings,
        ConversationSettings,
        ShellSettings,
        SecuritySettings,
    ],
)
def test_every_shown_settings_field_has_a_title_and_builds(qtbot: Any, model: Any) -> None:
    form = SettingsForm(model, model())
    qtbot.addWidget(form)
    for name in form.names:
        info = model.model_fields[name]
        assert shown(info) and info.title, f"{model.__name__}.{name} needs a title"
    assert form.problem() is None and form.changes() == {}
