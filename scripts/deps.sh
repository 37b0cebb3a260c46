#!/usr/bin/env bash
# Installs (from Debian's packages) whatever the build and the tests need and
# is not installed yet.  Safe to run again: it does nothing when all is there.
set -euo pipefail
# The CUDA toolkit (nvcc, cudart, cuBLAS; CUDA >= 12) is optional and not a
# Debian package here: -Dcuda=auto builds the CUDA device when it is found.

pkgs=(meson ninja-build pkg-config gcc g++ libc6-dev python3
      libunwind-dev libsqlite3-dev libopenblas-dev libdw-dev libiberty-dev sqlite3
      valgrind clang binutils  # the leak scan against memcheck; symbols of clang builds
      libgraphviz-dev chromium  # report --format html: graph layout; its browser test
      python3-numpy)  # python3-numpy: the DLPack exchange test (skipped without it)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
