#!/usr/bin/env bash
# Build (and push) the kfp-gpu runtime images: trainer, horovod, launcher.
#
#   KFP_GPU_REGISTRY=ghcr.io/acme scripts/build-images.sh [--no-push] [--dry-run]
#       [--wheelhouse DIR] [NAME ...]          # production: GPU flavour, docker buildx
#   scripts/build-images.sh --local [--dry-run] [NAME ...]
#                                              # CPU flavour on this machine's engine
#
# Image references follow kfp_gpu.release.images.ImageSet.image (compile --registry R names the same): <registry>/kfp-gpu-<name>:<version>, where
# <version> is the package version (kfp_gpu.__version__) and <registry> comes from
# KFP_GPU_REGISTRY (default ghcr.io/kfp-gpu). The build context is the repository root.
# Production: BuildKit (docker buildx), the Dockerfiles' default (CUDA / TensorFlow GPU)
# bases, pushed unless --no-push. --wheelhouse DIR (inside the repository; made with
# scripts/build-wheelhouse.sh [--gpu]) installs the Python layer from it with --no-index.
# --local: the classic builder (DOCKER_BUILDKIT=0) on the engine at DOCKER_HOST, the CPU
# flavour on the debootstrap base (KFP_GPU_BASE_IMAGE, default kfp-gpu-base:bookworm,
# built by scripts/build-base-image.sh when missing), the wheelhouse build/wheelhouse
# (built when missing), apt inside the build over the host network; tagged, not pushed.
# Prints the time each image took. See images/README.md.
set -euo pipefail

cd "$(dirname "$0")/.."
push=1
dry_run=0
local_build=0
wheelhouse=""
names=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --no-push) push=0 ;;
    --dry-run) dry_run=1 ;;
    --local) local_build=1; push=0 ;;
    --wheelhouse) shift; wheelhouse="${1:?--wheelhouse needs a folder}" ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    trainer|horovod|launcher) names+=("$1") ;;
    *) echo "unknown argument: $1 (accepted: --local, --no-push, --dry-run, --wheelhouse DIR, trainer, horovod, launcher)" >&2
       exit 2 ;;
  esac
  shift
done
[ "${#names[@]}" -gt 0 ] || names=(launcher trainer horovod)

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' kfp_gpu/__init__.py)"
[ -n "$version" ] || { echo "cannot read __version__ from kfp_gpu/__init__.py" >&2; exit 1; }
registry="${KFP_GPU_REGISTRY:-ghcr.io/kfp-gpu}"
registry="${registry%/}"
base="${KFP_GPU_BASE_IMAGE:-kfp-gpu-base:bookworm}"
[ "$local_build" -eq 0 ] || wheelhouse="${wheelhouse:-build/wheelhouse}"
if [ -n "$wheelhouse" ]; then
  wheelhouse="${wheelhouse%/}"
  case "$wheelhouse" in
    /*|..*) echo "--wheelhouse must be a folder inside the repository (the build context): $wheelhouse" >&2
            exit 2 ;;
  esac
fi

run() {
  echo "+ $*"
  if [ "$dry_run" -eq 0 ]; then "$@"; fi
}

if [ "$local_build" -eq 1 ] && [ "$dry_run" -eq 0 ]; then
  docker version --format 'engine {{.Server.Version}} at '"${DOCKER_HOST:-default socket}" \
    || { echo "no Docker engine at ${DOCKER_HOST:-the default socket} (scripts/dockerd.sh start)" >&2; exit 1; }
  bash scripts/build-base-image.sh "$base"
  if [ -z "$(find "$wheelhouse" -maxdepth 1 -name '*.whl' -print -quit 2>/dev/null)" ]; then
    bash scripts/build-wheelhouse.sh "$wheelhouse"
  fi
fi

total=$SECONDS
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  ref="${registry}/kfp-gpu-${name}:${version}"
  args=(--file "images/${name}/Dockerfile" --build-arg "KFP_GPU_VERSION=${version}")
  [ -z "$wheelhouse" ] || args+=(--build-arg "WHEELHOUSE=${wheelhouse}")
  echo "==> [${i}/${#names[@]}] ${name}: ${ref}"
  start=$SECONDS
  if [ "$local_build" -eq 1 ]; then
    args+=(--build-arg "BASE_IMAGE=${base}")
    case "$name" in
      trainer) args+=(--build-arg TENSORFLOW_PACKAGE=tensorflow-cpu) ;;
      horovod) args+=(--build-arg "BUILD_BASE_IMAGE=${base}" --build-arg FLAVOUR=cpu
                      --build-arg TENSORFLOW_PACKAGE=tensorflow-cpu) ;;
    esac
    DOCKER_BUILDKIT=0 run docker build --network host --tag "${ref}" "${args[@]}" .
  else
    output="--load"
    [ "$push" -eq 1 ] && output="--push"
    run docker buildx build "${args[@]}" --tag "${ref}" "${output}" .
  fi
  echo "image ${name}: ${ref}"
  echo "<== ${name} built in $((SECONDS - start)) s"
done
echo "all images (${names[*]}) built in $((SECONDS - total)) s"
