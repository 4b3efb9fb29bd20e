"""Compatibility shim: the settings window now lives in the `app.ui.settings` package."""

from app.ui.settings.about_page import AboutPage
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.form import FormPage, SettingsForm
from app.ui.settings.general_page import BrowserPage, GeneralPage, InstructionsPage, SecurityPage
from app.ui.settings.presets import PRESETS, Preset, url_problem
from app.ui.settings.providers_page import ProvidersPage
from app.ui.settings.tools_page import ToolsPage

__all__ = [
    "PRESETS",
    "AboutPage",
    "BrowserPage",
    "FormPage",
    "GeneralPage",
    "InstructionsPage",
    "Preset",
    "ProvidersPage",
    "SecurityPage",
    "SettingsDialog",
    "SettingsForm",
    "ToolsPage",
    "url_problem",
]
