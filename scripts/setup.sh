#!/usr/bin/env bash
# Create .venv (or $ZOO_VENV) and install Zoo into it.
#   bash scripts/setup.sh            Zoo with a CPU build of torch
#   bash scripts/setup.sh dev        + the test dependencies
#   bash scripts/setup.sh dev timm   + timm models (timm needs torchvision, which here comes only
#                                      with torch==2.14.1 + torchvision==0.29.1: a 5.5 GB CUDA build)
#   bash scripts/setup.sh dev open_clip  + OpenCLIP models (the same torchvision)
#   bash scripts/setup.sh dev pyannote   + pyannote.audio models (torchaudio links torch's CUDA
#                                          libraries, so the same 2.14.1 build)
#   bash scripts/setup.sh openvino       + the cpu+openvino backend (OpenVINO; also in dev)
#   bash scripts/setup.sh onnxruntime    + the cpu+onnxrt backend (ONNX Runtime, onnxscript; also in dev)
# torch is installed first (CPU build by default) so nothing pulls a larger build; override with
# ZOO_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" or similar.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${ZOO_VENV:-.venv}"
extras=()
torch_spec="${ZOO_TORCH:-torch==2.13.0}"
for arg in "$@"; do
  case "$arg" in
    dev|timm|open_clip|pyannote|diffusers|chronos|neuron|openvino|onnxruntime) extras+=("$arg") ;;
    *) echo "setup.sh: unknown extra '$arg' (dev, timm, open_clip, pyannote, diffusers, chronos, neuron, openvino, onnxruntime)" >&2; exit 2 ;;
  esac
  if { [ "$arg" = timm ] || [ "$arg" = open_clip ] || [ "$arg" = pyannote ]; } && [ -z "${ZOO_TORCH:-}" ]; then
    torch_spec="torch==2.14.1 torchvision==0.29.1"
  fi
done
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q $torch_spec
spec="."
if [ "${#extras[@]}" -gt 0 ]; then
  spec=".[$(IFS=,; echo "${extras[*]}")]"
fi
"$VENV/bin/python" -m pip install -q -e "$spec"
echo "zoo installed in $VENV ($("$VENV/bin/zoo" --help >/dev/null && echo ok))" >&2
