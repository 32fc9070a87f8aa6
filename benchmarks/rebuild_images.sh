#!/usr/bin/env bash
# Image rebuild time after a one-line change to one .py file.
#
#   bash benchmarks/rebuild_images.sh [--rev REV]
#
# Builds the three images as `scripts/build-images.sh --local` does (CPU flavour, classic
# builder, build/wheelhouse, kfp-gpu-base:bookworm) on the engine at DOCKER_HOST: once to
# bring the layer cache up to the current sources (not timed), then again after writing
# one new line into a .py file under kfp_gpu/ (each image timed), then removes that file.
# --rev REV: use the Dockerfiles of git revision REV (e.g. one from before the dependency
# layers moved above the source) with today's sources. Needs the base image and the
# wheelhouse (scripts/build-base-image.sh, scripts/build-wheelhouse.sh) and root.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=""
[ "${1:-}" = "--rev" ] && rev="${2:?--rev needs a revision}"
dfdir=images
if [ -n "$rev" ]; then
  dfdir="$(mktemp -d)"
  for n in launcher trainer horovod; do git show "$rev:images/$n/Dockerfile" > "$dfdir/$n"; done
fi
export DOCKER_BUILDKIT=0
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' kfp_gpu/__init__.py)"
build() {  # NAME: one image, CPU flavour
  local n=$1 f=images/$1/Dockerfile
  [ "$dfdir" = images ] || f="$dfdir/$n"
  local args=(--file "$f" --build-arg "KFP_GPU_VERSION=$version"
              --build-arg WHEELHOUSE=build/wheelhouse --build-arg BASE_IMAGE=kfp-gpu-base:bookworm)
  case $n in
    trainer) args+=(--build-arg TENSORFLOW_PACKAGE=tensorflow-cpu) ;;
    horovod) args+=(--build-arg BUILD_BASE_IMAGE=kfp-gpu-base:bookworm --build-arg FLAVOUR=cpu
                    --build-arg TENSORFLOW_PACKAGE=tensorflow-cpu) ;;
  esac
  docker build --quiet --network host --tag "ghcr.io/kfp-gpu/kfp-gpu-$n:$version" "${args[@]}" . \
    > /dev/null
}
for n in launcher trainer horovod; do build "$n"; done  # the cache at today's sources
probe=kfp_gpu/_rebuild_probe.py
trap 'rm -f "$probe"' EXIT
echo "# rebuild probe $(date +%s%N)" > "$probe"
total=0
for n in launcher trainer horovod; do
  start=$(date +%s%N)
  build "$n"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  total=$((total + ms))
  printf '%-8s %6.1f s\n' "$n" "$(echo "$ms / 1000" | bc -l)"
done
printf 'all      %6.1f s  (Dockerfiles: %s; %s, %s CPUs)\n' "$(echo "$total / 1000" | bc -l)" \
  "${rev:-working tree}" "$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)" "$(nproc)"
