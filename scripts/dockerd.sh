#!/usr/bin/env bash
# Start / stop a private Docker engine (Debian's docker.io, dockerd) for the container
# tests and the local image builds: everything it writes lives in one temporary folder
# (images too, unless KFP_GPU_DOCKERD_DATA_ROOT names a lasting folder for them, below).
#
#   eval "$(scripts/dockerd.sh start)"     # prints: export DOCKER_HOST=unix://DIR/docker.sock
#   scripts/dockerd.sh stop [DIR]          # DIR defaults to the one in $DOCKER_HOST
#
# The daemon config is scripts/dockerd.json with @DIR@ replaced: data-root, exec-root,
# pidfile and the unix socket in DIR, default ulimits nofile/nproc 10000 (without them
# containers fail to start where raising rlimits is not permitted). The engine is stopped
# by the pid in its pidfile, then DIR is removed. Needs root (dockerd).
# KFP_GPU_DOCKERD_SHARED_HOST=1: for a second engine on a host that already runs one. Its
# default bridge is then a bridge of its own (made here, removed by stop), and it leaves
# iptables alone ("iptables": false), so the first engine's docker0 and chains stay as
# they are. (Never "bridge": "none": dockerd then DELETES docker0, moby
# daemon/daemon_unix.go removeDefaultBridgeInterface.) Its containers reach neither each
# other across bridges nor the outside; builds use --network host.
# KFP_GPU_DOCKERD_DATA_ROOT=PATH: keep images and the build cache in PATH instead of
# DIR/data, so that a second start finds the layers of the first (.ci/run uses it, keyed
# by the base image's recipe: a warm CI machine rebuilds only the changed layers). One
# engine per PATH at a time (PATH/engine.pid): while another dockerd uses PATH, a start
# falls back to DIR/data and says so. stop leaves PATH in place.
# Logs: DIR/dockerd.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

start() {
  command -v dockerd >/dev/null || { echo "dockerd not found (apt-get install docker.io)" >&2; exit 1; }
  local dir
  dir="$(mktemp -d /tmp/kfp-gpu-dockerd.XXXXXX)"
  local data_root="${KFP_GPU_DOCKERD_DATA_ROOT:-}"
  if [ -n "$data_root" ]; then
    mkdir -p "$data_root"
    data_root="$(cd "$data_root" && pwd)"
    local other
    other="$(cat "$data_root/engine.pid" 2>/dev/null || true)"
    if [ -n "$other" ] && [ "$(cat "/proc/$other/comm" 2>/dev/null)" = dockerd ]; then
      echo "$data_root is in use by dockerd $other: this engine keeps its data in $dir/data" >&2
      data_root=""
    else
      echo "$data_root" > "$dir/data-root"
    fi
  fi
  if [ "${KFP_GPU_DOCKERD_SHARED_HOST:-0}" = 1 ]; then
    local br="kgd${dir##*.}"
    ip link add name "$br" type bridge
    ip addr add "10.213.$((RANDOM % 250)).1/24" dev "$br"
    ip link set "$br" up
    echo "$br" > "$dir/bridge"
    sed "s|@DIR@|$dir|g; s|^{|{\n  \"bridge\": \"$br\", \"iptables\": false, \"ip-masq\": false,|" \
      "$here/dockerd.json" > "$dir/daemon.json"
  else
    sed "s|@DIR@|$dir|g" "$here/dockerd.json" > "$dir/daemon.json"
  fi
  if [ -n "$data_root" ]; then
    sed -i "s|\"data-root\": \"[^\"]*\"|\"data-root\": \"$data_root\"|" "$dir/daemon.json"
  fi
  # setsid: the engine outlives this script, and a Ctrl-C in the caller's terminal does
  # not reach it; it is stopped by its pid only.
  setsid dockerd --config-file "$dir/daemon.json" > "$dir/dockerd.log" 2>&1 < /dev/null &
  local sock="unix://$dir/docker.sock" i
  for i in $(seq 1 120); do
    if DOCKER_HOST="$sock" docker version >/dev/null 2>&1; then
      [ -z "$data_root" ] || cp "$dir/docker.pid" "$data_root/engine.pid"
      echo "dockerd up in $((i / 2)) s: pid $(cat "$dir/docker.pid"), folder $dir${data_root:+, data $data_root}" >&2
      echo "export DOCKER_HOST=$sock"
      return 0
    fi
    sleep 0.5
  done
  echo "dockerd did not answer within 60 s; last log lines:" >&2
  tail -20 "$dir/dockerd.log" >&2
  stop "$dir"
  exit 1
}

stop() {
  local dir="${1:-}"
  if [ -z "$dir" ]; then
    case "${DOCKER_HOST:-}" in
      unix:///tmp/kfp-gpu-dockerd.*/docker.sock) dir="$(dirname "${DOCKER_HOST#unix://}")" ;;
      *) echo "stop: give the engine's folder (DOCKER_HOST=${DOCKER_HOST:-unset} is not one of ours)" >&2
         exit 2 ;;
    esac
  fi
  case "$dir" in
    /tmp/kfp-gpu-dockerd.*) ;;
    *) echo "stop: $dir is not a folder made by scripts/dockerd.sh start" >&2; exit 2 ;;
  esac
  local pid i
  pid="$(cat "$dir/docker.pid" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "dockerd $pid still running after 30 s; sending SIGKILL" >&2
      kill -KILL "$pid" || true
    fi
    echo "dockerd $pid stopped" >&2
  fi
  # Mounts the engine left (overlay layers, netns, shm) before removing the folder.
  local roots=("$dir")
  [ ! -f "$dir/data-root" ] || roots+=("$(cat "$dir/data-root")")
  { for r in "${roots[@]}"; do grep -o " $r/[^ ]*" /proc/self/mounts || true; done; } \
    | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  if [ -f "$dir/bridge" ]; then ip link delete "$(cat "$dir/bridge")" type bridge || true; fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop [DIR]" >&2; exit 2 ;;
esac
