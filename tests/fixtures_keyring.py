"""Fixtures for a real Secret Service (gnome-keyring on a private D-Bus)."""
