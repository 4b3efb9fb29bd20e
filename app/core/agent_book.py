"""`AgentBook`: listing, adding, editing and removing named sub-agents (settings `agents`),
for the CLI and the window alike. Every change is checked first (app.core.agents.problems,
names unique ignoring case, Deskhand's own agents left alone) and saved as every settings
change is (`settings_store.update`, then the runtime takes the saved settings).

Blocking: builds the tool registry on first use and writes settings.json.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from app.core.agents import BUILTIN_AGENTS, all_agents, find, is_builtin, problems
from app.core.settings import STRICT, AgentDefinition, Settings

if TYPE_CHECKING:
    from app.core.runtime import Runtime

Problem = tuple[str, str]

#: Text fields whose surrounding spaces mean nothing ("" of an optional one means unset).
_TRIMMED = ("name", "description")
_OPTIONAL = ("provider", "model")


class AgentError(ValueError):
    """A definition or a change that cannot be saved; `problems` are (field, plain words)."""

    def __init__(self, problems: builtins.list[Problem]) -> None:
        self.problems = builtins.list(problems)
        super().__init__("\n".join(f"{field}: {message}" for field, message in self.problems))


@dataclass(frozen=True)
class ListedAgent:
    """An agent as listed: its definition (a copy) and whether Deskhand ships it."""

    definition: AgentDefinition
    builtin: bool


class AgentBook:
    """The use cases over the runtime's settings; see the module docstring."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    # ---- reading ------------------------------------------------------------------------

    def list(self) -> builtins.list[ListedAgent]:
        """Deskhand's agents first, then the user's, in the order they were added (none that
        a hand edit gave a built-in's name: it is never reachable)."""
        return [
            ListedAgent(a.model_copy(deep=True), is_builtin(a))
            for a in all_agents(self._runtime.settings.agents)
        ]

    def get(self, name: str) -> AgentDefinition | None:
        """The agent called `name` (ignoring case), a copy; None if there is none."""
        found = find(name, self._runtime.settings.agents)
        return found.model_copy(deep=True) if found is not None else None

    @staticmethod
    def builtin(name: str) -> bool:
        """Whether `name` (ignoring case) is an agent Deskhand ships."""
        return find(name, BUILTIN_AGENTS) is not None

    # ---- changing -----------------------------------------------------------------------

    def add(self, definition: AgentDefinition | Mapping[str, Any]) -> AgentDefinition:
        """Saves a new agent (a mapping is checked field by field first); raises AgentError."""
        new = parse_definition(_data(definition))

        def change(settings: Settings) -> None:
            self._check(new, settings, replacing=None)
            settings.agents = [*settings.agents, new]

        self._save(change)
        return new.model_copy(deep=True)

    def edit(self, name: str, /, **changes: Any) -> AgentDefinition:
        """Changes fields of one of the user's agents (`name` may be among `changes` to
        rename it; its id stays); raises AgentError."""
        unknown = sorted(set(changes) - set(AgentDefinition.model_fields))
        if unknown:
            raise AgentError([(field, "there is no such field") for field in unknown])
        if "id" in changes:
            raise AgentError([("id", "an agent's id cannot be changed")])
        edited: builtins.list[AgentDefinition] = []

        def change(settings: Settings) -> None:
            index = self._own_index(name, settings)
            current = settings.agents[index]
            updated = parse_definition({**current.model_dump(), **changes})
            self._check(updated, settings, replacing=index)
            settings.agents = [updated if i == index else a for i, a in enumerate(settings.agents)]
            edited.append(updated)

        self._save(change)
        return edited[0].model_copy(deep=True)

    def remove(self, name: str) -> AgentDefinition:
        """Removes one of the user's agents; returns it. Raises AgentError."""
        removed: builtins.list[AgentDefinition] = []

        def change(settings: Settings) -> None:
            index = self._own_index(name, settings)
            removed.append(settings.agents[index])
            settings.agents = [a for i, a in enumerate(settings.agents) if i != index]

        self._save(change)
        return removed[0]

    # ---- the parts ----------------------------------------------------------------------

    def _save(self, change: Callable[[Settings], None]) -> None:
        """Load, change (which raises before anything is written), save, and take effect."""
        self._runtime.settings = self._runtime.settings_store.update(change)

    @staticmethod
    def _own_index(name: str, settings: Settings) -> int:
        """Where the user's agent `name` is in `settings.agents`; AgentError for one of
        Deskhand's or an unknown name."""
        wanted = name.strip().casefold()
        for index, agent in enumerate(settings.agents):
            if agent.name.strip().casefold() == wanted:
                return index
        shipped = find(name, BUILTIN_AGENTS)
        if shipped is not None:
            raise AgentError(
                [
                    (
                        "name",
                        f"{shipped.name!r} ships with Deskhand and cannot be changed or "
                        "removed; add an agent of your own under another name instead",
                    )
                ]
            )
        raise AgentError(
            [("name", f"there is no agent {name.strip()!r} (see: deskhand agents list)")]
        )

    def _check(
        self, definition: AgentDefinition, settings: Settings, *, replacing: int | None
    ) -> None:
        """Every problem of `definition` among `settings`' agents (without the one at
        `replacing`, which it replaces), at once."""
        found = problems(definition, self._runtime.registry, [p.id for p in settings.providers])
        others = [a for i, a in enumerate(settings.agents) if i != replacing]
        wanted = definition.name.strip().casefold()
        twin = next((a for a in others if a.name.strip().casefold() == wanted), None)
        if twin is not None:
            found.append(("name", f"there is already an agent called {twin.name!r}"))
        if any(a.id == definition.id for a in [*others, *BUILTIN_AGENTS]):
            found.append(("id", f"another agent has the id {definition.id!r}"))
        if found:
            raise AgentError(found)


def parse_definition(data: Mapping[str, Any]) -> AgentDefinition:
    """A definition from plain values, checked strictly (nothing falls back to a default):
    every field error as (field, plain words) in one AgentError."""
    cleaned = dict(data)
    for key in _TRIMMED:
        if isinstance(cleaned.get(key), str):
            cleaned[key] = cleaned[key].strip()
    for key in _OPTIONAL:
        if isinstance(cleaned.get(key), str) and not cleaned[key].strip():
            cleaned[key] = None
    try:
        return AgentDefinition.model_validate(cleaned, context=STRICT)
    except ValidationError as exc:
        raise AgentError([_plain(error) for error in exc.errors()]) from None


def _data(definition: AgentDefinition | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(definition, AgentDefinition):
        return definition.model_dump()
    return dict(definition)


def _plain(error: Any) -> Problem:
    """One pydantic error in the words the user reads."""
    loc = error["loc"]
    field = str(loc[0]) if loc else "agent"
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return field, "is required"
    if kind == "string_too_short":
        return field, "must not be empty"
    if kind == "string_too_long":
        return field, f"must be at most {ctx.get('max_length')} characters"
    if kind == "string_pattern_mismatch" and field == "name":
        return field, (
            "use letters, digits, spaces and _ . - only, starting with a letter or a digit"
        )
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = _bounds(field)
        return field, f"must be from {low} to {high} (got {error['input']!r})"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return field, f"must be a whole number (got {error['input']!r})"
    where = "".join(f"[{part}]" for part in loc[1:])
    return field, f"{where + ': ' if where else ''}{error['msg']}"


def _bounds(field: str) -> tuple[Any, Any]:
    """A number field's lowest and highest allowed values."""
    low = high = None
    for rule in AgentDefinition.model_fields[field].metadata:
        low = getattr(rule, "ge", low)
        high = getattr(rule, "le", high)
    return low, high
