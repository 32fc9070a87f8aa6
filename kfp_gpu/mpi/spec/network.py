"""RDMA, secondary networks and NCCL settings of the ranks (:class:`Network`).

Upstream names: ``rdma/rdma_shared_device_a`` (Mellanox k8s-rdma-shared-dev-plugin sample
config, NVIDIA Network Operator), ``rdma/hca_shared_devices_a`` (Network Operator
``NicClusterPolicy`` examples); ``k8s.v1.cni.cncf.io/networks`` (Multus pod annotation);
``NCCL_IB_HCA``, ``NCCL_NET_GDR_LEVEL``, ``NCCL_SOCKET_IFNAME``, ``NCCL_DEBUG``,
``NCCL_IB_DISABLE`` (NCCL user guide, "Environment Variables"); ``IPC_LOCK`` (Linux
capability that lets a process pin memory beyond ``RLIMIT_MEMLOCK``, as RDMA verbs' memory
registration does; it reaches root processes only, see
:func:`kfp_gpu.mpi.spec.mpijob.worker_may_run_as_root`); ``KFP_GPU_RDMA`` (this project: the
Worker command checks the memlock limit when it is ``1``, see
:mod:`kfp_gpu.training.worker_start`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kfp_gpu.mpi.spec.checks import choice, positive_int
from kfp_gpu.training.worker_start import RDMA_ENV

MULTUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
#: Istio's per-pod sidecar injection switch (istio.io, "Installing the Sidecar").
ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject"
RDMA_SHARED_DEVICE_A = "rdma/rdma_shared_device_a"
RDMA_HCA_SHARED_DEVICES_A = "rdma/hca_shared_devices_a"
KNOWN_RDMA_RESOURCES = (RDMA_SHARED_DEVICE_A, RDMA_HCA_SHARED_DEVICES_A)
#: NCCL_NET_GDR_LEVEL values (NCCL user guide): path names or the legacy integers 0-5.
NCCL_GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5")
NCCL_DEBUG_LEVELS = ("", "VERSION", "WARN", "INFO", "TRACE")

_RDMA_RESOURCE = re.compile(r"^rdma/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# Multus short form: [namespace/]name[@interface], comma separated.
_MULTUS_ITEM = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
                          r"(@[A-Za-z0-9_.-]{1,15})?$")
_IFNAME_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$")
_HCA_LIST = re.compile(r"^[\^=]?[A-Za-z0-9_]+(:[0-9]+)?(,[A-Za-z0-9_]+(:[0-9]+)?)*$")


@dataclass(frozen=True)
class Network:
    """RDMA, secondary networks and NCCL settings of the ranks.

    Attributes:
        rdma: request the RDMA extended resource and have each Worker check its memlock
            limit at start (:meth:`worker_env`): a non-root rank can register (pin) only as
            much memory as ``RLIMIT_MEMLOCK``, which the node's container runtime sets.
            ``IPC_LOCK`` is added only to Workers that may run as root, the only ones it
            reaches (:func:`kfp_gpu.mpi.spec.mpijob.worker_may_run_as_root`).
        rdma_resource: RDMA extended resource name (``rdma/<name>``).
        rdma_count: quantity of ``rdma_resource`` per Worker (>= 1).
        multus_networks: value of ``k8s.v1.cni.cncf.io/networks`` on Workers and Launcher,
            e.g. ``"rdma-net"`` or ``"ns/net1@net1"``; empty = no annotation.
        nccl_ib_hca: ``NCCL_IB_HCA`` (e.g. ``"mlx5_0,mlx5_1"``); empty = unset.
        nccl_net_gdr_level: ``NCCL_NET_GDR_LEVEL`` (one of :data:`NCCL_GDR_LEVELS`).
        nccl_socket_ifname: ``NCCL_SOCKET_IFNAME`` (e.g. ``"eth0"``, ``"^lo,docker0"``).
        nccl_debug: ``NCCL_DEBUG`` (one of :data:`NCCL_DEBUG_LEVELS`).
        istio_sidecar: let Istio inject its sidecar into Launcher and Workers (default
            False: ``sidecar.istio.io/inject: "false"``, see ``mpijob._mesh_annotations``).
    """

    rdma: bool = False
    rdma_resource: str = RDMA_SHARED_DEVICE_A
    rdma_count: int = 1
    multus_networks: str = ""
    nccl_ib_hca: str = ""
    nccl_net_gdr_level: str = ""
    nccl_socket_ifname: str = ""
    nccl_debug: str = "INFO"
    istio_sidecar: bool = False

    def validate(self) -> None:
        """Raises ValueError naming the field and the accepted values."""
        positive_int("rdma_count", self.rdma_count)
        if not _RDMA_RESOURCE.match(self.rdma_resource or ""):
            raise ValueError(f"invalid rdma_resource {self.rdma_resource!r}; accepted: "
                             f"'rdma/<name>', e.g. {', '.join(KNOWN_RDMA_RESOURCES)}")
        choice("nccl_debug", self.nccl_debug, NCCL_DEBUG_LEVELS)
        if self.nccl_net_gdr_level:
            choice("nccl_net_gdr_level", self.nccl_net_gdr_level, NCCL_GDR_LEVELS)
        if self.nccl_ib_hca and not _HCA_LIST.match(self.nccl_ib_hca):
            raise ValueError(f"invalid nccl_ib_hca {self.nccl_ib_hca!r}; accepted: a comma list "
                             "of HCA names with optional ':port', optionally prefixed by '^' "
                             "or '=', e.g. 'mlx5_0,mlx5_1' or '=mlx5_0:1'")
        if self.nccl_socket_ifname and not _IFNAME_LIST.match(self.nccl_socket_ifname):
            raise ValueError(f"invalid nccl_socket_ifname {self.nccl_socket_ifname!r}; accepted:"
                             " a comma list of interface names or prefixes, optionally "
                             "prefixed by '^' or '=', e.g. 'eth0' or '^lo,docker0'")
        if self.multus_networks and not all(
                _MULTUS_ITEM.match(x.strip()) for x in self.multus_networks.split(",")):
            raise ValueError(f"invalid multus_networks {self.multus_networks!r}; accepted: "
                             "comma list of '[namespace/]name[@interface]'")

    def nccl_env(self) -> dict[str, str]:
        """NCCL environment of the ranks (name -> value), in a stable order.

        ``NCCL_IB_DISABLE=1`` is set when RDMA is off, so NCCL uses sockets instead of
        probing InfiniBand/RoCE verbs it may not be able to use (no RDMA device, no
        memlock room).
        """
        env: dict[str, str] = {}
        if self.nccl_debug:
            env["NCCL_DEBUG"] = self.nccl_debug
        if self.rdma:
            if self.nccl_ib_hca:
                env["NCCL_IB_HCA"] = self.nccl_ib_hca
            if self.nccl_net_gdr_level:
                env["NCCL_NET_GDR_LEVEL"] = self.nccl_net_gdr_level
        else:
            env["NCCL_IB_DISABLE"] = "1"
        if self.nccl_socket_ifname:
            env["NCCL_SOCKET_IFNAME"] = self.nccl_socket_ifname
        return env

    def worker_env(self) -> dict[str, str]:
        """Env the Worker command reads at start (:mod:`kfp_gpu.training.worker_start`):
        ``KFP_GPU_RDMA=1`` with ``rdma``, so it checks ``RLIMIT_MEMLOCK`` before sshd
        starts; empty otherwise."""
        return {RDMA_ENV: "1"} if self.rdma else {}
