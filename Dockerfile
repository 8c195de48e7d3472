# syntax=docker/dockerfile:1
# Build stage: turn the source into a wheel (compilers stay here).
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proto ./proto
COPY hcs_deviceplugin ./hcs_deviceplugin
COPY vendors ./vendors
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Runtime stage: the wheel and its dependencies only.
FROM python:3.12-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# Root is needed to write sockets into kubelet's 0750 root-owned device-plugins directory.
ENTRYPOINT ["hcs-deviceplugin"]
CMD ["run"]
