"""Full-text search over the messages of conversations, and the safe FTS5 query syntax
every search of the store (memories too) is built with."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.providers.base import Role
from app.core.store.database import Database

#: Markers around matched terms in `SearchHit.snippet`: private-use characters (any in the
#: message itself are left out of its snippet), so a message's « » never pass for one.
HIGHLIGHT_START = "\ue000"
HIGHLIGHT_END = "\ue001"
_HIGHLIGHTS = (HIGHLIGHT_START, HIGHLIGHT_END)


@dataclass(frozen=True)
class SearchHit:
    conversation_id: str
    conversation_title: str
    message_id: int
    role: Role
    snippet: str


class Search(Database):
    """Reads `messages_fts` (kept up to date by triggers on `messages`)."""

    def search(
        self, query: str, limit: int = 50, *, include_children: bool = False
    ) -> list[SearchHit]:
        """Full-text search over messages of conversations that are not deleted, sub-agents'
        runs only with `include_children` (like the chat list, which they are not in).

        Every word the user typed must occur (the last one as a prefix, for search as you
        type). Any text is safe: words are quoted, FTS5 syntax has no effect.
        """
        match = fts_query(query)
        if match is None:
            return []
        children = "" if include_children else "AND c.parent_id IS NULL"
        rows = self._read(
            f"""SELECT m.conversation_id, c.title, m.id, m.role,
                      snippet(messages_fts, 0, ?, ?, '…', 12) AS snippet,
                      snippet(messages_fts, 0, '', '', '…', 12) AS plain
               FROM messages_fts
               JOIN messages m ON m.id = messages_fts.rowid
               JOIN conversations c ON c.id = m.conversation_id
               WHERE messages_fts MATCH ? AND c.deleted_at IS NULL {children}
               ORDER BY rank, m.id DESC LIMIT ?""",
            (HIGHLIGHT_START, HIGHLIGHT_END, match, limit),
        )
        return [
            SearchHit(
                conversation_id=r[0],
                conversation_title=r[1],
                message_id=r[2],
                role=r[3],
                snippet=_clean_snippet(r[4], r[5]),
            )
            for r in rows
        ]


def fts_query(text: str, *, any_word: bool = False) -> str | None:
    """Turn free text into a safe FTS5 MATCH expression, or None if nothing is searchable.

    Each whitespace-separated word becomes a quoted string (quotes doubled), so
    operators (`AND`, `NEAR(`), column filters (`content:`) and stray `"` are literal.
    With `any_word` the words are OR-ed (for ranking by relevance) instead of all required.
    """
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    if not words:
        return None
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    if any_word:
        return " OR ".join(dict.fromkeys(quoted))
    quoted[-1] += "*"
    return " ".join(quoted)


def _clean_snippet(marked: str, plain: str) -> str:
    """`marked` (the snippet with the match markers) without the marker characters that
    came from the message itself. `plain` is the same snippet without markers: walking
    both tells the characters of the text from the markers SQLite added."""
    out: list[str] = []
    j = 0
    for ch in marked:
        if j < len(plain) and ch == plain[j]:
            j += 1
            if ch not in _HIGHLIGHTS:
                out.append(ch)
        else:
            out.append(ch)
    return "".join(out)
