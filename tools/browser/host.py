"""The browser owner thread: one per Deskhand home, fed by a queue.

Playwright's sync API is bound to the thread that started it, so every browser job runs on
this one thread. `BrowserHost.run(job)` may be called from any thread and blocks until the
job is done, the caller's call is cancelled (Stop), or a hard deadline passes.

Lifecycle: the thread starts with the first job; it starts Playwright and launches the
user's browser with a persistent profile (`<home>/browser-profile`) when a job needs it;
after `idle_close_seconds` without jobs it closes the browser and the thread ends.
`shutdown()` does the same at once (registered with `atexit`; the app and tests call it).
Nothing here imports playwright at module level.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from tools.browser.config import BrowserConfig
from tools.browser.discovery import BrowserChoice, find_browser
from tools.browser.egress import EgressGuard
from tools.redact import shorten
from tools.spec import ToolCancelled, ToolContext, ToolError

log = logging.getLogger(__name__)

T = TypeVar("T")

PROFILE_DIR = "browser-profile"
#: Playwright calls made by jobs use at most this (ms) unless they pass their own timeout.
ACTION_TIMEOUT_MS = 10_000
LAUNCH_TIMEOUT_MS = 30_000
#: How long `run` waits beyond a job's own timeout before declaring the browser stuck.
HARD_DEADLINE_GRACE = 15.0
_POLL = 0.1

_BASE_ARGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything that decides how the browser is launched; a change relaunches it."""

    choice: BrowserChoice
    headless: bool
    profile: Path

    def launch_args(self) -> list[str]:
        args = list(_BASE_ARGS)
        if self.headless:
            args.append("--disable-gpu")
        if sys.platform.startswith("linux") and hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        return args


class BrowserSession:
    """The live browser, used only on the host thread: Playwright, the persistent context,
    which tab is current, and the egress guard of the call being run (every main-frame
    navigation and state-changing request goes through it, see tools.browser.intercept)."""

    def __init__(
        self, spec: LaunchSpec, pause: Callable[[], contextlib.AbstractContextManager[None]]
    ) -> None:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright

        self.spec = spec
        self.closed = False
        self.dialogs: list[str] = []
        self.new_pages: list[Any] = []
        #: Outside a tool call (approval hooks' jobs) nothing may be asked: unapproved
        #: navigations are stopped.
        self.idle_guard = EgressGuard()
        self.guard = self.idle_guard
        self._pause = pause
        spec.profile.mkdir(parents=True, exist_ok=True)
        self.playwright = sync_playwright().start()
        options: dict[str, Any] = {
            "headless": spec.headless,
            "args": spec.launch_args(),
            "accept_downloads": True,
            "timeout": LAUNCH_TIMEOUT_MS,
            "handle_sigint": False,  # Ctrl-C ends Deskhand, whose shutdown closes the browser
            # service workers' own requests bypass request interception: none may run
            "service_workers": "block",
        }
        if spec.choice.executable:
            options["executable_path"] = spec.choice.executable
        else:
            options["channel"] = spec.choice.channel
        if not spec.headless:
            options["no_viewport"] = True  # a real window: let the user resize it
        try:
            self.context = self.playwright.chromium.launch_persistent_context(
                str(spec.profile), **options
            )
        except PlaywrightError as exc:
            self.playwright.stop()
            raise ToolError(_launch_error(spec, exc)) from None
        self.context.set_default_timeout(ACTION_TIMEOUT_MS)
        self.context.on("close", lambda _ctx: self._mark_closed())
        from tools.browser.intercept import Interceptor

        self.interceptor = Interceptor(self.context, lambda: self.guard)
        self.context.on("page", self._on_page)
        for page in self.context.pages:
            self._watch(page)
        self.current: Any = self.context.pages[0] if self.context.pages else None

    # ---- pages ------------------------------------------------------------------------

    def _mark_closed(self) -> None:
        self.closed = True

    def _watch(self, page: Any) -> None:
        page.on("dialog", self._on_dialog)
        self.interceptor.watch(page)

    @contextlib.contextmanager
    def guarding(self, guard: EgressGuard) -> Iterator[EgressGuard]:
        """Check this call's requests with `guard` (asking through its ctx)."""
        guard.pause = self._pause
        self.guard = guard
        try:
            yield guard
        finally:
            self.guard = self.idle_guard

    def _on_page(self, page: Any) -> None:
        self._watch(page)
        self.new_pages.append(page)
        self.current = page  # a tab the page opened (target=_blank, window.open) takes focus

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(shorten(f"{dialog.type}: {dialog.message}", 300, mark=""))
        try:
            if dialog.type == "beforeunload":
                dialog.accept()
            else:
                dialog.dismiss()
        except Exception as exc:  # the page may already be gone
            log.debug("dialog handling failed: %s", exc)

    def pages(self) -> list[Any]:
        return [p for p in self.context.pages if not p.is_closed()]

    def page(self) -> Any:
        """The current tab; another open tab if it was closed; a new one if none is left."""
        if self.current is None or self.current.is_closed():
            pages = self.pages()
            self.current = pages[-1] if pages else self.context.new_page()
        return self.current

    def take_events(self) -> tuple[list[Any], list[str]]:
        """Tabs opened and dialogs dismissed since the last call."""
        pages, dialogs = self.new_pages, self.dialogs
        self.new_pages, self.dialogs = [], []
        return pages, dialogs

    # ---- life -------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        if self.closed:
            return False
        try:
            browser = self.context.browser
            return browser is None or browser.is_connected()
        except Exception:
            return False

    def close(self) -> None:
        try:
            if not self.closed:
                self.context.close()
        except Exception as exc:
            log.debug("closing the browser context failed: %s", exc)
        finally:
            self.closed = True
            try:
                self.playwright.stop()
            except Exception as exc:
                log.debug("stopping playwright failed: %s", exc)


def _launch_error(spec: LaunchSpec, exc: Exception) -> str:
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if any(m in text for m in ("ProcessSingleton", "SingletonLock", "in use by another")):
        return (
            f"Could not start the browser: its profile {spec.profile} is in use (another "
            "Deskhand window or a leftover browser). Close it and try again."
        )
    if "doesn't exist" in text or "ENOENT" in text:
        return (
            f"Could not start {spec.choice.label}: it is not installed where expected. Install "
            "Chrome, Chromium or Edge (e.g. `sudo apt install chromium`) or set its path in "
            "Settings → Tools → Browser."
        )
    return f"Could not start the browser ({spec.choice.label}): {first}"


@dataclass
class _Job:
    fn: Callable[[BrowserSession | None], Any]
    launch: LaunchSpec | None  # None: run without starting a browser (session may be None)
    future: Future[Any] = field(default_factory=Future)


_STOP = object()


class BrowserHost:
    """One browser thread per home. Use `BrowserHost.for_home(home)`."""

    _hosts: ClassVar[dict[Path, BrowserHost]] = {}
    _hosts_lock = threading.Lock()

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.profile = self.home / PROFILE_DIR
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._session: BrowserSession | None = None  # touched only by the host thread
        self._idle_seconds = BrowserConfig().idle_close_seconds
        self._final = False
        self._asking = 0  # jobs waiting for the user's answer (their deadline waits too)

    @classmethod
    def for_home(cls, home: Path) -> BrowserHost:
        key = Path(home).resolve()
        with cls._hosts_lock:
            host = cls._hosts.get(key)
            if host is None:
                host = cls._hosts[key] = cls(key)
            return host

    @classmethod
    def existing(cls, home: Path) -> BrowserHost | None:
        with cls._hosts_lock:
            return cls._hosts.get(Path(home).resolve())

    # ---- public -------------------------------------------------------------------------

    @property
    def thread_alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def browser_open(self) -> bool:
        session = self._session
        return session is not None and not session.closed

    def launch_spec(self, config: BrowserConfig) -> LaunchSpec:
        return LaunchSpec(find_browser(config.executable), config.headless, self.profile)

    def run(
        self,
        fn: Callable[[BrowserSession], T],
        *,
        config: BrowserConfig,
        ctx: ToolContext | None = None,
        timeout: float = 60.0,
    ) -> T:
        """Run `fn(session)` on the browser thread (launching the browser if needed)."""
        spec = self.launch_spec(config)  # no browser installed: say so before queueing
        self._idle_seconds = max(1.0, config.idle_close_seconds)
        job = _Job(fn, spec)  # type: ignore[arg-type]
        self._submit(job)
        return cast(T, self._wait(job, ctx, timeout))

    def run_if_open(self, fn: Callable[[BrowserSession], T], *, timeout: float = 15.0) -> T | None:
        """Run `fn` only if the browser is already open (approval hooks must not start it)."""
        if not self.browser_open:
            return None

        def guarded(session: BrowserSession | None) -> T | None:
            if session is None or not session.alive:
                return None
            return fn(session)

        job = _Job(guarded, None)
        self._submit(job)
        return cast("T | None", self._wait(job, None, timeout))

    def shutdown(self, timeout: float = 20.0, *, final: bool = False) -> None:
        """Close the browser and end the thread; later jobs start a new one unless `final`."""
        with self._lock:
            self._final = self._final or final
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is None:
            return
        thread.join(timeout)
        if thread.is_alive():
            log.warning("the browser thread did not stop within %g s; killing the browser", timeout)
            kill_profile_processes(self.profile)
            thread.join(5)

    # ---- internals -----------------------------------------------------------------------

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._final:
                raise ToolError("Deskhand is quitting; the browser is closed")
            self._queue.put(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="deskhand-browser-owner", daemon=True
                )
                self._thread.start()

    @contextlib.contextmanager
    def waiting_for_user(self) -> Iterator[None]:
        """While a job asks the user something, its hard deadline does not run out."""
        with self._lock:
            self._asking += 1
        try:
            yield
        finally:
            with self._lock:
                self._asking -= 1

    def _wait(self, job: _Job, ctx: ToolContext | None, timeout: float) -> Any:
        deadline = time.monotonic() + timeout + HARD_DEADLINE_GRACE
        while True:
            if self._asking:
                deadline = max(deadline, time.monotonic() + HARD_DEADLINE_GRACE)
            if ctx is not None and ctx.cancelled:
                job.future.cancel()  # not started yet: skipped; running: it checks ctx itself
                raise ToolCancelled("cancelled")
            try:
                return job.future.result(timeout=_POLL)
            except FutureTimeout:
                pass
            if time.monotonic() > deadline:
                if job.future.cancel():
                    raise ToolError("the browser is busy with an earlier action; try again")
                log.warning("browser job overran its deadline; restarting the browser")
                kill_profile_processes(self.profile)
                raise ToolError(
                    f"the browser did not respond within {timeout:g} s (a page may be stuck "
                    "in a script); it was restarted — open the page again"
                )

    def _serve(self) -> None:
        try:
            while True:
                try:
                    job = self._queue.get(timeout=self._idle_seconds)
                except queue.Empty:
                    self._close_session()
                    with self._lock:
                        if self._queue.empty():
                            self._thread = None
                            return
                    continue
                if job is _STOP:
                    self._close_session()
                    with self._lock:
                        self._thread = None
                        # jobs queued behind the stop get a fresh thread
                        if not self._queue.empty() and not self._final:
                            self._thread = threading.Thread(
                                target=self._serve, name="deskhand-browser", daemon=True
                            )
                            self._thread.start()
                    return
                self._execute(job)
        except BaseException:  # pragma: no cover - a bug here must not leave a browser behind
            log.exception("the browser thread crashed")
            self._close_session()
            with self._lock:
                self._thread = None
            raise

    def _execute(self, job: _Job) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        try:
            session = self._session_for(job.launch) if job.launch else self._session
            result = job.fn(session)
        except BaseException as exc:
            if self._session is not None and not self._session.alive:
                self._close_session()
            job.future.set_exception(_plain_error(exc))
        else:
            job.future.set_result(result)

    def _session_for(self, spec: LaunchSpec) -> BrowserSession:
        session = self._session
        if session is not None and (session.spec != spec or not session.alive):
            self._close_session()
            session = None
        if session is None:
            session = self._session = BrowserSession(spec, self.waiting_for_user)
        return session

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()


def _plain_error(exc: BaseException) -> BaseException:
    """Playwright errors become ToolErrors with their first line (no call logs)."""
    if isinstance(exc, ToolError | ToolCancelled) or not type(exc).__module__.startswith(
        "playwright"
    ):
        return exc
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "Target" in first and "closed" in first:
        return ToolError("the tab or the browser was closed; open the page again")
    if type(exc).__name__ == "TimeoutError":
        return ToolError(f"the page did not respond in time ({first})")
    return ToolError(f"browser error: {first}")


# ---- process hygiene ---------------------------------------------------------------------


def profile_processes(profile: Path) -> list[int]:
    """Running (non-zombie) processes whose command line names this browser profile."""
    proc = Path("/proc")
    if not proc.is_dir():
        return _ps_profile_processes(profile)
    needle = str(profile).encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[:1]
        if needle in cmdline and state != ["Z"]:
            found.append(int(entry.name))
    return found


def _ps_profile_processes(profile: Path) -> list[int]:
    """macOS/BSD: the same through ps(1). Windows: not supported (returns [])."""
    if os.name != "posix":
        return []
    import subprocess

    try:
        out = subprocess.run(
            ["ps", "-axo", "pid=,stat=,command="], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        pid, _, rest = line.strip().partition(" ")
        stat, _, command = rest.strip().partition(" ")
        if pid.isdigit() and str(profile) in command and not stat.startswith("Z"):
            found.append(int(pid))
    return found


def kill_profile_processes(profile: Path) -> None:
    """Last resort for a stuck browser: kill the processes using this profile (Linux)."""
    for pid in profile_processes(profile):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def shutdown_all(timeout: float = 20.0, *, final: bool = False) -> None:
    """Close every browser Deskhand opened (app quit, tests)."""
    with BrowserHost._hosts_lock:
        hosts = list(BrowserHost._hosts.values())
    for host in hosts:
        host.shutdown(timeout, final=final)


atexit.register(shutdown_all, final=True)
