"""Pasting into the composer, on real Qt widgets (offscreen) and the real clipboard: an image
or a long text becomes an attachment kept in the home's `pasted` folder, a short text stays
in the box, an image too large to send is refused with a message."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QBuffer, QIODevice, QMimeData, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage

from app.core.attachments import MAX_IMAGE_BYTES, build_user_message
from app.core.pasted import BIG_PASTE_CHARS, text_label
from app.ui.composer import AttachmentChip, Composer, png_bytes

pytestmark = pytest.mark.gui


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def composer(qtbot: Any, home: Path) -> Composer:
    widget = Composer(home=home)
    qtbot.addWidget(widget)
    widget.resize(760, 120)
    widget.show()
    widget.edit.setFocus()
    return widget


def paste(qtbot: Any, composer: Composer, mime: QMimeData) -> None:
    """Puts `mime` on the clipboard and presses Ctrl+V in the message box."""
    clipboard = QGuiApplication.clipboard()
    assert clipboard is not None
    clipboard.setMimeData(mime)
    qtbot.keyClick(composer.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)


def text_mime(text: str) -> QMimeData:
    mime = QMimeData()
    mime.setText(text)
    return mime


def image(width: int = 40, height: int = 30) -> QImage:
    picture = QImage(width, height, QImage.Format.Format_RGB32)
    picture.fill(QColor("#3070c0"))
    return picture


def chips(composer: Composer) -> list[AttachmentChip]:
    return composer.findChildren(AttachmentChip)


def assert_private_file_in_pasted(home: Path, path: str, suffix: str) -> Path:
    file = Path(path)
    assert file.parent == home / "pasted"
    assert file.suffix == suffix
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    return file


def test_a_pasted_screenshot_becomes_an_image_chip_sent_as_an_image(
    qtbot: Any, composer: Composer, home: Path
) -> None:
    mime = QMimeData()
    mime.setImageData(image(40, 30))
    paste(qtbot, composer, mime)

    assert composer.text() == ""
    [path] = composer.attachments
    file = assert_private_file_in_pasted(home, path, ".png")
    assert file.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    [chip] = chips(composer)
    assert chip.label.text() == "Pasted image (40×30)"
    assert composer.problem.isHidden()

    message, problems = build_user_message("look", composer.attachments)
    assert problems == []
    assert len(message.images) == 1
    assert message.images[0].startswith("data:image/png;base64,")


@pytest.mark.parametrize("kind, fmt", [("image/jpeg", "JPEG"), ("image/webp", "WEBP")])
def test_image_bytes_on_the_clipboard_are_kept_as_png(
    qtbot: Any, composer: Composer, home: Path, kind: str, fmt: str
) -> None:
    mime = QMimeData()
    picture = image(12, 8)
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    assert picture.save(buffer, fmt)  # type: ignore[call-overload]
    mime.setData(kind, buffer.data())
    paste(qtbot, composer, mime)

    [path] = composer.attachments
    file = assert_private_file_in_pasted(home, path, ".png")
    assert QImage(str(file)).size() == picture.size()


#: A 1×1 GIF (Qt reads GIF but does not write it); a paste keeps its first frame.
TINY_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00"
    b"\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


def test_a_pasted_gif_is_kept_as_png(qtbot: Any, composer: Composer, home: Path) -> None:
    mime = QMimeData()
    mime.setData("image/gif", TINY_GIF)
    paste(qtbot, composer, mime)

    [path] = composer.attachments
    file = assert_private_file_in_pasted(home, path, ".png")
    assert QImage(str(file)).width() == 1


def test_a_long_pasted_text_becomes_a_pasted_text_chip(
    qtbot: Any, composer: Composer, home: Path
) -> None:
    text = "\n".join(f"line {i:04} " + "x" * 20 for i in range(100))
    assert len(text) > 2_000 and len(text) < 3_200
    paste(qtbot, composer, text_mime(text))

    assert composer.text() == ""
    [path] = composer.attachments
    file = assert_private_file_in_pasted(home, path, ".txt")
    assert file.read_text(encoding="utf-8") == text
    [chip] = chips(composer)
    assert chip.label.text() == "Pasted text (100 lines)"
    message, problems = build_user_message("", composer.attachments)
    assert problems == [] and text in message.content


def test_three_thousand_characters_on_one_line_make_a_chip(
    qtbot: Any, composer: Composer, home: Path
) -> None:
    paste(qtbot, composer, text_mime("a" * 3_000))

    assert composer.text() == ""
    [chip] = chips(composer)
    assert chip.label.text() == "Pasted text (1 line)"
    assert Path(chip.path).read_text(encoding="utf-8") == "a" * 3_000


def test_a_short_paste_stays_text_in_the_box(qtbot: Any, composer: Composer, home: Path) -> None:
    paste(qtbot, composer, text_mime("b" * 100))

    assert composer.text() == "b" * 100
    assert composer.attachments == [] and chips(composer) == []
    assert not (home / "pasted").exists()


def test_ctrl_shift_v_pastes_a_long_text_into_the_box(
    qtbot: Any, composer: Composer, home: Path
) -> None:
    clipboard = QGuiApplication.clipboard()
    assert clipboard is not None
    clipboard.setText("c" * 3_000)
    shift_ctrl = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(composer.edit, Qt.Key.Key_V, shift_ctrl)

    assert composer.text() == "c" * 3_000
    assert composer.attachments == []


def test_text_copied_with_a_picture_of_it_pastes_as_text(qtbot: Any, composer: Composer) -> None:
    mime = text_mime("A1\tB1")  # as a spreadsheet copies cells: their text and an image
    mime.setImageData(image())
    paste(qtbot, composer, mime)

    assert composer.text() == "A1\tB1"
    assert composer.attachments == []


def test_an_image_too_large_to_send_is_refused_with_a_message(
    qtbot: Any, composer: Composer, home: Path
) -> None:
    width, height = 1_400, 1_000  # random pixels do not compress: over 5 MB as PNG
    pixels = os.urandom(width * height * 4)
    noise = QImage(pixels, width, height, QImage.Format.Format_RGBA8888).copy()
    assert len(png_bytes(noise)) > MAX_IMAGE_BYTES
    mime = QMimeData()
    mime.setImageData(noise)
    paste(qtbot, composer, mime)

    assert composer.attachments == [] and chips(composer) == []
    assert not composer.problem.isHidden()
    message = composer.problem.text()
    assert message.startswith("The pasted image is ")
    assert "images up to 5 MB can be attached" in message
    assert not (home / "pasted").exists()

    qtbot.keyClick(composer.edit, Qt.Key.Key_A)  # typing on puts the message away
    assert composer.problem.isHidden()


def test_without_a_home_a_long_paste_stays_text(qtbot: Any) -> None:
    widget = Composer()
    qtbot.addWidget(widget)
    widget.show()
    widget.edit.setFocus()
    paste(qtbot, widget, text_mime("d" * (BIG_PASTE_CHARS + 1)))

    assert widget.text() == "d" * (BIG_PASTE_CHARS + 1)
    assert widget.attachments == []


def test_the_chip_label_counts_lines() -> None:
    assert text_label("one") == "Pasted text (1 line)"
    assert text_label("one\ntwo\n") == "Pasted text (2 lines)"
