#!/usr/bin/env bash
# Installs everything lagscope needs on a fresh machine (Python 3.11, Java 17, Maven, Debian):
#   - uv (from PyPI) and the locked Python environment in .venv
#   - the Apache Kafka jars (Maven Central) into deploy/kafka/.cache
#   - Spark's s3a connector jars (hadoop-aws, AWS SDK; Maven Central) into deploy/spark/.cache
#   - with --system: Debian's prometheus (and promtool) and chromium, for the integration tests,
#     Debian's burrow (1.2.1) and zookeeper (Burrow needs one), to check lagscope's Burrow API
#     against the real Burrow, and, built from the Go module proxy into .tools/bin: Helm and
#     deploy/k8s/crdcheck (the chart's render and validation tests) and Telegraf with its burrow
#     input only (a real Burrow API client, for tests/burrow) and gofakes3's server (an S3-compatible
#     server process on loopback, for the object-store lake's tests)
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
# Spark's s3a:// connector: hadoop-aws of pyspark's Hadoop and its AWS SDK jars (deploy/spark/pom.xml)
.venv/bin/lagscope spark jars >/dev/null

if [ "$system" = 1 ]; then
  need=()
  command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v chromium >/dev/null 2>&1 || need+=(chromium chromium-driver)
  command -v Burrow >/dev/null 2>&1 || need+=(burrow)
  [ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
  command -v patch >/dev/null 2>&1 || need+=(patch)
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

if [ "$system" = 1 ]; then
  # Helm (pinned) and the prometheus-operator resource checker, built with the machine's Go
  helm_version=v3.22.0
  tools="$PWD/.tools/bin"
  mkdir -p "$tools"
  if ! command -v go >/dev/null 2>&1; then
    echo "setup: go is needed to build helm, crdcheck, telegraf and gofakes3 into .tools/bin" >&2
    exit 1
  fi
  # (a `go install`ed helm reports only its minor version, so a marker records the exact one)
  if [ ! -x "$tools/helm" ] || [ ! -f "$tools/.helm-$helm_version" ]; then
    echo "setup: go install helm.sh/helm/v3/cmd/helm@$helm_version" >&2
    GOBIN="$tools" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$helm_version"
    rm -f "$tools"/.helm-*
    touch "$tools/.helm-$helm_version"
  fi
  # Telegraf (pinned) with only its Burrow input and the Prometheus output: a Burrow API client.
  # (burrow_exporter, the other common one, is not served by the Go module proxy.)
  telegraf_version=v1.37.2
  if [ ! -x "$tools/telegraf" ] || [ ! -f "$tools/.telegraf-$telegraf_version" ]; then
    echo "setup: go install github.com/influxdata/telegraf/cmd/telegraf@$telegraf_version (burrow input only)" >&2
    GOBIN="$tools" GOFLAGS=-buildvcs=false go install -tags "custom,inputs.burrow,outputs.prometheus_client" \
      "github.com/influxdata/telegraf/cmd/telegraf@$telegraf_version"
    rm -f "$tools"/.telegraf-*
    touch "$tools/.telegraf-$telegraf_version"
  fi
  # gofakes3's server (pinned): an S3-compatible HTTP server process for the object-store tests
  # (tests/helpers/s3server.py). SeaweedFS's weed, the fuller server, cannot be `go install`ed (its
  # go.mod has replace directives) and built from its module took over 4 minutes on 2 cores;
  # this one builds in about 3 minutes cold, 15 s with Go's caches warm.
  gofakes3_version=v1.2.0
  # Built from its module with scripts/patches/gofakes3-bolt-copy.patch: its bolt backend decodes
  # an object from bolt's memory-mapped value and uses the bytes after the transaction ends, so
  # the first CopyObject that grows the database crashed the server (SIGBUS, reproduced by
  # tests/test_s3server.py); and its listings wrote LastModified with the trailing zeros of the
  # milliseconds dropped ("…:05.24Z"), which pyarrow's S3 client reads as the epoch (1 object in
  # 10: retention's oldest-first order broke). The marker names the patch's hash: a changed patch
  # rebuilds.
  gofakes3_patch=scripts/patches/gofakes3-bolt-copy.patch
  gofakes3_mark=".gofakes3-$gofakes3_version-$(sha256sum "$gofakes3_patch" | cut -c1-12)"
  if [ ! -x "$tools/gofakes3" ] || [ ! -f "$tools/$gofakes3_mark" ]; then
    echo "setup: building github.com/johannesboyne/gofakes3/cmd/gofakes3@$gofakes3_version (patched)" >&2
    gofakes3_mod=$(GOFLAGS=-mod=mod go mod download -json "github.com/johannesboyne/gofakes3@$gofakes3_version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
    gofakes3_src=$(mktemp -d)
    cp -r "$gofakes3_mod/." "$gofakes3_src"
    chmod -R u+w "$gofakes3_src"
    patch -s -d "$gofakes3_src" -p1 < "$gofakes3_patch"
    (cd "$gofakes3_src" && GOFLAGS="-buildvcs=false -mod=mod" go build -o "$tools/gofakes3.new" ./cmd/gofakes3)
    mv "$tools/gofakes3.new" "$tools/gofakes3"
    rm -rf "$gofakes3_src"
    rm -f "$tools"/.gofakes3-*
    touch "$tools/$gofakes3_mark"
  fi
  if [ ! -x "$tools/crdcheck" ] || [ -n "$(find deploy/k8s/crdcheck -newer "$tools/crdcheck" -type f)" ]; then
    echo "setup: building deploy/k8s/crdcheck" >&2
    (cd deploy/k8s/crdcheck && GOFLAGS=-buildvcs=false go build -o "$tools/crdcheck" .)
  fi
fi
