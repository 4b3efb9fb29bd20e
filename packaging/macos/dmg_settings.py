"""dmgbuild settings: Deskhand.app on the left, a link to /Applications on the right.

Not run on the Linux build machine; the release workflow runs it on macos-latest:

    dmgbuild -s packaging/macos/dmg_settings.py -D app=build/dist/Deskhand.app \
        -D version=0.1.0 Deskhand dist/deskhand-0.1.0-macos-arm64.dmg

`defines` (the -D values) and the settings names below are what dmgbuild reads.
"""

# ruff: noqa: F821  (dmgbuild executes this file with `defines` in scope)
import os.path

application = defines.get("app", "build/dist/Deskhand.app")
appname = os.path.basename(application)

format = "UDZO"  # zlib-compressed, read-only
filesystem = "HFS+"
size = None  # computed from the contents
files = [application]
symlinks = {"Applications": "/Applications"}
badge_icon = "resources/icons/deskhand.icns"
icon_locations = {appname: (140, 160), "Applications": (400, 160)}
window_rect = ((200, 200), (540, 340))
default_view = "icon-view"
show_status_bar = False
show_toolbar = False
icon_size = 96
text_size = 13
