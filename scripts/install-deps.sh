#!/bin/sh
# Install the Debian packages Corral builds and tests with, skipping those already present.
# Runs apt-get as root (or through sudo); does nothing when everything is installed.
set -eu
PACKAGES="cmake ninja-build gcc clang libclang-rt-14-dev pkg-config make
libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libssl-dev libpcre2-dev
libutf8proc-dev libedit-dev libcmocka-dev curl python3
libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev zlib1g-dev libzstd-dev zstd
libsndfile1-dev libsamplerate0-dev
libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
docker-registry chromium prometheus nginx systemd"
# libvulkan-dev and glslc build the Vulkan backend; mesa-vulkan-drivers (lavapipe, a Vulkan
# device on the CPU) runs its tests on any machine; vulkan-tools gives vulkaninfo.
# nginx and systemd are for the deployment test (tests/integration/deploy.test.sh), which runs
# its own nginx; on a machine booted with systemd, installing nginx also starts Debian's own
# site on port 80 (`systemctl disable --now nginx` stops it).

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# The integration tests drive the server with the npm clients (and Chromium, for the page).
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0

echo "installing:$missing"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
