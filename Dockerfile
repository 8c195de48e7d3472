# syntax=docker/dockerfile:1
#
# Two stages. "build" collects wheels: every dependency exactly as requirements.lock pins it (version
# and sha256; all ship binary wheels for linux/amd64 and linux/arm64, so nothing is compiled), and the
# project's own, built with the tools requirements-build.lock pins. "runtime" installs those wheels offline into a clean slim Python, the locked ones with
# --require-hashes and the project's with --no-deps, and keeps no build tools, no compilers and no
# wheels.
#
# Base image: pinned by digest, so a rebuild gets the same Python and Debian packages until someone
# moves the pin on purpose. Override it with --build-arg PYTHON_IMAGE=... (a mirror, a newer digest).
#
# Labels (OCI annotations): pass the revision, date and source when building, e.g.
#   docker build --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) --build-arg SOURCE=https://... .
#
# User: the image's default user is the unprivileged 65532 (nonroot), so that anything run from it
# without a reason to be root is not. The daemon on a node does need uid 0, and the Helm chart says
# so explicitly (securityContext.runAsUser: 0, every capability dropped): kubelet's device-plugins
# directory is root:root 0750, and only its owner can create the plugin sockets there.

# Python 3.12 (3.12.14 at this digest) on Debian 12, the interpreter the locks are resolved for: the
# multi-platform image index (linux/amd64, linux/arm64 and others) as docker-library publishes it.
ARG PYTHON_IMAGE=python:3.12-slim-bookworm@sha256:0f5b26b9518d002b6173fd61daad821fa340635ebfec5bba471013f9ca114579

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements-build.lock requirements.lock pyproject.toml README.md ./
COPY hcs_deviceplugin ./hcs_deviceplugin
COPY vendors ./vendors
# Each locked file is checked against its hash as it is downloaded, and again when it is installed.
# The project's wheel is built with the locked build tools, not ones an isolated build would fetch.
RUN python -m pip install --require-hashes -r requirements-build.lock \
    && python -m pip download --require-hashes --only-binary=:all: --dest /wheels -r requirements.lock \
    && python -m pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
    && cp requirements.lock /wheels/

FROM ${PYTHON_IMAGE} AS runtime
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=""
ARG CREATED=""
ARG SOURCE=""
LABEL org.opencontainers.image.title="hcs-deviceplugin" \
      org.opencontainers.image.description="Kubelet device plugin daemon for heterogeneous accelerators" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheels are bind-mounted from the build stage for this one step, so no layer keeps them.
# pip check: the locked versions satisfy every range the project's metadata declares.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels --require-hashes -r /wheels/requirements.lock \
    && python -m pip install --no-index --no-deps /wheels/hcs_deviceplugin-*.whl \
    && python -m pip check \
    && hcs-deviceplugin --version
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["hcs-deviceplugin"]
CMD ["run"]
