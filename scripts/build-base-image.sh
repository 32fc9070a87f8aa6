#!/usr/bin/env bash
# Build the Debian base of the CPU-flavour images (scripts/build-images.sh --local):
# debootstrap's minbase variant of Debian 12 (bookworm) with python3, python3-venv and
# ca-certificates, imported into the Docker engine at DOCKER_HOST as one layer.
#
#   scripts/build-base-image.sh [--force] [IMAGE]     # default IMAGE: kfp-gpu-base:bookworm
#
# Why not python:3.11-slim: official bases cannot be pulled where CI runs; debootstrap
# only needs a Debian mirror (DEBIAN_MIRROR, default http://deb.debian.org/debian).
# Needs root (debootstrap) and the debootstrap package. Skips the build when IMAGE exists,
# unless --force. About 1 minute, about 270 MB.
set -euo pipefail
force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
image="${1:-${KFP_GPU_BASE_IMAGE:-kfp-gpu-base:bookworm}}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
if [ "$force" -eq 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "base image $image exists (--force rebuilds it)"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap not installed (apt-get install debootstrap)" >&2; exit 1; }
start=$SECONDS
rootfs="$(mktemp -d /tmp/kfp-gpu-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm minbase -> $rootfs (mirror $mirror)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$rootfs" "$mirror" > "$rootfs.log" 2>&1 \
  || { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV LANG=C.UTF-8' \
  --message "debootstrap --variant=minbase bookworm (scripts/build-base-image.sh)" \
  - "$image" >/dev/null
echo "base image $image built in $((SECONDS - start)) s"
