#!/bin/sh
# /usr/bin/deskhand: starts the bundle installed under /opt/deskhand (a wrapper rather than a
# symlink, so the bundle always finds its _internal folder next to the real executable).
exec /opt/deskhand/deskhand "$@"
