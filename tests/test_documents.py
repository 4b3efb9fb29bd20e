"""Documents read into text (app/core/documents): every fixture is written here by a real
writer (fpdf2, python-docx, openpyxl, python-pptx, zipfile), then read back; the checks are
on the structure the model gets (where each part is, headings, Markdown tables, the note
when it was cut) and on the plain-words message for each kind of bad file."""

from __future__ import annotations

import csv
import datetime as dt
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.core.documents import (
    MAX_FILE_BYTES,
    SUPPORTED,
    DocumentError,
    read_document,
    supported,
)
from app.core.documents.detect import EXTENSIONS
from app.core.documents.limits import MAX_SHEET_COLUMNS, MAX_SHEET_ROWS, MAX_XML_PART_BYTES

ROOT = Path(__file__).resolve().parents[1]


# ---- writers -------------------------------------------------------------------------------


def write_pdf(path: Path, pages: list[str], *, password: str = "") -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    if password:
        pdf.set_encryption(owner_password="owner-" + password, user_password=password)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path, lines: tuple[str, ...] = ()) -> Path:
    """Pages that are only a picture, as a scanner makes them: one blank page, or one page
    with these lines of text drawn as pixels."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.new("L", (1700, 200 + 100 * len(lines)), 255)
    font = ImageFont.load_default(size=56)
    for row, line in enumerate(lines):
        ImageDraw.Draw(picture).text((60, 100 + 100 * row), line, fill=0, font=font)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(picture, x=10, y=10, w=190)
    pdf.output(str(path))
    return path


def without_tesseract(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine where no OCR engine is installed: PATH without tesseract."""
    empty = tmp_path / "no-programs"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


def write_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_paragraph("A short report before any heading.")
    document.add_heading("Introduction", level=1)
    document.add_paragraph("Why we measured.")
    document.add_paragraph("first point", style="List Bullet")
    document.add_paragraph("second point", style="List Bullet")
    document.add_heading("Results", level=2)
    grid = document.add_table(rows=3, cols=2)
    for r, row in enumerate([("Name", "Score"), ("Ada", "9"), ("Bo | Jo", "7")]):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    document.add_paragraph("After the table.")
    document.save(str(path))
    return path


def write_xlsx(path: Path) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    budget = book.active
    assert budget is not None
    budget.title = "Budget"
    budget.append(["Item", "Cost", "Paid", "Due"])
    budget.append(["Rent", 1200.0, True, dt.date(2025, 3, 1)])
    budget.append(["Food", 310.5, False, dt.datetime(2025, 3, 2, 9, 30)])
    notes = book.create_sheet("Notes")
    notes["B3"] = "Only one cell"
    book.save(str(path))
    return path


def write_pptx(path: Path) -> Path:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
    assert first.shapes.title is not None
    first.shapes.title.text = "Quarterly review"
    body = first.placeholders[1].text_frame
    body.text = "Revenue up"
    deeper = body.add_paragraph()
    deeper.text = "mostly in March"
    deeper.level = 1
    notes = first.notes_slide.notes_text_frame
    assert notes is not None
    notes.text = "Mention the new office."
    second = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    assert second.shapes.title is not None
    second.shapes.title.text = "Numbers"
    frame = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    for r, row in enumerate([("Region", "Sales"), ("North", "42")]):
        for c, value in enumerate(row):
            frame.table.cell(r, c).text = value
    deck.save(str(path))
    return path


ODT_CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content
  xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
  xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
  xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3">
 <office:body><office:text>
  <text:h text:outline-level="1">Minutes</text:h>
  <text:p>Present:<text:s text:c="2"/><text:span>everyone</text:span>.</text:p>
  <text:list><text:list-item><text:p>budget agreed</text:p>
   <text:list><text:list-item><text:p>with one change</text:p></text:list-item></text:list>
  </text:list-item></text:list>
  <text:h text:outline-level="2">Votes</text:h>
  <table:table table:name="Votes">
   <table:table-header-rows><table:table-row>
    <table:table-cell><text:p>Motion</text:p></table:table-cell>
    <table:table-cell><text:p>Yes</text:p></table:table-cell>
   </table:table-row></table:table-header-rows>
   <table:table-row>
    <table:table-cell><text:p>New roof</text:p></table:table-cell>
    <table:table-cell><text:p>5</text:p></table:table-cell>
   </table:table-row>
   <table:table-row table:number-rows-repeated="1048000">
    <table:table-cell table:number-columns-repeated="16000"/>
   </table:table-row>
  </table:table>
 </office:text></office:body>
</office:document-content>"""


def write_odt(path: Path, *, content: str = ODT_CONTENT, encrypted: bool = False) -> Path:
    entry = "<manifest:encryption-data/>" if encrypted else ""
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        f'<manifest:file-entry manifest:full-path="content.xml">{entry}</manifest:file-entry>'
        "</manifest:manifest>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        zf.writestr("META-INF/manifest.xml", manifest)
        zf.writestr("content.xml", content)
    return path


PAGE = """<!DOCTYPE html><html><head><title>Ignored title</title>
<style>body {{ color: red }}</style><script>var secret = "do not show";</script></head>
<body><h1>{title}</h1><p>Some   <b>bold</b>
words.</p>{extra}</body></html>"""


def write_epub(path: Path, *, drm: bool = False) -> Path:
    """Two chapters whose file names sort against the reading order the spine gives."""
    opf = """<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0">
 <manifest>
  <item id="a" href="text/a.xhtml" media-type="application/xhtml+xml"/>
  <item id="b" href="text/b%20two.xhtml" media-type="application/xhtml+xml"/>
  <item id="css" href="style.css" media-type="text/css"/>
 </manifest>
 <spine><itemref idref="b"/><itemref idref="a"/></spine>
</package>"""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
 <rootfiles><rootfile full-path="OEBPS/content.opf"
   media-type="application/oebps-package+xml"/></rootfiles>
</container>"""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml", container)
        zf.writestr("OEBPS/content.opf", opf)
        zf.writestr("OEBPS/style.css", "p { margin: 0 }")
        zf.writestr("OEBPS/text/a.xhtml", PAGE.format(title="The End", extra=""))
        zf.writestr("OEBPS/text/b two.xhtml", PAGE.format(title="The Start", extra=""))
        if drm:
            zf.writestr(
                "META-INF/encryption.xml",
                '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"'
                ' xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
                '<enc:CipherData><enc:CipherReference URI="OEBPS/text/a.xhtml"/>'
                "</enc:CipherData></enc:EncryptedData></encryption>",
            )
    return path


# ---- formats -------------------------------------------------------------------------------


def test_a_pdf_is_read_page_by_page(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "report.pdf", ["Alpha page.", "Beta page.", "Gamma page."])
    document = read_document(path)
    assert document.kind == "PDF"
    assert document.describe() == "PDF, 3 pages"
    assert [s.label for s in document.sections] == ["page 1", "page 2", "page 3"]
    assert [s.text for s in document.sections] == ["Alpha page.", "Beta page.", "Gamma page."]
    text = document.render()
    assert "## page 2\n\nBeta page." in text
    assert "Cut" not in text and "Not read" not in text


def test_a_word_document_keeps_headings_lists_and_tables_in_order(tmp_path: Path) -> None:
    document = read_document(write_docx(tmp_path / "report.docx"))
    assert document.kind == "DOCX"
    assert [s.label for s in document.sections] == [
        "beginning",
        "heading: Introduction",
        "heading: Results",
    ]
    intro, results = document.sections[1].text, document.sections[2].text
    assert intro.startswith("# Introduction\n\nWhy we measured.")
    assert "- first point\n\n- second point" in intro
    assert results.startswith("## Results\n\n| Name | Score |\n| --- | --- |\n| Ada | 9 |")
    assert "| Bo \\| Jo | 7 |" in results  # a pipe in a cell cannot break the table
    assert results.endswith("After the table.")
    text = document.render()
    assert "## heading:" not in text and "## beginning" not in text  # its own headings only
    assert text.index("A short report") < text.index("# Introduction") < text.index("## Results")


def test_a_workbook_gives_each_sheet_as_a_markdown_table(tmp_path: Path) -> None:
    document = read_document(write_xlsx(tmp_path / "money.xlsx"))
    assert document.kind == "XLSX"
    assert document.describe() == "XLSX, 2 sheets"
    assert [s.label for s in document.sections] == ["sheet Budget", "sheet Notes"]
    assert document.sections[0].text == (
        "| Item | Cost | Paid | Due |\n"
        "| --- | --- | --- | --- |\n"
        "| Rent | 1200 | TRUE | 2025-03-01 |\n"
        "| Food | 310.5 | FALSE | 2025-03-02 09:30:00 |"
    )
    assert document.sections[1].text == "|  | Only one cell |\n| --- | --- |"
    assert "## sheet Notes\n\n|" in document.render()


def test_a_huge_sheet_is_read_up_to_the_row_cap_and_says_so(tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Log")
    for n in range(MAX_SHEET_ROWS + 500):
        sheet.append([n])
    book.save(str(tmp_path / "log.xlsx"))
    document = read_document(tmp_path / "log.xlsx", max_chars=10_000_000)
    section = document.sections[0]
    assert section.text.count("\n") == MAX_SHEET_ROWS  # the header row plus the rule line
    assert section.more.startswith(f"rows {MAX_SHEET_ROWS + 1:,} on")
    assert f"a table is read up to {MAX_SHEET_ROWS:,} rows" in section.more
    assert f"[Not read: rows {MAX_SHEET_ROWS + 1:,} on" in document.render()


def test_a_csv_file_is_a_table_in_the_dialect_it_is_written_in(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=";")
        writer.writerows([["Fruit", "Price"], ["Apple; red", "1,20"], ["Pear", "0,90"]])
    document = read_document(path)
    assert document.kind == "CSV"
    assert [s.label for s in document.sections] == ["table"]
    assert document.sections[0].text == (
        "| Fruit | Price |\n| --- | --- |\n| Apple; red | 1,20 |\n| Pear | 0,90 |"
    )
    tsv = tmp_path / "wide.tsv"
    tsv.write_text("\t".join(f"c{n}" for n in range(MAX_SHEET_COLUMNS + 20)) + "\n")
    wide = read_document(tsv).sections[0].text
    assert f"| c{MAX_SHEET_COLUMNS - 1} |" in wide and f"c{MAX_SHEET_COLUMNS} " not in wide
    assert wide.endswith(f"[Only the first {MAX_SHEET_COLUMNS} columns are shown.]")


def test_a_presentation_gives_each_slide_its_title_bullets_table_and_notes(
    tmp_path: Path,
) -> None:
    document = read_document(write_pptx(tmp_path / "deck.pptx"))
    assert document.kind == "PPTX"
    assert [s.label for s in document.sections] == ["slide 1", "slide 2"]
    assert document.sections[0].text == (
        "### Quarterly review\n\n- Revenue up\n   - mostly in March\n\n"
        "Notes: Mention the new office."
    )
    assert document.sections[1].text == (
        "### Numbers\n\n| Region | Sales |\n| --- | --- |\n| North | 42 |"
    )


def test_an_opendocument_text_keeps_headings_lists_and_tables(tmp_path: Path) -> None:
    document = read_document(write_odt(tmp_path / "minutes.odt"))
    assert document.kind == "ODT"
    assert [s.label for s in document.sections] == ["heading: Minutes", "heading: Votes"]
    assert document.sections[0].text == (
        "# Minutes\n\nPresent: everyone.\n\n- budget agreed\n\n   - with one change"
    )
    # A million repeated empty rows of 16,000 cells (what spreadsheets write) cost nothing.
    assert document.sections[1].text == (
        "## Votes\n\n| Motion | Yes |\n| --- | --- |\n| New roof | 5 |"
    )


def test_html_keeps_headings_lists_and_tables_and_drops_scripts(tmp_path: Path) -> None:
    extra = (
        "<h2>Steps</h2><ol><li>Open<li>Close</ol><ul><li>loose<ul><li>nested</ul></li></ul>"
        "<table><tr><th>Key<th>Value<tr><td>a</td><td><p>one</p><p>two</p></td></table>"
        "<pre>x  =  1\n  y</pre><noscript>enable scripts</noscript>"
    )
    path = tmp_path / "page.html"
    path.write_text(PAGE.format(title="Guide", extra=extra), encoding="utf-8")
    document = read_document(path)
    assert document.kind == "HTML"
    assert [s.label for s in document.sections] == ["heading: Guide", "heading: Steps"]
    assert document.sections[0].text == "# Guide\n\nSome bold words."
    assert document.sections[1].text == (
        "## Steps\n\n1. Open\n\n2. Close\n\n- loose\n\n   - nested\n\n"
        "| Key | Value |\n| --- | --- |\n| a | one two |\n\n```\nx  =  1\n  y\n```"
    )
    text = document.render()
    for hidden in ("do not show", "color: red", "Ignored title", "enable scripts"):
        assert hidden not in text


def test_an_epub_is_read_in_its_spine_order(tmp_path: Path) -> None:
    document = read_document(write_epub(tmp_path / "book.epub"))
    assert document.kind == "EPUB"
    assert document.describe() == "EPUB, 2 chapters"
    assert [s.label for s in document.sections] == ["chapter 1", "chapter 2"]
    assert document.sections[0].text.startswith("# The Start")
    assert document.sections[1].text.startswith("# The End")
    assert "p { margin" not in document.render()


def test_markdown_is_split_at_headings_outside_code(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("Intro line.\n\n# Plan\n\n```sh\n# not a heading\n```\n\n## Risks\n\n- few\n")
    document = read_document(path)
    assert document.kind == "Markdown"
    assert [s.label for s in document.sections] == ["beginning", "heading: Plan", "heading: Risks"]
    assert document.sections[1].text == "# Plan\n\n```sh\n# not a heading\n```"


def test_plain_text_falls_back_from_utf8_and_keeps_every_line(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("Caf\u00e9 \u20ac5\r\nsecond line\r\n".encode("cp1252"))
    document = read_document(path)
    assert document.kind == "Text"
    assert document.sections[0].text == "Caf\u00e9 \u20ac5\nsecond line\n"
    utf8 = tmp_path / "notes"  # no extension: text by its content
    utf8.write_text("na\u00efve r\u00e9sum\u00e9\n", encoding="utf-8")
    assert read_document(utf8).sections[0].text == "na\u00efve r\u00e9sum\u00e9\n"


# ---- what the model is told when it does not see it all ------------------------------------


def test_the_text_is_cut_at_max_chars_with_where_and_how_much(tmp_path: Path) -> None:
    pages = [f"Page {n} says " + "words " * 60 for n in range(1, 41)]
    path = write_pdf(tmp_path / "long.pdf", pages)
    document = read_document(path, max_chars=1_000)
    text = document.render()
    body, note = text.rsplit("\n\n", 1)
    assert len(body) <= 1_000
    assert body.startswith("## page 1\n\nPage 1 says")
    read_pages = len(document.sections)
    assert 1 < read_pages < 40
    assert note.startswith("[Cut: only the first ")
    assert " characters of long.pdf are shown; it stops in page " in note
    assert "more characters." in note
    assert f"Not read: pages {read_pages + 1}–40 of 40.]" in note
    # A smaller cut of what was read says the same kind of thing.
    short = document.render(max_chars=200)
    assert len(short.rsplit("\n\n", 1)[0]) <= 200
    assert "it stops in page 1, line " in short


def test_a_long_plain_text_says_how_much_of_the_file_was_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_text("".join(f"line {n}\n" for n in range(200_000)))
    document = read_document(path, max_chars=5_000)
    section = document.sections[0]
    assert len(section.text) == 5_000
    assert section.more.startswith("the rest of the file (about ")
    text = document.render()
    assert "it stops in text, line " in text
    assert "Not read: the rest of the file (about 2.2 MB)" in text


def test_a_page_far_longer_than_the_budget_is_not_read_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "dump.html"
    rows = "".join(f"<tr><td>{n}</td><td>row</td></tr>" for n in range(50_000))
    path.write_text(f"<h1>Dump</h1><table>{rows}</table><p>THE LAST WORDS</p>")
    document = read_document(path, max_chars=2_000)
    text = document.render()
    assert "| 0 | row |" in text
    assert "THE LAST WORDS" not in text and "| 49999 |" not in text
    assert text.endswith("Not read: the rest of the document.]")


def test_reading_stops_when_its_time_is_up_and_says_so(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "slow.pdf", ["one", "two", "three"])
    document = read_document(path, time_limit=0)
    assert [s.label for s in document.sections] == ["page 1"]
    assert document.not_read == "pages 2–3 of 3 (reading took too long)"
    assert document.render().endswith("[Not read: pages 2–3 of 3 (reading took too long).]")


# ---- bad input -----------------------------------------------------------------------------


def _error(path: Path) -> str:
    with pytest.raises(DocumentError) as caught:
        read_document(path)
    message = str(caught.value)
    assert message.startswith(f"{path.name}: ")
    assert caught.value.reason == message.removeprefix(f"{path.name}: ")
    return message


def test_an_encrypted_pdf_asks_for_a_copy_without_a_password(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "locked.pdf", ["secret"], password="hunter2")
    assert _error(path) == (
        "locked.pdf: it is encrypted: open it, or save a copy without a password"
    )


def test_a_scanned_pdf_without_a_text_layer_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_tesseract(monkeypatch, tmp_path)
    path = write_scanned_pdf(tmp_path / "scan.pdf", ("The invoice is due in March.",))
    message = _error(path)
    assert "it has no text layer (a scan?)" in message
    assert "with tesseract installed Deskhand does that itself" in message


def test_a_scanned_pdf_is_read_by_text_recognition_when_tesseract_is_installed(
    tmp_path: Path,
) -> None:
    path = write_scanned_pdf(
        tmp_path / "scan.pdf", ("The quarterly invoice is due on", "the third of March.")
    )
    document = read_document(path)
    assert [section.label for section in document.sections] == ["page 1"]
    text = " ".join(document.sections[0].text.split())
    assert "quarterly invoice is due on the third of March" in text


def test_a_scanned_page_with_nothing_on_it_still_says_it_has_no_text(tmp_path: Path) -> None:
    message = _error(write_scanned_pdf(tmp_path / "blank.pdf"))
    assert "it has no text layer (a scan?)" in message


def test_truncated_files_are_called_damaged(tmp_path: Path) -> None:
    sources = [
        write_pdf(tmp_path / "whole.pdf", ["Some text."]),
        write_docx(tmp_path / "whole.docx"),
        write_xlsx(tmp_path / "whole.xlsx"),
        write_pptx(tmp_path / "whole.pptx"),
        write_epub(tmp_path / "whole.epub"),
    ]
    for source in sources:
        cut = tmp_path / f"cut{source.suffix}"
        cut.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
        message = _error(cut)
        assert "damaged" in message, message
        assert "save it again" in message or "save a copy" in message, message


def test_a_file_that_only_pretends_to_be_its_type_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "letter.docx"
    fake.write_text("just text")
    assert "not a valid .docx file" in _error(fake)
    old = tmp_path / "old.docx"  # an old binary Office file, or an encrypted new one
    old.write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + b"\0" * 504)
    assert "password-protected or in an older format" in _error(old)
    not_pdf = tmp_path / "paper.pdf"
    not_pdf.write_bytes(b"<html>")
    assert "it is not a PDF inside" in _error(not_pdf)


def test_a_zip_bomb_is_refused_before_any_library_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"\0" * (40 * 1024 * 1024))
    assert path.stat().st_size < 200_000
    message = _error(path)
    assert "one part would unpack to 40 MB" in message
    assert "zip bomb" in message


def test_an_archive_declaring_too_much_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.xlsx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("xl/workbook.xml", "<workbook/>")
        zf.filelist[0].file_size = 600 * 1024 * 1024  # what the directory claims
    message = _error(path)
    assert "it would unpack to 600 MB" in message and "zip bomb" in message


def test_a_part_too_large_to_parse_at_once_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "long.docx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("word/document.xml", "<w:document/>")
        info = zf.filelist[0]  # what the directory claims: big, and not compressed
        info.file_size = info.compress_size = MAX_XML_PART_BYTES + 1
    message = _error(path)
    assert "one part of it (word/document.xml) is 50.0 MB of markup" in message
    assert "split it into smaller files" in message


def test_an_encrypted_opendocument_asks_for_a_copy_without_a_password(tmp_path: Path) -> None:
    path = write_odt(tmp_path / "locked.odt", encrypted=True)
    assert _error(path).endswith("it is encrypted: open it, or save a copy without a password")


def test_a_book_with_drm_says_so(tmp_path: Path) -> None:
    message = _error(write_epub(tmp_path / "bought.epub", drm=True))
    assert message.endswith(
        "it is protected by DRM: Deskhand can read only books without copy protection"
    )


def test_xml_entities_are_refused(tmp_path: Path) -> None:
    laughs = '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaa">]><d>&a;</d>'
    message = _error(write_odt(tmp_path / "laughs.odt", content=laughs))
    assert "declares XML entities" in message


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.pdf"
    with path.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used, nothing to read
    message = _error(path)
    assert message.startswith("huge.pdf: it is 200.0 MB, more than the 200 MB Deskhand reads")
    assert "attach a smaller part" in message


def test_an_unsupported_type_names_the_types_that_are(tmp_path: Path) -> None:
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a.bin", b"\0\1\2")
    message = _error(archive)
    assert "Deskhand cannot read this kind of file (.zip files)" in message
    assert "It reads PDF, Word (.docx), Excel (.xlsx)" in message
    old = tmp_path / "thesis.doc"
    old.write_bytes(b"\xd0\xcf\x11\xe0")
    assert "the old Word format (.doc): save it as .docx" in _error(old)
    renamed = tmp_path / "data.csv"
    renamed.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    assert "it looks like a binary file, not text" in _error(renamed)
    binary = tmp_path / "program"
    binary.write_bytes(b"\x7fELF\0\0\0\1\2\3" * 100)
    assert "cannot read this kind of file. It reads" in _error(binary)


def test_missing_files_and_folders_are_named(tmp_path: Path) -> None:
    assert "there is no such file" in _error(tmp_path / "gone.pdf")
    folder = tmp_path / "papers"
    folder.mkdir()
    assert "it is a folder, not a document" in _error(folder)


def test_supported_goes_by_extension_then_by_content(tmp_path: Path) -> None:
    pdf_without_name = tmp_path / "download"
    pdf_without_name.write_bytes(write_pdf(tmp_path / "x.pdf", ["x"]).read_bytes())
    docx_without_name = tmp_path / "attachment"
    docx_without_name.write_bytes(write_docx(tmp_path / "x.docx").read_bytes())
    (tmp_path / "README").write_text("hello\n")
    (tmp_path / "core").write_bytes(b"\0" * 64)
    assert supported(tmp_path / "a.PDF") and supported(tmp_path / "b.xlsx")
    assert supported(pdf_without_name) and supported(docx_without_name)
    assert read_document(docx_without_name).kind == "DOCX"
    assert supported(tmp_path / "README")
    assert not supported(tmp_path / "core")
    assert not supported(tmp_path / "photo.png") and not supported(tmp_path / "old.doc")
    patterns = [p for _, patterns in SUPPORTED for p in patterns]
    assert sorted(p.removeprefix("*") for p in patterns) == sorted(EXTENSIONS)


def test_importing_documents_loads_no_format_library() -> None:
    """Start-up stays light: the libraries load when a document of theirs is read."""
    code = (
        "import sys, app.core.documents\n"
        "heavy = ('pypdfium2', 'docx', 'openpyxl', 'pptx', 'lxml', 'PIL')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_an_encrypted_pdf_opens_with_its_password(tmp_path: Path) -> None:
    path = write_pdf(
        tmp_path / "locked.pdf", ["The vault code is in the blue folder."], password="hunter2"
    )
    with pytest.raises(DocumentError) as caught:
        read_document(path)
    assert caught.value.needs_password
    document = read_document(path, password="hunter2")
    assert "vault code is in the blue folder" in document.sections[0].text


def test_a_wrong_password_says_so_and_can_be_asked_again(tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "locked.pdf", ["secret"], password="hunter2")
    with pytest.raises(DocumentError) as caught:
        read_document(path, password="hunter3")
    assert str(caught.value) == (
        "locked.pdf: that password does not open it: check it and try again"
    )
    assert caught.value.needs_password


def test_damaged_files_never_ask_for_a_password(tmp_path: Path) -> None:
    path = tmp_path / "cut.pdf"
    path.write_bytes(write_pdf(tmp_path / "whole.pdf", ["text"]).read_bytes()[:300])
    with pytest.raises(DocumentError) as caught:
        read_document(path)
    assert not caught.value.needs_password
