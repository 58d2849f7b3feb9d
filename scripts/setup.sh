#!/usr/bin/env bash
# Create .venv and install Zoo into it. `scripts/setup.sh dev` adds the test dependencies.
# torch is installed first (CPU build by default) so nothing pulls a larger build; override with
# ZOO_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" or similar.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# shellcheck disable=SC2086
.venv/bin/python -m pip install -q ${ZOO_TORCH:-torch==2.13.0}
if [ "${1:-}" = "dev" ]; then
  .venv/bin/python -m pip install -q -e ".[dev]"
else
  .venv/bin/python -m pip install -q -e .
fi
echo "zoo installed in .venv ($(.venv/bin/zoo --help >/dev/null && echo ok))" >&2
