"""Renders resources/icons/deskhand.svg into every icon the installers need.

    .venv/bin/python packaging/make_icons.py          # writes resources/icons/*

Output (committed, so the Windows and macOS builds need no renderer):
  deskhand-<N>.png  N in 16 24 32 48 64 128 256 512 1024   (Linux hicolor theme, tray)
  deskhand.ico      16 24 32 48 64 128 256, PNG-compressed entries (Windows, Vista+)
  deskhand.icns     16 … 1024 incl. @2x, PNG entries (macOS 10.7+)

Rendering uses PySide6's QSvgRenderer (offscreen platform, no display needed), or
ImageMagick's `convert`/`magick` when PySide6 is missing. ICO and ICNS are plain
containers of PNGs, written here directly, so Pillow is not needed.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ICONS = ROOT / "resources" / "icons"
SOURCE = ICONS / "deskhand.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512, 1024)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types holding PNG data, by pixel size (several types share a size: @2x).
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"ic11", 32),  # 16@2x
    (b"icp6", 64),
    (b"ic12", 64),  # 32@2x
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic13", 256),  # 128@2x
    (b"ic09", 512),
    (b"ic14", 512),  # 256@2x
    (b"ic10", 1024),  # 512@2x
)


def render_qt(sizes: tuple[int, ...]) -> dict[int, bytes]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"cannot read {SOURCE}")
    out: dict[int, bytes] = {}
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        data = QByteArray()
        buf = QBuffer(data)
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buf, "PNG")
        out[size] = bytes(data.data())
    return out


def render_magick(sizes: tuple[int, ...]) -> dict[int, bytes]:
    tool = shutil.which("magick") or shutil.which("convert")
    if tool is None:
        raise SystemExit("need PySide6 (QtSvg) or ImageMagick to render the SVG")
    out = {}
    for size in sizes:
        out[size] = subprocess.run(
            [tool, "-background", "none", "-density", str(max(72, size * 72 // 64)),
             str(SOURCE), "-resize", f"{size}x{size}", "png:-"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
    return out


def ico(pngs: dict[int, bytes]) -> bytes:
    entries = [(s, pngs[s]) for s in ICO_SIZES]
    header = struct.pack("<HHH", 0, 1, len(entries))
    offset = 6 + 16 * len(entries)
    directory, blobs = b"", b""
    for size, data in entries:
        dim = 0 if size >= 256 else size  # 0 means 256
        directory += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
        blobs += data
    return header + directory + blobs


def icns(pngs: dict[int, bytes]) -> bytes:
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    try:
        pngs = render_qt(PNG_SIZES)
    except ImportError:
        pngs = render_magick(PNG_SIZES)
    for size, data in pngs.items():
        (ICONS / f"deskhand-{size}.png").write_bytes(data)
    (ICONS / "deskhand.ico").write_bytes(ico(pngs))
    (ICONS / "deskhand.icns").write_bytes(icns(pngs))
    print(f"wrote {len(pngs)} PNGs, deskhand.ico and deskhand.icns to {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
