"""Terminal output as a terminal would show it: ANSI escape sequences → styled text.

`parse_terminal(text)` interprets what a program in a pseudo-terminal printed, on a small
screen model: SGR colours (16, 256 and 24-bit), bold, dim, italic, underline, inverse,
strike-through and resets; `\\r` returning to the start of the line (progress bars
overwrite it), backspace, tabs, erasing in the line or the screen, cursor movement. OSC
(hyperlinks, window titles, clipboard writes), DCS/APC/PM strings and every other
sequence are dropped. What remains is text and only text: `render_terminal` inserts it
into a `QTextDocument` with character formats, never as HTML or markdown, and invisible
or direction-changing characters are shown as ⟨U+XXXX⟩ (`app.core.visible`).

Everything here is bounded: only the tail of a huge output is read, at most `MAX_LINES`
lines and `MAX_COLUMNS` columns are kept, numbers in sequences are clamped.

`terminal_output(name, category, data)` picks a built-in terminal tool's result data
(`tools/shell/tools.py`) apart, checking every field's type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from PySide6.QtGui import QBrush, QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument

from app.core.approval import ApprovalRequest
from app.core.visible import visible
from app.ui.chat.style import ensure_contrast, mix

#: Only this much of the end of an output is interpreted.
MAX_INPUT_CHARS = 200_000
#: Lines kept (the oldest are dropped first).
MAX_LINES = 3_000
#: A line longer than this wraps, as in a terminal that wide.
MAX_COLUMNS = 1_000
#: Largest number a sequence parameter may have (cursor moves, repeats).
MAX_PARAM = 9_999
#: The built-in tools whose results and progress are terminal output.
TERMINAL_TOOLS = frozenset({"shell_run", "shell_code"})

# ---- styles -------------------------------------------------------------------------------

#: A colour: an index into the 256-colour palette, or (r, g, b); None is the default.
Color = int | tuple[int, int, int] | None


@dataclass(frozen=True)
class Style:
    fg: Color = None
    bg: Color = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    strike: bool = False


PLAIN = Style()


@dataclass(frozen=True)
class TerminalText:
    """The lines of an output, each a list of (text, style) runs."""

    lines: list[list[tuple[str, Style]]]
    #: Lines that scrolled out of what is kept, or were cut off the input's start.
    dropped_lines: int = 0
    dropped_chars: int = 0

    def plain(self) -> str:
        return "\n".join("".join(text for text, _ in line) for line in self.lines)


# ---- the screen model ---------------------------------------------------------------------


class _Line:
    __slots__ = ("chars", "styles")

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.styles: list[Style] = []

    def write(self, col: int, text: str, style: Style) -> None:
        pad = col - len(self.chars)
        if pad > 0:
            self.chars.extend(" " * pad)
            self.styles.extend([PLAIN] * pad)
        end = col + len(text)
        self.chars[col:end] = text
        self.styles[col:end] = [style] * len(text)

    def truncate(self, col: int) -> None:
        del self.chars[col:]
        del self.styles[col:]

    def blank(self, start: int, end: int) -> None:
        end = min(end, len(self.chars))
        if end > start:
            self.chars[start:end] = " " * (end - start)
            self.styles[start:end] = [PLAIN] * (end - start)

    def runs(self) -> list[tuple[str, Style]]:
        out: list[tuple[str, Style]] = []
        chars, styles = self.chars, self.styles
        start = 0
        for i in range(1, len(chars) + 1):
            if i == len(chars) or (styles[i] is not styles[start] and styles[i] != styles[start]):
                out.append(("".join(chars[start:i]), styles[start]))
                start = i
        return out


_CSI = re.compile(r"(?:\x1b\[|\x9b)([0-?]*)([ -/]*)([@-~])")
_CSI_UNFINISHED = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z")
#: OSC and the other string sequences end at BEL or ST; a newline or an ESC also ends
#: one here, so a string left open cannot swallow the rest of the output.
_STRING = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
)
_ESC_OTHER = re.compile(r"\x1b[ -/]*[0-~]?")
_SPECIAL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Controls terminals ignore.
_IGNORED = frozenset("\x00\x07\x0e\x0f\x7f")


class _Screen:
    def __init__(self) -> None:
        self.lines: list[_Line] = [_Line()]
        self.row = 0
        self.col = 0
        self.top = 0  # where the "screen" starts (absolute rows count from here)
        self.style = PLAIN
        self.saved = (0, 0)
        self.dropped = 0

    # -- cursor ---------------------------------------------------------------------------

    def goto(self, row: int, col: int) -> None:
        self.row = max(0, row)
        self.col = max(0, min(col, MAX_COLUMNS))
        while self.row >= len(self.lines):
            self.lines.append(_Line())
        if len(self.lines) > MAX_LINES:
            cut = len(self.lines) - MAX_LINES
            del self.lines[:cut]
            self.dropped += cut
            self.row = max(0, self.row - cut)
            self.top = max(0, self.top - cut)

    def newline(self) -> None:
        self.goto(self.row + 1, 0)

    # -- text -----------------------------------------------------------------------------

    def text(self, run: str) -> None:
        if not run.isascii():
            run = visible(run, keep_newlines=False)
        while run:
            if self.col >= MAX_COLUMNS:
                self.newline()
            room = MAX_COLUMNS - self.col
            piece, run = run[:room], run[room:]
            self.lines[self.row].write(self.col, piece, self.style)
            self.col += len(piece)

    def control(self, ch: str) -> None:
        if ch in "\n\x0b\x0c":
            self.newline()
        elif ch == "\r":
            self.col = 0
        elif ch == "\b":
            self.col = max(0, self.col - 1)
        elif ch == "\t":
            self.col = min(MAX_COLUMNS, (self.col // 8 + 1) * 8)
        elif ch not in _IGNORED:
            self.text(f"⟨U+{ord(ch):04X}⟩")

    # -- escape sequences ------------------------------------------------------------------

    def csi(self, params: list[int], final: str) -> None:
        n = params[0] if params and params[0] > 0 else 1
        line = self.lines[self.row]
        match final:
            case "K":
                mode = params[0] if params else 0
                if mode == 0:
                    line.truncate(self.col)
                elif mode == 1:
                    line.blank(0, self.col + 1)
                else:
                    line.truncate(0)
            case "J":
                self._erase_display(params[0] if params else 0)
            case "A":
                self.goto(max(self.top, self.row - n), self.col)
            case "B" | "e":
                self.goto(self.row + n, self.col)
            case "C" | "a":
                self.goto(self.row, self.col + n)
            case "D":
                self.goto(self.row, self.col - n)
            case "E":
                self.goto(self.row + n, 0)
            case "F":
                self.goto(max(self.top, self.row - n), 0)
            case "G" | "`":
                self.goto(self.row, n - 1)
            case "d":
                self.goto(self.top + n - 1, self.col)
            case "H" | "f":
                col = params[1] if len(params) > 1 and params[1] > 0 else 1
                self.goto(self.top + n - 1, col - 1)
            case "X":
                line.blank(self.col, self.col + n)
            case "P":
                del line.chars[self.col : self.col + n]
                del line.styles[self.col : self.col + n]
            case "@":
                if self.col < len(line.chars):
                    line.chars[self.col : self.col] = " " * n
                    line.styles[self.col : self.col] = [PLAIN] * n
                    line.truncate(MAX_COLUMNS)
            case "s":
                self.saved = (self.row, self.col)
            case "u":
                self.goto(*self.saved)
            case _:
                pass  # modes, scroll regions, reports…: nothing to show

    def _erase_display(self, mode: int) -> None:
        if mode == 0:  # from the cursor to the end
            self.lines[self.row].truncate(self.col)
            del self.lines[self.row + 1 :]
        elif mode == 1:  # from the start of the screen to the cursor
            for line in self.lines[self.top : self.row]:
                line.truncate(0)
            self.lines[self.row].blank(0, self.col + 1)
        else:  # the whole screen: what was on it is gone, as in a terminal
            self.dropped += len(self.lines) - 1
            self.lines = [_Line()]
            self.row = self.top = 0

    def escape(self, text: str, pos: int) -> int:
        """Interprets the sequence at `pos` (an ESC or a C1 introducer); returns its end."""
        csi = _CSI.match(text, pos)
        if csi is not None:
            params, inter, final = csi.groups()
            private = params if params[:1] in ("<", "=", ">", "?") else ""
            if final == "m":
                # SGR keeps its raw parameters (colons matter); private forms are not SGR
                if not private and not inter:
                    self.style = sgr(self.style, params)
            elif not private and not inter:
                self.csi(_numbers(params), final)
            return csi.end()
        if _CSI_UNFINISHED.match(text, pos):
            return len(text)
        string = _STRING.match(text, pos)
        if string is not None:
            return string.end()
        if text[pos] != "\x1b":
            return pos + 1  # another C1 control: dropped
        other = _ESC_OTHER.match(text, pos)
        end = other.end() if other is not None else pos + 1
        self._esc(text[pos + 1 : end])
        return end

    def _esc(self, body: str) -> None:
        if body == "7":
            self.saved = (self.row, self.col)
        elif body == "8":
            self.goto(*self.saved)
        elif body == "M":
            self.goto(max(self.top, self.row - 1), self.col)
        elif body == "D":
            self.goto(self.row + 1, self.col)
        elif body == "E":
            self.newline()
        elif body == "c":
            self._erase_display(2)
            self.style = PLAIN
            self.col = 0

    def result(self, dropped_chars: int) -> TerminalText:
        lines = [line.runs() for line in self.lines]
        while lines and not any(text.strip() for text, _ in lines[-1]):
            lines.pop()
        return TerminalText(lines, self.dropped, dropped_chars)


def _numbers(params: str) -> list[int]:
    out = []
    for part in params.split(";"):
        head = part.split(":", 1)[0]
        out.append(min(int(head), MAX_PARAM) if head.isdigit() else 0)
    return out


# ---- SGR ----------------------------------------------------------------------------------

_SIMPLE: dict[int, dict[str, Any]] = {
    1: {"bold": True},
    2: {"dim": True},
    3: {"italic": True},
    4: {"underline": True},
    7: {"inverse": True},
    9: {"strike": True},
    21: {"underline": True},
    22: {"bold": False, "dim": False},
    23: {"italic": False},
    24: {"underline": False},
    27: {"inverse": False},
    29: {"strike": False},
    39: {"fg": None},
    49: {"bg": None},
}


def sgr(style: Style, params: str) -> Style:
    """`style` after one SGR sequence's parameters (e.g. "1;38;5;208", "38:2::255:0:0")."""
    groups = [[_int(x) for x in part.split(":")] for part in params.split(";")] or [[0]]
    i = 0
    while i < len(groups):
        group = groups[i]
        code = group[0] if group[0] is not None else 0
        i += 1
        if code == 0:
            style = PLAIN
        elif code in _SIMPLE:
            if code == 4 and len(group) > 1:  # 4:0 is "no underline", 4:1…4:5 kinds of it
                style = replace(style, underline=group[1] != 0)
            else:
                style = replace(style, **_SIMPLE[code])
        elif 30 <= code <= 37:
            style = replace(style, fg=code - 30)
        elif 40 <= code <= 47:
            style = replace(style, bg=code - 40)
        elif 90 <= code <= 97:
            style = replace(style, fg=code - 90 + 8)
        elif 100 <= code <= 107:
            style = replace(style, bg=code - 100 + 8)
        elif code in (38, 48, 58):
            if len(group) > 1:  # colon form: everything is in this group
                color = _extended(group[1:], colon=True)
            else:
                color, used = _extended_semicolon(groups, i)
                i += used
            if code == 38:
                style = replace(style, fg=color)
            elif code == 48:
                style = replace(style, bg=color)
        # blink, conceal (hiding text is not done here), fonts, frames…: ignored
    return style


def _int(text: str) -> int | None:
    return min(int(text), MAX_PARAM) if text.isdigit() else None


def _extended(values: list[int | None], *, colon: bool) -> Color:
    """5;n or 2;r;g;b (with colons, 2 may have a colour-space id before r;g;b)."""
    if not values:
        return None
    kind = values[0]
    if kind == 5 and len(values) > 1 and values[1] is not None:
        return values[1] if values[1] <= 255 else None
    if kind == 2:
        rgb = values[1:]
        if colon and len(rgb) >= 4:
            rgb = rgb[1:4]
        if len(rgb) >= 3:
            r, g, b = (min(v or 0, 255) for v in rgb[:3])
            return (r, g, b)
    return None


def _extended_semicolon(groups: list[list[int | None]], i: int) -> tuple[Color, int]:
    """A 38;5;n or 38;2;r;g;b colour starting at `groups[i]`, and how many groups it took."""
    if i >= len(groups):
        return None, 0
    kind = groups[i][0]
    if kind == 5:
        return _extended([g[0] for g in groups[i : i + 2]], colon=False), 2
    if kind == 2:
        return _extended([g[0] for g in groups[i : i + 4]], colon=False), 4
    return None, 1


# ---- parsing ------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def parse_terminal(text: str) -> TerminalText:
    """The lines `text` leaves on a terminal (scrolled-off lines included, up to a bound).
    Cached: a card's layout is rebuilt on every resize."""
    start = _start(text)
    text = text[start:]
    screen = _Screen()
    pos = 0
    while pos < len(text):
        special = _SPECIAL.search(text, pos)
        end = special.start() if special is not None else len(text)
        if end > pos:
            screen.text(text[pos:end])
        if special is None:
            break
        ch = text[end]
        if ch == "\x1b" or "\x80" <= ch <= "\x9f":
            pos = screen.escape(text, end)
        else:
            screen.control(ch)
            pos = end + 1
    return screen.result(start)


def _start(text: str) -> int:
    """Where reading starts: the tail of a huge text, from a line start if one is near,
    never inside an escape sequence."""
    start = len(text) - MAX_INPUT_CHARS
    if start <= 0:
        return 0
    newline = text.find("\n", start, start + 2000)
    if newline >= 0:
        return newline + 1
    esc = text.rfind("\x1b", max(0, start - 2000), start)
    if esc >= 0:
        match = _CSI.match(text, esc) or _STRING.match(text, esc) or _ESC_OTHER.match(text, esc)
        if match is not None and match.end() > start:
            return match.end()
    return start


# ---- colours and documents ----------------------------------------------------------------

#: The terminal's own colours: dark in both themes, like a terminal window.
TERMINAL_BG = QColor("#17181b")
TERMINAL_HEADER = QColor("#25272b")
TERMINAL_BORDER = QColor("#3a3c42")
TERMINAL_FG = QColor("#d6d6d6")
TERMINAL_MUTED = QColor("#9a9ca3")
TERMINAL_PROMPT = QColor("#4ec98c")
TERMINAL_OK = QColor("#6fdc9c")
TERMINAL_ERROR = QColor("#ff8b84")
TERMINAL_WARN = QColor("#f5c25c")
_BASE16 = (
    "#3b3e45", "#f0524f", "#5cc27a", "#e5c07b", "#4f9cf0", "#c678dd", "#3fbfcf", "#d6d6d6",
    "#7a7e87", "#ff6e6b", "#7be29a", "#f5d98b", "#78b6ff", "#e09cf0", "#6fd8e6", "#ffffff",
)  # fmt: skip
_CUBE = (0, 95, 135, 175, 215, 255)


def palette_rgb(index: int) -> tuple[int, int, int]:
    """The xterm 256-colour palette (its first 16 tuned for the dark background)."""
    if index < 16:
        color = QColor(_BASE16[index])
        return color.red(), color.green(), color.blue()
    if index < 232:
        index -= 16
        return _CUBE[index // 36], _CUBE[index // 6 % 6], _CUBE[index % 6]
    level = 8 + 10 * (index - 232)
    return level, level, level


def _qcolor(color: Color, default: QColor) -> QColor:
    if color is None:
        return QColor(default)
    if isinstance(color, int):
        return QColor(*palette_rgb(color))
    return QColor(*color)


@lru_cache(maxsize=1024)
def _colors(style: Style) -> tuple[QColor, QColor | None]:
    """(text colour, background or None): inverse applied, the text kept readable."""
    fg = _qcolor(style.fg, TERMINAL_FG)
    bg = _qcolor(style.bg, TERMINAL_BG) if style.bg is not None else None
    if style.inverse:
        fg, bg = (bg or QColor(TERMINAL_BG)), fg
    surface = bg or TERMINAL_BG
    if style.dim:
        fg = mix(fg, surface, 0.35)
    # no text the same colour as its background (a way to hide it), and dark blue stays legible
    return ensure_contrast(fg, surface, 3.0), bg


@lru_cache(maxsize=1024)
def _format(style: Style) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fg, bg = _colors(style)
    fmt.setForeground(QBrush(fg))
    if bg is not None:
        fmt.setBackground(QBrush(bg))
    if style.bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    fmt.setFontItalic(style.italic)
    fmt.setFontUnderline(style.underline)
    fmt.setFontStrikeOut(style.strike)
    return fmt


def note_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QBrush(TERMINAL_MUTED))
    fmt.setFontItalic(True)
    return fmt


def insert_terminal(
    cursor: QTextCursor, parsed: TerminalText, *, tail: int | None = None, first: bool = True
) -> int:
    """Inserts the lines (only the last `tail` when given) as formatted plain text;
    returns how many earlier lines were left out."""
    lines = parsed.lines
    hidden = parsed.dropped_lines
    if tail is not None and len(lines) > tail:
        hidden += len(lines) - tail
        lines = lines[-tail:]
    if hidden or parsed.dropped_chars:
        what = f"{hidden:,} earlier line{'s' if hidden != 1 else ''}" if hidden else "the start"
        if not first:
            cursor.insertBlock()
        cursor.insertText(f"… {what} not shown", note_format())
        first = False
    for line in lines:
        if not first:
            cursor.insertBlock()
        first = False
        for text, style in line:
            cursor.insertText(text, _format(style))
    return hidden


def prompt_format(bold: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QBrush(TERMINAL_PROMPT))
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    return fmt


def render_terminal(
    output: str,
    font: QFont,
    *,
    command: str | None = None,
    tail: int | None = None,
) -> tuple[QTextDocument, int, int]:
    """A document showing `output` as a terminal would (after a `$ command` line when
    given): (document, lines of output, lines left out above the tail)."""
    from PySide6.QtGui import QTextOption

    doc = QTextDocument()
    doc.setUndoRedoEnabled(False)
    doc.setDocumentMargin(0)
    doc.setDefaultFont(font)
    option = doc.defaultTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    doc.setDefaultTextOption(option)
    cursor = QTextCursor(doc)
    first = True
    if command is not None:
        cursor.insertText("$ ", prompt_format(bold=True))
        plain = QTextCharFormat()
        plain.setForeground(QBrush(TERMINAL_FG))
        plain.setFontWeight(QFont.Weight.DemiBold)
        for i, line in enumerate(visible(command.rstrip("\n")).split("\n")):
            if i:
                cursor.insertBlock()
                cursor.insertText("> ", prompt_format())
            cursor.insertText(line, plain)
        first = False
    parsed = parse_terminal(output)
    hidden = insert_terminal(cursor, parsed, tail=tail, first=first)
    return doc, len(parsed.lines) + parsed.dropped_lines, hidden


# ---- a terminal tool's result -------------------------------------------------------------


@dataclass(frozen=True)
class TerminalOutput:
    """What a terminal card shows of a finished command."""

    output: str
    command: str
    folder: str
    exit_code: int | None
    timed_out: bool
    sandboxed: bool


def _pill(color: QColor) -> tuple[QColor, QColor]:
    fill = QColor(color)
    fill.setAlphaF(0.16)
    return QColor(color), fill


def terminal_badges(out: TerminalOutput) -> list[tuple[str, QColor, QColor]]:
    """The pills of a terminal card's header: (text, text colour, fill)."""
    if out.timed_out:
        status = ("timed out", *_pill(TERMINAL_ERROR))
    elif out.exit_code is None:
        status = ("no exit code", *_pill(TERMINAL_WARN))
    else:
        color = TERMINAL_OK if out.exit_code == 0 else TERMINAL_ERROR
        status = (f"exit {out.exit_code}", *_pill(color))
    if out.sandboxed:
        sandbox = ("sandboxed", *_pill(TERMINAL_MUTED))
    else:
        sandbox = ("NOT sandboxed", *_pill(TERMINAL_WARN))
    return [sandbox, status]


def is_terminal_tool(name: str, category: str) -> bool:
    """A built-in terminal tool (a third-party tool can call its category "shell", but
    cannot take a built-in tool's name)."""
    return category == "shell" and name in TERMINAL_TOOLS


def terminal_output(name: str, category: str, data: object) -> TerminalOutput | None:
    """The terminal view of a result's data, or None when it is not a terminal tool's
    (or any field has the wrong type)."""
    if not is_terminal_tool(name, category) or not isinstance(data, dict):
        return None
    output, command, folder = data.get("terminal"), data.get("command"), data.get("folder")
    exit_code, timed_out = data.get("exit_code"), data.get("timed_out")
    sandboxed = data.get("sandboxed")
    if not (isinstance(output, str) and isinstance(command, str) and isinstance(folder, str)):
        return None
    if exit_code is not None and (not isinstance(exit_code, int) or isinstance(exit_code, bool)):
        return None
    if not isinstance(timed_out, bool) or not isinstance(sandboxed, bool):
        return None
    return TerminalOutput(output, command, folder, exit_code, timed_out, sandboxed)


# ---- what a terminal call's approval shows ------------------------------------------------

#: Built-in terminal tools whose approval shows a text in full: (argument, what it is).
_APPROVAL_TEXT = {
    "shell_run": ("command", "Command"),
    "shell_start": ("command", "Command, started in the background"),
    "shell_code": ("code", "Code"),
    "shell_send": ("text", "Text typed into the program"),
}
_LANGUAGES = {"python": "Python code", "javascript": "JavaScript code", "shell": "Bash code"}


@dataclass(frozen=True)
class ShellApproval:
    """The parts of a terminal call's approval the card shows on their own."""

    #: What the text is ("Command", "Python code"…) and the text, whole.
    label: str
    text: str
    #: Where it runs ("~/project", "a new temporary folder"); None when not said.
    folder: str | None
    #: Whether it runs in the OS sandbox; None when the call says nothing about it.
    sandboxed: bool | None
    network: bool


def is_shell_request(request: ApprovalRequest) -> bool:
    """A built-in terminal tool's approval (a third party cannot take these names, and
    only built-in tools get a summary line and a target from Deskhand's own hooks)."""
    return (
        request.category == "shell"
        and request.source_id == "builtin"
        and request.tool in _APPROVAL_TEXT
    )


def shell_approval(request: ApprovalRequest) -> ShellApproval | None:
    if not is_shell_request(request):
        return None
    key, label = _APPROVAL_TEXT[request.tool]
    text = request.arguments.get(key)
    if not isinstance(text, str):
        return None
    if request.tool == "shell_code":
        label = _LANGUAGES.get(str(request.arguments.get("language")), label)
    folder = None
    if request.target and request.target.startswith("Terminal · "):
        folder = request.target.removeprefix("Terminal · ")
    elif isinstance(request.arguments.get("folder"), str):
        folder = request.arguments["folder"]
    sandboxed = None if request.tool == "shell_send" else _sandboxed(request)
    network = request.arguments.get("network") is True
    return ShellApproval(label, text, folder, sandboxed, network)


def _sandboxed(request: ApprovalRequest) -> bool | None:
    """Read from the summary line's last parenthesis ("… in ~/p (NOT sandboxed)"), which
    the hook writes after the quoted command; "without a sandbox" in the reason wins."""
    if "without a sandbox" in (request.reason or ""):
        return False
    summary = request.summary.rstrip()
    tail = summary[summary.rfind("”") + 1 :]
    if not tail.endswith(")") or " (" not in tail:
        return None
    how = tail[tail.rfind(" (") + 2 :]
    if how.startswith("NOT sandboxed"):
        return False
    if how.startswith("sandboxed"):
        return True
    return None
