"""Logging with the secret tripwire: every record is scrubbed before any handler sees it.

The filter uses the tools' Redactor (every encoding it knows) and asks for the known
secrets on every record, so values loaded in the background after start-up, or set during
the run, are redacted from then on.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
from collections.abc import Callable, Iterable
from pathlib import Path

from tools.redact import Redactor


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: Callable[[], Iterable[str]]) -> None:
        super().__init__()
        self._secrets = secrets
        self._redactor = Redactor()

    def filter(self, record: logging.LogRecord) -> bool:
        with contextlib.suppress(Exception):  # a broken secret source must not stop logging
            self._redactor.update(self._secrets())
        text = self._redactor.text
        try:
            message = record.getMessage()
        except Exception:  # bad %-arguments: log what we have rather than nothing
            message = f"{record.msg} {record.args!r}"
        record.msg = text(message)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = text(record.exc_text)
        if record.stack_info:
            record.stack_info = text(record.stack_info)
        return True


def configure(
    secrets: Callable[[], Iterable[str]],
    *,
    log_dir: Path | None = None,
    console_level: int = logging.WARNING,
) -> None:
    """stderr for warnings; a rotating file under the home folder for everything else."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    redacting = RedactingFilter(secrets)
    console = logging.StreamHandler()
    console.setLevel(console_level)
    console.setFormatter(logging.Formatter("deskhand: %(message)s"))
    console.addFilter(redacting)
    root.addHandler(console)
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            file = logging.handlers.RotatingFileHandler(
                log_dir / "deskhand.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
            )
        except OSError as exc:
            logging.getLogger(__name__).warning("cannot write the log file: %s", exc)
            return
        file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        file.addFilter(redacting)
        root.addHandler(file)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
