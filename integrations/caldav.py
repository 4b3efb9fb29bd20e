"""Calendars as accounts: the built-in local calendar (an .ics file under the Deskhand home,
no setup) and CalDAV servers (Nextcloud, Fastmail, iCloud, Radicale…; the password lives in
the keyring).

Cheap to import: the caldav package loads inside the functions that talk to a server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from integrations.spec import Account, IntegrationField, IntegrationSpec

if TYPE_CHECKING:
    from caldav.davclient import DAVClient

LOCAL_ID = "local"
LOCAL_LABEL = "On this computer"
#: Seconds a CalDAV request may take before it counts as "cannot reach".
TIMEOUT = 20


def discover() -> list[Account]:
    """The local calendar always exists (url "" = `<home>/calendar/local.ics`)."""
    return [Account(LOCAL_ID, "caldav", LOCAL_LABEL, {"url": ""}, discovered=True)]


def is_local(account: Account) -> bool:
    return not account.fields.get("url", "").strip()


class CalDavUnavailable(RuntimeError):
    """The caldav package is not installed."""


class CalDavProblem(RuntimeError):
    """A CalDAV server could not be used; the message says why in plain words."""


def connect(account: Account) -> DAVClient:
    """A caldav.DAVClient for the account (no request is made yet)."""
    try:
        from caldav.davclient import DAVClient
    except ImportError:
        raise CalDavUnavailable(
            "CalDAV accounts need the Python package caldav (pip install caldav); "
            "the local calendar works without it"
        ) from None
    return DAVClient(
        url=account.fields["url"].strip(),
        username=account.get("username") or None,
        password=account.get("password") or None,
        timeout=TIMEOUT,
    )


def readable_error(exc: BaseException, url: str) -> str | None:
    """A message for a failure talking to the server at `url`, or None if not a known kind."""
    try:
        from caldav.lib import error
    except ImportError:  # pragma: no cover - only reached with caldav installed
        return None
    if isinstance(exc, error.AuthorizationError):
        if getattr(exc, "status", None) == 403 or "Forbidden" in str(exc.reason):
            return (
                f"the CalDAV server at {url} refused access (403 Forbidden): the account may "
                "not use this calendar"
            )
        return f"the CalDAV server at {url} rejected the login: wrong user name or password"
    if isinstance(exc, error.DAVError):
        where = exc.url or url
        return f"the CalDAV server answered {type(exc).__name__} for {where}: {exc.reason}"
    if _is_unreachable(exc):
        return f"cannot reach the CalDAV server at {url} ({_reason(exc)}); is it running?"
    return None


def _is_unreachable(exc: BaseException) -> bool:
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, (ConnectionError, TimeoutError)):
            return True
        if type(item).__module__.split(".")[0] in {"niquests", "requests", "urllib3"}:
            return True
        pending.extend(e for e in (item.__cause__, item.__context__) if e is not None)
    return False


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Connection refused", "timed out", "Name or service not known"):
        if marker.lower() in text.lower():
            return marker.lower()
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def test_connection(account: Account) -> str:
    if is_local(account):
        return "The local calendar on this computer needs no connection."
    url = account.fields["url"].strip()
    try:
        with connect(account) as client:
            calendars = client.principal().calendars()
            names = [c.get_display_name() or str(c.url) for c in calendars]
    except CalDavUnavailable:
        raise
    except Exception as exc:
        message = readable_error(exc, url)
        if message is None:
            raise
        raise CalDavProblem(message) from None
    who = account.get("username") or "anonymous"
    listed = ", ".join(names) if names else "no calendars yet"
    return f"Connected to {url} as {who}: {len(names)} calendar(s) ({listed})"


SPEC = IntegrationSpec(
    id="caldav",
    title="Calendars (CalDAV)",
    description="Calendars the assistant may read and change: the local calendar on this "
    "computer and CalDAV accounts (Nextcloud, Fastmail, iCloud, Radicale…).",
    fields=(
        IntegrationField(
            "url",
            "Server URL",
            required=True,
            help="e.g. https://cloud.example.com/remote.php/dav or https://caldav.fastmail.com",
        ),
        IntegrationField("username", "User name"),
        IntegrationField(
            "password", "Password", secret=True, help="An app password where the service has them"
        ),
        IntegrationField(
            "calendar", "Default calendar", help="Its name; empty for the first calendar"
        ),
    ),
    discover=discover,
    test_connection=test_connection,
)
