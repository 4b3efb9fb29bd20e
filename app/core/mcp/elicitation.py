"""Elicitation (`elicitation/create`): an MCP server asks the user for a few values (form
mode) or to open a web page (URL mode). This module holds what a front end needs — the
request as plain data, already made visible (no terminal escapes, no bidi tricks), and the
check of the answer against the server's schema — and imports neither the SDK nor Qt.

The schema comes from the server, so it is untrusted: only the flat, primitive forms the
spec allows are accepted (strings, numbers, integers, booleans, single- and multi-select
enums); anything else is declined without asking the user.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from app.core.visible import one_line, visible
from tools.redact import shorten

Action = Literal["accept", "decline", "cancel"]
Value = str | int | float | bool | list[str]
FieldKind = Literal["string", "number", "integer", "boolean", "choice", "choices"]

MAX_FIELDS = 30
MAX_MESSAGE = 4000
MAX_VALUE = 10_000


class UnsupportedRequest(ValueError):
    """The server asked for something Deskhand does not show (nested schema, odd URL...)."""


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class ElicitField:
    """One value the server asks for. `title` and `description` are one visible line."""

    name: str
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Value | None = None
    choices: tuple[Choice, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None


@dataclass(frozen=True)
class ElicitationRequest:
    """What a server asks. `message` is made visible (newlines kept); `url` is one visible
    line and http(s) only; `cancelled` is set when the server withdraws the request or the
    connection ends, so a form can close itself."""

    server: str
    mode: Literal["form", "url"]
    message: str
    fields: tuple[ElicitField, ...] = ()
    url: str | None = None
    site: str | None = None
    #: The Deskhand tool call this request came during, when exactly one call to this
    #: server was running (a front end shows the form next to that call's card).
    call_id: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class ElicitationAnswer:
    action: Action
    content: dict[str, Value] | None = None


#: Asks the user; runs on a worker thread (it may block until the user answers).
ElicitationHandler = Callable[[ElicitationRequest], ElicitationAnswer]


def decline_all(request: ElicitationRequest) -> ElicitationAnswer:
    """The default when no front end can ask: decline."""
    return ElicitationAnswer("decline")


# ---- reading a request ----------------------------------------------------------------------


def form_request(
    server: str, message: str, schema: Any, call_id: str | None = None
) -> ElicitationRequest:
    return ElicitationRequest(
        server=server,
        mode="form",
        message=visible(shorten(message, MAX_MESSAGE, mark="")),
        fields=parse_schema(schema),
        call_id=call_id,
    )


def url_request(
    server: str, message: str, url: str, call_id: str | None = None
) -> ElicitationRequest:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UnsupportedRequest(f"only http(s) web addresses are opened, not {one_line(url, 80)}")
    if one_line(url, 2000) != url:
        raise UnsupportedRequest("the web address has control or invisible characters")
    return ElicitationRequest(
        server=server,
        mode="url",
        message=visible(shorten(message, MAX_MESSAGE, mark="")),
        url=url,
        site=parts.hostname,
        call_id=call_id,
    )


def parse_schema(schema: Any) -> tuple[ElicitField, ...]:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise UnsupportedRequest("the form is not an object of fields")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict) or len(properties) > MAX_FIELDS:
        raise UnsupportedRequest(f"the form must have at most {MAX_FIELDS} fields")
    required = schema.get("required") or []
    if not isinstance(required, list):
        raise UnsupportedRequest("'required' is not a list")
    return tuple(_field(str(name), spec, name in required) for name, spec in properties.items())


def _field(name: str, spec: Any, required: bool) -> ElicitField:
    if not isinstance(spec, dict):
        raise UnsupportedRequest(f"field {one_line(name, 60)!r} has no schema")
    kind, choices = _kind(name, spec)
    common: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "title": one_line(str(spec.get("title") or name), 120),
        "description": one_line(str(spec.get("description") or ""), 400),
        "required": required,
        "choices": choices,
        "format": _str_or_none(spec.get("format")),
        "minimum": _num_or_none(spec.get("minimum")),
        "maximum": _num_or_none(spec.get("maximum")),
        "min_length": _int_or_none(spec.get("minLength", spec.get("minItems"))),
        "max_length": _int_or_none(spec.get("maxLength", spec.get("maxItems"))),
    }
    default = spec.get("default")
    if default is not None and check_value(ElicitField(**common), default) is None:
        common["default"] = default
    return ElicitField(**common)


def _kind(name: str, spec: dict[str, Any]) -> tuple[FieldKind, tuple[Choice, ...]]:
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        choices = _choices(items) if isinstance(items, dict) else ()
        if not choices:
            raise UnsupportedRequest(f"field {one_line(name, 60)!r} is a list without choices")
        return "choices", choices
    choices = _choices(spec)
    if choices:
        return "choice", choices
    if kind in {"string", "number", "integer", "boolean"}:
        return kind, ()
    raise UnsupportedRequest(f"field {one_line(name, 60)!r} has an unsupported type")


def _choices(spec: dict[str, Any]) -> tuple[Choice, ...]:
    if isinstance(spec.get("enum"), list):
        values = [str(v) for v in spec["enum"]]
        names = spec.get("enumNames")
        labels = [str(n) for n in names] if isinstance(names, list) else values
        if len(labels) != len(values):
            labels = values
        pairs = zip(values, labels, strict=True)
        return tuple(Choice(v, one_line(label, 120)) for v, label in pairs)
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if isinstance(options, list):
            found = [
                Choice(str(o["const"]), one_line(str(o.get("title") or o["const"]), 120))
                for o in options
                if isinstance(o, dict) and "const" in o
            ]
            if found:
                return tuple(found)
    return ()


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _num_or_none(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- checking an answer ---------------------------------------------------------------------


def check_value(spec: ElicitField, value: Any) -> str | None:
    """Why `value` does not fit `spec` (None: it fits)."""
    title = spec.title
    if spec.kind == "boolean":
        return None if isinstance(value, bool) else f"{title}: yes or no"
    if spec.kind in {"number", "integer"}:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{title}: a number"
        if not math.isfinite(value) or (spec.kind == "integer" and not float(value).is_integer()):
            return f"{title}: a whole number" if spec.kind == "integer" else f"{title}: a number"
        if spec.minimum is not None and value < spec.minimum:
            return f"{title}: at least {spec.minimum:g}"
        if spec.maximum is not None and value > spec.maximum:
            return f"{title}: at most {spec.maximum:g}"
        return None
    allowed = {c.value for c in spec.choices}
    if spec.kind == "choices":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{title}: a list of choices"
        if not set(value) <= allowed:
            return f"{title}: only the offered choices"
        return _length(spec, len(value), "choices")
    if not isinstance(value, str) or len(value) > MAX_VALUE:
        return f"{title}: text"
    if spec.kind == "choice" and value not in allowed:
        return f"{title}: one of the offered choices"
    return _length(spec, len(value), "characters")


def _length(spec: ElicitField, n: int, unit: str) -> str | None:
    if spec.min_length is not None and n < spec.min_length:
        return f"{spec.title}: at least {spec.min_length} {unit}"
    if spec.max_length is not None and n > spec.max_length:
        return f"{spec.title}: at most {spec.max_length} {unit}"
    return None


def check_answer(
    request: ElicitationRequest, answer: ElicitationAnswer
) -> tuple[ElicitationAnswer, str | None]:
    """The answer to send, and why it was changed to a decline (None: sent as given).
    Only declared fields are sent; every value must fit its field; required ones present."""
    if answer.action != "accept" or request.mode == "url":
        return ElicitationAnswer(answer.action), None
    given = answer.content or {}
    content: dict[str, Value] = {}
    for spec in request.fields:
        if spec.name not in given or given[spec.name] is None:
            if spec.required:
                return ElicitationAnswer("decline"), f"{spec.title} is required"
            continue
        problem = check_value(spec, given[spec.name])
        if problem:
            return ElicitationAnswer("decline"), problem
        value = given[spec.name]
        content[spec.name] = int(value) if spec.kind == "integer" else value  # type: ignore[arg-type]
    return ElicitationAnswer("accept", content), None
