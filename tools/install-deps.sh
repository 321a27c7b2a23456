#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine: the package with its test and spark
# extras, the mypyc-compiled hot loops (tools/build_native.py), and from Debian (root only, via apt)
# kcat, the ZooKeeper server the cluster tests run (Java 17 is expected to be there), chromium and its
# driver for the web console's tests, and iproute2 and nftables, with which the fault tests put brokers
# in network namespaces and cut or degrade their links; and Maven, with which Apache Kafka's jars (the
# reference the side-by-side tests run, tools/kafka_reference.py) are fetched into a cache outside the
# repository, so the test run itself downloads nothing.
set -euo pipefail

PYTHON="${PYTHON:-python3}"

"$PYTHON" -m pip install -q -e '.[test,spark]'
"$PYTHON" tools/build_native.py

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # the web console's tests (tests/console)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ -e /usr/share/java/zookeeper.jar ] || [ -n "${ODRADEK_ZOOKEEPER_CLASSPATH:-}" ] || missing+=(zookeeper)
command -v mvn >/dev/null 2>&1 || missing+=(maven)  # fetches Apache Kafka (tests/kafka_reference)
# Namespaces need root anyway; without them the fault tests run their proxy equivalents.
if [ "$(id -u)" -eq 0 ]; then
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v nft >/dev/null 2>&1 || missing+=(nftables)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing ${missing[*]}: run 'apt-get install -y ${missing[*]}' as root (the tests need them)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi

if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    "$PYTHON" tools/kafka_reference.py fetch
fi
