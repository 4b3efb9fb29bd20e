"""Compatibility shim: the settings window now lives in the `app.ui.settings` package."""

from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.general_page import GeneralPage
from app.ui.settings.presets import PRESETS, Preset, url_problem
from app.ui.settings.providers_page import ProvidersPage
from app.ui.settings.tools_page import ToolsPage

__all__ = [
    "PRESETS",
    "GeneralPage",
    "Preset",
    "ProvidersPage",
    "SettingsDialog",
    "ToolsPage",
    "url_problem",
]
