"""Where events live, behind one small interface: the local .ics file or a CalDAV account.

The caldav package is imported only when a CalDAV account is used, so the local calendar
works without it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import icalendar

from integrations import caldav as caldav_integration
from integrations.spec import Account
from tools.calendar.events import PRODID, CalendarRef, StoredEvent
from tools.spec import ToolContext, ToolError

if TYPE_CHECKING:
    from caldav.calendarobjectresource import CalendarObjectResource
    from caldav.collection import Calendar as DavCalendar

INTEGRATION = "caldav"

T = TypeVar("T")


class Backend(Protocol):
    label: str

    def calendars(self) -> list[CalendarRef]: ...

    def default_calendar(self) -> CalendarRef: ...

    def events(self, calendar: CalendarRef, start: datetime, end: datetime) -> list[StoredEvent]:
        """Events with an occurrence overlapping [start, end) (more is harmless)."""
        ...

    def find(self, uid: str, calendars: list[CalendarRef]) -> StoredEvent | None: ...

    def add(self, calendar: CalendarRef, ical: icalendar.Calendar) -> StoredEvent: ...

    def replace(self, stored: StoredEvent, ical: icalendar.Calendar) -> None: ...

    def remove(self, stored: StoredEvent) -> None: ...

    def close(self) -> None: ...


def pick(backend: Backend, names: list[str] | None) -> list[CalendarRef]:
    """Calendars by name or URL (case-insensitive); all of them when `names` is empty."""
    available = backend.calendars()
    if not names:
        return available
    chosen: list[CalendarRef] = []
    for name in names:
        match = [c for c in available if name.strip().lower() in (c.name.lower(), c.id.lower())]
        if not match:
            known = ", ".join(c.name for c in available) or "none"
            raise ToolError(f"no calendar {name!r} in {backend.label} (calendars: {known})")
        chosen.extend(c for c in match if c not in chosen)
    return chosen


def pick_one(backend: Backend, name: str | None) -> CalendarRef:
    return pick(backend, [name])[0] if name else backend.default_calendar()


# ---- the local .ics file ----------------------------------------------------------------

_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time: a lock per file within the process, and flock across them."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(path, threading.Lock())
    with lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # Windows: the in-process lock is what there is
            yield
            return
        with open(path.with_name(path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


class LocalIcsBackend:
    """One calendar in one .ics file, rewritten atomically (temp file + os.replace)."""

    CALENDAR = CalendarRef("local", "Local")

    def __init__(self, path: Path, label: str = caldav_integration.LOCAL_LABEL) -> None:
        self.path = path
        self.label = label

    def calendars(self) -> list[CalendarRef]:
        return [self.CALENDAR]

    def default_calendar(self) -> CalendarRef:
        return self.CALENDAR

    def close(self) -> None:
        pass

    # reading

    def _read(self) -> icalendar.Calendar:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if not data.strip():
            cal = icalendar.Calendar()
            cal.add("prodid", PRODID)
            cal.add("version", "2.0")
            return cal
        try:
            return icalendar.Calendar.from_ical(data)
        except ValueError as exc:
            raise ToolError(
                f"the local calendar file {self.path} is not valid iCalendar ({exc}); "
                "repair or move it away"
            ) from None

    def _grouped(self, cal: icalendar.Calendar) -> dict[str, StoredEvent]:
        zones = list(cal.walk("VTIMEZONE"))
        groups: dict[str, StoredEvent] = {}
        for event in cal.walk("VEVENT"):
            uid = str(event.get("UID", ""))
            if uid not in groups:
                wrapper = icalendar.Calendar()
                wrapper.add("prodid", PRODID)
                wrapper.add("version", "2.0")
                for tz in zones:
                    wrapper.add_component(tz)
                groups[uid] = StoredEvent(self.CALENDAR, wrapper)
            groups[uid].ical.add_component(event)
        return groups

    def events(self, calendar: CalendarRef, start: datetime, end: datetime) -> list[StoredEvent]:
        return list(self._grouped(self._read()).values())

    def find(self, uid: str, calendars: list[CalendarRef]) -> StoredEvent | None:
        return self._grouped(self._read()).get(uid)

    # writing

    def _write(self, cal: icalendar.Calendar) -> None:
        data = cal.to_ical()
        fd, tmp = tempfile.mkstemp(prefix=".local-", suffix=".ics.tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _rewrite(self, uid: str, new: icalendar.Calendar | None) -> None:
        with _locked(self.path):
            cal = self._read()
            cal.subcomponents = [
                c for c in cal.subcomponents if not (c.name == "VEVENT" and c.get("UID") == uid)
            ]
            if new is not None:
                for event in new.walk("VEVENT"):
                    cal.add_component(event)
                cal.add_missing_timezones()
            self._write(cal)

    def add(self, calendar: CalendarRef, ical: icalendar.Calendar) -> StoredEvent:
        stored = StoredEvent(self.CALENDAR, ical)
        with _locked(self.path):
            cal = self._read()
            if any(e.get("UID") == stored.uid for e in cal.walk("VEVENT")):
                raise ToolError(f"an event with id {stored.uid} already exists")
            for event in ical.walk("VEVENT"):
                cal.add_component(event)
            cal.add_missing_timezones()
            self._write(cal)
        return stored

    def replace(self, stored: StoredEvent, ical: icalendar.Calendar) -> None:
        self._rewrite(stored.uid, ical)

    def remove(self, stored: StoredEvent) -> None:
        self._rewrite(stored.uid, None)


# ---- a CalDAV account -------------------------------------------------------------------


def _answered(value: T | Coroutine[Any, Any, T]) -> T:
    """caldav types its calls as "a value, or a coroutine with an async client"; the client
    here is the synchronous DAVClient, which always answers with the value."""
    if isinstance(value, Coroutine):
        value.close()
        raise ToolError("the CalDAV client answered asynchronously; this is a bug in Deskhand")
    return value


class CalDavBackend:
    """The calendars of a CalDAV account, through the caldav package."""

    def __init__(self, account: Account) -> None:
        self.account = account
        self.url = account.fields.get("url", "").strip()
        self.label = account.label
        try:
            self.client = caldav_integration.connect(account)
        except caldav_integration.CalDavUnavailable as exc:
            raise ToolError(str(exc)) from None
        self._calendars: dict[str, DavCalendar] | None = None
        self._refs: list[CalendarRef] | None = None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Server and transport failures become readable ToolErrors."""
        try:
            yield
        except ToolError:
            raise
        except Exception as exc:
            message = caldav_integration.readable_error(exc, self.url)
            if message is None:
                raise
            raise ToolError(f"{self.label}: {message}") from None

    def _objects(self) -> dict[str, DavCalendar]:
        if self._calendars is None:
            with self.guard():
                found = self.client.principal().calendars()
            self._calendars = {str(c.url): c for c in found}
        return self._calendars

    def _ref(self, cal: DavCalendar) -> CalendarRef:
        url = str(cal.url)
        with self.guard():
            name = cal.get_display_name()
        return CalendarRef(url, str(name or url.rstrip("/").rsplit("/", 1)[-1]))

    def calendars(self) -> list[CalendarRef]:
        if self._refs is None:
            self._refs = [self._ref(c) for c in self._objects().values()]
        return list(self._refs)

    def default_calendar(self) -> CalendarRef:
        available = self.calendars()
        if not available:
            raise ToolError(f"{self.label} has no calendars; create one on the server first")
        wanted = self.account.fields.get("calendar", "").strip()
        if wanted:
            return pick(self, [wanted])[0]
        return available[0]

    def _parse(self, ref: CalendarRef, obj: CalendarObjectResource) -> StoredEvent:
        return StoredEvent(ref, icalendar.Calendar.from_ical(obj.data), handle=obj)

    def events(self, calendar: CalendarRef, start: datetime, end: datetime) -> list[StoredEvent]:
        cal = self._objects()[calendar.id]
        with self.guard():
            found: list[CalendarObjectResource] = _answered(
                cal.search(start=start, end=end, event=True, expand=False)
            )
            return [self._parse(calendar, obj) for obj in found]

    def find(self, uid: str, calendars: list[CalendarRef]) -> StoredEvent | None:
        from caldav.lib.error import NotFoundError

        for ref in calendars:
            cal = self._objects()[ref.id]
            with self.guard():
                try:
                    obj = _answered(cal.get_event_by_uid(uid))
                except NotFoundError:
                    continue
                return self._parse(ref, obj)
        return None

    def add(self, calendar: CalendarRef, ical: icalendar.Calendar) -> StoredEvent:
        cal = self._objects()[calendar.id]
        with self.guard():
            obj = cal.save_event(ical.to_ical().decode())
        return StoredEvent(calendar, ical, handle=obj)

    def replace(self, stored: StoredEvent, ical: icalendar.Calendar) -> None:
        with self.guard():
            stored.handle.data = ical.to_ical().decode()
            stored.handle.save()

    def remove(self, stored: StoredEvent) -> None:
        with self.guard():
            stored.handle.delete()


# ---- which account a call acts on ----------------------------------------------------------


def resolve_account(ctx: ToolContext, ref: str | None) -> Account:
    """The account named by the call, else the active one, else the local calendar."""
    if ref:
        directory = ctx.accounts
        if directory is None:
            raise ToolError(f"cannot pick the calendar account {ref!r} here (no account list)")
        try:
            account = directory.find(INTEGRATION, ref)
        except LookupError as exc:
            raise ToolError(str(exc)) from None
        with_secrets = getattr(directory, "with_secrets", None)
        return with_secrets(account) if with_secrets is not None else account
    active = _active_local(ctx)
    if active is not None:
        return active  # no keyring read (and no unlock prompt) for the local calendar
    configured: Account | None
    try:
        configured = ctx.account(INTEGRATION)
    except ToolError:
        if getattr(ctx, "_account_resolver", None) is not None:
            raise  # a configured directory failed: never silently act on another calendar
        configured = None
    return configured or caldav_integration.discover()[0]


def _active_local(ctx: ToolContext) -> Account | None:
    active = getattr(ctx.accounts, "active", None)
    if active is None:
        return None
    try:
        account = active(INTEGRATION)
    except LookupError:
        return None
    return account if account is not None and caldav_integration.is_local(account) else None


def local_path(ctx: ToolContext) -> Path:
    return Path(ctx.home) / "calendar" / "local.ics"


def open_backend(ctx: ToolContext, ref: str | None) -> Backend:
    account = resolve_account(ctx, ref)
    if caldav_integration.is_local(account):
        return LocalIcsBackend(local_path(ctx), account.label)
    return CalDavBackend(account)


@contextlib.contextmanager
def backend_for(ctx: ToolContext, ref: str | None) -> Iterator[Backend]:
    backend = open_backend(ctx, ref)
    try:
        yield backend
    finally:
        backend.close()
