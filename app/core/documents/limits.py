"""What reading one document may cost: every cap is a named constant so a message can cite it
and a test can reach it."""

from __future__ import annotations

import time
from dataclasses import dataclass

#: Larger files are refused by their size on disk, before a byte is read.
MAX_FILE_BYTES = 200 * 1024 * 1024
#: The text handed to the model by default (about 25,000 tokens).
DEFAULT_MAX_CHARS = 100_000
#: Reading stops (and says so) once this much time has gone by.
MAX_READ_SECONDS = 30.0

# Zip containers (DOCX, XLSX, PPTX, ODT, EPUB), checked before any library opens them.
#: What all members may unpack to together, as the archive declares it.
MAX_UNZIPPED_BYTES = 500 * 1024 * 1024
#: Unpacked size over packed size, for a member or the whole archive...
MAX_ZIP_RATIO = 100
#: ...once it unpacks to more than this (small parts compress well and are harmless).
ZIP_RATIO_FLOOR = 10 * 1024 * 1024
MAX_ZIP_MEMBERS = 10_000
#: One XML or XHTML part that is parsed whole (a Word body, a chapter); sheets are streamed.
MAX_XML_PART_BYTES = 50 * 1024 * 1024

# Tables (sheets, CSV/TSV, tables in documents).
#: Rows read from one sheet or CSV file, empty ones included.
MAX_SHEET_ROWS = 10_000
#: Columns read from one sheet or table; wider ones are cut and say so.
MAX_SHEET_COLUMNS = 100
#: Pages read from one PDF.
MAX_PDF_PAGES = 2_000


@dataclass(frozen=True)
class Budget:
    """How much text one reading may gather and until when."""

    chars: int
    deadline: float

    @classmethod
    def start(cls, chars: int, seconds: float = MAX_READ_SECONDS) -> Budget:
        return cls(chars, time.monotonic() + seconds)

    def expired(self) -> bool:
        return time.monotonic() > self.deadline
