"""MCP tool listings → `ToolManifest`s named `mcp__<server>__<tool>` in category `mcp:<server>`.

Takes the SDK's `Tool` objects duck-typed (name, description, input_schema, annotations),
so it imports no SDK itself.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, model_validator

from tools.registry import ToolSource
from tools.spec import Operation, ToolContext, ToolManifest

PREFIX = "mcp__"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_NAME = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ServerTools:
    """One server's tools as the registry takes them: its manifests (built from its own
    connection, or from its cached listing) and itself as a tool source (identity + each
    tool's definition hash)."""

    server: str
    manifests: list[ToolManifest]
    source: ToolSource


def slug(text: str, *, camel: bool = True) -> str:
    """snake_case usable in a tool name (`readFile` → `read_file`, `My-Server` → `my_server`),
    never containing `__` (the separator)."""
    if camel:
        text = _CAMEL.sub("_", text)
    out = _NOT_NAME.sub("_", text.lower()).strip("_")
    if not out or not out[0].isalpha():
        out = f"x_{out}".rstrip("_")
    return out


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{slug(server, camel=False)}__{slug(tool)}"


def category(server: str) -> str:
    return f"mcp:{slug(server, camel=False)}"


def server_slug_of(name: str) -> str | None:
    """The server part of an MCP tool name, or None for other tools."""
    if not name.startswith(PREFIX):
        return None
    server, sep, _ = name[len(PREFIX) :].partition("__")
    return server if sep else None


class McpParams(BaseModel):
    """Arguments pass through as given; the schema shown is the server's own."""

    model_config = ConfigDict(extra="allow")
    mcp_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(cls.mcp_schema)

    @model_validator(mode="before")
    @classmethod
    def _check_schema(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the arguments must be a JSON object")
        try:
            import jsonschema
        except ImportError:  # pragma: no cover - the mcp SDK depends on it
            return data
        validator = jsonschema.Draft202012Validator(cls.mcp_schema)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            parts = []
            for err in errors[:5]:
                where = ".".join(str(p) for p in err.absolute_path)
                parts.append(f"{where}: {err.message}" if where else err.message)
            raise ValueError("; ".join(parts))
        return data

    def arguments(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def params_model(name: str, schema: dict[str, Any] | None) -> type[McpParams]:
    schema = copy.deepcopy(schema) if isinstance(schema, dict) else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    model = type(f"Params_{name}", (McpParams,), {"mcp_schema": schema, "__module__": __name__})
    return cast(type[McpParams], model)


def operations_of(annotations: Any) -> frozenset[Operation]:
    """readOnlyHint → READ; destructiveHint → DELETE; unknown → EXECUTE (asks)."""
    if annotations is not None and getattr(annotations, "read_only_hint", None) is True:
        return frozenset({Operation.READ})
    if annotations is not None and getattr(annotations, "destructive_hint", None) is True:
        return frozenset({Operation.DELETE})
    return frozenset({Operation.EXECUTE})


Impl = Callable[[Any, ToolContext], Any]

#: Why a tool that requires task-augmented execution is not offered to the model.
NEEDS_TASKS = (
    "not offered: it runs only as an MCP task (task-augmented execution), "
    "which Deskhand's MCP client does not support yet"
)


def needs_tasks(tool: Any) -> bool:
    """The server says the tool can only be called as a task (`execution.taskSupport` is
    "required"): a plain call would always fail, so it is never offered."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def build_manifests(
    server: str,
    tools: Iterable[Any],
    make_impl: Callable[[str], Impl],
    *,
    timeout: float = 120.0,
) -> tuple[list[ToolManifest], dict[str, str]]:
    """Manifests for one server's tools and a map manifest name → the server's tool name.
    `make_impl(original_tool_name)` returns the function a call runs. Tools that can only
    run as tasks are left out (`needs_tasks`)."""
    manifests: list[ToolManifest] = []
    names: dict[str, str] = {}
    for tool in tools:
        if needs_tasks(tool):
            continue
        name = tool_name(server, tool.name)
        base, n = name, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names[name] = tool.name
        description = (tool.description or getattr(tool, "title", None) or tool.name).strip()
        manifests.append(
            ToolManifest(
                name=name,
                category=category(server),
                description=f"{description}\n(MCP tool {tool.name!r} of server {server!r}.)",
                params=params_model(name, tool.input_schema),
                operations=operations_of(tool.annotations),
                impl=make_impl(tool.name),
                timeout=timeout,
            )
        )
    return manifests, names
