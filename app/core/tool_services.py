"""The app's services, checked against what the tool categories expect of them.

Tools reach a service with `ctx.service(name)` and see it as a Protocol of tools/views.py
(typed by name in tools.spec.ToolContext.service). Nothing here runs: each function below
type-checks only while its class has every method and attribute, with compatible types,
that the Protocol names; so a change to a service that would break its tools fails mypy
here, not in a conversation. `SERVICES` is the name of each service, as the runtime hands
it out (app.core.runtime._LazyServices); tests/test_tool_services.py keeps them in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

SERVICES = ("reminders", "tasks", "memory", "skills", "knowledge")

if TYPE_CHECKING:
    from app.core.knowledge_tools import KnowledgeTools
    from app.core.memory import MemoryService
    from app.core.reminders import ReminderBook
    from app.core.skills import SkillLibrary
    from app.core.tasks import TaskBook
    from tools.views import (
        KnowledgeServiceView,
        MemoryServiceView,
        ReminderBookView,
        SkillLibraryView,
        TaskBookView,
    )

    def _reminders(book: ReminderBook) -> ReminderBookView:
        return book

    def _tasks(book: TaskBook) -> TaskBookView:
        return book

    def _memory(service: MemoryService) -> MemoryServiceView:
        return service.for_conversation(None)

    def _skills(library: SkillLibrary) -> SkillLibraryView:
        return library

    def _knowledge(tools: KnowledgeTools) -> KnowledgeServiceView:
        return tools.for_conversation(None)
