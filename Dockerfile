# One image for the api, worker and beat services (docker-compose.yml).
FROM python:3.11-slim
ARG TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
WORKDIR /app
RUN pip install --no-cache-dir ${TORCH_SPEC}
COPY pyproject.toml README.md ./
COPY zoo ./zoo
COPY zoo_runner ./zoo_runner
COPY workers ./workers
COPY api ./api
COPY db ./db
COPY dashboards ./dashboards
RUN pip install --no-cache-dir . && useradd --create-home zoo && mkdir -p /home/zoo/.cache/huggingface /home/zoo/.cache/zoo/references && chown -R zoo /home/zoo/.cache
USER zoo
ENV HF_HOME=/home/zoo/.cache/huggingface ZOO_REFERENCE_CACHE=/home/zoo/.cache/zoo/references
EXPOSE 8000
CMD ["zoo", "serve", "--host", "0.0.0.0", "--port", "8000"]
