"""Untrusted text (from the model, servers, pages, titles) shown as text in Qt places that
would otherwise read markup."""

from __future__ import annotations

import html

from app.core.visible import visible


def plain_tooltip(text: str, *, wrap: bool = True) -> str:
    """A tooltip showing `text` as text: Qt renders a tooltip that looks like HTML as HTML
    (links, images), so it is escaped, controls made visible, inside a paragraph of its
    own (`wrap`: keeping its line breaks and spaces)."""
    if not text:
        return ""
    style = " style='white-space:pre-wrap'" if wrap else ""
    return f"<p{style}>{html.escape(visible(text))}</p>"
