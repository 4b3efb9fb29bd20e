"""Fixtures for the scripted model server."""
