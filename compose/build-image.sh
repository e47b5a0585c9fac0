#!/usr/bin/env bash
# Build the seglog node image (seglog:latest) for compose/docker-compose.yml,
# also on machines where no container registry can be reached; with --spark also
# the Spark image (seglog-spark:latest) for compose/docker-compose.spark.yml.
#
#   compose/build-image.sh                 # seglog:latest
#   compose/build-image.sh --prometheus    # and seglog-prometheus:latest
#   compose/build-image.sh --spark         # and seglog-spark:latest
#
# 1. Wheelhouse on the host (compose/.wheels): seglog's own wheel in seglog/,
#    binary wheels of all its dependencies in deps/ (pip fetches them here,
#    where the package index is reachable; the image build is offline).
# 2. Base image: $BASE_IMAGE if set; else python:3.11-slim if present or
#    pullable; else seglog-base:bookworm, made once with debootstrap from the
#    Debian mirror named in /etc/apt/sources.list.d/debian.sources and kept.
# 3. docker-compose build with BASE_IMAGE set, tagging seglog:latest.
#
# --prometheus, after those three steps: Debian's prometheus package and its
# dependencies downloaded on the host (apt-get download, into compose/prometheus/.debs
# with a Packages index), then seglog-prometheus:latest built on the same base
# (compose/prometheus/Dockerfile, docker-compose.monitoring.yml).
#
# --spark, after those steps:
# 4. Spark wheelhouse (compose/.spark-build/spark-deps): seglog's `pipeline` extra
#    (PySpark, pyarrow, ...), fetched on the host like the dependencies above.
# 5. Spark base image: $SPARK_BASE_IMAGE if set (it needs Python 3.11's python3
#    with venv, and `java` 17 or 21); else seglog-spark-base:bookworm,
#    made once with debootstrap like seglog-base:bookworm plus Debian's JRE
#    (openjdk-17-jre-headless), and kept.
# 6. docker build of compose/Dockerfile.spark, tagging seglog-spark:latest: the
#    same wheels as the node image plus the Spark ones, installed offline.
#
# A second run only rebuilds seglog's wheel and the image's last layers.
# Environment: PYTHON (a Python 3.11 for pip wheel; default python3),
# BASE_IMAGE, SPARK_BASE_IMAGE, SEGLOG_DEBIAN_MIRROR (instead of the one in
# debian.sources), SEGLOG_IMAGE / SEGLOG_PROMETHEUS_IMAGE (the tags built, default
# seglog:latest and seglog-prometheus:latest; the compose files read the same variables).
set -euo pipefail

SPARK=0
PROMETHEUS=0
for arg in "$@"; do
    case "$arg" in
        --spark) SPARK=1 ;;
        --prometheus) PROMETHEUS=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image.sh: unknown argument: $arg (expected --prometheus or --spark)" >&2; exit 2 ;;
    esac
done
export SEGLOG_IMAGE=${SEGLOG_IMAGE:-seglog:latest}
export SEGLOG_PROMETHEUS_IMAGE=${SEGLOG_PROMETHEUS_IMAGE:-seglog-prometheus:latest}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
WHEELS="$HERE/.wheels"
MONITORING_FILE="$HERE/docker-compose.monitoring.yml"
DEBS="$HERE/prometheus/.debs"
COMPOSE_FILE="$HERE/docker-compose.yml"
PYTHON=${PYTHON:-python3}
DEFAULT_BASE=python:3.11-slim
LOCAL_BASE=seglog-base:bookworm
LOCAL_SPARK_BASE=seglog-spark-base:bookworm
SPARK_IMAGE=seglog-spark:latest
SPARK_CONTEXT="$HERE/.spark-build"
SUITE=bookworm
# Fixed timestamps make seglog's wheel byte-identical for identical sources,
# so docker reuses every layer when nothing changed.
export SOURCE_DATE_EPOCH=315532800
export PIP_DISABLE_PIP_VERSION_CHECK=1
# docker-compose 1.29 with the engine's classic builder (no buildx here).
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}
export COMPOSE_DOCKER_CLI_BUILD=${COMPOSE_DOCKER_CLI_BUILD:-0}

START=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { printf '[build-image %6ss] %s\n' "$(since "$START")" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

TMPDIRS=()
cleanup() {
    local d
    for d in "${TMPDIRS[@]+"${TMPDIRS[@]}"}"; do
        rm -rf -- "$d"
    done
}
trap cleanup EXIT

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        die "needs root (or password-less sudo) for: $*"
    fi
}

command -v docker >/dev/null 2>&1 || die "docker is not installed"
command -v docker-compose >/dev/null 2>&1 || die "docker-compose is not installed"
docker info >/dev/null 2>&1 || die "the docker engine is not reachable"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || die "$PYTHON is not Python 3.11; the image's wheels must be cp311 (set PYTHON=...)"

# --- 1. wheelhouse -------------------------------------------------------------------
mkdir -p "$WHEELS/deps"
# One build at a time (the test suite may run this while someone else does).
exec 9>"$WHEELS/.lock"
flock -w 900 9 || die "another build-image.sh holds $WHEELS/.lock"

step=$(date +%s.%N)
# Build from a copy so the work tree gets no build/ or egg-info and concurrent
# edits by others cannot leak stale files into the wheel.
src=$(mktemp -d "${TMPDIR:-/tmp}/seglog-src.XXXXXX")
TMPDIRS+=("$src")
tar -C "$ROOT" \
    --exclude=./.git --exclude=./.ci --exclude=./compose --exclude=./docs --exclude=./tests \
    --exclude=./build --exclude=./dist --exclude=./data --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=.hypothesis --exclude=.pytest_cache \
    --exclude=.ruff_cache -cf - . | tar -C "$src" -xf -
# Rebuild seglog's wheel only when its sources changed.
src_hash=$(tar -C "$src" --sort=name --mtime='1970-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner -cf - . \
    | sha256sum | cut -d' ' -f1)
seglog_wheel=$(find "$WHEELS/seglog" -name 'seglog-*.whl' -print -quit 2>/dev/null || true)
if [ -n "$seglog_wheel" ] && [ "$(cat "$WHEELS/seglog/.source-sha256" 2>/dev/null)" = "$src_hash" ]; then
    log "seglog's wheel is up to date"
else
    new="$WHEELS/seglog.new"
    rm -rf -- "$new"
    build_flags=(--quiet --no-deps -w "$new")
    if "$PYTHON" -c 'import setuptools, wheel' 2>/dev/null; then
        build_flags+=(--no-build-isolation)
    fi
    "$PYTHON" -m pip wheel "${build_flags[@]}" "$src" || die "building seglog's wheel failed"
    printf '%s\n' "$src_hash" >"$new/.source-sha256"
    rm -rf -- "$WHEELS/seglog"
    mv -- "$new" "$WHEELS/seglog"
    seglog_wheel=$(find "$WHEELS/seglog" -name 'seglog-*.whl' -print -quit)
    [ -n "$seglog_wheel" ] || die "no seglog wheel in $WHEELS/seglog"
    log "built $(basename "$seglog_wheel")"
fi

# Its run-time requirements (not the `test` extra), as the image installs them.
"$PYTHON" - "$seglog_wheel" >"$WHEELS/deps/requirements.txt.new" <<'PY'
import sys
import zipfile
from email.parser import Parser

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode("utf-8"))
for requirement in metadata.get_all("Requires-Dist") or []:
    if "extra ==" not in requirement:
        print(requirement)
PY
if cmp -s "$WHEELS/deps/requirements.txt.new" "$WHEELS/deps/requirements.txt"; then
    rm -f -- "$WHEELS/deps/requirements.txt.new"
else
    mv -- "$WHEELS/deps/requirements.txt.new" "$WHEELS/deps/requirements.txt"
fi
deps_stamp() {
    (cd "$WHEELS/deps" && sha256sum requirements.txt && find . -name '*.whl' | sort) | sha256sum
}
if [ "$(cat "$WHEELS/.deps-checked" 2>/dev/null)" = "$(deps_stamp)" ]; then
    log "dependency wheels are up to date"
else
    deps_flags=(--quiet --find-links "$WHEELS/deps" -w "$WHEELS/deps" -r "$WHEELS/deps/requirements.txt")
    if ! "$PYTHON" -m pip wheel --no-index "${deps_flags[@]}" >/dev/null 2>&1; then
        log "fetching dependency wheels from the package index"
        "$PYTHON" -m pip wheel --prefer-binary "${deps_flags[@]}" \
            || die "pip wheel of seglog's dependencies failed"
    fi
    # Every requirement must resolve to a wheel that installs on CPython 3.11 here.
    "$PYTHON" -m pip install --quiet --dry-run --ignore-installed --no-index \
        --only-binary=:all: --python-version 3.11 --target "$src/check" \
        --find-links "$WHEELS/deps" -r "$WHEELS/deps/requirements.txt" \
        || die "the wheelhouse lacks a cp311 wheel for some dependency"
    deps_stamp >"$WHEELS/.deps-checked"
fi
log "wheelhouse ready in $(since "$step")s: $(find "$WHEELS/deps" -name '*.whl' | wc -l) dependency wheels + $(basename "$seglog_wheel")"

# --- 2. base image -------------------------------------------------------------------
debian_mirror() {
    if [ -n "${SEGLOG_DEBIAN_MIRROR:-}" ]; then
        printf '%s\n' "$SEGLOG_DEBIAN_MIRROR"
        return
    fi
    local sources=/etc/apt/sources.list.d/debian.sources
    if [ -r "$sources" ]; then
        # deb822 stanzas: the first URI of a `deb` stanza that carries the suite itself.
        awk -v suite="$SUITE" '
            function flush() {
                if (uri != "" && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ")) {
                    print uri; found = 1; exit
                }
                uri = ""; types = ""; suites = ""
            }
            /^[ \t]*$/ { flush(); next }
            /^URIs:/ { uri = $2 }
            /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            END { if (!found) flush() }
        ' "$sources"
        return
    fi
    if [ -r /etc/apt/sources.list ]; then
        awk -v suite="$SUITE" '$1 == "deb" && $3 == suite { print $2; exit }' /etc/apt/sources.list
    fi
}

# build_local_base TAG [EXTRA_PACKAGES]: a Debian root file system as image TAG.
build_local_base() {
    local tag=$1 extra=${2:-} mirror rootfs step
    step=$(date +%s.%N)
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no Debian $SUITE mirror in /etc/apt/sources.list.d/debian.sources (set SEGLOG_DEBIAN_MIRROR)"
    if ! command -v debootstrap >/dev/null 2>&1; then
        log "installing debootstrap"
        as_root apt-get install -y -q debootstrap >/dev/null || die "apt-get install debootstrap failed"
    fi
    rootfs=$(mktemp -d /var/tmp/seglog-rootfs.XXXXXX)
    TMPDIRS+=("$rootfs")
    log "debootstrap $SUITE (minbase + python3${extra:+ + $extra}) into $rootfs"
    if ! as_root debootstrap --variant=minbase \
        --include=python3,python3-pip,python3-venv,ca-certificates${extra:+,$extra} \
        "$SUITE" "$rootfs" "$mirror" >"$WHEELS/debootstrap.log" 2>&1; then
        tail -n 30 "$WHEELS/debootstrap.log" >&2
        die "debootstrap failed (full log: $WHEELS/debootstrap.log)"
    fi
    as_root rm -rf "$rootfs/var/cache/apt/archives" "$rootfs/var/lib/apt/lists"
    as_root mkdir -p "$rootfs/var/cache/apt/archives/partial" "$rootfs/var/lib/apt/lists/partial"
    log "importing the root file system as $tag"
    as_root tar -C "$rootfs" --numeric-owner -cf - . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        - "$tag" >/dev/null
    as_root rm -rf -- "$rootfs"
    log "base image $tag built in $(since "$step")s"
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

if [ -n "${BASE_IMAGE:-}" ]; then
    log "base image: $BASE_IMAGE (from BASE_IMAGE)"
elif have_image "$DEFAULT_BASE"; then
    BASE_IMAGE=$DEFAULT_BASE
elif have_image "$LOCAL_BASE"; then
    BASE_IMAGE=$LOCAL_BASE
elif timeout 120 docker pull -q "$DEFAULT_BASE" >/dev/null 2>&1; then
    BASE_IMAGE=$DEFAULT_BASE
else
    log "no registry reachable for $DEFAULT_BASE: building $LOCAL_BASE with debootstrap"
    build_local_base "$LOCAL_BASE"
    BASE_IMAGE=$LOCAL_BASE
fi
export BASE_IMAGE
log "base image: $BASE_IMAGE"

# --- 3. the image --------------------------------------------------------------------
step=$(date +%s.%N)
previous=$(docker image inspect -f '{{.Id}}' "$SEGLOG_IMAGE" 2>/dev/null || true)
docker-compose -f "$COMPOSE_FILE" build node1 || die "docker-compose build failed"
current=$(docker image inspect -f '{{.Id}}' "$SEGLOG_IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    # Drop the image this build replaced (kept if a container still uses it);
    # the dependency stage stays cached.
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
log "image $SEGLOG_IMAGE built in $(since "$step")s (total $(since "$START")s)"

# --- the Prometheus image (--prometheus) -----------------------------------------
if [ "$PROMETHEUS" = 1 ]; then
    step=$(date +%s.%N)
    mkdir -p "$DEBS"
    if [ -z "$(find "$DEBS" -name 'prometheus_*.deb' -print -quit)" ] || [ ! -s "$DEBS/Packages" ]; then
        # The whole dependency closure: the image's apt takes what its base lacks.
        if ! apt-cache show prometheus >/dev/null 2>&1; then
            as_root apt-get update -q >/dev/null || die "apt-get update failed"
        fi
        mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests \
            --no-conflicts --no-breaks --no-replaces --no-enhances prometheus \
            | grep -E '^[a-z0-9]' | sort -u)
        [ "${#pkgs[@]}" -gt 0 ] || die "apt-cache knows no prometheus package"
        log "downloading prometheus and ${#pkgs[@]} packages of its dependency closure"
        (cd "$DEBS" && apt-get download -q "${pkgs[@]}" >"$DEBS/download.log" 2>&1) \
            || { tail -n 20 "$DEBS/download.log" >&2; die "apt-get download failed"; }
        if ! command -v dpkg-scanpackages >/dev/null 2>&1; then
            log "installing dpkg-dev (dpkg-scanpackages)"
            as_root apt-get install -y -q dpkg-dev >/dev/null || die "apt-get install dpkg-dev failed"
        fi
        (cd "$DEBS" && dpkg-scanpackages . /dev/null >Packages 2>/dev/null) \
            || die "dpkg-scanpackages failed"
    fi
    log "prometheus packages ready: $(find "$DEBS" -name '*.deb' | wc -l) .deb files"
    previous=$(docker image inspect -f '{{.Id}}' "$SEGLOG_PROMETHEUS_IMAGE" 2>/dev/null || true)
    docker-compose -f "$COMPOSE_FILE" -f "$MONITORING_FILE" build prometheus \
        || die "docker-compose build prometheus failed"
    current=$(docker image inspect -f '{{.Id}}' "$SEGLOG_PROMETHEUS_IMAGE")
    if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
        docker image rm "$previous" >/dev/null 2>&1 || true
    fi
    log "image $SEGLOG_PROMETHEUS_IMAGE built in $(since "$step")s (total $(since "$START")s)"
fi

[ "$SPARK" -eq 1 ] || exit 0

# --- 4. Spark wheelhouse ---------------------------------------------------------------
step=$(date +%s.%N)
mkdir -p "$SPARK_CONTEXT/spark-deps"
# The `pipeline` extra's requirements, from seglog's wheel.
"$PYTHON" - "$seglog_wheel" >"$SPARK_CONTEXT/spark-deps/requirements.txt.new" <<'PY'
import re
import sys
import zipfile
from email.parser import Parser

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode("utf-8"))
for requirement in metadata.get_all("Requires-Dist") or []:
    if re.search(r"extra\s*==\s*['\"]pipeline['\"]", requirement):
        print(requirement.split(";")[0].strip())
PY
[ -s "$SPARK_CONTEXT/spark-deps/requirements.txt.new" ] || die "seglog's wheel has no 'pipeline' extra"
mv -- "$SPARK_CONTEXT/spark-deps/requirements.txt.new" "$SPARK_CONTEXT/spark-deps/requirements.txt"
spark_flags=(--quiet --find-links "$WHEELS/deps" --find-links "$SPARK_CONTEXT/spark-deps"
    -w "$SPARK_CONTEXT/spark-deps" -r "$SPARK_CONTEXT/spark-deps/requirements.txt")
if ! "$PYTHON" -m pip wheel --no-index "${spark_flags[@]}" >/dev/null 2>&1; then
    log "fetching the Spark wheels from the package index (PySpark is ~450 MB)"
    "$PYTHON" -m pip wheel --prefer-binary "${spark_flags[@]}" \
        || die "pip wheel of the pipeline extra failed"
fi
# The Docker context of the Spark image: hard links to the node image's wheels (the
# node image's context, compose/, leaves this directory out: .dockerignore).
rm -rf -- "$SPARK_CONTEXT/deps" "$SPARK_CONTEXT/seglog"
cp -al -- "$WHEELS/deps" "$SPARK_CONTEXT/deps"
cp -al -- "$WHEELS/seglog" "$SPARK_CONTEXT/seglog"
log "Spark wheelhouse ready in $(since "$step")s: $(find "$SPARK_CONTEXT/spark-deps" -name '*.whl' | wc -l) wheels"

# --- 5. Spark base image (Python 3.11 and a JRE) -----------------------------------
if [ -n "${SPARK_BASE_IMAGE:-}" ]; then
    log "Spark base image: $SPARK_BASE_IMAGE (from SPARK_BASE_IMAGE)"
elif have_image "$LOCAL_SPARK_BASE"; then
    SPARK_BASE_IMAGE=$LOCAL_SPARK_BASE
else
    log "building $LOCAL_SPARK_BASE with debootstrap (Debian's python3 and openjdk-17-jre-headless)"
    build_local_base "$LOCAL_SPARK_BASE" openjdk-17-jre-headless
    SPARK_BASE_IMAGE=$LOCAL_SPARK_BASE
fi
log "Spark base image: $SPARK_BASE_IMAGE"

# --- 6. the Spark image ----------------------------------------------------------------
step=$(date +%s.%N)
previous=$(docker image inspect -f '{{.Id}}' "$SPARK_IMAGE" 2>/dev/null || true)
docker build -q -f "$HERE/Dockerfile.spark" --build-arg "SPARK_BASE_IMAGE=$SPARK_BASE_IMAGE" \
    -t "$SPARK_IMAGE" "$SPARK_CONTEXT" >/dev/null || die "docker build of $SPARK_IMAGE failed"
current=$(docker image inspect -f '{{.Id}}' "$SPARK_IMAGE")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
log "image $SPARK_IMAGE built in $(since "$step")s (total $(since "$START")s)"
