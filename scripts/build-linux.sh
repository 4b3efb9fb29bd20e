#!/usr/bin/env bash
# Builds the Linux installers from the current checkout:
#   dist/deskhand-<version>-linux-<arch>.tar.gz   portable: unpack anywhere, run deskhand/deskhand
#   dist/deskhand_<version>_<debarch>.deb         /opt/deskhand, /usr/bin/deskhand, menu entry, icons
#
#   ./scripts/build-linux.sh            build the PyInstaller bundle, then both packages
#   ./scripts/build-linux.sh --reuse    reuse build/dist/deskhand if it is already there
#
# Needs the project installed in .venv with the gui + packaging extras (the optional tool
# extras -- docker, kubernetes, calendar, browser, mcp -- are bundled when installed), and
# dpkg-deb. Downloads nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DESKHAND_VENV:-$ROOT/.venv}"
cd "$ROOT"

REUSE=0
[ "${1:-}" = "--reuse" ] && REUSE=1

VERSION="$("$VENV/bin/python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
ARCH="$(uname -m)"
DEBARCH="$(dpkg --print-architecture)"
# The bundle needs at least the glibc it was built against.
GLIBC="$(getconf GNU_LIBC_VERSION | cut -d" " -f2)"
BUNDLE="build/dist/deskhand"
OUT="dist"
mkdir -p "$OUT"

# ---- 1. the onedir bundle ------------------------------------------------------------------
if [ "$REUSE" = 1 ] && [ -x "$BUNDLE/deskhand" ]; then
  echo "== reusing $BUNDLE"
else
  echo "== pyinstaller"
  "$VENV/bin/pyinstaller" packaging/deskhand.spec --noconfirm --log-level WARN \
    --distpath build/dist --workpath build/pyinstaller
fi
"$BUNDLE/deskhand" --version

# ---- 2. portable .tar.gz -------------------------------------------------------------------
TARBALL="$OUT/deskhand-$VERSION-linux-$ARCH.tar.gz"
echo "== $TARBALL"
STAGE_TAR="build/stage-tar"
rm -rf "$STAGE_TAR" && mkdir -p "$STAGE_TAR"
cp -a "$BUNDLE" "$STAGE_TAR/deskhand"
cp packaging/linux/deskhand.desktop resources/icons/deskhand-256.png "$STAGE_TAR/deskhand/"
tar -C "$STAGE_TAR" --owner=0 --group=0 -czf "$TARBALL" deskhand

# ---- 3. .deb ---------------------------------------------------------------------------------
DEB="$OUT/deskhand_${VERSION}_${DEBARCH}.deb"
echo "== $DEB"
PKG="build/stage-deb"
rm -rf "$PKG"
mkdir -p "$PKG/DEBIAN" "$PKG/opt" "$PKG/usr/bin" "$PKG/usr/share/applications" \
  "$PKG/usr/share/doc/deskhand" "$PKG/usr/share/icons/hicolor/scalable/apps"
cp -a "$BUNDLE" "$PKG/opt/deskhand"
install -m 0755 packaging/linux/deskhand-launcher.sh "$PKG/usr/bin/deskhand"
install -m 0644 packaging/linux/deskhand.desktop "$PKG/usr/share/applications/deskhand.desktop"
install -m 0644 resources/icons/deskhand.svg "$PKG/usr/share/icons/hicolor/scalable/apps/deskhand.svg"
for size in 16 24 32 48 64 128 256 512; do
  dir="$PKG/usr/share/icons/hicolor/${size}x${size}/apps"
  mkdir -p "$dir"
  install -m 0644 "resources/icons/deskhand-$size.png" "$dir/deskhand.png"
done
printf 'Deskhand %s\nLicense: MIT\nThe bundle in /opt/deskhand includes Python, Qt (LGPLv3) and\nthird-party Python packages under their own licenses.\n' \
  "$VERSION" >"$PKG/usr/share/doc/deskhand/copyright"
chmod -R u+rwX,go+rX,go-w "$PKG"
INSTALLED_KB="$(du -sk --exclude=DEBIAN "$PKG" | cut -f1)"
# Only libraries PyInstaller deliberately leaves out of the bundle (libc, GL/EGL, xcb,
# fontconfig) are dependencies; everything else ships in /opt/deskhand. No maintainer
# scripts: the hicolor icon cache and desktop database are refreshed by dpkg triggers of
# hicolor-icon-theme and desktop-file-utils, so removal leaves nothing behind.
cat >"$PKG/DEBIAN/control" <<CONTROL
Package: deskhand
Version: $VERSION
Architecture: $DEBARCH
Maintainer: Deskhand developers <deskhand@users.noreply.github.com>
Installed-Size: $INSTALLED_KB
Depends: libc6 (>= $GLIBC), libgl1, libegl1, libxcb1, libfontconfig1
Recommends: gnome-keyring | kwalletmanager
Suggests: chromium | google-chrome-stable, docker.io, kubectl
Section: utils
Priority: optional
Homepage: https://github.com/deskhand/deskhand
Description: desktop AI assistant that does real work on your machine
 A chat window drives a local agent loop; the model (any OpenAI-compatible server
 or Anthropic) calls tools for files, Docker, Kubernetes, a real browser, calendars
 and connected services. Anything that changes something asks first.
CONTROL
# gzip: xz would save ~25% but takes minutes on 300 MB
dpkg-deb --root-owner-group -Zgzip -z6 --build "$PKG" "$DEB" >/dev/null
rm -rf "$STAGE_TAR" "$PKG"

ls -l "$TARBALL" "$DEB"
echo "bundle: $(du -sh "$BUNDLE" | cut -f1) on disk"
