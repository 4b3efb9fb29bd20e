"""Text for the one-line summaries approval hooks write: user-, page- or server-controlled
text is put on one line, cut, and cannot close a quote the summary opened."""

from __future__ import annotations

from tools.redact import TRIPWIRE, shorten

#: At most this many characters of one quoted piece of user-controlled text.
QUOTE_LIMIT = 60


def clean(text: str, limit: int = QUOTE_LIMIT) -> str:
    """One line (whitespace runs become one space), curly quotes made straight so that the
    text cannot close a quote the summary opened, cut with an ellipsis — after the
    tripwire masked known secrets, so a cut cannot leave part of one. Masked before AND
    after folding: folding must not join a secret (`pw<TAB>x` -> `pw x`) back together."""
    flat = " ".join(TRIPWIRE.text(str(text)).split()).replace("“", '"').replace("”", '"')
    flat = TRIPWIRE.text(flat)
    if len(flat) <= limit:
        return flat
    return shorten(flat, limit - 1, mark="", redacted=True).rstrip() + "…"


def quoted(text: str, limit: int = QUOTE_LIMIT) -> str:
    """User-controlled text as “…”, one line, at most `limit` characters inside the quotes."""
    return f"“{clean(text, limit)}”"
