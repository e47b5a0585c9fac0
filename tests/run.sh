#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs seglog with its test
# dependencies (PySpark included), checks that Java is there for Spark, lints,
# then runs pytest. CI (.ci/run) calls exactly this. The docker-compose tests
# build their image themselves (compose/build-image.sh) and skip when no
# Docker engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

if ! java -version >/dev/null 2>&1; then
    echo "tests/run.sh: installing a Java runtime for PySpark" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

if ! command -v kcat >/dev/null 2>&1; then
    echo "tests/run.sh: installing kcat for the Kafka-protocol tests" >&2
    apt-get update -qq && apt-get install -y -qq kcat >/dev/null
fi

# The dashboard test (tests/node/test_dashboard.py): Debian's Prometheus serves the page
# and answers its queries, headless Chromium renders it.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
    echo "tests/run.sh: installing prometheus and chromium for the dashboard test" >&2
    apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus chromium >/dev/null
fi

# The web console's browser tests (tests/console/): Selenium drives Debian's Chromium
# through Debian's chromium-driver (nothing is downloaded at run time).
if ! command -v chromedriver >/dev/null 2>&1; then
    echo "tests/run.sh: installing chromium-driver for the web console's browser tests" >&2
    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi

python3 -m ruff check .
python3 proto/generate.py --check
python3 tests/typecheck.py
# The suite stays under 30 minutes: tests marked `long` (minutes each: chaos on
# compose, Spark clusters, benchmark smoke runs) run with SEGLOG_LONG_TESTS=1.
if [ "${SEGLOG_LONG_TESTS:-0}" = "1" ]; then
    python3 -m pytest -q -p no:cacheprovider --durations=40 "$@"
else
    python3 -m pytest -q -p no:cacheprovider --durations=40 -m "not long" "$@"
fi
