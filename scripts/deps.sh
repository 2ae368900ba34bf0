#!/usr/bin/env bash
# Installs cohort's build and test dependencies from Debian 12's packages.
# Idempotent: does nothing (and needs no network) when all are present.
# Also puts scikit-learn's digits data set where examples/torch finds it.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config python3 binutils
  libboost1.81-dev libboost-json1.81-dev libfmt-dev libyaml-cpp-dev
  libcurl4-openssl-dev libssl-dev libgtest-dev libbenchmark-dev
  libre2-dev liblua5.4-dev libgloo-dev openmpi-bin libopenmpi-dev
  chromium abigail-tools python3-numpy python3-torch clang libjs-chart.js
  python3-pip python3-setuptools python3-wheel python3-venv python3-build
  nftables prometheus etcd-server etcd-client openssl
  slurm-wlm slurmd slurmctld munge
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
else
  echo "deps: installing ${missing[*]}"
  [ -z "$sudo" ] || command -v sudo >/dev/null || { echo "deps: run as root or install sudo" >&2; exit 1; }
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Debian's kubectl (kubernetes-client), which the Kubernetes tests run
# against the API-server double. Where another package already owns
# /usr/bin/kubectl (a cloud SDK's kubectl), the two cannot be installed
# together, so take Debian's binary out of its package into
# /usr/local/share/cohort/ instead; the tests prefer it there.
debian_kubectl=/usr/local/share/cohort/kubernetes-client/kubectl
if ! dpkg-query -W -f='${Status}' kubernetes-client 2>/dev/null | grep -q "install ok installed" &&
   [ ! -x "$debian_kubectl" ]; then
  if owner=$(dpkg -S /usr/bin/kubectl 2>/dev/null) && [ -n "$owner" ]; then
    echo "deps: /usr/bin/kubectl belongs to ${owner%%:*}; extracting Debian's kubectl to $debian_kubectl"
    ktmp=$(mktemp -d)
    chmod 755 "$ktmp"
    (cd "$ktmp" && apt-get download kubernetes-client >/dev/null 2>&1) ||
      { $sudo apt-get update -q && (cd "$ktmp" && apt-get download kubernetes-client); }
    dpkg-deb --fsys-tarfile "$ktmp"/kubernetes-client_*.deb | tar -x -C "$ktmp" ./usr/bin/kubectl
    $sudo install -D -m 755 "$ktmp/usr/bin/kubectl" "$debian_kubectl"
    rm -rf "$ktmp"
  else
    $sudo apt-get install -y -q --no-install-recommends kubernetes-client
  fi
fi

# scikit-learn's digits (examples/torch/train_elastic.py). Debian 12's
# python3-sklearn cannot be installed beside libboost1.81-dev (through
# python3-scipy it needs python3-pythran, which needs libboost-dev, 1.74,
# and the two conflict), so take the data file out of the package instead
# of installing it.
digits=/usr/local/share/cohort/digits.csv.gz
sklearn_digits=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [ ! -e "$digits" ] && [ ! -e "$sklearn_digits" ]; then
  echo "deps: extracting $digits from Debian's python3-sklearn package"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"  # apt's download user writes there
  (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1) ||
    { $sudo apt-get update -q && (cd "$tmp" && apt-get download python3-sklearn); }
  dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb | tar -x -C "$tmp" ".$sklearn_digits"
  $sudo install -D -m 644 "$tmp$sklearn_digits" "$digits"
fi
