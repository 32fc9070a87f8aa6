#!/usr/bin/env bash
# Build the wheelhouse the images install from with `pip install --no-index` (the
# air-gapped path, images/README.md): every wheel the three images need, built on this
# machine with `pip wheel` (not `pip download`: kfp-server-api ships only an sdist), plus
# Horovod's sdist, which the horovod image compiles against its own TensorFlow and MPI.
#
#   scripts/build-wheelhouse.sh [--gpu] [DIR]   # default DIR: build/wheelhouse
#   PYTHON=python3.11 scripts/build-wheelhouse.sh
#
# Default (CPU flavour): TensorFlow as requirements/tensorflow.txt pins it (tensorflow-cpu).
# --gpu adds the full `tensorflow` wheel (CUDA-enabled; the horovod image's GPU flavour
# installs it; the trainer's GPU base brings its own TensorFlow).
#
# The Python that runs pip must match the images' Python (3.11: Debian bookworm's python3
# and the TensorFlow GPU base). Two resolves, because tensorflow-cpu 2.18 declares
# protobuf<6 while kfp 2.17 needs protobuf>=6.31 (requirements/tensorflow.txt); the images
# install them in the same two steps. The kfp-gpu wheel itself is removed: the images
# install the package from the sources in the build context.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=0
if [ "${1:-}" = "--gpu" ]; then gpu=1; shift; fi
out="${1:-build/wheelhouse}"
PYTHON="${PYTHON:-.venv/bin/python}"
# Versions: tests/unit/test_images.py checks them against the Dockerfiles / pyproject.toml.
HOROVOD_VERSION=0.28.1
BUILD_TOOLS=("pip==26.3" "setuptools==84.2.1" "wheel==0.48.0")
mkdir -p "$out"
# (grep: this machine's pip config names index folders that may be missing; pip warns per package)
pip_wheel() {
  "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$out" "$@" \
    2> >(grep -v "^WARNING: Location '" >&2)
}
start=$SECONDS
echo "wheelhouse: $out (python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0])'))"
tf=(-r requirements/tensorflow.txt)
[ "$gpu" -eq 0 ] || tf+=("tensorflow==$(sed -n 's/^tensorflow-cpu==//p' requirements/tensorflow.txt)")
pip_wheel "${tf[@]}" "${BUILD_TOOLS[@]}"
echo "  tensorflow + build tools: $((SECONDS - start)) s"
pip_wheel ".[train]"
rm -f "$out"/kfp_gpu-*.whl
echo "  kfp-gpu[train] dependencies: $((SECONDS - start)) s"
# Horovod: its sdist (built inside the image, --no-build-isolation after TensorFlow) and
# its install requirements (horovod 0.28.1 setup.py: cloudpickle, psutil, pyyaml, packaging).
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary horovod \
  --dest "$out" "horovod==${HOROVOD_VERSION}" 2> >(grep -v "^WARNING: Location '" >&2)
pip_wheel cloudpickle psutil pyyaml packaging cffi
echo "  horovod sdist + requirements: $((SECONDS - start)) s"
echo "wheelhouse ready: $(find "$out" -maxdepth 1 -type f | wc -l) files, $(du -sh "$out" | cut -f1), $((SECONDS - start)) s"
