"""Skill tools: load a skill's instructions and run its scripts (with approval)."""
