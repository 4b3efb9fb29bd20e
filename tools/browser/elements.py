"""Finding the element a tool call names (number, text or selector) and describing it.

Runs on the browser thread with Playwright objects passed in; imports no playwright itself.
"""

from __future__ import annotations

from typing import Any, Protocol

from tools.browser.snapshot import REF_ATTR
from tools.spec import ToolError


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
    squash(el.innerText || el.textContent).slice(0, 80) || squash(el.title);
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


def _first_visible(locator: Any) -> Any:
    count = locator.count()
    for i in range(min(count, 10)):
        candidate = locator.nth(i)
        if candidate.is_visible():
            return candidate
    return locator.first


def _by_text(page: Any, text: str) -> Any | None:
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
                return _first_visible(locator)
    return None


def locate(page: Any, target: Target) -> Any:
    """A Playwright locator for the element, or a ToolError saying how to find it."""
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
        locator = page.locator(target.selector)
        try:
            count = locator.count()
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
            raise ToolError(f"The selector {target.selector!r} is not valid: {first}") from None
        if count == 0:
            raise ToolError(f"No element on this page matches the selector {target.selector!r}.")
        return _first_visible(locator)
    if target.text is not None:
        found = _by_text(page, target.text)
        if found is None:
            raise ToolError(
                f"No element with the text {target.text!r} is on this page. Call "
                "browser_snapshot and use the element's number."
            )
        return found
    raise ToolError("name the element with ref, text or selector")


def describe(page: Any, target: Target) -> dict[str, Any]:
    """What the element is (kind, label, whether it submits a form, where a link goes)."""
    info: dict[str, Any] = locate(page, target).evaluate(DESCRIBE_JS)
    return info


def describe_focused(page: Any) -> dict[str, Any] | None:
    """The focused element's facts (None when nothing in the page has focus)."""
    handle = page.evaluate_handle(
        "() => document.activeElement && document.activeElement !== document.body"
        " ? document.activeElement : null"
    )
    element = handle.as_element()
    if element is None:
        return None
    info: dict[str, Any] = element.evaluate(DESCRIBE_JS)
    return info


def label(info: dict[str, Any]) -> str:
    """`[5] button "Send"` — for status lines and approval previews."""
    ref = f"[{info['ref']}] " if info.get("ref") else ""
    name = f' "{info["name"]}"' if info.get("name") else ""
    return f"{ref}{info.get('kind', 'element')}{name}"
