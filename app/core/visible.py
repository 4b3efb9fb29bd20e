"""Text shown on approval cards and prompts: control characters made visible, never
interpreted (no terminal escapes, no bidirectional overrides, no invisible characters)."""

from __future__ import annotations

import unicodedata

_KEEP = {"\n", "\t"}


def visible(text: str, *, keep_newlines: bool = True) -> str:
    """Escapes C0/C1 controls, format characters (bidi overrides, zero-width joiners…),
    and line/paragraph separators as ⟨U+XXXX⟩; keeps newlines and tabs when asked."""
    out: list[str] = []
    for ch in text:
        if keep_newlines and ch in _KEEP:
            out.append(ch)
            continue
        category = unicodedata.category(ch)
        if category in {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"} and ch != " ":
            out.append(f"⟨U+{ord(ch):04X}⟩")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: str, limit: int = 200) -> str:
    """A single visible line (newlines shown as ⏎), cut with an ellipsis."""
    flat = visible(text, keep_newlines=False)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
