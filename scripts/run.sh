#!/usr/bin/env bash
# Installs Deskhand into .venv (with what the window needs) and opens it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
ensure_apt python3-venv gnome-keyring "${QT_RUNTIME_PACKAGES[@]}"
ensure_venv all
exec "$VENV/bin/deskhand" "$@"
