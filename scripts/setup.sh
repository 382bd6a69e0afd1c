#!/usr/bin/env bash
# Create .venv (once) and install aiayn with its CPU dependencies into it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
# AIAYN_TORCH=cpu (the default) pins torch's CPU build (constraints-cpu.txt), not a multi-GB
# CUDA build; AIAYN_TORCH=pypi takes the torch build PyPI serves (CUDA on Linux), for a machine
# with a GPU, where the tests marked gpu then run.
torch_build=${AIAYN_TORCH:-cpu}
case "$torch_build" in
cpu) constraints=(-c constraints-cpu.txt) ;;
pypi) constraints=() ;;
*)
    echo "AIAYN_TORCH must be cpu or pypi, got '$torch_build'" >&2
    exit 2
    ;;
esac
stamp=.venv/.aiayn-installed-$torch_build
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet "${constraints[@]}" -e ".[dev]"
    rm -f .venv/.aiayn-installed .venv/.aiayn-installed-*
    touch "$stamp"
fi
# redis-server: the tests of request limits shared by several servers (--shared-storage
# redis://) start one on a free loopback port; installed from Debian's package where missing
# (as root, e.g. on CI), otherwise those tests skip with a message
if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q redis-server >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null && apt-get install -y -q redis-server >/dev/null; } ||
            echo "could not install redis-server: the shared-limit tests will skip" >&2
    else
        echo "redis-server is not installed (apt-get install redis-server, as root): the" \
            "shared-limit tests will skip" >&2
    fi
fi
# deepl-node: DeepL's Node client, which tests/serve/test_deepl_node.py runs against the
# server; installed from tests/serve/deepl_node/package-lock.json where npm is (its registry
# reachable), otherwise that test skips with a message
if command -v npm >/dev/null 2>&1; then
    (cd tests/serve/deepl_node && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
        echo "could not install deepl-node (npm ci): its test will skip" >&2
else
    echo "npm is not installed: the deepl-node test will skip" >&2
fi
