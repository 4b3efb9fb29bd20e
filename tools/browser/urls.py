"""Which site an address belongs to, decided the way a browser decides it.

A site is scheme + host + port ("https://example.com:443"). Python's urllib does not parse
addresses like a browser: it keeps backslashes, tabs and newlines, does not read IPv4 in
decimal/octal/hex forms, does not map Unicode hosts, and splits `user@host` differently in
corner cases. Approving one site while the browser loads another would defeat the check, so
this module follows the WHATWG URL Standard's basic URL parser and host parser (the parts
that decide the origin of a URL with a special scheme) step by step.

Anything this parser cannot be sure about is a failure (None), never a guess: callers treat
that as "ask" or "refuse". Pure Python; no browser needed (the approval hooks use it).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

#: Special schemes and their default ports (WHATWG URL §"special scheme").
DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | {chr(c) for c in range(0x20)} | {"%", "\x7f"}
_RADIX_DIGITS = {10: set(string.digits), 8: set("01234567"), 16: set(string.hexdigits)}


@dataclass(frozen=True)
class Origin:
    scheme: str
    #: Serialised host: lower-case ASCII domain, dotted IPv4, or "[...]" IPv6.
    host: str
    port: int

    @property
    def site(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def clean(raw: str) -> str:
    """What the URL parser actually reads: leading/trailing C0 controls and spaces stripped,
    tabs and newlines removed anywhere."""
    return raw.strip(_C0_OR_SPACE).translate(_TAB_OR_NEWLINE)


def scheme_of(raw: str) -> str | None:
    match = _SCHEME.match(clean(raw))
    return match.group()[:-1].lower() if match else None


def parse_origin(raw: str) -> Origin | None:
    """The origin of an absolute URL with a special scheme; None if it has none or the
    browser would reject the URL."""
    text = clean(raw)
    match = _SCHEME.match(text)
    if not match:
        return None
    scheme = match.group()[:-1].lower()
    if scheme not in DEFAULT_PORTS:
        return None
    # special authority (ignore) slashes: any run of / and \ after "scheme:"
    rest = text[match.end() :].lstrip("/\\")
    end = next((i for i, c in enumerate(rest) if c in "/\\?#"), len(rest))
    authority = rest[:end]
    at = authority.rfind("@")
    host_port = authority[at + 1 :] if at >= 0 else authority
    split = _port_colon(host_port)
    host_text = host_port if split is None else host_port[:split]
    port_text = "" if split is None else host_port[split + 1 :]
    if not host_text:
        return None
    if port_text:
        if not all(c in string.digits for c in port_text) or int(port_text) > 65535:
            return None
        port = int(port_text)
    else:
        port = DEFAULT_PORTS[scheme]
    host = parse_host(host_text)
    if host is None:
        return None
    return Origin(scheme, host, port)


def _port_colon(host_port: str) -> int | None:
    inside = False
    for i, c in enumerate(host_port):
        if c == "[":
            inside = True
        elif c == "]":
            inside = False
        elif c == ":" and not inside:
            return i
    return None


# ---- host parser --------------------------------------------------------------------------


def parse_host(text: str) -> str | None:
    """WHATWG host parser for special schemes; returns the serialised host."""
    if text.startswith("["):
        if not text.endswith("]"):
            return None
        pieces = parse_ipv6(text[1:-1])
        return None if pieces is None else f"[{serialize_ipv6(pieces)}]"
    domain = _percent_decode(text).decode("utf-8", errors="replace")
    ascii_domain = domain_to_ascii(domain)
    if ascii_domain is None:
        return None
    if _ends_in_number(ascii_domain):
        address = parse_ipv4(ascii_domain)
        return None if address is None else ".".join(str(b) for b in address.to_bytes(4, "big"))
    return ascii_domain


def _percent_decode(text: str) -> bytes:
    data = text.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(data):
        byte = data[i]
        pair = data[i + 1 : i + 3]
        if byte == 0x25 and len(pair) == 2 and all(chr(b) in string.hexdigits for b in pair):
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(byte)
            i += 1
    return bytes(out)


def domain_to_ascii(domain: str) -> str | None:
    """UTS #46 ToASCII with the URL Standard's options (CheckHyphens off, non-transitional,
    no STD3 rules), then the forbidden-code-point check."""
    labels = domain.split(".")
    if domain.isascii() and not any(label[:4].lower() == "xn--" for label in labels):
        result: str | None = domain.lower()
    else:
        result = _uts46(domain)
        if result is None:
            return None
    if not result or any(c in _FORBIDDEN_DOMAIN for c in result):
        return None
    return result


def _uts46(domain: str) -> str | None:
    import idna  # installed with httpx; only needed for Unicode and xn-- hosts

    try:
        mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False)
    except idna.IDNAError:
        return None
    labels = mapped.split(".")
    out = []
    for index, label in enumerate(labels):
        if not label:
            if index == len(labels) - 1:  # a trailing dot stays
                out.append("")
                continue
            return None  # empty label in the middle: refuse rather than guess
        if label.isascii() and not label.lower().startswith("xn--"):
            out.append(label.lower())
            continue
        try:
            out.append(idna.alabel(label).decode("ascii"))
        except (idna.IDNAError, UnicodeError):
            return None
    return ".".join(out)


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(c in string.digits for c in last):
        return True
    return _ipv4_number(last) is not None


def _ipv4_number(text: str) -> int | None:
    if not text:
        return None
    radix = 10
    if len(text) >= 2 and text[:2] in ("0x", "0X"):
        text, radix = text[2:], 16
    elif len(text) >= 2 and text[0] == "0":
        text, radix = text[1:], 8
    if not text:
        return 0
    if not all(c in _RADIX_DIGITS[radix] for c in text):
        return None
    return int(text, radix)


def parse_ipv4(text: str) -> int | None:
    """WHATWG IPv4 parser: 1 to 4 parts, each decimal, 0-octal or 0x-hex."""
    parts = text.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            return None
        numbers.append(number)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1]
    for i, number in enumerate(numbers[:-1]):
        address += number * 256 ** (3 - i)
    return address


def parse_ipv6(text: str) -> list[int] | None:
    """WHATWG IPv6 parser (eight 16-bit pieces), including an embedded dotted IPv4 tail."""
    address = [0] * 8
    piece = 0
    compress: int | None = None
    i = 0
    n = len(text)

    def at(k: int) -> str:
        return text[k] if k < n else ""

    if at(0) == ":":
        if at(1) != ":":
            return None
        i = 2
        piece = 1
        compress = 1
    while i < n:
        if piece == 8:
            return None
        if text[i] == ":":
            if compress is not None:
                return None
            i += 1
            piece += 1
            compress = piece
            continue
        value = length = 0
        while length < 4 and at(i) and at(i) in string.hexdigits:
            value = value * 16 + int(text[i], 16)
            i += 1
            length += 1
        if at(i) == ".":
            if length == 0:
                return None
            i -= length
            if piece > 6:
                return None
            seen = 0
            while i < n:
                ipv4_piece: int | None = None
                if seen > 0:
                    if text[i] == "." and seen < 4:
                        i += 1
                    else:
                        return None
                if not at(i) or at(i) not in string.digits:
                    return None
                while at(i) and at(i) in string.digits:
                    digit = int(text[i])
                    if ipv4_piece is None:
                        ipv4_piece = digit
                    elif ipv4_piece == 0:
                        return None
                    else:
                        ipv4_piece = ipv4_piece * 10 + digit
                    if ipv4_piece > 255:
                        return None
                    i += 1
                address[piece] = address[piece] * 0x100 + (ipv4_piece or 0)
                seen += 1
                if seen in (2, 4):
                    piece += 1
            if seen != 4:
                return None
            break
        if at(i) == ":":
            i += 1
            if i >= n:
                return None
        elif i < n:
            return None
        address[piece] = value
        piece += 1
    if compress is not None:
        swaps = piece - compress
        piece = 7
        while piece != 0 and swaps > 0:
            other = compress + swaps - 1
            address[piece], address[other] = address[other], address[piece]
            piece -= 1
            swaps -= 1
    elif piece != 8:
        return None
    return address


def serialize_ipv6(pieces: list[int]) -> str:
    """Hex pieces, the first longest run of two or more zero pieces written as "::"."""
    best_start, best_len = -1, 1
    i = 0
    while i < 8:
        if pieces[i] == 0:
            j = i
            while j < 8 and pieces[j] == 0:
                j += 1
            if j - i > best_len:
                best_start, best_len = i, j - i
            i = j
        else:
            i += 1
    out = ""
    i = 0
    while i < 8:
        if i == best_start:
            out += "::" if i == 0 else ":"
            i += best_len
            continue
        out += format(pieces[i], "x")
        if i != 7:
            out += ":"
        i += 1
    return out
