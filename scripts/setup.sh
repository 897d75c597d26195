#!/usr/bin/env bash
# Installs everything lagscope needs on a fresh machine (Python 3.11, Java 17, Maven, Debian):
#   - uv (from PyPI) and the locked Python environment in .venv
#   - the Apache Kafka jars (Maven Central) into deploy/kafka/.cache
#   - with --system: Debian's prometheus (and promtool) and chromium, for the integration tests
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

system=0
for arg in "$@"; do
  case "$arg" in
    --system) system=1 ;;
    *) echo "usage: scripts/setup.sh [--system]" >&2; exit 2 ;;
  esac
done

if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check uv
fi
uv sync --frozen --quiet

.venv/bin/lagscope broker fetch >/dev/null
.venv/bin/lagscope broker fetch --version 3.9.2 --no-tools >/dev/null

if [ "$system" = 1 ]; then
  need=()
  command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v chromium >/dev/null 2>&1 || need+=(chromium chromium-driver)
  if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "setup: apt-get install ${need[*]}" >&2
    $sudo apt-get update -qq
    install() { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
    # one retry: an interrupted dpkg run (or a concurrent apt) leaves state that --configure -a repairs
    install || { sleep 5; $sudo dpkg --configure -a || true; install; }
  fi
fi
