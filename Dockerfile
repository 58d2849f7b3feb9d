# One image for the api, worker and beat services (docker-compose.yml).
FROM python:3.11-slim
# The torch to install first, so nothing pulls a larger build: the CPU build by default; the
# compose file's worker-cuda sets a CUDA build (PyPI's torch for Linux x86_64); worker-neuron has an
# image of its own (Dockerfile.neuron: Python 3.12 and AWS's repositories).
ARG TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
# Zoo's extras (pyproject.toml), comma-separated: the compose workers take every library and CPU backend
# (timm, open_clip, pyannote, ultralytics, openvino, onnxruntime), so no popular model is `unsupported` for want of one;
# the api, beat and migrate services, which never build a model, take none.
ARG ZOO_EXTRAS=""
WORKDIR /app
RUN pip install --no-cache-dir ${TORCH_SPEC}
COPY pyproject.toml README.md ./
COPY zoo ./zoo
COPY zoo_runner ./zoo_runner
COPY workers ./workers
COPY api ./api
COPY db ./db
COPY services ./services
COPY dashboards ./dashboards
RUN pip install --no-cache-dir ".${ZOO_EXTRAS:+[$ZOO_EXTRAS]}" && useradd --create-home zoo && mkdir -p /home/zoo/.cache/huggingface /home/zoo/.cache/zoo/references /home/zoo/.cache/zoo/compile && chown -R zoo /home/zoo/.cache
# Model processes run sandboxed, and strictly: a worker runs as root (this image's user), and each
# model process switches to uid 65533 with no capabilities, no network and a read-only filesystem.
# unshare and mount need CAP_SYS_ADMIN and no AppArmor mount denial: docker-compose.yml gives the
# workers `cap_add: [SYS_ADMIN]` and `security_opt: [apparmor=unconfined]`; services that never run
# a model (api, beat) run as `zoo`. `zoo doctor` prints what a container allows.
ENV HF_HOME=/home/zoo/.cache/huggingface ZOO_REFERENCE_CACHE=/home/zoo/.cache/zoo/references ZOO_COMPILE_CACHE=/home/zoo/.cache/zoo/compile ZOO_SANDBOX=strict
EXPOSE 8000
CMD ["zoo", "serve", "--host", "0.0.0.0", "--port", "8000"]
