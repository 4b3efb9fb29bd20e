"""The Qt user interface: the only package that imports PySide6."""

from app.ui.pyside_import_scan import install as _install_import_scan

_install_import_scan()  # before the window's modules: see app.ui.pyside_import_scan
