#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine: the package with its test extra,
# the compression libraries kafka-python uses for snappy/lz4/zstd, and kcat (root only, via apt).
set -euo pipefail

PYTHON="${PYTHON:-python3}"

"$PYTHON" -m pip install -q -e '.[test,spark]'
"$PYTHON" -m pip install -q python-snappy lz4 zstandard

if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "kcat is missing: run 'apt-get install -y kcat' as root (the kcat tests need it)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y kcat
fi
