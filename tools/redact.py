"""The secret tripwire: nothing that passes here carries a known secret value or a
credential-looking field to the model, the UI, the logs or the store.

A known secret is caught raw and in the encodings a tool, a page or a log line would
produce: percent-encoding (either hex case, `+` for a space, any subset of characters
encoded), JSON escaping (`\\"`, `\\/`, `\\uXXXX`), HTML entities, hex (either case), and
base64 (standard or URL-safe, padded or not) — also when the secret sits inside a longer
base64 string such as `Authorization: Basic base64(user:secret)`, at any of the three byte
alignments. All variants of all secrets go into ONE compiled regex, built as a trie so
that text without secrets is scanned in a single cheap pass; the compiled pattern is
cached per set of secrets and shared by every Redactor.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4
#: Base64 pieces shorter than this are not matched: they would hit ordinary base64 data.
MIN_BASE64_FRAGMENT = 6
#: Longer secrets (certificates, kubeconfigs) are matched raw and JSON/URL-escaped only:
#: their hex/base64/fully-escaped variants would bloat the pattern for no real gain.
MAX_ENCODED_SECRET = 1024

_CREDENTIAL_WORDS = (
    "password|passwd|passphrase|pwd|secret|token|apikey|api_key|private_key|access_key|"
    "secret_key|client_secret|authorization|auth|credential|credentials|cookie|session_id|"
    "bearer|refresh_token|access_token|id_token"
)
_CREDENTIAL_KEY = re.compile(rf"(^|_)({_CREDENTIAL_WORDS})($|_)")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_credential_key(key: str) -> bool:
    """True for `password`, `apiKey`, `X-Api-Key`, `access_token`; false for `max_tokens`."""
    normal = _CAMEL_BOUNDARY.sub("_", key).replace("-", "_").replace(" ", "_").lower()
    return bool(_CREDENTIAL_KEY.search(normal))


# ---- how one character may be written ------------------------------------------------------

_JSON_SHORT = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "\n": "n",
    "\r": "r",
    "\t": "t",
    "\b": "b",
    "\f": "f",
}
_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos", "\xa0": "nbsp"}
#: Base64 characters that differ between the standard and the URL-safe alphabet.
_B64_TWINS = {"+": "-", "/": "_"}


def _hex(number: int, width: int) -> str:
    """Hex digits matching either case: 0x2f -> `2[fF]`."""
    return "".join(
        f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{number:0{width}x}"
    )


def _percent(ch: str) -> str:
    """`%2F`, `%2f`, and `%252F` (a URL inside a URL parameter)."""
    return "".join("%(?:25)?" + _hex(b, 2) for b in ch.encode("utf-8"))


def _json_unicode(ch: str) -> str:
    """`\\u00e9`; more backslashes when JSON sits inside a JSON string."""
    units = ch.encode("utf-16-be")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    return "".join(r"\\\\*u" + _hex(code, 4) for code in codes)


def _html_numeric(ch: str) -> list[str]:
    cp = ord(ch)
    return [f"&#0*{cp};", f"&#[xX]0*{_hex(cp, 1)};"]


#: One unit of a variant: a regex fragment without alternation, or alternative fragments.
Unit = str | tuple[str, ...]
Units = tuple[Unit, ...]


@lru_cache(maxsize=512)
def _char_unit(ch: str) -> Unit:
    """`ch` as written raw or escaped by URL, JSON or HTML encoders. Letters and digits
    stay literal (encoders leave them alone); `_escaped_everywhere` covers text with every
    character escaped."""
    if ch.isascii() and ch.isalnum():
        return ch
    forms = {re.escape(ch), _percent(ch), _json_unicode(ch), *_html_numeric(ch)}
    if ch == " ":
        forms.add(r"\+")
    if ch in _JSON_SHORT:
        forms.add(r"\\\\*" + re.escape(_JSON_SHORT[ch]) if ch != "\\" else r"\\\\*")
    if ch in _HTML_NAMED:
        forms.add(f"&{_HTML_NAMED[ch]};")
    return tuple(sorted(forms))


def _forms(unit: Unit) -> tuple[str, ...]:
    return unit if isinstance(unit, tuple) else (unit,)


@lru_cache(maxsize=128)
def _b64_unit(ch: str) -> Unit:
    twin = _B64_TWINS.get(ch)
    if twin is None:
        return _char_unit(ch)
    return tuple(sorted({*_forms(_char_unit(ch)), *_forms(_char_unit(twin))}))


def _hex_unit(ch: str) -> Unit:
    return f"[{ch}{ch.upper()}]" if ch.isalpha() else ch


# ---- the variants of one secret ----------------------------------------------------------------


def _base64_variants(raw: bytes) -> list[Units]:
    """The part of base64(prefix + raw + suffix) that depends on `raw` alone, for a prefix
    of 0, 1 and 2 bytes (every alignment), plus the exact ending when raw ends the data
    (with and without `=` padding)."""
    out: list[Units] = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = -(-8 * shift // 6)  # first character made of raw's bits only
        stop = 8 * (shift + len(raw)) // 6  # last one not mixed with what follows
        core = encoded[start:stop]
        ending = encoded[start:]
        for text in sorted({core, ending, ending.rstrip("=")}):
            if len(text) >= MIN_BASE64_FRAGMENT:
                out.append(tuple(_b64_unit(c) for c in text))
    return out


def _escaped_everywhere(secret: str) -> list[Units]:
    """Every character escaped (a hostile tool's way to slip a value past a literal check)."""
    return [
        tuple(_percent(c) for c in secret),
        tuple(_json_unicode(c) for c in secret),
        tuple(_html_numeric(c)[0] for c in secret),
        tuple(_html_numeric(c)[1] for c in secret),
    ]


@lru_cache(maxsize=4096)
def _variants(secret: str) -> tuple[Units, ...]:
    found: list[Units] = [tuple(_char_unit(c) for c in secret)]
    raw = secret.encode("utf-8")
    if len(raw) <= MAX_ENCODED_SECRET:
        found.append(tuple(_hex_unit(c) for c in raw.hex()))
        found += _base64_variants(raw)
        found += _escaped_everywhere(secret)
    return tuple(found)


# ---- one pattern for all of them -----------------------------------------------------------------

#: One matching step: a character (escaped or not), a class or a small group, with an
#: optional quantifier. A trie key must never split a quantifier from what it repeats.
_ATOM = re.compile(r"(?:\\.|\[[^\]]+\]|\(\?:[^()]*\)|[^\\\[(])[*+?]?")


def _keys(units: Units) -> list[list[str]]:
    """Trie keys for a variant, once per form of its first unit: the regex engine skips an
    alternative cheaply only when it starts with a plain character or class, so the first
    step never is a group. Later alternatives stay grouped (no blow-up per character)."""
    rest: list[str] = []
    for unit in units[1:]:
        if isinstance(unit, tuple):
            rest.append("(?:" + "|".join(unit) + ")")
        else:
            rest += _ATOM.findall(unit)
    return [_ATOM.findall(form) + rest for form in _forms(units[0])]


class _Node:
    __slots__ = ("children", "end")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.end = False


def _trie_regex(variants: Iterable[Units]) -> str:
    """Alternatives sharing a prefix share its regex: each text position is tried against
    the distinct first characters, not against every variant of every secret."""
    root = _Node()
    for units in variants:
        for keys in _keys(units):
            node = root
            for key in keys:
                node = node.children.setdefault(key, _Node())
            node.end = True
    return _emit(root)


def _emit(node: _Node) -> str:
    parts: list[str] = []
    # Follow single-child chains iteratively: long secrets must not recurse per character.
    while len(node.children) == 1 and not node.end:
        (token, node), = node.children.items()
        parts.append(token)
    if not node.children:
        return "".join(parts)
    branches = [token + _emit(child) for token, child in node.children.items()]
    group = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if node.end:  # a longer match first, so overlapping secrets leave no tail behind
        group = group + "?" if len(branches) == 1 and len(group) == 1 else f"(?:{group})?"
    return "".join(parts) + group


@lru_cache(maxsize=16)
def _compile(secrets: frozenset[str]) -> re.Pattern[str] | None:
    if not secrets:
        return None
    sequences = [v for s in sorted(secrets) for v in _variants(s)]
    return re.compile(_trie_regex(sequences))


def compile_secrets(secrets: Iterable[str]) -> None:
    """Build (and cache) the pattern for `secrets` now, e.g. in a background thread right
    after they are loaded, so the first redaction does not pay for it."""
    _compile(_usable(secrets))


def _usable(secrets: Iterable[str]) -> frozenset[str]:
    return frozenset(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)


class Redactor:
    """Replaces known secret values (in any of the encodings above) with a marker; the
    longest match wins, so overlapping secrets cannot leave a recognisable tail behind.
    Safe to share between threads."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # One tuple, swapped whole: readers in other threads see the old or the new state.
        self._state: tuple[frozenset[str], re.Pattern[str] | None] = (frozenset(), None)
        self.update(secrets)

    def update(self, secrets: Iterable[str]) -> None:
        values = _usable(secrets)
        if values == self._state[0]:
            return
        self._state = (values, _compile(values))

    @property
    def secrets(self) -> frozenset[str]:
        return self._state[0]

    def text(self, value: str) -> str:
        pattern = self._state[1]
        if pattern is None or not value:
            return value
        return pattern.sub(REDACTED, value)

    def data(self, value: Any) -> Any:
        """Walks JSON-like data: masks credential-named string fields, scrubs all strings
        (keys included: a hostile tool may put a secret in a key)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    if is_credential_key(key) and isinstance(item, str) and item:
                        out[self.text(key)] = REDACTED
                        continue
                    key = self.text(key)
                out[key] = self.data(item)
            return out
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value
