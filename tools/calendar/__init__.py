"""Calendar tools: the local .ics calendar and CalDAV accounts (manifests in manifest.py)."""
