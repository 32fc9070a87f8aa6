#!/usr/bin/env bash
# Build (and push) the kfp-gpu runtime images: trainer, horovod, launcher.
#
#   KFP_GPU_REGISTRY=ghcr.io/acme scripts/build-images.sh [--no-push] [--dry-run] [NAME ...]
#
# Image references follow kfp_gpu/images.py: <registry>/kfp-gpu-<name>:<version>, where
# <version> is the package version (kfp_gpu.__version__) and <registry> comes from
# KFP_GPU_REGISTRY (default ghcr.io/kfp-gpu). The build context is the repository root;
# each image has images/<name>/Dockerfile and its Dockerfile.dockerignore (BuildKit).
# Needs Docker with BuildKit (docker buildx); --dry-run only prints the commands.
set -euo pipefail

cd "$(dirname "$0")/.."
push=1
dry_run=0
names=()
for arg in "$@"; do
  case "$arg" in
    --no-push) push=0 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    trainer|horovod|launcher) names+=("$arg") ;;
    *) echo "unknown argument: $arg (accepted: --no-push, --dry-run, trainer, horovod, launcher)" >&2
       exit 2 ;;
  esac
done
[ "${#names[@]}" -gt 0 ] || names=(launcher trainer horovod)

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' kfp_gpu/__init__.py)"
[ -n "$version" ] || { echo "cannot read __version__ from kfp_gpu/__init__.py" >&2; exit 1; }
registry="${KFP_GPU_REGISTRY:-ghcr.io/kfp-gpu}"
registry="${registry%/}"

run() {
  echo "+ $*"
  if [ "$dry_run" -eq 0 ]; then "$@"; fi
}

for name in "${names[@]}"; do
  ref="${registry}/kfp-gpu-${name}:${version}"
  output="--load"
  [ "$push" -eq 1 ] && output="--push"
  run docker buildx build \
    --file "images/${name}/Dockerfile" \
    --build-arg "KFP_GPU_VERSION=${version}" \
    --tag "${ref}" \
    "${output}" \
    .
  echo "image ${name}: ${ref}"
done
