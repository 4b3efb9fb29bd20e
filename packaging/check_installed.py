"""Checks an installed Deskhand (the .deb's /usr/bin/deskhand) from the outside.

    python packaging/check_installed.py tools   EXE          # one tool call per category
    python packaging/check_installed.py knowledge EXE        # index documents, search them
    python packaging/check_installed.py window  EXE OUT.png  # window under $DISPLAY + screenshot
    python packaging/check_installed.py startup EXE [RUNS]   # cold start to the first window

Run by scripts/package-test.sh with the checkout's Python (for the expected categories) and
an Xvfb display. Uses only the standard library, xdotool and ImageMagick's `import`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A cheap, read-only call per category; a category not listed uses its first read-only tool
# without required parameters. Calls may fail (no Docker daemon, no kubeconfig, ...) as long
# as they fail with the tool's own readable error: the point is that the implementation
# module imports inside the bundle.
PREFERRED = {
    "fs": ("fs_list_dir", {"path": "."}),
    "core": ("browse_tools", {}),
    "reminders": ("reminders_list", {}),
    "integrations": ("integration_list", {}),
    "docker": ("docker_list_containers", {}),
    "kubectl": ("kubectl_contexts", {}),
    "calendar": ("calendar_list_calendars", {}),
    "browser": ("browser_tabs", {}),
    "knowledge": ("knowledge_search", {"query": "invoice"}),
}
IMPORT_FAILURES = ("No module named", "ModuleNotFoundError", "ImportError", "cannot import name")
WINDOW_NAME = "^Deskhand$"


def expected_categories() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tools.registry import ToolRegistry

    return ToolRegistry.default(None, entry_points=False).categories()


def pick(category: str, tools: list[dict]) -> tuple[str, dict]:
    if category in PREFERRED:
        return PREFERRED[category]
    for tool in tools:
        if tool["operations"] == ["read"] and not tool["parameters"].get("required"):
            return tool["name"], {}
    raise SystemExit(f"category {category}: no read-only tool without required parameters")


def check_tools(exe: str) -> int:
    home = Path(tempfile.mkdtemp(prefix="deskhand-pkg-"))
    env = {**os.environ, "HOME": str(home)}
    run = {"capture_output": True, "text": True, "env": env, "cwd": home, "timeout": 90}
    listing = subprocess.run([exe, "--home", str(home), "tools", "list", "--json"], **run)
    if listing.returncode:
        print(listing.stderr, file=sys.stderr)
        return 1
    tools = json.loads(listing.stdout)
    by_category: dict[str, list[dict]] = {}
    for tool in tools:
        by_category.setdefault(tool["category"], []).append(tool)
    want = expected_categories()
    missing = sorted(set(want) - set(by_category))
    print(f"installed copy lists {len(tools)} tools in {len(by_category)} categories")
    if missing:
        print(f"FAIL: categories missing from the installed copy: {missing}", file=sys.stderr)
        return 1
    failed = 0
    for category in sorted(by_category):
        name, args = pick(category, by_category[category])
        result = subprocess.run(
            [exe, "--home", str(home), "tools", "call", name, "--args", json.dumps(args)], **run
        )
        out = (result.stdout + result.stderr).strip()
        broken = result.returncode not in (0, 1) or any(s in out for s in IMPORT_FAILURES)
        failed += broken
        first = out.splitlines()[0] if out else ""
        status = "FAIL" if broken else ("ok" if result.returncode == 0 else "ok (tool error)")
        print(f"  {category:13} {name:26} {status:16} {first[:90]}")
        if broken:
            print(out, file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    return 1 if failed else 0


# ---- knowledge: documents read, indexed and found by meaning inside the bundle ----------

INVOICE = "The invoice for the roof repair is due on the third of March."
HOLIDAY = "Our team offsite takes place in Lisbon during the second week of June."


def _pdf(text: str) -> bytes:
    """A one-page PDF with `text` in its text layer (hand-made: the check uses only the
    standard library)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _docx(text: str) -> bytes:
    """A minimal Word document holding one paragraph."""
    import io
    import zipfile

    main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="{main}"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'
        ),
        "word/document.xml": (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
            f"<w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>"
        ),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in parts.items():
            archive.writestr(name, body)
    return buffer.getvalue()


def check_knowledge(exe: str) -> int:
    """The bundle reads a PDF (PDFium) and a Word file, indexes them (SQLite with
    sqlite-vec, the built-in embedder's weights) and finds each by meaning."""
    root = Path(tempfile.mkdtemp(prefix="deskhand-knowledge-"))
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    home.mkdir()
    (docs / "bills.pdf").write_bytes(_pdf(INVOICE))
    (docs / "plans.docx").write_bytes(_docx(HOLIDAY))
    settings = {"files": {"allowed_roots": [str(docs)], "folders_chosen": True}}
    (home / "settings.json").write_text(json.dumps(settings), "utf-8")
    env = {**os.environ, "HOME": str(root)}
    run = {"capture_output": True, "text": True, "env": env, "cwd": root, "timeout": 180}
    failed = 0
    try:
        added = subprocess.run([exe, "--home", str(home), "knowledge", "add", str(docs)], **run)
        print(f"  knowledge add: exit {added.returncode}; {added.stdout.strip()[:120]}")
        if added.returncode != 0:
            print(added.stdout + added.stderr, file=sys.stderr)
            return 1
        for question, wanted in (
            ("when must the bill be paid", "bills.pdf"),
            ("where is the company retreat", "plans.docx"),
        ):
            args = json.dumps({"query": question, "limit": 1})
            found = subprocess.run(
                [exe, "--home", str(home), "tools", "call", "knowledge_search", "--args", args],
                **run,
            )
            out = found.stdout + found.stderr
            ok = found.returncode == 0 and wanted in out
            failed += not ok
            print(f"  {question!r:34} -> {'ok' if ok else 'FAIL'} ({wanted})")
            if not ok:
                print(out, file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


def check_engine(exe: str, model: str) -> int:
    """The bundle's built-in engine runs a model: the GGUF added with `models add`, then
    `ask --model` starts the engine (the executable as `--engine-server`) and answers."""
    root = Path(tempfile.mkdtemp(prefix="deskhand-engine-"))
    home = root / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(root)}
    run = {"capture_output": True, "text": True, "env": env, "cwd": root, "timeout": 300}
    try:
        added = subprocess.run([exe, "--home", str(home), "models", "add", model], **run)
        print(f"  models add: exit {added.returncode}; {added.stdout.strip()[:120]}")
        if added.returncode != 0:
            print(added.stdout + added.stderr, file=sys.stderr)
            return 1
        name = Path(model).stem
        asked = subprocess.run(
            [exe, "--home", str(home), "ask", "--model", name, "Say hello in one word."], **run
        )
        answer = asked.stdout.strip()
        print(f"  ask --model {name}: exit {asked.returncode}; answer {answer[:60]!r}")
        if asked.returncode != 0 or not answer:
            print(asked.stdout + asked.stderr, file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _visible() -> bool:
    found = subprocess.run(
        ["xdotool", "search", "--onlyvisible", "--name", WINDOW_NAME], capture_output=True
    )
    return found.returncode == 0 and bool(found.stdout.strip())


def _start(exe: str) -> tuple[subprocess.Popen, Path]:
    home = Path(tempfile.mkdtemp(prefix="deskhand-gui-"))
    env = {**os.environ, "HOME": str(home), "QT_QPA_PLATFORM": "xcb"}
    proc = subprocess.Popen(
        [exe, "--home", str(home / "deskhand")],
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=open(home / "stderr.txt", "w"),  # noqa: SIM115 - lives as long as the process
    )
    return proc, home


def _stop(proc: subprocess.Popen, home: Path) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(home, ignore_errors=True)


def _wait_window(proc: subprocess.Popen, home: Path, timeout: float = 30) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if _visible():
            return time.monotonic() - start
        if proc.poll() is not None:
            raise SystemExit(
                f"the app exited ({proc.returncode}): {(home / 'stderr.txt').read_text()[-2000:]}"
            )
        time.sleep(0.01)
    raise SystemExit("no Deskhand window within 30 s")


def check_window(exe: str, out: str) -> int:
    proc, home = _start(exe)
    try:
        _wait_window(proc, home)
        time.sleep(1.5)  # let the first conversation view and theme settle
        subprocess.run(["import", "-window", "root", out], check=True)
        spread = subprocess.run(
            ["convert", out, "-format", "%[fx:standard_deviation]", "info:"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        _stop(proc, home)
    print(f"window shown; screenshot {out} (pixel spread {float(spread):.3f})")
    return 0 if float(spread) > 0.02 else 1


def startup(exe: str, runs: int) -> int:
    times = []
    for _ in range(runs):
        while _visible():  # the previous run's window must be gone
            time.sleep(0.05)
        proc, home = _start(exe)
        try:
            times.append(_wait_window(proc, home))
        finally:
            _stop(proc, home)
    ms = ", ".join(f"{t:.2f}" for t in times)
    print(f"cold start to the first shown window: median {statistics.median(times):.2f} s ({ms})")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and "/" in argv[1]:
        argv[1] = str(Path(argv[1]).resolve())  # the app runs with its home as working dir
    if len(argv) >= 2 and argv[0] == "tools":
        return check_tools(argv[1])
    if len(argv) >= 2 and argv[0] == "knowledge":
        return check_knowledge(argv[1])
    if len(argv) >= 3 and argv[0] == "engine":
        return check_engine(argv[1], argv[2])
    if len(argv) >= 3 and argv[0] == "window":
        return check_window(argv[1], argv[2])
    if len(argv) >= 2 and argv[0] == "startup":
        return startup(argv[1], int(argv[2]) if len(argv) > 2 else 5)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
