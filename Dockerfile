# docsim image: the API (`docsim serve`), the job worker (`docsim worker`) and the migrations
# (`alembic upgrade head`) all run from it; docker-compose.yml wires them to PostgreSQL.
#
#   docker build -t docsim .                          # CPU: torch's CPU wheel + faiss-cpu
#   docker build -t docsim:gpu --build-arg VARIANT=gpu .
#                                                     # CUDA: PyPI's CUDA torch + faiss-gpu-cu12
#                                                     # (needs the NVIDIA container toolkit)
#
# The base image and the package indexes are build arguments whose defaults are the public
# ones: PYTHON_IMAGE (a Debian bookworm with Python 3.11 as `python`), TORCH_CPU_INDEX (where
# the CPU variant's torch comes from; empty: pip's own configuration), and pip's own PIP_*
# variables (unset: PyPI), so that a machine without Docker or the public indexes can build it
# (issue 55: with buildah, from a locally bootstrapped base and the machine's pip configuration).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG VARIANT=cpu
ARG TORCH_VERSION=2.13.0
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# pip's own settings, for a build against a mirror or a local wheel folder; unset by default
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_CERT
ARG PIP_CONSTRAINT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/docsim
ENV PATH=/opt/docsim/bin:$PATH
WORKDIR /src
# torch first, from the index that has the wanted build: an unpinned torch from PyPI would be
# the CUDA build with gigabytes of CUDA libraries, which only the gpu variant wants.
RUN if [ "$VARIANT" = "gpu" ]; then \
        pip install "torch==${TORCH_VERSION}"; \
    else \
        pip install "torch==${TORCH_VERSION}" ${TORCH_CPU_INDEX:+--index-url "$TORCH_CPU_INDEX"}; \
    fi
COPY pyproject.toml README.md ./
COPY app app
COPY indexer indexer
COPY models models
COPY search search
COPY migrations migrations
# the one installed package: the client, and links to the folders above (docsim/app -> ../app)
COPY docsim docsim
# EXTRAS=ray adds Ray, for the sharded setup (docker-compose.sharded.yml)
ARG EXTRAS=""
RUN if [ "$VARIANT" = "gpu" ]; then extra=gpu; else extra=cpu; fi \
    && pip install ".[${extra}${EXTRAS:+,$EXTRAS}]" "torch==${TORCH_VERSION}"

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/docsim/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    DOCSIM_DATA_DIR=/data \
    DOCSIM_API__HOST=0.0.0.0 \
    DOCSIM_API__PORT=8000 \
    DOCSIM_LOG__FORMAT=json
RUN useradd --create-home --uid 10001 docsim \
    && mkdir -p /data /corpora \
    && chown docsim:docsim /data
COPY --from=build /opt/docsim /opt/docsim
WORKDIR /app
# alembic.ini points at ./migrations: `alembic upgrade head` runs from here
COPY alembic.ini ./
COPY migrations migrations
USER docsim
VOLUME ["/data"]
EXPOSE 8000
# No HEALTHCHECK here: the same image runs the worker, which serves no HTTP; the compose file
# gives the api service its check.
CMD ["docsim", "serve"]
