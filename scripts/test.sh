#!/usr/bin/env bash
# Installs everything the tests need (system packages, .venv) and runs lint + the test suite.
# Test services (D-Bus + gnome-keyring, the scripted model server, ...) are started by the
# test fixtures themselves.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
# Every program the tests start must come from these packages, the venv or Python itself:
# tests/program_guard.py fails the CI run on any other (tests/test_ci_programs.py tests it).
TEST_PACKAGES=(
  python3-venv git build-essential  # the venv; llama-cpp-python builds from source
  dbus dbus-x11 gnome-keyring       # dbus-daemon + gnome-keyring-daemon: a private Secret Service
  libsecret-tools                   # secret-tool, which test_secrets.py reads the keyring with
  docker.io iptables busybox-static # a private dockerd and its busybox test image
  chromium                          # the browser tools' tests, through Playwright
  desktop-file-utils                # desktop-file-validate (test_packaging.py, package-test.sh)
  file                              # platform.architecture() runs it (croniter imports that)
  bubblewrap                        # bwrap: the shell tool's sandbox (test_shell_sandbox.py)
  dunst xvfb                        # a real notifications daemon on a private X display
  tesseract-ocr                     # text recognition of scanned PDFs (test_documents.py)
)
ensure_apt "${TEST_PACKAGES[@]}" "${QT_RUNTIME_PACKAGES[@]}"
ensure_venv gui,test
# The official MCP conformance suite and the Node >= 22 it runs on (tests/test_conformance.py)
ensure_npm .cache/conformance tests/conformance
cd "$ROOT"
echo "== ruff"
"$VENV/bin/ruff" check .
echo "== mypy"
"$VENV/bin/mypy"
echo "== package test (build the Linux bundle and .deb, install, start, remove)"
./scripts/package-test.sh
echo "== pytest"
export QT_QPA_PLATFORM=offscreen
set +e
"$VENV/bin/python" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$status"
