"""Knowledge tool bodies, on the index the app hands in as `ctx.service("knowledge")`
(bound to the calling conversation: the global knowledge folders and its own).

Both tools return what the index holds (text redacted before it was indexed), never a file
read now. `knowledge_read` names a document by path; a path is taken only when, with every
symlink and `..` resolved, it lies in one of this conversation's knowledge folders — so a
model talked into reading `~/.ssh/…`, `folder/../../etc/passwd` or a symlink pointing out
gets a refusal, and another conversation's attachments stay out of reach. The pipeline
labels both results as untrusted data and counts them as private data read (the same as
`fs_read_file`: app/core/untrusted.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tools.knowledge.manifest import ReadKnowledge, SearchKnowledge
from tools.spec import ToolContext, ToolError, ToolResult
from tools.views import KnowledgeFolderView, KnowledgePassageView, KnowledgeServiceView

#: What one knowledge_read returns at most; a longer section is read in parts.
MAX_READ_CHARS = 12_000
#: The outline lists at most this many sections.
MAX_OUTLINE = 200
#: How far back the end of one chunk may repeat at the start of the next (chunk overlap).
_MAX_OVERLAP = 400
_PAGE = re.compile(r"page (\d+)", re.IGNORECASE)
NO_FOLDERS = (
    "there are no knowledge folders for this conversation: the user adds them in "
    "Settings → Knowledge (or with `deskhand knowledge add FOLDER`)"
)


def _knowledge(ctx: ToolContext) -> KnowledgeServiceView:
    return ctx.service("knowledge")


def _folders(view: KnowledgeServiceView) -> Sequence[KnowledgeFolderView]:
    try:
        folders = view.folders()
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if not folders:
        raise ToolError(NO_FOLDERS)
    return folders


# ---- links and citations ------------------------------------------------------------------


def file_link(path: str, location: str = "") -> str:
    """The `file:` address of a document, at its page for a PDF ("page 3" → `#page=3`):
    what the window opens when the user clicks a citation."""
    address = Path(path).as_uri()
    page = _PAGE.fullmatch(location.strip())
    if page and path.lower().endswith(".pdf"):
        address += f"#page={int(page.group(1))}"
    return address


def _where(path: str, location: str) -> str:
    name = Path(path).name
    return f"{name}, {location}" if location else name


@dataclass(frozen=True)
class Citation:
    number: int
    path: str
    location: str
    link: str
    text: str

    def block(self) -> str:
        return (
            f"[{self.number}] {_where(self.path, self.location)}\n"
            f"link: {self.link}\npath: {self.path}\n{self.text.strip()}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "n": self.number,
            "file": Path(self.path).name,
            "path": self.path,
            "location": self.location,
            "link": self.link,
        }


def citations(passages: Sequence[KnowledgePassageView]) -> list[Citation]:
    return [
        Citation(n, p.path, p.location, file_link(p.path, p.location), p.text)
        for n, p in enumerate(passages, start=1)
    ]


def knowledge_search(args: SearchKnowledge, ctx: ToolContext) -> ToolResult:
    view = _knowledge(ctx)
    _folders(view)
    try:
        found = view.search(args.query, args.limit)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if not found:
        return ToolResult(
            ok=True,
            content=f"Nothing in the knowledge folders matches {args.query!r}.",
            data={"passages": []},
        )
    cited = citations(found)
    head = (
        f"{len(cited)} passage(s) for {args.query!r}. Cite a passage you use as [n](link), "
        "e.g. " + f"[1]({cited[0].link})."
    )
    return ToolResult(
        ok=True,
        content="\n\n".join([head, *(c.block() for c in cited)]),
        data={"passages": [c.to_json() for c in cited]},
    )


# ---- reading a document -----------------------------------------------------------------


def _real(path: Path) -> Path:
    return Path(path).expanduser().resolve(strict=False)


def _within(real: Path, root: Path) -> bool:
    return real == root or root in real.parents


def resolve_in_folders(raw: str, folders: Sequence[KnowledgeFolderView]) -> tuple[str, ...]:
    """The ways the index may name the document `raw` (its absolute path as written, then
    with symlinks resolved), once its real path is inside one of `folders`; else a
    ToolError. A `file:` link from knowledge_search is taken too (its page dropped)."""
    text = raw.strip()
    if text.lower().startswith("file:"):
        text = unquote(urlsplit(text).path)
    if not text or "\0" in text:
        raise ToolError("give the document's path, as knowledge_search shows it")
    given = Path(text).expanduser()
    roots = [_real(Path(f.path)) for f in folders]
    written = [Path(*_normal_parts(Path(f.path).expanduser())) for f in folders]
    tries = [given] if given.is_absolute() else [root / given for root in roots]
    for candidate in tries:
        real = _real(candidate)
        if any(_within(real, root) for root in roots):
            plain = Path(*_normal_parts(candidate))
            # the path as written counts only where it, too, names a place in a folder
            names = [plain] if any(_within(plain, r) for r in [*written, *roots]) else []
            return tuple(dict.fromkeys(str(n) for n in [*names, real]))
    raise ToolError(
        f"{raw!r} is not in a knowledge folder of this conversation; knowledge_read reads "
        "only documents knowledge_search found (use the path it shows)"
    )


def _normal_parts(path: Path) -> list[str]:
    """The path's parts with `.` dropped and `..` applied (no file system access); only used
    to look the path up once its real path was found inside a folder."""
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if len(parts) > 1:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return parts


@dataclass
class Section:
    location: str
    texts: list[str]

    @property
    def text(self) -> str:
        return join_chunks(self.texts)


def sections_of(passages: Sequence[KnowledgePassageView]) -> list[Section]:
    """The document's chunks (in reading order) gathered by location."""
    sections: list[Section] = []
    for passage in passages:
        if sections and sections[-1].location == passage.location:
            sections[-1].texts.append(passage.text)
        else:
            sections.append(Section(passage.location, [passage.text]))
    return sections


def join_chunks(texts: Sequence[str]) -> str:
    """Consecutive chunks as one text, without the overlap each repeats of the one before."""
    if not texts:
        return ""
    out = texts[0]
    for text in texts[1:]:
        cut = _overlap(out, text)
        out += text[cut:] if cut else "\n\n" + text
    return out


def _overlap(before: str, after: str) -> int:
    """The length of the longest start of `after` that `before` ends with (at least 20
    characters, at most `_MAX_OVERLAP`); 0 for none."""
    for size in range(min(len(before), len(after), _MAX_OVERLAP), 19, -1):
        if before.endswith(after[:size]):
            return size
    return 0


def find_section(sections: Sequence[Section], wanted: str) -> list[Section]:
    """The sections `wanted` names: exactly ("page 3"), or by what follows the kind
    ("3" → "page 3", "Budget" → "sheet Budget", "Costs" → "heading: Costs")."""
    key = _key(wanted)
    exact = [s for s in sections if _key(s.location) == key]
    if exact:
        return exact
    return [s for s in sections if _key(s.location.split(" ", 1)[-1]) == key]


def _key(text: str) -> str:
    return " ".join(text.casefold().replace(":", " ").split())


def knowledge_read(args: ReadKnowledge, ctx: ToolContext) -> ToolResult:
    view = _knowledge(ctx)
    names = resolve_in_folders(args.path, _folders(view))
    passages: Sequence[KnowledgePassageView] = ()
    try:
        for name in names:
            passages = view.read(name)
            if passages:
                break
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if not passages:
        raise ToolError(
            f"{Path(names[0]).name} is not indexed (yet): it may still be indexing, have "
            "no text, or be a kind of file Deskhand does not read; knowledge_search shows "
            "what is indexed"
        )
    path = passages[0].path
    sections = sections_of(passages)
    if args.location is None or not args.location.strip():
        return _outline(path, sections)
    chosen = find_section(sections, args.location)
    if not chosen:
        listed = ", ".join(s.location for s in sections[:20] if s.location)
        raise ToolError(
            f"{Path(path).name} has no section {args.location!r}"
            + (f"; its sections include: {listed}" if listed else "")
        )
    text = "\n\n".join(s.text for s in chosen)
    return _part(path, chosen[0].location, text, args.part)


def _outline(path: str, sections: Sequence[Section]) -> ToolResult:
    """The sections of the document with their sizes, then its start."""
    name = Path(path).name
    lines = [f"{name}: {len(sections)} section(s). Read one with knowledge_read(path, location)."]
    for section in sections[:MAX_OUTLINE]:
        label = section.location or "(start)"
        lines.append(f"- {label} ({len(section.text):,} characters)")
    if len(sections) > MAX_OUTLINE:
        lines.append(f"- … and {len(sections) - MAX_OUTLINE} more")
    first = sections[0]
    budget = max(1000, MAX_READ_CHARS - sum(len(line) + 1 for line in lines))
    start = first.text[:budget]
    more = " (more with part=2)" if len(first.text) > budget else ""
    lines += ["", f"{_where(path, first.location) or name}{more}:", start]
    return ToolResult(
        ok=True,
        content="\n".join(lines),
        data={
            "path": path,
            "link": file_link(path),
            "sections": [s.location for s in sections],
        },
    )


def _part(path: str, location: str, text: str, part: int) -> ToolResult:
    """Part `part` of a section's text (MAX_READ_CHARS each, cut at a line end if near)."""
    parts = _split(text, MAX_READ_CHARS)
    if part > len(parts):
        raise ToolError(f"{_where(path, location)} has {len(parts)} part(s)")
    body = parts[part - 1]
    head = f"{_where(path, location)} — {file_link(path, location)}"
    if len(parts) > 1:
        head += f" (part {part} of {len(parts)}"
        head += f"; next: part={part + 1})" if part < len(parts) else ")"
    return ToolResult(
        ok=True,
        content=f"{head}\n\n{body}",
        data={"path": path, "location": location, "link": file_link(path, location)},
    )


def _split(text: str, size: int) -> list[str]:
    parts: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind("\n", size // 2, size)
        cut = cut if cut > 0 else size
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip("\n")
    parts.append(rest)
    return parts
