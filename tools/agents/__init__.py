"""Sub-agents: hand one task to a named agent with its own, narrower tools."""
