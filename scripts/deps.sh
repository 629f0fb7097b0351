#!/bin/sh
# Installs the Debian packages EGS builds, tests and benchmarks with; a no-op when all are present.
set -e
PKGS="build-essential pkg-config libevent-dev libjansson-dev libsqlite3-dev libpq-dev libcurl4-openssl-dev
libyaml-dev libssl-dev libsodium-dev libcmocka-dev python3 python3-pytest python3-pytest-xdist python3-yaml sqlite3 curl wrk nginx-light prometheus
chromium postgresql"
# The tests' fake Kubernetes API server makes its test PKI with the openssl CLI and is driven by a
# real kubectl; any kubectl will do (Debian's kubernetes-client is 1.20), so install it only if none.
PKGS="$PKGS openssl"
# libFuzzer targets (fuzz/, `make fuzz`, and 10 s each in `make test`) need clang and its runtime.
PKGS="$PKGS clang libclang-rt-dev"
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
# The portal's build needs node and npm.  Some machines carry NodeSource's nodejs, which bundles npm
# and conflicts with Debian's npm package, so install Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
