"""Excel workbooks (openpyxl, read-only, cell values as last saved) and CSV/TSV files (the
standard csv module): each sheet a Markdown table, read up to a cap of rows and columns."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast

from app.core.documents.containers import open_checked
from app.core.documents.limits import MAX_SHEET_COLUMNS, MAX_SHEET_ROWS, Budget
from app.core.documents.markdown import table
from app.core.documents.model import Reading, Section, fail
from app.core.documents.plaintext import open_text

if TYPE_CHECKING:
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

#: What the dialect is guessed from: whole lines within this much (the csv module's guess
#: takes time that grows with the square of its sample on unlucky text).
_SNIFF = 8 * 1024


class _Rows(Protocol):
    def iter_rows(
        self, *, max_row: int, max_col: int, values_only: Literal[True]
    ) -> Iterator[tuple[object, ...]]: ...


def read_xlsx(path: Path, budget: Budget) -> Reading:
    fh, archive = open_checked(path, "XLSX")
    archive.close()
    try:
        import openpyxl

        workbook = openpyxl.load_workbook(fh, read_only=True, data_only=True)
    except BaseException:
        fh.close()
        raise

    def close() -> None:
        try:
            workbook.close()
        finally:
            fh.close()

    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

    sheets = [s for s in workbook.worksheets if isinstance(s, ReadOnlyWorksheet)]
    return Reading("XLSX", (_sheet(s, budget) for s in sheets), "sheet", len(sheets), close)


def _sheet(sheet: ReadOnlyWorksheet, budget: Budget) -> Section:
    declared = sheet.max_row if isinstance(sheet.max_row, int) else 0
    # The size a file declares can be wrong: read by the caps, not by it.
    sheet.reset_dimensions()
    # (The stubs type iter_rows for a full Worksheet only; it is the same method.)
    rows = cast("_Rows", sheet).iter_rows(
        max_row=MAX_SHEET_ROWS + 1, max_col=MAX_SHEET_COLUMNS + 1, values_only=True
    )
    kept, more = _take(([_value(v) for v in row] for row in rows), budget, declared)
    return Section(f"sheet {sheet.title}", table(kept), more=more)


def _take(
    rows: Iterable[Sequence[str]], budget: Budget, declared: int = 0
) -> tuple[list[Sequence[str]], str]:
    """Rows up to the row cap, the character budget and the deadline, and what was left."""
    kept: list[Sequence[str]] = []
    size = 0
    for number, row in enumerate(rows, 1):
        why = ""
        if number > MAX_SHEET_ROWS:
            why = f"a table is read up to {MAX_SHEET_ROWS:,} rows"
        elif size > budget.chars:
            why = f"enough to fill {budget.chars:,} characters was read"
        elif number % 1000 == 0 and budget.expired():
            why = "reading took too long"
        if why:
            of = f" of about {declared:,}" if declared >= number else ""
            return kept, f"rows {number:,} on{of} ({why})"
        if any(row):
            kept.append(row)
            size += sum(len(v) + 3 for v in row if v)
    return kept, ""


def _value(value: object) -> str:
    """A cell as a person would read it: 3 rather than 3.0, dates without midnight."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def read_delimited(path: Path, budget: Budget, kind: str) -> Reading:
    """A CSV or TSV file; its dialect (delimiter, quotes) sniffed from its start."""
    with open_text(path) as stream:
        sample = stream.read(_SNIFF)
        sample = sample[: sample.rfind("\n") + 1] or sample
        stream.seek(0)
        dialect: type[csv.Dialect] | csv.Dialect = csv.excel_tab if kind == "TSV" else csv.excel
        if kind == "CSV":
            # One column, or too little to tell: plain commas.
            with contextlib.suppress(csv.Error):
                dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        reader = csv.reader(stream, dialect)
        try:
            kept, more = _take(reader, budget)
        except csv.Error as exc:
            raise fail(
                path,
                f"line {reader.line_num:,} is not valid {kind} ({exc}): check its quotes, or "
                f"open it in a spreadsheet and save it as {kind} again",
            ) from None
    return Reading(kind, iter([Section("table", table(kept), more=more)]))
