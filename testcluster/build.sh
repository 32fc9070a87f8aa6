#!/usr/bin/env bash
# Build the test control plane from its pinned Go modules (one wrapper go.mod per tool in
# go/<tool>/; testcluster/README.md "How the plane is built and run" is the recipe) into a
# cache outside the checkout.
#
#   build.sh [TIER|TOOL ...]   build what is missing: tier1 (default) = k8s etcd kwok
#                              mpi-operator kustomize; tier2 = jobset trainer; tier3 = kueue;
#                              node = kubelet containerd runc cni-plugins coredns
#                              dra-example-driver (a real node: the plane's node tier); all
#   build.sh --dir TOOL        print the folder holding TOOL's binaries (exit 1 if not built)
#
# Each tool's binaries live in $KFP_GPU_CP_CACHE/<tool>-<key>/ where key hashes the tool's
# go.mod, go.sum, this script less its comment lines and `go version`: a version bump builds
# anew, nothing else does. Go's own caches (GOMODCACHE, GOCACHE) stay at their defaults and
# are reused.
# Nothing built here is committed; nothing fetched lands in the checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mods="$here/go"
cache="${KFP_GPU_CP_CACHE:-$HOME/.cache/kfp-gpu/control-plane}"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -modcacherw"
jobs="${KFP_GPU_CP_JOBS:-$(nproc)}"

tier1=(k8s etcd kwok mpi-operator kustomize)
tier2=(jobset trainer)
tier3=(kueue)
node=(kubelet containerd runc cni-plugins coredns dra-example-driver)

moddir() {  # moddir TOOL: the wrapper module's folder (kubelet and kube-proxy come from k8s's)
  case "$1" in kubelet) echo "$mods/k8s" ;; *) echo "$mods/$1" ;; esac
}

key() {  # key TOOL: the cache key of TOOL's binaries
  # go.mod and build.sh without their comment lines: a comment edit keeps every cache
  { echo "$1"; grep -v '^[[:space:]]*//' "$(moddir "$1")/go.mod"; cat "$(moddir "$1")/go.sum"
    grep -v '^[[:space:]]*#' "$here/build.sh"
    go version; } | sha256sum | cut -c1-16
}
dir_of() { echo "$cache/$1-$(key "$1")"; }

build_tool() {  # build_tool TOOL: go build TOOL's main packages into its cache folder
  local tool="$1" out tmp t0=$SECONDS
  out="$(dir_of "$tool")"
  if [ -f "$out/.complete" ]; then echo "  $tool: cached ($out)"; return 0; fi
  tmp="$out.tmp.$$"; rm -rf "$tmp"; mkdir -p "$tmp"
  local pkgs=() ldflags="-s -w" tags="" cgo="${CGO_ENABLED:-}"
  case "$tool" in
    k8s|kubelet)
      local v p=k8s.io/component-base/version
      v="$(sed -n 's#^\s*\(require \)\{0,1\}k8s.io/kubernetes \(v[0-9.]*\).*#\2#p' "$mods/k8s/go.mod" | head -1)"
      local minor="${v#v1.}"; minor="${minor%%.*}"
      # Version stamping as the Kubernetes release build does (hack/lib/version.sh): without
      # it /version reports v0.0.0-master, which Kueue and kwokctl parse.
      ldflags+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
      ldflags+=" -X $p.buildDate=1970-01-01T00:00:00Z"
      ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1"
      ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
      if [ "$tool" = kubelet ]; then
        pkgs=(k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
      else
        pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
              k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
      fi ;;
    etcd) pkgs=(go.etcd.io/etcd/server/v3) ;;
    kwok) pkgs=(sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl) ;;
    mpi-operator) pkgs=(github.com/kubeflow/mpi-operator/cmd/mpi-operator) ;;
    kustomize)
      # Version stamping as kustomize's release build does (its kustomize.Dockerfile and
      # releasing/ ldflags): without it `kustomize version` prints (devel).
      local kv
      kv="$(sed -n 's#^\s*\(require \)\{0,1\}sigs.k8s.io/kustomize/kustomize/v5 \(v[0-9.]*\).*#\2#p' "$mods/kustomize/go.mod" | head -1)"
      ldflags+=" -X sigs.k8s.io/kustomize/api/provenance.version=$kv"
      pkgs=(sigs.k8s.io/kustomize/kustomize/v5) ;;
    jobset) pkgs=(sigs.k8s.io/jobset) ;;
    trainer) pkgs=(github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager) ;;
    kueue) pkgs=(sigs.k8s.io/kueue/cmd/kueue) ;;
    containerd)
      # No btrfs/devmapper/zfs snapshotters (overlayfs and native only), as containerd's
      # static release build does (its Makefile's STATIC build tags).
      tags="no_btrfs no_devmapper no_zfs"
      pkgs=(github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr
            github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2) ;;
    runc)
      # runc's nsenter is C (cgo); the seccomp tag links libseccomp (Debian's libseccomp-dev)
      # so RuntimeDefault profiles, which PSA `restricted` requires, are applied (runc's
      # Makefile default BUILDTAGS=seccomp).
      cgo=1; tags="seccomp"; ldflags=""
      pkgs=(github.com/opencontainers/runc) ;;
    cni-plugins)
      pkgs=(github.com/containernetworking/plugins/plugins/main/bridge
            github.com/containernetworking/plugins/plugins/main/loopback
            github.com/containernetworking/plugins/plugins/ipam/host-local
            github.com/containernetworking/plugins/plugins/meta/portmap) ;;
    coredns) pkgs=(github.com/coredns/coredns) ;;
    dra-example-driver) pkgs=(sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin) ;;
    *) echo "unknown tool '$tool' (known: ${tier1[*]} ${tier2[*]} ${tier3[*]} ${node[*]})" >&2; return 2 ;;
  esac
  echo "  $tool: building ${#pkgs[@]} binaries (go build -p $jobs)"
  (cd "$(moddir "$tool")" && CGO_ENABLED=$cgo nice go build -p "$jobs" -trimpath -tags "$tags" \
     -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  # Binaries named after their main package's folder; etcd's and jobset's main is the
  # module root, so go names them after the last path element.
  for n in v3 server; do [ -f "$tmp/$n" ] && mv "$tmp/$n" "$tmp/etcd"; done
  [ "$tool" = cni-plugins ] && mkdir "$tmp/cni" && mv "$tmp"/{bridge,loopback,host-local,portmap} "$tmp/cni/"
  true
  { go version; echo "built $(date -u +%FT%TZ) in $((SECONDS - t0)) s"; } > "$tmp/.complete"
  rm -rf "$out"; mv "$tmp" "$out"
  echo "  $tool: built in $((SECONDS - t0)) s -> $out"
}

if [ "${1:-}" = "--dir" ]; then
  d="$(dir_of "$2")"; [ -f "$d/.complete" ] || exit 1; echo "$d"; exit 0
fi
command -v go >/dev/null || { echo "go not found: the control plane is built with the go command" >&2; exit 3; }
targets=()
[ "$#" -eq 0 ] && set -- tier1
for a in "$@"; do
  case "$a" in
    tier1) targets+=("${tier1[@]}") ;;
    tier2) targets+=("${tier2[@]}") ;;
    tier3) targets+=("${tier3[@]}") ;;
    node) targets+=("${node[@]}") ;;
    all) targets+=("${tier1[@]}" "${tier2[@]}" "${tier3[@]}" "${node[@]}") ;;
    *) targets+=("$a") ;;
  esac
done
for t in "${targets[@]}"; do build_tool "$t"; done
