# syntax=docker/dockerfile:1
#
# Two stages. "build" turns the source into wheels: the project's own and one for every dependency
# (all of which ship binary wheels for linux/amd64 and linux/arm64, so nothing is compiled; should a
# source build ever be needed it happens here). "runtime" installs those wheels offline into a clean
# slim Python and keeps no build tools, no compilers and no wheels.
#
# User: the image's default user is the unprivileged 65532 (nonroot), so that anything run from it
# without a reason to be root is not. The daemon on a node does need uid 0, and the Helm chart says
# so explicitly (securityContext.runAsUser: 0, every capability dropped): kubelet's device-plugins
# directory is root:root 0750, and only its owner can create the plugin sockets there.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY hcs_deviceplugin ./hcs_deviceplugin
COPY vendors ./vendors
RUN python -m pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="hcs-deviceplugin" \
      org.opencontainers.image.description="Kubelet device plugin daemon for heterogeneous accelerators" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheels are bind-mounted from the build stage for this one step, so no layer keeps them.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels hcs-deviceplugin \
    && hcs-deviceplugin --version
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["hcs-deviceplugin"]
CMD ["run"]
