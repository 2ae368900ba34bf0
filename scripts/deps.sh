#!/usr/bin/env bash
# Installs cohort's build and test dependencies from Debian 12's packages.
# Idempotent: does nothing (and needs no network) when all are present.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config python3 binutils
  libboost1.81-dev libboost-json1.81-dev libfmt-dev libyaml-cpp-dev
  libcurl4-openssl-dev libssl-dev libgtest-dev libbenchmark-dev
  libre2-dev liblua5.4-dev libgloo-dev openmpi-bin libopenmpi-dev
  chromium abigail-tools python3-numpy python3-torch clang
  python3-pip python3-setuptools python3-wheel python3-venv python3-build
  nftables
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
