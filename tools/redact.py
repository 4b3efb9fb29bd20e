"""The secret tripwire: nothing that passes here carries a known secret value or a
credential-looking field to the model, the UI, the logs or the store.

A known secret is caught raw and in the encodings a tool, a page or a log line would
produce: percent-encoding (either hex case, `+` for a space, any subset of characters
encoded), JSON escaping (`\\"`, `\\/`, `\\uXXXX`), HTML entities, hex (either case), and
base64 (standard or URL-safe, padded or not) — also when the secret sits inside a longer
base64 string such as `Authorization: Basic base64(user:secret)`, at any of the three
byte alignments — each in its composed (NFC) and decomposed (NFD) Unicode form too.
Overlapping matches are masked as one. All variants of all secrets go into ONE compiled
regex, built as a trie so that text without secrets is scanned in a single cheap pass;
the compiled pattern is cached per set of secrets and shared by every Redactor.

`TRIPWIRE` is the one owner of secret knowledge and masking in the process (fed by
`app.core.secrets`, handed out by `Runtime.tripwire`): it also classifies names
(`is_credential_key`, `is_secret_name`) and masks credential-shaped values (`shapes`,
`command`, `env`, `labels`, `shaped_data`; the patterns live in
`tools.credential_values`). Text anyone will see is cut only with `shorten` (masked
first, cut after), text arriving in pieces passes a `StreamRedactor`, and searches run
on the redacted text — so neither a cut nor a chunk boundary nor a yes/no answer gives
away part of a secret.
"""

from __future__ import annotations

import base64
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tools import credential_values as shapes
from tools.credential_values import REDACTED, is_credential_key

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "TRIPWIRE",
    "Redactor",
    "StreamRedactor",
    "Tripwire",
    "compile_secrets",
    "is_credential_key",
    "reach",
    "shorten",
]
MIN_SECRET_LENGTH = 4
#: Base64 pieces shorter than this are not matched: they would hit ordinary base64 data.
MIN_BASE64_FRAGMENT = 6
#: Longer secrets (certificates, kubeconfigs) are matched raw and JSON/URL-escaped only:
#: their hex/base64/fully-escaped variants would bloat the pattern for no real gain.
MAX_ENCODED_SECRET = 1024


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


def _spellings(secret: str) -> list[str]:
    """The secret as given and in its composed (NFC) and decomposed (NFD) Unicode forms:
    `ä` written as one code point or as `a` + a combining mark looks the same."""
    found = [secret]
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, secret)
        if other not in found:
            found.append(other)
    return found


@lru_cache(maxsize=4096)
def _variants(secret: str) -> tuple[Units, ...]:
    found: list[Units] = []
    for spelling in _spellings(secret):
        found.append(tuple(_char_unit(c) for c in spelling))
        raw = spelling.encode("utf-8")
        if len(raw) <= MAX_ENCODED_SECRET:
            found.append(tuple(_hex_unit(c) for c in raw.hex()))
            found += _base64_variants(raw)
            found += _escaped_everywhere(spelling)
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


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """Where `pattern` matches in `text`, matches that overlap merged into one span: a
    secret beginning inside another's match (B starting in A's tail) is masked with it,
    not left as a recognisable tail. Each search for an overlap is the search for the next
    match anyway, so this costs no more than `finditer`."""
    spans: list[tuple[int, int]] = []
    match = pattern.search(text)
    while match is not None:
        start, end = match.span()
        match = pattern.search(text, start + 1)
        while match is not None and match.start() < end:
            end = max(end, match.end())
            match = pattern.search(text, match.start() + 1)
        spans.append((start, end))
    return spans


def _masked(pattern: re.Pattern[str], text: str, keep_lines: bool = False) -> str:
    out: list[str] = []
    pos = 0
    for start, end in _spans(pattern, text):
        out += [text[pos:start], REDACTED]
        if keep_lines:
            out.append("\n" * text.count("\n", start, end))
        pos = end
    out.append(text[pos:])
    return "".join(out)


class Redactor:
    """Replaces known secret values (in any of the encodings above) with a marker; the
    longest match wins and overlapping matches are masked as one, so overlapping secrets
    cannot leave a recognisable tail behind.
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

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The compiled pattern of every variant of every secret (None: none known)."""
        return self._state[1]

    def text(self, value: str) -> str:
        pattern = self._state[1]
        if pattern is None or not value:
            return value
        return _masked(pattern, value)

    def spans(self, value: str) -> list[tuple[int, int]]:
        """Where `text` would put a marker: (start, end) of each masked stretch of `value`
        (overlapping matches merged), in order."""
        pattern = self._state[1]
        return [] if pattern is None or not value else _spans(pattern, value)

    def window(self, text: str, start: int, stop: int | None = None) -> str:
        """`text[start:stop]` redacted, judged with the text around it: a secret crossing
        either edge is masked whole, and a piece of one lying outside is left out — for
        text about to lose its ends (a capped command output, a rolling buffer)."""
        stop = len(text) if stop is None else stop
        pattern = self._state[1]
        if pattern is None:
            return text[start:stop]
        matches = _spans(pattern, text)
        for m_start, m_end in matches:
            if m_start < start < m_end:
                start = m_start
            if m_start < stop < m_end:
                stop = m_end
        out: list[str] = []
        pos = start
        for m_start, m_end in matches:
            if m_start >= start and m_end <= stop:
                out += [text[pos:m_start], REDACTED]
                pos = m_end
        out.append(text[pos:stop])
        return "".join(out)

    def text_keeping_lines(self, value: str) -> str:
        """`text`, a masked secret that spanned lines (a PEM key) leaving its line breaks
        behind, so the lines after it keep their numbers."""
        pattern = self._state[1]
        if pattern is None or not value:
            return value
        return _masked(pattern, value, keep_lines=True)

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


# ---- the one owner: what is known, masking, shortening, streams ----------------------------


def _char_reach(ch: str) -> int:
    """The longest text one character of a secret may be written as (JSON `\\\\uXXXX` with
    an extra backslash, double percent-encoding, HTML `&#x…;`)."""
    if ch.isascii() and ch.isalnum():
        return 7
    return max(5 * len(ch.encode("utf-8")), 7 * (len(ch.encode("utf-16-be")) // 2), 10)


@lru_cache(maxsize=4096)
def _secret_reach(secret: str) -> int:
    return max(_spelling_reach(s) for s in _spellings(secret))


def _spelling_reach(secret: str) -> int:
    raw = secret.encode("utf-8")
    if len(raw) > MAX_ENCODED_SECRET:  # raw and JSON/URL-escaped only
        return sum(1 if c.isascii() and c.isalnum() else _char_reach(c) for c in secret)
    base64_len = 4 * ((len(raw) + 2 + 2) // 3)
    return max(sum(_char_reach(c) for c in secret), base64_len, 2 * len(raw))


def reach(secrets: Iterable[str]) -> int:
    """The longest stretch of text one known secret can occupy in any form the tripwire
    knows: how much a stream must hold back, and how far past a cut a secret may reach."""
    return max((_secret_reach(s) for s in _usable(secrets)), default=0)


def _marker_across(text: str, at: int) -> int:
    """Where a `[redacted]` marker that a cut at `at` would split starts (-1: none)."""
    size = len(REDACTED)
    return text.find(REDACTED, max(0, at - size + 1), at + size - 1)


#: Longer than any one character's written form (`\\\\u00e9`, `&#x1F600;`, `%25E2`).
_LONGEST_UNIT = 16
#: A variant: per unit, the compiled forms it may take.
_Compiled = tuple[tuple[re.Pattern[str], ...], ...]


@lru_cache(maxsize=4096)
def _form_re(form: str) -> re.Pattern[str]:
    return re.compile(form)


def _first_chars(form: str) -> str:
    """The characters text matching `form` can begin with."""
    atom: str = _ATOM.findall(form)[0]
    if atom.startswith("["):
        return atom[1 : atom.index("]")]
    return atom[1] if atom.startswith("\\") else atom[0]


def _plain_atom(atom: str) -> str | None:
    """The characters a quantifier-free atom matches (None: a group or a quantifier)."""
    if atom.startswith("(") or atom[-1] in "*+?":
        return None
    if atom.startswith("["):
        return atom[1:-1]
    return atom[1] if atom.startswith("\\") else atom


def _beginnings(units: Units) -> set[str] | None:
    """The two characters text matching `units` can begin with (None: too varied)."""
    found: set[str] = set()
    for form in _forms(units[0]):
        atoms = _ATOM.findall(form)
        first = _plain_atom(atoms[0])
        if first is None:
            return None
        if len(atoms) > 1:
            second = _plain_atom(atoms[1])
        elif len(units) > 1:
            nexts = [_plain_atom(_ATOM.findall(f)[0]) for f in _forms(units[1])]
            second = None if None in nexts else "".join(n or "" for n in nexts)
        else:
            second = None
        if second is None:
            return None
        found |= {a + b for a in first for b in second}
    return found


@dataclass(frozen=True)
class _Openings:
    """Every variant of every secret, filed under the characters it can begin with."""

    by_two: dict[str, tuple[_Compiled, ...]]
    #: Variants whose first two characters vary too much to file (escaped forms).
    loose: dict[str, tuple[_Compiled, ...]]


@lru_cache(maxsize=16)
def _openings(secrets: frozenset[str]) -> _Openings:
    by_two: dict[str, list[_Compiled]] = {}
    loose: dict[str, list[_Compiled]] = {}
    for secret in sorted(secrets):
        for units in _variants(secret):
            compiled = tuple(tuple(_form_re(f) for f in _forms(u)) for u in units)
            firsts = {c for f in _forms(units[0]) for c in _first_chars(f)}
            two = _beginnings(units)
            for ch in firsts if two is None else ():
                loose.setdefault(ch, []).append(compiled)
            for pair in two or ():
                by_two.setdefault(pair, []).append(compiled)

    def frozen(table: dict[str, list[_Compiled]]) -> dict[str, tuple[_Compiled, ...]]:
        return {key: tuple(found) for key, found in table.items()}

    return _Openings(frozen(by_two), frozen(loose))


def _open_variant(text: str, start: int, units: _Compiled) -> bool:
    """Whether `text[start:]` could be the beginning of `units`, more text to come."""
    stack = [(start, 0)]
    while stack:
        pos, index = stack.pop()
        if pos >= len(text):
            return True
        if index == len(units):
            continue  # complete: the pattern itself judges it
        for form in units[index]:
            match = form.match(text, pos)
            if match is not None and match.end() > pos:
                stack.append((match.end(), index + 1))
            elif len(text) - pos < _LONGEST_UNIT and text[pos] in _first_chars(form.pattern):
                return True  # a unit cut short by the end of the text (`%2` of `%2F`)
    return False


def _open_from(text: str, secrets: frozenset[str]) -> int:
    """The first position from which the end of `text`, `MIN_SECRET_LENGTH` characters or
    more, could be the beginning of a secret in some form (len(text): none) — what a stream
    must hold back."""
    openings = _openings(secrets)
    for start in range(max(0, len(text) - reach(secrets)), len(text) - MIN_SECRET_LENGTH + 1):
        pair = text[start : start + 2]
        for units in openings.by_two.get(pair, ()) + openings.loose.get(text[start], ()):
            if _open_variant(text, start, units):
                return start
    return len(text)


class StreamRedactor:
    """Redacts a text that arrives in pieces (a model's streamed answer, a command's
    output): a secret split across pieces is still caught. `feed` returns what may be shown
    now: everything but an end of `MIN_SECRET_LENGTH` or more characters that could be the
    beginning of a known secret in some form (looked for in the last `reach` characters),
    and never part of a match that more text could still extend; `flush` returns the rest
    at the end. Text that cannot begin a secret is not held back.

    A shorter end (fewer characters than the shortest secret the tripwire masks at all) is
    shown — a stalled stream must not hide "ans" because a key starts with "a" — and the
    last such characters are kept as context: when the secret does go on, the rest of it is
    masked from where it continues ("sk-[redacted]")."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._pending = ""
        #: The last few characters already shown as they were (raw).
        self._shown = ""

    def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        self._pending += chunk
        return self._release(final=False)

    def flush(self) -> str:
        return self._release(final=True)

    @property
    def held(self) -> str:
        """What is held back (raw: never show it)."""
        return self._pending

    def _release(self, final: bool) -> str:
        secrets, pattern = self._redactor._state  # one consistent pair
        if pattern is None:
            text, self._pending, self._shown = self._pending, "", ""
            return text
        text = self._shown + self._pending
        base = len(self._shown)
        keep_from = len(text) if final else max(base, _open_from(text, secrets))
        out: list[str] = []
        pos = base
        for m_start, m_end in _spans(pattern, text):
            if m_end <= pos:
                continue
            if not final and m_end >= keep_from:
                keep_from = max(base, min(keep_from, m_start))
                break
            out += [text[pos : max(pos, m_start)], REDACTED]
            pos = m_end
        keep_from = max(keep_from, pos)
        out.append(text[pos:keep_from])
        self._pending = text[keep_from:]
        self._shown = "" if final else text[:keep_from][-(MIN_SECRET_LENGTH - 1) :]
        return "".join(out)


class Tripwire:
    """The one owner of secret knowledge and masking in this process: every secret value
    Deskhand has read or written (`remember`), masked in any form the tripwire knows
    (`text`, `data`), shortened only after masking (`shorten`), and redacted as it streams
    (`stream`); names classified (`is_credential_key`, `is_secret_name`) and
    credential-shaped values masked whatever their name (`shapes`, `command`, `env`,
    `labels`, `shaped_data`, and `arguments`: both kinds at once). `app.core.secrets` feeds
    it; `Runtime.tripwire` hands it to the runner, the pipeline and the agent; tools and the
    logs use `TRIPWIRE`. `extra` adds values a caller knows on top (a tool context's)."""

    def __init__(self, known: set[str] | None = None) -> None:
        """`known`: the set it keeps the values in (default: its own, empty)."""
        self._values: set[str] = known if known is not None else set()
        self._lock = threading.Lock()
        self._redactor = Redactor()
        self._store: Callable[[], set[str]] = lambda: self._values

    def keep_in(self, store: Callable[[], set[str]]) -> None:
        """Keep the values in the set `store` returns (the application's own, read on every
        use, so a test may give each test a fresh one)."""
        self._store = store

    def remember(self, values: Iterable[str]) -> None:
        with self._lock:
            self._store().update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)

    def forget(self, value: str) -> None:
        """Drop a value (tests: as after a restart)."""
        with self._lock:
            self._store().discard(value)

    def known(self) -> set[str]:
        with self._lock:
            return set(self._store())

    def redactor(self, extra: Iterable[str] = ()) -> Redactor:
        """A redactor knowing every remembered secret and `extra`."""
        known = self.known()
        values = known.union(extra)
        if len(values) == len(known):
            self._redactor.update(known)
            return self._redactor
        return Redactor(values)

    def text(self, value: str, extra: Iterable[str] = ()) -> str:
        return self.redactor(extra).text(value)

    def data(self, value: Any, extra: Iterable[str] = ()) -> Any:
        return self.redactor(extra).data(value)

    def shorten(
        self,
        text: str,
        limit: int,
        *,
        extra: Iterable[str] = (),
        end: bool = False,
        mark: str = "…",
    ) -> str:
        return shorten(text, limit, redactor=self.redactor(extra), end=end, mark=mark)

    def stream(self, extra: Iterable[str] = ()) -> StreamRedactor:
        return StreamRedactor(self.redactor(extra))

    # ---- names and shapes: credentials Deskhand never stored ------------------------

    @staticmethod
    def is_credential_key(key: str) -> bool:
        """A credential word in a field's name (`password`, `apiKey`, `X-Api-Key`)."""
        return is_credential_key(key)

    @staticmethod
    def is_secret_name(name: str) -> bool:
        """`is_credential_key`, or a key-ish name (`SSH_KEY`, `DB_PASS`), but not a harmless
        companion setting (`password_file`, `token_ttl`)."""
        return shapes.is_secret_name(name)

    @staticmethod
    def looks_like_credential(value: str) -> bool:
        """`value` is or holds something credential-shaped (a token, a URL password…)."""
        return shapes.looks_like_credential_value(value)

    @staticmethod
    def shapes(text: str) -> str:
        """`text` with every credential-shaped part masked (token formats, URL passwords,
        private keys, authorization headers, `TOKEN=…`, `--password=…`)."""
        return shapes.mask_credential_values(text)

    @staticmethod
    def command(argv: Sequence[str]) -> list[str]:
        """A command line's arguments, masked (also a `--password` flag's next argument)."""
        return shapes.mask_command(argv)

    @staticmethod
    def env(entries: Sequence[str]) -> list[str]:
        """`NAME=value` entries, the value masked when the name or the value looks like a
        credential."""
        return shapes.mask_env_entries(entries)

    @staticmethod
    def labels(labels: Mapping[str, str]) -> dict[str, str]:
        """Name → value labels (a container's), masked like `env`."""
        entries = shapes.mask_env_entries([f"{k}={v}" for k, v in labels.items()])
        return {k: entry.partition("=")[2] for k, entry in zip(labels, entries, strict=True)}

    @staticmethod
    def shaped_data(value: Any) -> Any:
        """JSON-like data with credential-shaped strings and credential-named fields masked
        (also `{"name": "DB_PASSWORD", "value": …}` entries)."""
        return shapes.mask_credential_data(value)

    def arguments(self, value: Any, extra: Iterable[str] = ()) -> Any:
        """A call's arguments as anyone may see them: known secrets first, then anything
        shaped like a credential (a token under an innocent name)."""
        return shapes.mask_credential_data(self.data(value, extra))


TRIPWIRE = Tripwire()


def shorten(
    text: str,
    limit: int,
    *,
    secrets: Iterable[str] = (),
    redactor: Redactor | None = None,
    end: bool = False,
    mark: str = "…",
    redacted: bool = False,
) -> str:
    """THE way to cut text anyone will see: known secrets are redacted FIRST, then the
    text is cut to `limit` characters (`end`: its last ones), `mark` standing for what
    was left out — so a cut never leaves part of a secret the tripwire no longer
    recognises. Knows every remembered secret (`TRIPWIRE`) plus `secrets`. `redacted`:
    the text already passed the tripwire whole (a `StreamRedactor`'s output): only cut."""
    clean = str(text) if redacted else (redactor or TRIPWIRE.redactor(secrets)).text(str(text))
    if len(clean) <= limit:
        return clean
    room = max(limit - len(mark), 0)
    if end:
        start = len(clean) - room
        if (marker := _marker_across(clean, start)) != -1:
            start = marker + len(REDACTED)  # not half a marker
        return mark + clean[start:]
    if (marker := _marker_across(clean, room)) != -1:
        room = marker
    return clean[:room] + mark
