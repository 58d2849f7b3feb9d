#!/usr/bin/env bash
# cuda and cuda+inductor over the top of the snapshot, on a lent GPU machine (the `device` tool of this
# workplace), as one prepared command. That machine reaches no registry: its image has torch, triton and
# numpy; Zoo, its pins that the image lacks (transformers 5.23.0, huggingface_hub 2.4.0, SQLAlchemy,
# pydantic, ...) travel as wheels in .whl, made here (Python 3.12, as there) with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#       --platform manylinux_2_17_x86_64 -d .whl transformers==5.23.0 huggingface_hub==2.4.0 tokenizers==0.23.3 \
#       SQLAlchemy==2.1.9 alembic==1.20.1 Mako pydantic==2.14.4 pydantic_core pydantic-settings==2.16.3 \
#       typing-inspection annotated-types python-dotenv httpx2 httpcore2 truststore hf-xet typing_extensions greenlet
#   pip wheel --no-deps --no-build-isolation . -w .whl          # Zoo itself
# (the versions .venv has: `pip list`), and `carry: [".whl"]`. Results: benchmarks/cuda_latest.txt.
#
#   bash benchmarks/device_cuda.sh PLAN SECONDS     e.g. "cuda:100,cuda+inductor:100" 420
#
# Writes under $OUT (or ./.device-out): the state (rows.jsonl.gz, walls.json), the report
# (cuda_latest.txt) and the log. The benchmark runs under `timeout SECONDS`, and its state is written
# every --chunk models, so a cut-short run still reports what it finished.
set -uo pipefail
PLAN=${1:-cuda:20,cuda+inductor:20}
SECONDS_LIMIT=${2:-300}
OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT/state"
PY=${PY:-python3}
if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 ZOO_BENCH_WORK=/tmp/zoo-bench
rm -rf /tmp/zoo-bench
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
: nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, transformers, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), '| transformers', transformers.__version__, '| triton', triton.__version__)"
$PY -m zoo.cli doctor 2>&1 | head -30
timeout "$SECONDS_LIMIT" $PY -m benchmarks.backends --plan "$PLAN" --jobs "${JOBS:-6}" --timeout 240 \
    --state "$OUT/state" --chunk 10 --db "sqlite:////tmp/zoo-bench/zoo.db" 2>&1 | tee "$OUT/log.txt" | grep -v "^\s*$" | tail -60
echo "benchmark exit: $?"
$PY -m benchmarks.backends --report-only --state "$OUT/state" --db "sqlite:////tmp/zoo-bench/report.db" \
    --out "$OUT/cuda_latest.txt" > /dev/null 2>&1 || echo "report failed"
cat "$OUT/cuda_latest.txt" 2>/dev/null | head -80
