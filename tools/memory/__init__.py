"""Memory tools: remember facts, preferences and tasks across conversations."""
