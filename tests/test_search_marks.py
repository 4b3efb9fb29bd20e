"""Search snippets mark matches with characters no stored text keeps: French quotes (or the
markers themselves) in a message never pass for a match in the sidebar."""

from __future__ import annotations

from pathlib import Path

from app.core.paths import db_path
from app.core.providers.base import ChatMessage
from app.core.store import HIGHLIGHT_END, HIGHLIGHT_START, Store
from app.ui.sidebar import highlight_parts


def _snippet(home: Path, content: str, query: str) -> str:
    with Store(db_path(home)) as store:
        conv = store.create_conversation("Quotes")
        store.append_message(conv, ChatMessage("user", content))
        (hit,) = store.search(query)
        return hit.snippet


def test_french_quotes_in_a_message_are_text_not_match_markers(home: Path) -> None:
    snippet = _snippet(home, "Il a dit « bonjour » puis « merci » au chauffeur", "merci")
    text, spans = highlight_parts(snippet)
    assert text == "Il a dit « bonjour » puis « merci » au chauffeur"
    assert [text[s : s + n] for s, n in spans] == ["merci"]


def test_marker_characters_in_a_message_are_left_out(home: Path) -> None:
    content = f"odd {HIGHLIGHT_START}text{HIGHLIGHT_END} then the needle here {HIGHLIGHT_END}"
    snippet = _snippet(home, content, "needle")
    assert snippet.count(HIGHLIGHT_START) == 1 and snippet.count(HIGHLIGHT_END) == 1
    text, spans = highlight_parts(snippet)
    assert [text[s : s + n] for s, n in spans] == ["needle"]
    assert "odd text then the needle here" in text
