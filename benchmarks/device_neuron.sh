#!/usr/bin/env bash
# neuron and neuron+neuron over the top 100 of the snapshot, on a Trainium machine, as one prepared
# command (the counterpart of device_cuda.sh). Run it on a fresh Trn2 instance from the Deep Learning
# AMI Neuron torch-neuronx 2.14.0 (AWS setup/pytorch/update-dlami: its venv
# /opt/aws_neuronx_venv_torch_neuronx_2_14_0 has torch-neuronx 2.14, neuronx-cc and nki), from a clone:
#
#   PY=/opt/aws_neuronx_venv_torch_neuronx_2_14_0/bin/python bash benchmarks/device_neuron.sh [PLAN] [SECONDS]
#       PLAN     default "neuron:100,neuron+neuron:100"
#       SECONDS  default 5400 (a cold first compile of each graph may take minutes)
#
# Zoo is installed into that venv (its neuron extra pins what the AMI has); `zoo doctor --backend neuron`
# must pass first, and the script stops where it does not. Each model process claims
# ZOO_NEURON_CORES_PER_PROCESS NeuronCores (default 1) of ZOO_NEURON_CORES (default: every core of the
# /dev/neuron* devices, 4 per device at Trn2's default LNC=2), and --jobs is the number of such sets.
# Writes under $OUT (or ./.device-out): the state (rows.jsonl.gz, walls.json), the report
# (neuron_latest.txt, to commit as benchmarks/neuron_latest.txt) and the log.
set -uo pipefail
PLAN=${1:-neuron:100,neuron+neuron:100}
SECONDS_LIMIT=${2:-5400}
OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT/state"
PY=${PY:-python3}
$PY -m pip install -q -e ".[neuron]" --extra-index-url https://pip.repos.neuron.amazonaws.com || exit 3
export PYTHONUNBUFFERED=1 ZOO_BENCH_WORK=/tmp/zoo-bench
rm -rf /tmp/zoo-bench
$PY -m zoo.cli doctor --backend neuron || { echo "a precondition fails: fix it first (the lines above say how)"; exit 4; }
$PY -c "import importlib.metadata as m; print(*(f'{d} {m.version(d)}' for d in ('torch', 'torch-neuronx', 'neuronx-cc', 'nki', 'transformers')), sep=' | ')"
JOBS=${JOBS:-$($PY -c "from zoo.jobs import default_jobs; print(default_jobs('neuron'))")}
timeout "$SECONDS_LIMIT" $PY -m benchmarks.backends --plan "$PLAN" --jobs "$JOBS" --timeout 900 \
    --state "$OUT/state" --chunk 10 --db "sqlite:////tmp/zoo-bench/zoo.db" 2>&1 | tee "$OUT/log.txt" | grep -v "^\s*$" | tail -60
echo "benchmark exit: $?"
$PY -m benchmarks.backends --report-only --state "$OUT/state" --db "sqlite:////tmp/zoo-bench/report.db" \
    --out "$OUT/neuron_latest.txt" > /dev/null 2>&1 || echo "report failed"
cat "$OUT/neuron_latest.txt" 2>/dev/null | head -80
