#!/usr/bin/env bash
# Rebuild what docs/ shows of Zoo's real run from the rows kept in benchmarks/data/backends (the
# state of `python -m benchmarks.backends --state`): the weekly report of every backend in it
# (docs/reports/weekly-B.md and .html) and the dashboard screenshots (docs/dashboard-*.png).
# Nothing is validated again: the rows go into a fresh SQLite database in a temporary folder,
# `zoo report` writes each report from it, and `zoo serve` on it is what the screenshots show.
#
#   bash scripts/publish_real_results.sh            # needs `bash scripts/setup.sh dev` and /usr/bin/chromium
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ZOO_VENV:-.venv}"
PORT="${ZOO_PUBLISH_PORT:-8765}"
STATE=benchmarks/data/backends
[ -x "$VENV/bin/zoo" ] || { echo "publish: $VENV has no zoo; run: bash scripts/setup.sh dev" >&2; exit 1; }
[ -x /usr/bin/chromium ] || { echo "publish: no /usr/bin/chromium; run: apt-get install -y chromium" >&2; exit 1; }

WORK="$(mktemp -d)"
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
export ZOO_DATABASE_URL="sqlite:///$WORK/zoo.db" ZOO_BENCH_WORK="$WORK/bench" HF_HUB_OFFLINE=1
# the reports link each triaged cluster's repro.py and issue.md (python -m benchmarks.findings writes them there)
export ZOO_TRIAGE_DIR="${ZOO_TRIAGE_DIR:-docs/findings}"

echo "publish: loading the rows of $STATE into a fresh database" >&2
"$VENV/bin/python" -m benchmarks.backends --state "$STATE" --report-only --db "$ZOO_DATABASE_URL" \
  --out "$WORK/sections.txt" >/dev/null

# every backend with rows in the state, in the order of the walls file
mapfile -t BACKENDS < <("$VENV/bin/python" -c '
import json, sys
from benchmarks.backends import _parse_walls_key
print("\n".join(dict.fromkeys(_parse_walls_key(k)[0] for k in json.load(open(sys.argv[1])))))
' "$STATE/walls.json")
mkdir -p docs/reports
for b in "${BACKENDS[@]}"; do
  for fmt in md html; do
    "$VENV/bin/zoo" report --backend "$b" --tier tiny --format "$fmt" --output "docs/reports/weekly-$b.$fmt"
  done
  echo "publish: docs/reports/weekly-$b.md and .html" >&2
done

"$VENV/bin/zoo" serve --host 127.0.0.1 --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 60); do
  "$VENV/bin/python" -c "import httpx; httpx.get('http://127.0.0.1:$PORT/api/v1/coverage').raise_for_status()" \
    2>/dev/null && break
  sleep 1
done
"$VENV/bin/python" -m dashboards.screenshots "http://127.0.0.1:$PORT" docs
echo "publish: docs/dashboard-*.png from the same database" >&2
