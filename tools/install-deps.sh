#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine: the package with its test and spark
# extras, the mypyc-compiled hot loops (tools/build_native.py), and kcat (root only, via apt).
set -euo pipefail

PYTHON="${PYTHON:-python3}"

"$PYTHON" -m pip install -q -e '.[test,spark]'
"$PYTHON" tools/build_native.py

if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "kcat is missing: run 'apt-get install -y kcat' as root (the kcat tests need it)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y kcat
fi
