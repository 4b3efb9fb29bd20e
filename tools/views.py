"""What tools see of the app's settings, as structural types.

Tools never import `app`: the app's pydantic settings (app.core.settings.Settings) satisfy
these protocols by shape, and mypy checks that where the app hands them to a ToolContext.
Every member is read-only, so a list field may be seen as a Sequence and an int as a float.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class FileSettingsView(Protocol):
    """`settings.files`: the folders file tools may touch."""

    @property
    def allowed_roots(self) -> Sequence[str]: ...

    @property
    def denied_paths(self) -> Sequence[str]: ...

    @property
    def folders_chosen(self) -> bool: ...


class BrowserSettingsView(Protocol):
    """`settings.browser`: which browser the browser tools drive, and how."""

    @property
    def executable(self) -> str: ...

    @property
    def headless(self) -> bool: ...

    @property
    def ask_new_sites(self) -> bool: ...

    @property
    def idle_close_seconds(self) -> float: ...


class ShellSettingsView(Protocol):
    """`settings.shell`: the terminal tool's sandbox and time limit."""

    @property
    def sandbox(self) -> str: ...

    @property
    def timeout(self) -> float: ...


class SettingsView(Protocol):
    """`ctx.settings`: the parts of the app's settings that tools read."""

    @property
    def files(self) -> FileSettingsView: ...

    @property
    def browser(self) -> BrowserSettingsView: ...

    @property
    def shell(self) -> ShellSettingsView: ...
