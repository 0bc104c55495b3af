#!/usr/bin/env bash
# Installs the Debian 12 packages Kelp builds, runs and tests with. Idempotent, and fast when
# everything is present (one dpkg query, no apt-get). Needs root (or sudo) only when
# something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  librocksdb-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libxxhash-dev libfmt-dev libspdlog-dev libboost-dev catch2 nlohmann-json3-dev
  libfuse3-dev fuse3 liburing-dev curl attr psmisc procps python3
  # the fault tests: small loop-mounted ext4 file systems (mkfs.ext4, losetup)
  e2fsprogs util-linux mount
  libpq-dev postgresql-15
  libssl-dev libjwt-dev libtomlplusplus-dev
  clang-14 libclang-rt-14-dev
  # bench/compare.sh -quick (CI) and its report: workloads, nginx + ab, charts, fsync probe
  sysbench fio nginx-light apache2-utils gnuplot-nox strace iproute2
  # the web UI test: Debian's Chromium, driven by playwright-core (npm) under Node.js
  chromium chromium-driver
  # the Debian package: dpkg-shlibdeps; packaging/test-deb.sh: debootstrap
  dpkg-dev debootstrap
)
# Node.js and npm for the UI test, from Debian when the machine has none of its own.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# The PostgreSQL tests start servers of their own (initdb in a temporary directory); the
# package's default cluster would only be a server nobody uses, listening on 5432.
if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
# Packages such as nginx would start their service on a machine without systemd: nothing is
# started by this install (invoke-rc.d asks policy-rc.d; 101 = not allowed).
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
