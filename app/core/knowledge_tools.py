"""The knowledge service as the knowledge tools see it (`ctx.service("knowledge")`): bound to
the calling conversation, so a search covers the global knowledge folders and that
conversation's own (its large attachments among them), never another conversation's.

The tools (tools/knowledge/actions.py) check that a path they read lies in one of these
folders; this module only binds and forwards, and builds nothing until a tool is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.knowledge.index import Folder, Hit
    from app.core.knowledge.service import KnowledgeService


class KnowledgeTools:
    """What the runtime hands out as the "knowledge" service; `service` builds (or returns)
    the one KnowledgeService (`Runtime.knowledge`) when a tool first needs it."""

    def __init__(self, service: Callable[[], KnowledgeService]) -> None:
        self._service = service

    def for_conversation(self, conversation_id: str | None) -> ConversationKnowledge:
        return ConversationKnowledge(self._service, conversation_id)


class ConversationKnowledge:
    """The knowledge folders one conversation sees, and searching and reading them."""

    def __init__(
        self, service: Callable[[], KnowledgeService], conversation_id: str | None
    ) -> None:
        self._service = service
        self.conversation_id = conversation_id

    def folders(self) -> list[Folder]:
        return self._service().folders(self.conversation_id)

    def search(self, query: str, k: int) -> list[Hit]:
        return self._service().search(query, k=k, conversation_id=self.conversation_id)

    def read(self, path: str) -> list[Hit]:
        """The document's chunks, only from folders this conversation sees."""
        return self._service().read(path, conversation_id=self.conversation_id)
