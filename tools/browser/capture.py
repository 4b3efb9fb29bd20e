"""browser_screenshot, browser_download and browser_evaluate."""

from __future__ import annotations

import contextlib
import re
import secrets
import struct
import time
from collections.abc import Iterator
from email.message import Message
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from tools.browser import elements
from tools.browser.common import PlaywrightError, PlaywrightTimeout, first_line, run_job
from tools.browser.egress import EgressGuard
from tools.browser.host import ACTION_TIMEOUT_MS, BrowserSession
from tools.browser.manifest import Download, Evaluate, Screenshot
from tools.browser.policy import jsonable, normalize_url, site_of
from tools.browser.snapshot import UNTRUSTED_NOTE, wrap_untrusted
from tools.fs.sandbox import Sandbox
from tools.spec import ToolContext, ToolError, ToolResult

SCREENSHOT_DIR = "screenshots"
STAGING_DIR = "browser-downloads"
EVALUATE_OUTPUT_CAP = 20_000
_CHUNK = 1 << 20


def _has_target(args: Any) -> bool:
    return any(v is not None for v in (args.ref, args.text, args.selector))


# ---- screenshot --------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ToolError("the browser did not return a PNG image")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def screenshot(args: Screenshot, ctx: ToolContext) -> ToolResult:
    def job(session: BrowserSession) -> tuple[bytes, str, str]:
        page = session.page()
        if _has_target(args):
            locator = elements.locate(page, args, elements.masking(ctx))
            what = elements.label(elements.info_of(locator, elements.masking(ctx)))
            png = locator.screenshot(type="png", timeout=30_000)
        else:
            what = "the full page" if args.full_page else "the visible page"
            png = page.screenshot(type="png", full_page=args.full_page, timeout=30_000)
        return png, page.url, what

    png, url, what = run_job(ctx, job, 45)
    folder = ctx.home / SCREENSHOT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"browser-{stamp}-{secrets.token_hex(3)}.png"
    path.write_bytes(png)
    width, height = png_size(png)
    return ToolResult(
        ok=True,
        # the agent adds whether the image went to the model (app/core/providers/vision.py)
        content=f"Saved a screenshot of {what} of {url} ({width}×{height} px) to {path}.",
        data={"path": str(path), "width": width, "height": height, "url": url},
        attachments=[str(path)],
    )


# ---- download ------------------------------------------------------------------------------


def destination_folder(args: Download, ctx: ToolContext) -> Path:
    """The checked real folder (inside the allowed file folders) a download goes to."""
    folder = Sandbox.from_context(ctx).resolve(args.folder)
    if not folder.is_dir():
        raise ToolError(f"'{folder}' is not an existing folder; create it first or pick another.")
    return folder


_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]')


def safe_filename(name: str) -> str:
    """A plain file name: no folders, no control characters, no leading dots."""
    name = PurePosixPath(name.replace("\\", "/")).name
    name = _UNSAFE.sub("_", name).strip().lstrip(".").strip()
    return name[:200] or "download"


def filename_from_headers(headers: dict[str, str], url: str) -> str:
    message = Message()
    disposition = headers.get("content-disposition")
    if disposition:
        message["content-disposition"] = disposition
        name = message.get_filename()
        if name:
            return name
    return unquote(PurePosixPath(urlsplit(url).path).name) or "download"


def _free_name(folder: Path, name: str) -> Path:
    candidate = folder / name
    stem, suffix = Path(name).stem, Path(name).suffix
    n = 1
    while candidate.exists() or candidate.is_symlink():
        candidate = folder / f"{stem} ({n}){suffix}"
        n += 1
    return candidate


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


_MAX_REDIRECTS = 10


def _get_checked(session: BrowserSession, url: str, guard: EgressGuard, timeout_ms: float) -> Any:
    """GET `url` following redirects one hop at a time, each hop checked by the guard (the
    request context would otherwise follow them to any site unseen)."""
    for _ in range(_MAX_REDIRECTS + 1):
        try:
            response = session.context.request.get(url, timeout=timeout_ms, max_redirects=0)
        except PlaywrightError as exc:
            raise ToolError(f"Could not download {url}: {first_line(exc)}") from None
        location = response.headers.get("location")
        if not (300 <= response.status < 400 and location):
            return response
        target = resolve_location(url, location)
        if not guard.allow_navigation(target, from_url=url):
            raise ToolError(f"The download was not fetched. {' '.join(guard.stopped)}")
        url = target
    raise ToolError(f"The download of {url} redirected more than {_MAX_REDIRECTS} times.")


def resolve_location(base: str, location: str) -> str:
    """An absolute URL for a redirect's Location header. Backslashes count as slashes, as in
    the browser; whatever this returns is what is requested next (and what was checked)."""
    from urllib.parse import urljoin

    from tools.browser.urls import clean

    loc = clean(location).replace("\\", "/")
    if site_of(loc) is not None:
        return loc
    return urljoin(base, loc)


def download(args: Download, ctx: ToolContext) -> ToolResult:
    sandbox = Sandbox.from_context(ctx)
    folder = destination_folder(args, ctx)
    staging_dir = ctx.home / STAGING_DIR
    staging_dir.mkdir(parents=True, exist_ok=True)
    staging = staging_dir / f"{secrets.token_hex(8)}.part"
    timeout_ms = args.timeout_seconds * 1000

    guard = EgressGuard.for_call(ctx, [site_of(normalize_url(args.url))] if args.url else [])

    def by_url(session: BrowserSession) -> tuple[str, str]:
        url = normalize_url(args.url or "")
        ctx.progress(f"Downloading {url}")
        response = _get_checked(session, url, guard, timeout_ms)
        if not response.ok:
            raise ToolError(f"{url} answered HTTP {response.status}; nothing was saved.")
        staging.write_bytes(response.body())
        return filename_from_headers(response.headers, response.url), response.url

    def by_click(session: BrowserSession) -> tuple[str, str]:
        page = session.page()
        locator = elements.locate(page, args, elements.masking(ctx))
        what = elements.label(elements.info_of(locator, elements.masking(ctx)))
        try:
            with page.expect_download(timeout=timeout_ms) as info:
                locator.click(timeout=ACTION_TIMEOUT_MS)
        except PlaywrightTimeout:
            raise ToolError(
                f"Clicking {what} did not start a download within {args.timeout_seconds:g} s."
            ) from None
        item = info.value
        ctx.progress(f"Downloading {item.suggested_filename}")
        item.save_as(staging)  # waits until the download has finished
        failure = item.failure()
        if failure:
            raise ToolError(f"The download of {item.url} failed: {failure}")
        return item.suggested_filename, item.url

    try:
        suggested, source = run_job(
            ctx, by_url if args.url else by_click, args.timeout_seconds + 15, guard
        )
        name = safe_filename(args.filename or suggested)
        target = folder / name if args.overwrite else _free_name(folder, name)
        sandbox.check(target)
        size = sandbox.write_file(target, _chunks(staging), exclusive=not args.overwrite)
    finally:
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
    renamed = f" (a file named {name} already existed)" if target.name != name else ""
    return ToolResult(
        ok=True,
        content=f"Downloaded {source} to {target} ({size:,} bytes){renamed}.",
        data={"path": str(target), "bytes": size, "url": source},
    )


# ---- evaluate ---------------------------------------------------------------------------------


def evaluate(args: Evaluate, ctx: ToolContext) -> ToolResult:
    def job(session: BrowserSession) -> tuple[Any, str]:
        page = session.page()
        try:
            return page.evaluate(args.script), page.url
        except PlaywrightError as exc:
            raise ToolError(f"The script failed: {first_line(exc)}") from None

    # a script can make the page send data: state-changing requests ask
    value, url = run_job(ctx, job, args.timeout_seconds, EgressGuard.for_call(ctx, sends=True))
    text = jsonable(value, EVALUATE_OUTPUT_CAP)
    return ToolResult(
        ok=True,
        content=f"Result of the script on {url}:\n{UNTRUSTED_NOTE}\n{wrap_untrusted(url, text)}",
        data={"url": url, "result": value if len(text) < EVALUATE_OUTPUT_CAP else None},
    )
