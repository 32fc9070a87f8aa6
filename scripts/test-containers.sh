#!/usr/bin/env bash
# Container tests in one command (make test-containers): start a private Docker engine
# unless DOCKER_HOST is already set, build the three images (scripts/build-images.sh
# --local: base image, wheelhouse, images; cached by the engine), run
# `pytest -m container tests/containers` (extra arguments go to pytest), and stop the
# engine it started by its pid. Needs root, docker.io and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DOCKER_HOST:-}" ]; then
  eval "$(bash scripts/dockerd.sh start)"
  dir="$(dirname "${DOCKER_HOST#unix://}")"
  trap 'bash scripts/dockerd.sh stop "$dir"' EXIT
fi
bash scripts/build-images.sh --local
.venv/bin/python -m pytest -m container tests/containers "$@"
