"""Browser automation tools (Playwright's sync API driving the user's installed Chromium).

`manifest.py` is cheap; everything that imports playwright runs on the browser thread
(`host.py`) after the first browser tool call.
"""
