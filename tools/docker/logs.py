"""Container logs: a bounded window, newest lines last, capped from the old end."""

from __future__ import annotations

from tools.docker.format import keep_newest, parse_time
from tools.docker.host import connect
from tools.docker.manifest import ContainerLogs
from tools.spec import ToolContext, ToolError, ToolResult

#: Characters of log text a result carries; the oldest lines go first when there are more.
LOG_CAP = 20_000


def _timestamp(value: str | None, what: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value).timestamp()
    except ValueError as exc:
        raise ToolError(f"{what}: {exc}") from None


def container_logs(args: ContainerLogs, ctx: ToolContext) -> ToolResult:
    since = _timestamp(args.since, "since")
    until = _timestamp(args.until, "until")
    if since is not None and until is not None and until <= since:
        raise ToolError("until must be later than since")
    host = connect(ctx)
    container = host.container(args.container)
    with host.errors(container=args.container):
        raw = container.logs(
            stdout=True,
            stderr=True,
            timestamps=args.timestamps,
            tail=args.tail if args.tail is not None else "all",
            since=since,
            until=until,
        )
    text = raw.decode("utf-8", errors="replace")
    shown, omitted = keep_newest(text, LOG_CAP)
    line_count = len(shown.splitlines())
    window = f"last {args.tail} lines" if args.tail is not None else "all lines"
    if args.since or args.until:
        window += f", since {args.since or 'the start'} until {args.until or 'now'}"
    header = f"Logs of {container.name} ({window}; newest last):"
    if not shown.strip():
        header = f"No log lines from {container.name} ({window})."
    if omitted:
        header += (
            f"\n[{omitted:,} older lines omitted to stay under {LOG_CAP:,} characters; "
            "narrow with since/until or a smaller tail to read them]"
        )
    data = {
        "container": container.name,
        "lines": line_count,
        "omitted_lines": omitted,
        "text": shown,
    }
    result = host.result(f"{header}\n{shown}".rstrip("\n"), data)
    result.truncated = omitted > 0
    return result
