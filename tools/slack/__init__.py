"""Slack tools: workspace health, channels, people, messages."""
