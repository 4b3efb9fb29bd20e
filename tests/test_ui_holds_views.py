"""`app/ui` holds views: the use cases (writing files, the keyring, the rules) are core
services the views call. Checked statically over every module of app/ui, lazy imports and
calls inside functions included, so a view cannot quietly take a use case back.

Each rule has a test on a small made-up source that proves the checker sees what it bans.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UI = ROOT / "app" / "ui"

# ---- reading a module ----------------------------------------------------------------------


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name → the dotted name it was imported as (`from os import replace as r` gives
    `r → os.replace`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    """`os.replace`, `shutil.rmtree`…: the dotted name an expression stands for, imports
    resolved; None when it is not a plain chain of names."""
    if isinstance(node, ast.Name):
        return names.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, names)
        return f"{base}.{node.attr}" if base else None
    return None


def ui_modules() -> Iterator[tuple[str, str]]:
    for path in sorted(UI.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def found_in_ui(check: Callable[[str], list[str]]) -> list[str]:
    return [f"{where}:{finding}" for where, source in ui_modules() for finding in check(source)]


# ---- (a) no file writing -------------------------------------------------------------------

#: Functions that write, move or delete files (a reference counts: `in_thread(os.replace, …)`).
WRITING_FUNCTIONS = frozenset(
    {
        *(f"os.{f}" for f in ("replace", "rename", "renames", "remove", "unlink", "rmdir")),
        *(f"os.{f}" for f in ("removedirs", "mkdir", "makedirs", "open", "write", "truncate")),
        *(f"os.{f}" for f in ("symlink", "link")),
        *(f"{m}.dump" for m in ("json", "pickle", "marshal", "yaml", "tomli_w", "tomlkit")),
        "yaml.safe_dump",
        *(f"tempfile.{f}" for f in ("mkstemp", "mkdtemp", "NamedTemporaryFile")),
        *(f"tempfile.{f}" for f in ("TemporaryFile", "SpooledTemporaryFile")),
        # Qt's own ways to the disk (QSettings writes a config file of its own)
        *(f"PySide6.QtCore.{c}" for c in ("QSettings", "QSaveFile", "QFile", "QDir")),
        *(f"PySide6.QtCore.{c}" for c in ("QTemporaryFile", "QTemporaryDir", "QLockFile")),
    }
)
WRITING_MODULES = ("shutil.",)
#: Path methods that write or delete, whatever they are called on.
WRITING_METHODS = frozenset(
    {"write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir", "symlink_to", "hardlink_to"}
)
#: `open(path, mode)`-like functions: they write when the mode says so.
OPENERS = frozenset({"open", "io.open", "os.fdopen", "codecs.open"})
WRITE_MODE = frozenset("wax+")

#: Files of app/ui that write files that are not settings, and what they may use.
WRITES_ALLOWED = {
    # the style sheet takes images only by URL: glyph files in a temporary folder
    "app/ui/theme.py": {"tempfile.mkdtemp", "shutil.rmtree", ".write_text"},
    # the single-instance socket's private folder (QLocalServer needs it on disk)
    "app/ui/single_instance.py": {".mkdir", ".unlink"},
}


def _mode(call: ast.Call, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "mode":
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _writes_by_mode(mode: ast.expr | None, *, unknown_writes: bool) -> bool:
    if mode is None:
        return False  # the default mode reads
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODE & set(mode.value))
    return unknown_writes


def file_writes(source: str) -> list[str]:
    """Each place that writes, moves or deletes a file: `line: what` (what is a dotted name,
    or `.method` for a method whatever it is called on)."""
    tree = ast.parse(source)
    names = imported_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            name = dotted(node, names)
            if name and (name in WRITING_FUNCTIONS or name.startswith(WRITING_MODULES)):
                found.append((node.lineno, name))
            elif isinstance(node, ast.Attribute) and node.attr in WRITING_METHODS:
                found.append((node.lineno, f".{node.attr}"))
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func, names)
        if name in OPENERS:  # open(path, mode): a mode that is not a literal may write
            if _writes_by_mode(_mode(node, 1), unknown_writes=True):
                found.append((node.lineno, name))
        elif isinstance(node.func, ast.Attribute):
            method, positional = node.func.attr, len(node.args)
            # Path.open(mode); zipfile's open(member) reads, so only a literal mode counts
            if method == "open" and _writes_by_mode(_mode(node, 0), unknown_writes=False):
                found.append((node.lineno, ".open"))
            # Path.replace(target) / rename(target): one argument (str.replace takes two,
            # datetime.replace keywords; self.rename(x) is the view's own method)
            elif (
                method in {"replace", "rename"}
                and positional == 1
                and not node.keywords
                and dotted(node.func.value, names) not in {"self", "cls"}
            ):
                found.append((node.lineno, f".{method}"))
    return [f"{line}: {what}" for line, what in sorted(set(found))]


def _not_allowed(where: str, finding: str) -> bool:
    return finding.split(": ", 1)[1] not in WRITES_ALLOWED.get(where, set())


def test_the_ui_writes_no_file():
    writes = [
        f"{where}:{finding}"
        for where, source in ui_modules()
        for finding in file_writes(source)
        if _not_allowed(where, finding)
    ]
    assert writes == [], "write files through a core service (SettingsStore, atomic_write…)"


def test_every_allowed_write_is_still_made():
    made = {
        where: {finding.split(": ", 1)[1] for finding in file_writes(source)}
        for where, source in ui_modules()
    }
    stale = {
        where: sorted(allowed - made.get(where, set())) for where, allowed in WRITES_ALLOWED.items()
    }
    assert {where: left for where, left in stale.items() if left} == {}


def test_the_checker_sees_every_way_to_write_a_file():
    source = """
import json, os, shutil as sh
from os import replace as move
from pathlib import Path
from PySide6.QtCore import QSettings

def save(path: Path, data: dict) -> None:
    path.write_text("x")
    with open(path, "w") as f:
        json.dump(data, f)
    with path.open(mode="ab") as f:
        pass
    move("a", "b")
    path.replace(path.with_suffix(".bak"))
    self.rename(path)
    in_thread(sh.rmtree, path)
    QSettings().setValue("k", 1)
    open(path, some_mode)
"""
    assert file_writes(source) == [
        "8: .write_text",
        "9: open",
        "10: json.dump",
        "11: .open",
        "13: os.replace",
        "14: .replace",
        "16: shutil.rmtree",
        "17: PySide6.QtCore.QSettings",
        "18: open",
    ]


def test_the_checker_lets_reading_and_string_work_pass():
    source = """
import zipfile
from datetime import datetime

def read(path, zf, when: datetime) -> str:
    with open(path) as f, open(path, "rb") as g, path.open() as h:
        pass
    zf.open(member)
    dialog.open()
    when.replace(second=0)
    return path.read_text().replace("a", "b")
"""
    assert file_writes(source) == []


# ---- (b) no keyring ------------------------------------------------------------------------

#: Libraries that reach the keyring or the secret service directly.
KEYRING_LIBRARIES = ("keyring", "keyrings", "secretstorage", "jeepney", "dbus")
#: What a view may import from the core's secret modules: errors, names and the GUI's
#: passphrase prompts. Reading and writing secrets goes through `runtime.secrets`.
SECRETS_ALLOWED = {
    "app.core.secrets": {"SecretStoreError", "env_api_key", "secret_key"},
    "app.core.keyring_fallback": {"FallbackError", "Prompts", "install_prompts"},
}


def _import_lines(tree: ast.Module) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name) for each imported name; name None for `import module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def keyring_access(source: str) -> list[str]:
    found = []
    for line, module, name in _import_lines(ast.parse(source)):
        full = f"{module}.{name}" if name else module
        if _within(full, KEYRING_LIBRARIES) or _within(module, KEYRING_LIBRARIES):
            found.append(f"{line}: {full}")
        elif full in SECRETS_ALLOWED or (module in SECRETS_ALLOWED and name is None):
            found.append(f"{line}: {full} (the whole module)")
        elif module in SECRETS_ALLOWED and name not in SECRETS_ALLOWED[module]:
            found.append(f"{line}: {full}")
    return sorted(found, key=lambda finding: int(finding.split(":")[0]))


def test_the_ui_never_calls_the_keyring():
    assert found_in_ui(keyring_access) == [], "read and write secrets through runtime.secrets"


def test_the_checker_sees_keyring_access():
    source = """
import keyring
def f():
    from secretstorage import dbus_init
    from app.core.secrets import SecretStore, SecretStoreError
    from app.core import secrets
    import app.core.keyring_fallback
"""
    assert keyring_access(source) == [
        "2: keyring",
        "4: secretstorage.dbus_init",
        "5: app.core.secrets.SecretStore",
        "6: app.core.secrets (the whole module)",
        "7: app.core.keyring_fallback (the whole module)",
    ]


# ---- (c) no reaching inside the runtime ----------------------------------------------------


def runtime_internals(source: str) -> list[str]:
    """`x.__dict__`, `vars(x)`, `getattr(x, "__dict__")` (on anything: a view has no reason
    to list an object's attributes), and a private attribute of a runtime."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if node.attr == "__dict__":
                found.append(f"{node.lineno}: .__dict__")
            elif node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                owner_name = (
                    owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                )
                if owner_name.lower().endswith("runtime"):
                    found.append(f"{node.lineno}: runtime.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "vars":
                found.append(f"{node.lineno}: vars()")
            elif node.func.id in {"getattr", "hasattr", "setattr"} and any(
                isinstance(a, ast.Constant) and a.value == "__dict__" for a in node.args
            ):
                found.append(f"{node.lineno}: {node.func.id}(…, '__dict__')")
    return sorted(found, key=lambda finding: int(finding.split(":")[0]))


def test_the_ui_reads_the_runtime_only_through_its_typed_accessors():
    assert found_in_ui(runtime_internals) == []


def test_the_checker_sees_reaching_inside_the_runtime():
    source = """
def f(self, runtime):
    if "agent" in self.runtime.__dict__:
        vars(runtime)
    getattr(runtime, "__dict__")
    runtime._secrets
    self.runtime._built
    runtime.secrets
"""
    assert runtime_internals(source) == [
        "3: .__dict__",
        "4: vars()",
        "5: getattr(…, '__dict__')",
        "6: runtime._secrets",
        "7: runtime._built",
    ]


# ---- (d) only the public names of the rules and of mcp.json --------------------------------

#: The names a view may import: the rule vocabulary and the choices the pages show
#: (evaluating and storing rules stays in the core), and mcp.json's error and report types.
PUBLIC_NAMES = {
    "app.core.rules": {
        "BUILTIN",
        "Rule",
        "RuleBook",
        "RuleChoice",
        "RuleDecision",
        "Scope",
        "choice_for",
        "set_choice",
        "server_choice",
        "set_server_choice",
        "forget_server_choice",
    },
    "app.core.mcp.config": {"McpConfigError", "EntryError", "EntryProblem", "ImportReport"},
}


def internal_imports(source: str) -> list[str]:
    """Names of `app.core.rules` / `app.core.mcp.config` outside `PUBLIC_NAMES`, the modules
    themselves (which open every name), and any private (`_name`) name of the core."""
    found = []
    for line, module, name in _import_lines(ast.parse(source)):
        full = f"{module}.{name}" if name else module
        if full in PUBLIC_NAMES or (name is None and module in PUBLIC_NAMES):
            found.append(f"{line}: {full} (the whole module)")
        elif (module in PUBLIC_NAMES and name not in PUBLIC_NAMES[module]) or (
            _within(module, ("app.core",)) and name and name.startswith("_")
        ):
            found.append(f"{line}: {full}")
    return sorted(found, key=lambda finding: int(finding.split(":")[0]))


def test_the_ui_imports_only_public_names_of_the_rules_and_mcp_config():
    assert found_in_ui(internal_imports) == []


def test_the_checker_sees_internal_imports():
    source = """
from app.core.rules import Rule, RuleDecision, _same, Matcher
def f():
    from app.core.mcp.config import EntryError, write_servers_block
    from app.core import rules
    import app.core.mcp.config as config
    from app.core.skills import _read
"""
    assert internal_imports(source) == [
        "2: app.core.rules._same",
        "2: app.core.rules.Matcher",
        "4: app.core.mcp.config.write_servers_block",
        "5: app.core.rules (the whole module)",
        "6: app.core.mcp.config (the whole module)",
        "7: app.core.skills._read",
    ]


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES))
def test_every_public_name_exists(module: str):
    import importlib

    missing = {
        name for name in PUBLIC_NAMES[module] if not hasattr(importlib.import_module(module), name)
    }
    assert missing == set()
