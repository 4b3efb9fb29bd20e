"""Scheduled-task tools: the model proposes a task, the user approves it on every call."""
