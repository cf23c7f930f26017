#!/usr/bin/env bash
# Installs the system packages runthrough builds and tests against, only if missing.
# Idempotent; needs root (apt-get) when something is missing. Used by `make demo`,
# `make test` and `.ci/run`.
set -euo pipefail

pkgs=(
  pkg-config         # also tests/install.rs: pkg-config --cflags --libs mpi-abi
  g++                # the installed mpicxx wraps c++ (tests/install.rs)
  libfabric-dev      # headers of the committed fabric/ bindings (tools/gen-bindings checks them; building needs none) + libfabric.so (1.17 on Debian 12)
  libfabric-bin      # fi_info / fi_pingpong, the raw-libfabric reference
  libhwloc-dev       # hwloc2 crate: NUMA placement of shm rings
  libpmix-dev        # headers of the committed pmix/ bindings, checked as above (libpmix.so.2 is loaded at run time, under PMIx only)
  libclang-dev       # bindgen, for tools/gen-bindings (`make bindings` and its staleness test), no longer for building
  clang
  iproute2           # ip netns for multi-host tests
  procps
  gnuplot-nox        # make plots: bench/plots.sh renders bench/data/*.csv as SVG
  man-db             # man -l: tests/install.rs renders the installed rtrun.1
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all system packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root to apt-get install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
