#!/usr/bin/env bash
# Installs Deskhand into .venv (with what the window needs) and opens it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
# build-essential: pip builds the built-in engine (llama-cpp-python) from source once
ensure_apt python3-venv gnome-keyring build-essential "${QT_RUNTIME_PACKAGES[@]}"
echo "Installing Deskhand into .venv (the first time, pip compiles the built-in model engine: a few minutes)"
ensure_venv all
exec "$VENV/bin/deskhand" "$@"
