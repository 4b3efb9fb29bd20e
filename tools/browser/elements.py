"""Finding the element a tool call names (number, text or selector) and describing it.

Runs on the browser thread with Playwright objects passed in; imports no playwright itself.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from tools.browser.snapshot import REF_ATTR
from tools.redact import REDACTED, TRIPWIRE, Redactor, shorten
from tools.spec import ToolError

#: An element's name as tools show it: cut in Python after masking (the page script sends
#: up to 2000 characters), never in the page.
NAME_CHARS = 80


class Target(Protocol):
    ref: int | None
    text: str | None
    selector: str | None


DESCRIBE_JS = r"""
(el) => {
  const squash = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const labelText = (l) => {
    const copy = l.cloneNode(true);
    copy.querySelectorAll('input, select, textarea, button').forEach((c) => c.remove());
    return copy.textContent;
  };
  const tag = el.tagName;
  const type = (el.getAttribute('type') || '').toLowerCase();
  const role = el.getAttribute('role') || '';
  const buttonish = tag === 'BUTTON' || role === 'button' ||
    (tag === 'INPUT' && ['submit', 'button', 'reset', 'image'].includes(type));
  const submits = !!el.form && (
    (tag === 'BUTTON' && (type === '' || type === 'submit')) ||
    (tag === 'INPUT' && (type === 'submit' || type === 'image')));
  const form = el.form || el.closest('form');
  const link = el.closest('a[href]');
  let name = squash(el.getAttribute('aria-label')) ||
    (el.labels && el.labels.length
      ? squash([...el.labels].map(labelText).join(' ')) : '') ||
    squash(tag === 'INPUT' ? (el.value && buttonish ? el.value : el.placeholder || el.name) : '') ||
    squash(el.innerText || el.textContent).slice(0, 2000) || squash(el.title);
  let kind = tag.toLowerCase();
  if (link) kind = 'link';
  else if (buttonish) kind = 'button';
  else if (tag === 'INPUT') kind = `${type || 'text'} field`;
  else if (tag === 'TEXTAREA') kind = 'text area';
  return {
    ref: el.getAttribute('data-deskhand-ref'),
    kind, name, tag: tag.toLowerCase(), type,
    buttonish, submits, in_form: !!form,
    // a submit button's formaction/formmethod override the form's own
    form_action: form ? ((submits && el.hasAttribute('formaction') && el.formAction) ||
      form.action || location.href) : null,
    form_method: form ? ((submits && el.getAttribute('formmethod')) ||
      form.getAttribute('method') || 'get').toUpperCase() : null,
    text_entry: (tag === 'INPUT' && !['submit', 'button', 'reset', 'image', 'checkbox', 'radio',
      'file', 'range', 'color'].includes(type)) || tag === 'TEXTAREA',
    href: link ? link.href : null,
    new_tab: link ? link.target === '_blank' : false,
    page_url: location.href,
  };
}
"""


# ---- selectors: plain CSS only -------------------------------------------------------------

#: Pseudo-classes of plain CSS that look at structure and state, never at text. Playwright's
#: own (`:has-text`, `:text`, `:text-is`, `:text-matches`, layout ones) match the page's RAW
#: text, which the tripwire never saw: a right guess of a secret's start would match.
_PSEUDO_OK = frozenset(
    {
        "active", "any-link", "checked", "default", "defined", "dir", "disabled", "empty",
        "enabled", "first-child", "first-of-type", "focus", "focus-visible", "focus-within",
        "has", "hover", "in-range", "indeterminate", "invalid", "is", "lang", "last-child",
        "last-of-type", "link", "not", "nth-child", "nth-last-child", "nth-last-of-type",
        "nth-of-type", "only-child", "only-of-type", "optional", "out-of-range",
        "placeholder-shown", "read-only", "read-write", "required", "root", "scope", "target",
        "valid", "visible", "visited", "where",
    }
)
#: Attribute operators that match part of a value (a prefix of a secret in an href…).
_PART_OPERATORS = ("^=", "$=", "*=", "~=", "|=")
_ENGINE = re.compile(r"\s*[\w+:*-]+\s*=")
_NAME_CHAR = re.compile(r"[\w-]")
_HEX = re.compile(r"[0-9a-fA-F]{1,6}\s?")

REFUSED_SELECTOR = (
    "Only a plain CSS selector (tags, #ids, .classes, [attr] or [attr=\"exact value\"], "
    "combinators and structural pseudo-classes) can name an element; Playwright's text, "
    "XPath and other engines, :has-text()/:text…() and partial attribute matches are not "
    "accepted. Call browser_snapshot and use the element's number (ref), or name it by its text."
)


def _pseudo_name(selector: str, at: int) -> tuple[str, int]:
    """The pseudo-class name starting at `at` (CSS escapes decoded, lower case) and where
    it ends."""
    out: list[str] = []
    i = at
    while i < len(selector):
        ch = selector[i]
        if ch == "\\":
            hexes = _HEX.match(selector, i + 1)
            if hexes:
                out.append(chr(min(int(hexes.group(0).strip(), 16), 0x10FFFF) or 0xFFFD))
                i = hexes.end()
            elif i + 1 < len(selector):
                out.append(selector[i + 1])
                i += 2
            else:
                i += 1
            continue
        if not _NAME_CHAR.match(ch) and ord(ch) < 0x80:
            break
        out.append(ch)
        i += 1
    return "".join(out).lower(), i


def plain_selector(selector: str) -> str:
    """`selector` when it is plain CSS that matches on structure (see `_PSEUDO_OK`), else a
    ToolError with one plain message: the answer says nothing about the page."""
    text = selector.strip()
    refused = ToolError(REFUSED_SELECTOR)
    if (
        not text
        or text[0] in "\"'(/"  # text and XPath engines
        or text.startswith(("//", ".."))
        or _ENGINE.match(text)
        or ">>" in text
        or "/*" in text
    ):
        raise refused
    i, quote = 0, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "\\":
            i += 2
            continue
        elif text.startswith(_PART_OPERATORS, i):
            raise refused
        elif ch == ":":
            at = i + 2 if text.startswith("::", i) else i + 1
            if at != i + 1:
                raise refused  # pseudo-elements (::before…) name no element
            name, i = _pseudo_name(text, at)
            if name not in _PSEUDO_OK:
                raise refused
            continue
        i += 1
    if quote:
        raise refused
    return text


# ---- finding the element --------------------------------------------------------------------

#: What an element may be found by (its text, accessible name, label, placeholder…).
TEXTS_JS = r"""
(el) => {
  const out = [el.innerText, el.textContent, el.getAttribute('aria-label'),
    el.getAttribute('placeholder'), el.getAttribute('title'), el.getAttribute('alt'),
    el.getAttribute('value'), typeof el.value === 'string' ? el.value : ''];
  const by = el.getAttribute('aria-labelledby');
  if (by) {
    for (const id of by.split(/\s+/)) {
      const ref = document.getElementById(id);
      if (ref) out.push(ref.innerText || ref.textContent);
    }
  }
  if (el.labels) for (const l of el.labels) out.push(l.innerText || l.textContent);
  const img = el.querySelector && el.querySelector('img[alt]');
  if (img) out.push(img.alt);
  return out.filter((t) => typeof t === 'string' && t);
}
"""


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def shown_in(text: str, texts: list[str], redactor: Redactor) -> bool:
    """Whether `text` is in one of `texts` once known secrets are masked, outside every
    `[redacted]` marker (whitespace and case as Playwright's text matching has them): a
    text found only in a secret's characters (or in the marker standing for them) is not
    there, so a match cannot answer yes/no about a secret."""
    wanted = _fold(text)
    if not wanted:
        return False
    for raw in texts:
        for piece in redactor.text(raw).split(REDACTED):
            if wanted in _fold(piece):
                return True
    return False


def _first_visible(locator: Any, keep: Any = None) -> Any | None:
    """The first visible match (else the first) of the first 10 that `keep` accepts."""
    count = locator.count()
    kept = []
    for i in range(min(count, 10)):
        candidate = locator.nth(i)
        if keep is not None and not keep(candidate):
            continue
        if candidate.is_visible():
            return candidate
        kept.append(candidate)
    if keep is None:
        return locator.first
    return kept[0] if kept else None


def _by_text(page: Any, text: str, redactor: Redactor) -> Any | None:
    """The element Playwright finds by `text` whose MASKED texts still hold it."""

    def shows(candidate: Any) -> bool:
        try:
            return shown_in(text, list(candidate.evaluate(TEXTS_JS) or []), redactor)
        except Exception:
            return False

    for exact in (True, False):
        candidates = (
            page.get_by_role("button", name=text, exact=exact),
            page.get_by_role("link", name=text, exact=exact),
            page.get_by_label(text, exact=exact),
            page.get_by_placeholder(text, exact=exact),
            page.get_by_role("option", name=text, exact=exact),
            page.get_by_text(text, exact=exact),
        )
        for locator in candidates:
            if locator.count() > 0:
                found = _first_visible(locator, shows)
                if found is not None:
                    return found
    return None


def locate(page: Any, target: Target, redactor: Redactor | None = None) -> Any:
    """A Playwright locator for the element, or a ToolError saying how to find it. Text is
    matched as the tripwire shows it; a selector must be plain CSS (`plain_selector`)."""
    if target.ref is not None:
        locator = page.locator(f'[{REF_ATTR}="{int(target.ref)}"]')
        if locator.count() == 0:
            raise ToolError(
                f"There is no element [{target.ref}] on this page any more (the page changed "
                "or the number is from an older snapshot). Call browser_snapshot for fresh "
                "numbers."
            )
        return locator.first
    if target.selector is not None:
        locator = page.locator(plain_selector(target.selector))
        try:
            count = locator.count()
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
            raise ToolError(f"The selector {target.selector!r} is not valid: {first}") from None
        if count == 0:
            raise ToolError(f"No element on this page matches the selector {target.selector!r}.")
        return _first_visible(locator)
    if target.text is not None:
        found = _by_text(page, target.text, redactor or TRIPWIRE.redactor())
        if found is None:
            raise ToolError(
                f"No element with the text {target.text!r} is on this page. Call "
                "browser_snapshot and use the element's number."
            )
        return found
    raise ToolError("name the element with ref, text or selector")


def masking(ctx: Any) -> Redactor:
    """The tripwire as a call knows it: element texts are matched and cut as it shows them."""
    return TRIPWIRE.redactor(ctx.secret_values())


def info_of(element: Any, redactor: Redactor | None = None) -> dict[str, Any]:
    """DESCRIBE_JS on a locator or element handle, its name masked, then cut."""
    info: dict[str, Any] = element.evaluate(DESCRIBE_JS)
    if isinstance(info.get("name"), str):
        info["name"] = shorten(info["name"], NAME_CHARS, redactor=redactor)
    return info


def describe(page: Any, target: Target) -> dict[str, Any]:
    """What the element is (kind, label, whether it submits a form, where a link goes)."""
    return info_of(locate(page, target))


def describe_focused(page: Any) -> dict[str, Any] | None:
    """The focused element's facts (None when nothing in the page has focus)."""
    handle = page.evaluate_handle(
        "() => document.activeElement && document.activeElement !== document.body"
        " ? document.activeElement : null"
    )
    element = handle.as_element()
    if element is None:
        return None
    return info_of(element)


def label(info: dict[str, Any]) -> str:
    """`[5] button "Send"` — for status lines and approval previews."""
    ref = f"[{info['ref']}] " if info.get("ref") else ""
    name = f' "{info["name"]}"' if info.get("name") else ""
    return f"{ref}{info.get('kind', 'element')}{name}"
