#!/usr/bin/env bash
# Create .venv (or $ZOO_VENV) and install Zoo into it.
#   bash scripts/setup.sh            Zoo with a CPU build of torch
#   bash scripts/setup.sh dev        + the test dependencies
#   bash scripts/setup.sh dev timm   + timm models (timm needs torchvision, pinned with torch==2.14.1 +
#                                      torchvision==0.29.1; on Linux x86_64 PyPI's build of that torch
#                                      is the CUDA one, about 5.5 GB with its nvidia-* wheels)
#   bash scripts/setup.sh dev open_clip  + OpenCLIP models (the same torchvision)
#   bash scripts/setup.sh dev pyannote   + pyannote.audio models (torchaudio links torch's CUDA
#                                          libraries, so the same 2.14.1 build)
#   bash scripts/setup.sh dev speechbrain  + SpeechBrain models (torchaudio, as for pyannote)
#   bash scripts/setup.sh dev vocos        + Vocos vocoders (torchaudio, as for pyannote)
#   bash scripts/setup.sh all            every library and CPU backend Zoo builds and runs: timm, OpenCLIP,
#                                          pyannote.audio, ultralytics, SpeechBrain, Vocos, OpenVINO, ONNX Runtime (torch 2.14.1's CUDA build,
#                                          as for timm); the benchmarks and the compose workers use this set
#   bash scripts/setup.sh openvino       + the cpu+openvino backend (OpenVINO; also in dev)
#   bash scripts/setup.sh onnxruntime    + the cpu+onnxrt backend (ONNX Runtime, onnxscript; also in dev)
#   bash scripts/setup.sh xla            + the xla and xla+openxla backends (torch-xla 2.9.0, which pins
#                                          torch==2.9.0: use a venv of its own, ZOO_VENV=.venv-xla; PyPI's
#                                          torch 2.9.0 for Linux x86_64 is its CUDA build, about 4 GB with
#                                          its nvidia-* wheels, unless ZOO_TORCH names a CPU build's index)
#   bash scripts/setup.sh dev xla all    the xla backends with every library (timm, OpenCLIP, pyannote.audio,
#                                          ultralytics, SpeechBrain, Vocos) at torch 2.9.0's own torchvision 0.24.0 and
#                                          torchaudio 2.9.0 instead of the extras' pins: the backends benchmark's
#                                          xla slice (ZOO_VENV=.venv-xla-all)
# torch is installed first (CPU build by default) so nothing pulls a larger build; override with
# ZOO_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" or similar.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${ZOO_VENV:-.venv}"
extras=()
torch_spec="${ZOO_TORCH:-torch==2.13.0}"
args=()
for arg in "$@"; do  # `all`: the extras every model kind needs (README, "Libraries")
  if [ "$arg" = all ]; then args+=(timm open_clip pyannote ultralytics speechbrain vocos openvino onnxruntime); else args+=("$arg"); fi
done
set -- "${args[@]+"${args[@]}"}"
for arg in "$@"; do
  case "$arg" in
    dev|timm|open_clip|pyannote|ultralytics|speechbrain|vocos|diffusers|chronos|neuron|openvino|onnxruntime|xla) extras+=("$arg") ;;
    *) echo "setup.sh: unknown extra '$arg' (all, dev, timm, open_clip, pyannote, ultralytics, speechbrain, vocos, diffusers, chronos, neuron, openvino, onnxruntime, xla)" >&2; exit 2 ;;
  esac
  if { [ "$arg" = timm ] || [ "$arg" = open_clip ] || [ "$arg" = pyannote ] || [ "$arg" = ultralytics ] || [ "$arg" = speechbrain ] || [ "$arg" = vocos ]; } && [ -z "${ZOO_TORCH:-}" ]; then
    torch_spec="torch==2.14.1 torchvision==0.29.1"
  fi
  if [ "$arg" = xla ] && [ -z "${ZOO_TORCH:-}" ]; then
    torch_spec="torch==2.9.0"  # torch-xla 2.9.0 requires exactly this torch
  fi
done
# neuron: TorchNeuron from AWS's pip index (AWS setup/pytorch/update-manual, Neuron 2.33: torch-neuronx 2.14.*,
# neuronx-cc 2.*, nki; torch 2.14 from PyPI's CPU index; Python 3.12+). Where the index is unreachable or the
# Python too old, the extra is left out in one line and the rest installs (`zoo doctor --backend neuron`).
NEURON_INDEX="https://pip.repos.neuron.amazonaws.com"
if [[ " ${extras[*]-} " == *" neuron "* ]]; then
  why=""
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    why="TorchNeuron's wheels need Python 3.12+, this is $("$PY" --version 2>&1) (PYTHON=python3.12 bash scripts/setup.sh neuron)"
  elif ! "$PY" -c "import urllib.request, sys; urllib.request.urlopen('$NEURON_INDEX/', timeout=8)" >/dev/null 2>&1; then
    why="AWS's Neuron index $NEURON_INDEX is not reachable from here"
  fi
  if [ -n "$why" ]; then
    echo "setup: the neuron extra is left out: $why; everything else installs" >&2
    kept=(); for e in "${extras[@]}"; do [ "$e" = neuron ] || kept+=("$e"); done; extras=("${kept[@]+"${kept[@]}"}")
  else
    # beside the indexes pip is configured with here (an environment variable would replace them)
    configured="$("$PY" -m pip config list 2>/dev/null | sed -n "s/^[^=]*extra-index-url='\(.*\)'$/\1/p" | tr '\n' ' ')"
    export PIP_EXTRA_INDEX_URL="${configured}${PIP_EXTRA_INDEX_URL:+$PIP_EXTRA_INDEX_URL }$NEURON_INDEX"
    [ -n "${ZOO_TORCH:-}" ] || torch_spec="torch==2.14.* --index-url https://download.pytorch.org/whl/cpu"
  fi
fi
# xla with libraries: torch-xla needs torch==2.9.0, the library extras pin torch 2.14.1's torchvision and
# torchaudio; here the libraries go in at torch 2.9.0's own (their requirements from pyproject.toml, less
# those two pins), after Zoo
xla_libs=()
if [[ " ${extras[*]} " == *" xla "* ]]; then
  kept=()
  for e in "${extras[@]}"; do
    case "$e" in timm|open_clip|pyannote|ultralytics|speechbrain|vocos) xla_libs+=("$e") ;; *) kept+=("$e") ;; esac
  done
  extras=("${kept[@]}")
  if [ "${#xla_libs[@]}" -gt 0 ] && [ -z "${ZOO_TORCH:-}" ]; then
    torch_spec="torch==2.9.0 torchvision==0.24.0 torchaudio==2.9.0"
  fi
fi
log="$VENV/setup.log"  # pip's own output: shown only when a step fails
say() { echo "setup: $*" >&2; }
step() {  # step WHAT CMD...: say WHAT, run CMD with its output in $log, show its tail if it fails
  local what="$1"; shift
  say "$what"
  if ! "$@" >>"$log" 2>&1; then
    say "failed: $what; the last lines of $log:"
    tail -n 30 "$log" >&2
    exit 1
  fi
}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV ($("$PY" --version 2>&1))" >&2
  "$PY" -m venv "$VENV"
fi
: >"$log"
# uv installs (about 10 s where pip took 60-90 s on 2 cores), with pip's own configuration on this
# machine (its local wheels, indexes and caps) handed over; pip is the fallback
UV_VERSION=0.13.9
uv=""
if "$VENV/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION" >>"$log" 2>&1; then
  uv="$VENV/bin/uv"
  # pip's configuration as uv's environment (not its command line: an index URL may hold a password),
  # the most specific of pip's sections winning (its environment, then [install], then [global])
  eval "$("$VENV/bin/python" - <<'PY'
import ast, shlex, subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
rank, best = {":env:": 3, "install": 2, "global": 1}, {}
for line in out.splitlines():  # e.g. global.extra-index-url='file:///a file:///b'
    key, _, value = line.partition("=")
    section, _, name = key.rpartition(".")
    try:
        value = str(ast.literal_eval(value))
    except (ValueError, SyntaxError):
        continue
    if rank.get(section, 0) > best.get(name, (0, ""))[0]:
        best[name] = (rank[section], value)
env = {"index-url": ("UV_INDEX_URL", " "), "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
       "find-links": ("UV_FIND_LINKS", ","), "constraint": ("UV_CONSTRAINT", " "), "cert": ("SSL_CERT_FILE", " ")}
for name, (var, sep) in env.items():
    if name in best:
        print(f"export {var}={shlex.quote(sep.join(best[name][1].split()))}")
if best.get("no-index", (0, ""))[1].lower() in ("1", "true", "yes", "on"):
    print("export UV_NO_INDEX=1")
PY
)"
  export UV_INDEX_STRATEGY=unsafe-best-match  # as pip: the best match over every index, not the first's
  export UV_COMPILE_BYTECODE=1  # as pip: model processes (another uid) cannot write .pyc files here
else
  say "uv $UV_VERSION not installed (offline?): pip installs everything"
  "$VENV/bin/python" -m pip install -q --upgrade pip >>"$log" 2>&1 || true
fi
pins=""  # set below: the torch that stays
pkg_install() {  # pkg_install PIP-ARGS...: uv where it is here, else (or where uv fails) pip
  local constraints="${UV_CONSTRAINT:-}"
  if [ -n "$pins" ]; then constraints="${constraints:+$constraints }$pins"; fi
  if [ -n "$uv" ] && UV_CONSTRAINT="$constraints" "$uv" pip install --quiet --python "$VENV/bin/python" "$@"; then
    return 0
  fi
  if [ -n "$uv" ]; then echo "setup: uv failed (its output in $log); pip tries" >&2; fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check ${pins:+--constraint "$pins"} "$@"
}
# shellcheck disable=SC2086
step "installing $torch_spec" pkg_install $torch_spec
spec="."
if [ "${#extras[@]}" -gt 0 ]; then
  spec=".[$(IFS=,; echo "${extras[*]}")]"
fi
# the torch just installed stays: a dependency that wants another build fails here instead of pulling
# one (PyPI's Linux torch is the 4 GB CUDA build)
pins="$VENV/torch-pins.txt"
"$VENV/bin/python" -m pip list --disable-pip-version-check --format=freeze 2>>"$log" \
  | grep -iE '^(torch|torchvision|torchaudio)==' >"$pins" || true
[ -s "$pins" ] || pins=""
# editable, so a change to the source needs no reinstall; the build backend's output goes to the log
step "installing Zoo and its dependencies ($([ -n "$uv" ] && echo "uv ")pip install -e '$spec': transformers, SQLAlchemy, Celery, FastAPI, ...)" \
  pkg_install -e "$spec"
if [ "${#xla_libs[@]}" -gt 0 ]; then
  lib_reqs="$("$VENV/bin/python" - "${xla_libs[@]}" <<'PY'
import re, sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
reqs = {r for name in sys.argv[1:] for r in extras[name] if not re.match(r"(torchvision|torchaudio)\b", r)}
print(" ".join(sorted(reqs)))
PY
)"
  # shellcheck disable=SC2086
  step "installing ${xla_libs[*]} at torch 2.9.0's torchvision and torchaudio ($lib_reqs)" pkg_install $lib_reqs
fi
# every model's classes import through transformers' modeling layers: a package they import that is installed
# but broken (soundfile 0.14.0 without libsndfile) fails every model, so say it here, not in each row
if ! "$VENV/bin/python" -c "import transformers.modeling_layers" >>"$log" 2>&1; then
  say "transformers' modeling code does not import in $VENV: $(tail -n 1 "$log")"
  exit 1
fi
say "zoo installed in $VENV ($("$VENV/bin/zoo" --help >/dev/null && echo ok); the installers' output in $log)"
