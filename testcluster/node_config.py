"""Configuration of the plane's real node (the node tier, :mod:`testcluster.node`): pure
builders, no I/O. Each returns the text or document one daemon reads; every field is named
after the upstream type that defines it (read at the versions the wrapper go.mod files in
testcluster/go pin):

- containerd v2.4.2: config version 3, internal/cri/config/config.go (``restrict_oom_score_adj``,
  ``netns_mounts_under_state_dir``, ``cdi_spec_dirs``, ``cni.bin_dirs``/``conf_dir``,
  ``pinned_images.sandbox``; the default sandbox image ``registry.k8s.io/pause:3.10.2``);
- kubelet v1.36.3: k8s.io/kubelet/config/v1beta1 KubeletConfiguration;
- kube-proxy v1.36.3: k8s.io/kube-proxy/config/v1alpha1 KubeProxyConfiguration;
- CNI plugins v1.10.0: plugins/main/bridge, plugins/ipam/host-local, plugins/meta/portmap;
- CoreDNS v1.15.0: plugin/kubernetes (``kubeconfig``, ``pods insecure``), plugin/bind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: The real node's name in the plane (one real node per plane).
NODE_NAME = "kfp-gpu-real-node"
#: Taint the real node registers with: only pods that tolerate it run there, so the kwok
#: tests' pods never land on a node that really starts containers.
REAL_NODE_TAINT = {"key": "kfp-gpu.test/real-node", "value": "true", "effect": "NoSchedule"}
#: Label of the real node (the kwok nodes carry ``kfp-gpu.test/fake-node``).
REAL_NODE_LABEL = "kfp-gpu.test/real-node"
#: containerd's default sandbox image (internal/cri/config/config.go DefaultSandboxImage);
#: the tier builds it from Kubernetes' own build/pause/linux/pause.c.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"
#: CNI network name (also the prefix of libcni's cache files in /var/lib/cni/results).
CNI_NETWORK = "kfp-gpu"
#: The kubelet's KubeletConfiguration.podPidsLimit etc. are left at their defaults; these
#: six sysctls are what kubelet's container manager sets when protectKernelDefaults is false
#: (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables): recorded before the
#: kubelet starts and restored at down.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
                   "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes")


@dataclass(frozen=True)
class Addresses:
    """The node's network: a veth pair between the host and the node's network namespace
    (``host_ip``/30 <-> ``node_ip``/30) and the pods' bridge subnet inside it.

    ``index`` (0-63) keeps two planes on one machine apart: 10.213.<index*4>.0/30 for the
    veth, 10.214.<index>.0/24 for pods.
    """

    index: int

    def __post_init__(self):
        if not 0 <= self.index < 64:
            raise ValueError(f"node network index must be 0-63, got {self.index}")

    @property
    def host_ip(self) -> str:
        return f"10.213.{self.index * 4}.1"

    @property
    def node_ip(self) -> str:
        return f"10.213.{self.index * 4}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.214.{self.index}.0/24"

    @property
    def netns(self) -> str:
        return f"kfpgpu-node{self.index}"

    @property
    def host_if(self) -> str:
        return f"kfpgpu{self.index}h"


@dataclass(frozen=True)
class Paths:
    """Where the node keeps its state: everything under one folder (``root``)."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_sock(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def cdi(self) -> Path:
        return self.root / "cdi"

    @property
    def config(self) -> Path:
        return self.root / "config"


#: The longest path a unix socket may have: ``sockaddr_un.sun_path`` holds 108 bytes with
#: the terminating NUL (unix(7)); a longer one makes the bind fail.
UNIX_PATH_MAX = 107
#: The kubelet's hard eviction thresholds for disk, in percent of the filesystem (the node's
#: kubelet, containerd and plane share one: the kubelet finds no separate imagefs). Below
#: it the eviction manager first deletes every image no running container uses
#: (pkg/kubelet/eviction/eviction_manager.go ``reclaimNodeLevelResources``): the imported
#: images are in no registry, so :func:`testcluster.node_images.import_images` refuses to
#: import one that would take the disk under it.
DISK_EVICTION_PERCENT = 1
#: dra-example-driver's driver name (its DeviceClass is named after it).
DRA_DRIVER = "gpu.example.com"


def sockets(paths: Paths) -> list[Path]:
    """The unix sockets the node binds under ``paths.root``: containerd's and its ttrpc
    socket, and the DRA kubelet plugin's registrar and service sockets
    (sigs.k8s.io/dra-example-driver v0.2.1 ``cmd/dra-example-kubeletplugin/health.go``:
    ``<registrar dir>/<driver>-reg.sock``, ``<plugins dir>/<driver>/dra.sock``)."""
    return [paths.containerd_sock, Path(f"{paths.containerd_sock}.ttrpc"),
            paths.kubelet_root / "plugins_registry" / f"{DRA_DRIVER}-reg.sock",
            paths.kubelet_root / "plugins" / DRA_DRIVER / "dra.sock"]


def too_long_sockets(paths: Paths) -> list[str]:
    """The sockets of :func:`sockets` whose path is longer than :data:`UNIX_PATH_MAX`
    bytes, as ``"PATH (N bytes)"``; [] when the node's folder is short enough."""
    return [f"{p} ({len(str(p).encode())} bytes)" for p in sockets(paths)
            if len(str(p).encode()) > UNIX_PATH_MAX]


def _toml_str(s: str | Path) -> str:
    return json.dumps(str(s))  # a JSON string is a valid TOML basic string


def containerd_config(paths: Paths, runc: Path, cni_bin: Path) -> str:
    """containerd v2 config (version 3) for the node: state, sockets and images under
    ``paths.containerd``; the CRI plugin with runc at ``runc`` (cgroupfs: the machine has
    cgroup v1 and no systemd), ``restrict_oom_score_adj`` (without CAP_SYS_RESOURCE runc
    cannot lower a container's oom_score_adj below containerd's: "can't get final child's
    PID from pipe: EOF"), pod network namespaces under the state folder, CDI specs in
    ``paths.cdi`` (where dra-example-driver writes them), NRI off (it would make
    /var/run/nri)."""
    c = paths.containerd
    rt = "plugins.'io.containerd.cri.v1.runtime'"
    return "\n".join([
        "version = 3",
        f"root = {_toml_str(c / 'root')}",
        f"state = {_toml_str(c / 'state')}",
        "[grpc]",
        f"  address = {_toml_str(paths.containerd_sock)}",
        "[ttrpc]",
        f"  address = {_toml_str(str(paths.containerd_sock) + '.ttrpc')}",
        "[plugins.'io.containerd.internal.v1.opt']",
        f"  path = {_toml_str(c / 'opt')}",
        "[plugins.'io.containerd.nri.v1.nri']",
        "  disable = true",
        f"[{rt}]",
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        f"  cdi_spec_dirs = [{_toml_str(paths.cdi)}]",
        f"[{rt}.cni]",
        f"  bin_dirs = [{_toml_str(cni_bin)}]",
        f"  conf_dir = {_toml_str(paths.cni_conf)}",
        f"[{rt}.containerd]",
        "  default_runtime_name = 'runc'",
        f"[{rt}.containerd.runtimes.runc]",
        "  runtime_type = 'io.containerd.runc.v2'",
        f"[{rt}.containerd.runtimes.runc.options]",
        f"  BinaryName = {_toml_str(runc)}",
        "  SystemdCgroup = false",
        "[plugins.'io.containerd.cri.v1.images']",
        "  snapshotter = 'overlayfs'",
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f"  sandbox = {_toml_str(PAUSE_IMAGE)}",
        "",
    ])


def cni_conflist(paths: Paths, addrs: Addresses) -> dict:
    """The pods' network: a ``cni0`` bridge that is the pods' gateway, host-local IPAM over
    ``addrs.pod_cidr`` (its state under ``paths.cni_ipam``), masquerade for traffic that
    leaves the pod subnet (to the API server on the host), hairpin for a pod reaching
    itself through a Service; portmap for hostPort."""
    return {
        "cniVersion": "1.0.0", "name": CNI_NETWORK,
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": True,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": addrs.pod_cidr}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(paths.cni_ipam)}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(paths: Paths, addrs: Addresses, *, ca_file: Path, cgroup_root: str,
                   oom_score_adj: int) -> dict:
    """KubeletConfiguration (kubelet.config.k8s.io/v1beta1) for the node.

    cgroup v1 without systemd: ``failCgroupV1: false`` (1.35+ refuses v1 otherwise) and
    ``cgroupDriver: cgroupfs``; pods under ``cgroup_root`` so down removes exactly them.
    ``oomScoreAdj`` is the current value (raising our own priority needs
    CAP_SYS_RESOURCE). Image garbage collection is off (100 %): the imported images
    are not in any registry to pull again; only disk pressure (under
    :data:`DISK_EVICTION_PERCENT`) still deletes them. Authentication: x509 clients of the plane's
    CA and anonymous (the API server calls the kubelet for logs without a client
    certificate: kwokctl passes no --kubelet-client-certificate), AlwaysAllow: the
    kubelet listens only inside the node's network namespace.
    """
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": addrs.node_ip, "port": 10250, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True, "enforceNodeAllocatable": ["pods"],
        "containerRuntimeEndpoint": f"unix://{paths.containerd_sock}",
        "clusterDNS": [addrs.node_ip], "clusterDomain": "cluster.local",
        "resolvConf": str(paths.config / "resolv.conf"),
        "podLogsDir": str(paths.pod_logs),
        "oomScoreAdj": oom_score_adj, "failSwapOn": False, "protectKernelDefaults": False,
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi",
                         "nodefs.available": f"{DISK_EVICTION_PERCENT}%",
                         "imagefs.available": f"{DISK_EVICTION_PERCENT}%",
                         "nodefs.inodesFree": "1%"},
        "maxPods": 40, "serializeImagePulls": False, "hairpinMode": "hairpin-veth",
        "registerNode": True, "registerWithTaints": [REAL_NODE_TAINT],
        "nodeStatusUpdateFrequency": "10s", "nodeStatusReportFrequency": "1m",
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(addrs: Addresses, kubeconfig: Path, oom_score_adj: int) -> dict:
    """KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1): iptables mode inside the
    node's network namespace; conntrack sysctls left alone (``maxPerCore: 0``: they are
    the host's, not the namespace's)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "hostnameOverride": NODE_NAME, "bindAddress": addrs.node_ip,
        "clusterCIDR": addrs.pod_cidr, "oomScoreAdj": oom_score_adj,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "conntrack": {"maxPerCore": 0, "min": 0},
        "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
    }


def corefile(addrs: Addresses, kubeconfig: Path) -> str:
    """CoreDNS's Corefile: Service and pod names of ``cluster.local`` from the plane's API
    (plugin/kubernetes with a kubeconfig: CoreDNS runs as a process of the node, not a
    pod), bound to the node's address, which is the kubelet's ``clusterDNS``. No
    ``forward``: nothing outside the cluster resolves (the machine has no other DNS to
    offer pods)."""
    return (f".:53 {{\n    bind {addrs.node_ip}\n    errors\n"
            f"    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n"
            f"        kubeconfig {kubeconfig}\n        pods insecure\n"
            f"        fallthrough in-addr.arpa ip6.arpa\n    }}\n    cache 5\n}}\n")


def node_kubeconfig(admin: dict, host_ip: str) -> dict:
    """The plane's admin kubeconfig re-pointed for a process in a network namespace (the
    node's daemons, an operator's: :mod:`testcluster.netns`): the API server on
    the host end of the veth (it binds 0.0.0.0), its certificate checked for
    ``localhost`` (kwokctl's certificate names 127.0.0.1 and localhost:
    pkg/kwokctl/pki/pki.go DefaultAltNames)."""
    import copy

    k = copy.deepcopy(admin)
    for c in k["clusters"]:
        port = c["cluster"]["server"].rsplit(":", 1)[1]
        c["cluster"]["server"] = f"https://{host_ip}:{port}"
        c["cluster"]["tls-server-name"] = "localhost"
    return k
