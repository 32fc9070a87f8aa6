"""Kubernetes' own rules for the names and labels the CLI writes, checked at compile time.

The rules are those of kubernetes/apimachinery (HEAD eed236ce, v0.37 line):

- ``pkg/api/validate/content/kube.go`` ``IsLabelKey`` (l. 43-72): an optional DNS-1123
  subdomain prefix and ``/``, then a name of at most 63 characters matching
  ``([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`` (l. 24-27); ``IsLabelValue`` (l. 85-93):
  empty, or the same pattern, at most 63 characters (l. 74-78);
- ``pkg/api/validate/content/dns.go``: DNS-1123 label ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, at
  most 63 characters (l. 23-45); DNS-1123 subdomain: labels joined by ``.``, at most 253
  characters (l. 51-60) -- namespaces are DNS-1123 labels, ServiceAccounts and
  PersistentVolumeClaims DNS-1123 subdomains (``pkg/api/validation/generic.go``
  ``NameIsDNSLabel`` / ``NameIsDNSSubdomain``).

Image references follow the distribution/reference grammar in
:class:`kfp_gpu.release.images.ImageSet`. Each check raises ``ValueError`` with one line: what
was wrong, where (``where``), and what is accepted.
"""

from __future__ import annotations

import re

from kfp_gpu import gpu

# The DNS-1123 patterns the MPIJob builder already checks names with (one copy).
from kfp_gpu.mpi.spec.names import DNS1123_LABEL as _DNS1123_LABEL
from kfp_gpu.mpi.spec.names import DNS1123_SUBDOMAIN as _DNS1123_SUBDOMAIN

_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
LABEL_MAX, DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX = 63, 63, 253
#: The most whole GPUs one pod may ask for: the largest GPU nodes hold 8 (HGX/DGX H100,
#: B200) or 16 (DGX-2, HGX-2); a larger count can never be scheduled.
MAX_GPUS_PER_POD = 16


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def dns1123_label(value: str, where: str = "") -> str:
    """``value`` if it is a DNS-1123 label (a namespace, a Service), else ``ValueError``."""
    if (not isinstance(value, str) or len(value) > DNS1123_LABEL_MAX
            or not _DNS1123_LABEL.fullmatch(value)):
        raise ValueError(f"{_at(where)}{value!r} is not a valid name: accepted is a DNS-1123 label "
                         "(lower-case letters, digits and '-', starting and ending with a "
                         "letter or digit, at most 63 characters), e.g. 'team-a'")
    return value


def dns1123_subdomain(value: str, where: str = "") -> str:
    """``value`` if it is a DNS-1123 subdomain (a ServiceAccount, a PVC), else
    ``ValueError``."""
    if (not isinstance(value, str) or len(value) > DNS1123_SUBDOMAIN_MAX
            or not _DNS1123_SUBDOMAIN.fullmatch(value)):
        raise ValueError(f"{_at(where)}{value!r} is not a valid name: accepted is a DNS-1123 "
                         "subdomain (lower-case letters, digits, '-' and '.', starting and "
                         "ending with a letter or digit, at most 253 characters), e.g. "
                         "'pipeline-runner'")
    return value


def label_key(key: str, where: str = "") -> str:
    """``key`` if it is a label key (``[prefix/]name``), else ``ValueError``."""
    prefix, slash, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
    ok = (isinstance(key, str) and key.count("/") <= 1 and len(name) <= LABEL_MAX
          and bool(_LABEL_NAME.fullmatch(name))
          and (not slash or (len(prefix) <= DNS1123_SUBDOMAIN_MAX
                             and bool(_DNS1123_SUBDOMAIN.fullmatch(prefix)))))
    if not ok:
        raise ValueError(f"{_at(where)}{key!r} is not a valid label key: accepted is an optional "
                         "DNS subdomain prefix and '/', then at most 63 letters, digits, '-', "
                         "'_' or '.' starting and ending with a letter or digit, e.g. "
                         "'kai.scheduler/queue'")
    return key


def label_value(value: str, where: str = "") -> str:
    """``value`` if it is a label value (empty, or at most 63 letters, digits, ``-_.``
    starting and ending alphanumeric), else ``ValueError``."""
    if not isinstance(value, str) or len(value) > LABEL_MAX or (
            value and not _LABEL_NAME.fullmatch(value)):
        raise ValueError(f"{_at(where)}{value!r} is not a valid label value: accepted is empty or "
                         "at most 63 letters, digits, '-', '_' or '.' starting and ending with "
                         "a letter or digit (no spaces), e.g. 'NVIDIA-H100-80GB-HBM3'")
    return value


def gpu_request(text: str, where: str = "") -> gpu.GpuRequest:
    """Parse a GPU request given on the command line and check what it writes into pods by
    Kubernetes' rules: node-selector and pod labels (keys and values), and a whole-GPU
    count one node can hold (at most :data:`MAX_GPUS_PER_POD`).

    Raises:
        ValueError: ``text`` is empty (give ``none`` for no GPU, or leave the option out for
            the pipeline's default), does not parse (:func:`kfp_gpu.gpu.parse`, naming the
            accepted forms), or breaks one of the rules above.
    """
    at = f"{where}: " if where else ""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{at}empty GPU request; give e.g. 'gpu:1', 'fraction:0.5' or "
                         "'none', or leave the option out for the pipeline's own request")
    request = gpu.parse(text)
    count = request.count if request.kind == "dra" else request.resource_count
    if request.kind in ("gpu", "shared", "hami", "dra") and count > MAX_GPUS_PER_POD:
        raise ValueError(f"{at}{count} GPUs in one pod can never be scheduled: the largest "
                         f"GPU nodes hold {MAX_GPUS_PER_POD}; for more GPUs use more MPIJob "
                         "Workers (parameter workers) with gpu:8 or fewer each")
    for kind, labels in (("node selector", request.node_selector()),
                         ("pod label", request.labels())):
        for key, value in labels.items():
            label_key(key, f"{at}{text!r}: {kind} key")
            label_value(value, f"{at}{text!r}: {kind} {key}")
    return request


def image_reference(ref: str, where: str = "") -> str:
    """``ref`` if it is an image reference ``name[:tag][@sha256:...]`` by the
    distribution/reference grammar (v0.6.0 regexp.go ``ReferenceRegexp``: the name and tag
    patterns of :mod:`kfp_gpu.release.images`; a digest is ``algorithm:hex``), else
    ``ValueError``."""
    from kfp_gpu.release import images

    name, at, digest = ref.partition("@") if isinstance(ref, str) else ("", "", "")
    head, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:  # no tag: the colon (if any) belonged to host:port
        head, tag = name, ""
    ok = (bool(images._NAME.fullmatch(head)) and len(head) <= images.NAME_TOTAL_LENGTH_MAX
          and (not tag or bool(images._TAG.fullmatch(tag)))
          and (not at or bool(re.fullmatch(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}",
                                            digest))))
    if not ok:
        raise ValueError(f"{_at(where)}{ref!r} is not an image reference: accepted is "
                         "[HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST] (ASCII, no spaces, "
                         "lower-case path), e.g. 'ghcr.io/kfp-gpu/kfp-gpu-horovod:0.1.0'")
    return ref


def extended_resource(name: str, where: str = "") -> str:
    """``name`` if it is an extended resource name, else ``ValueError``: domain-prefixed
    (``DOMAIN/NAME``), outside ``kubernetes.io``, and ``requests.<name>`` a qualified name
    (kubernetes/kubernetes ``pkg/apis/core/v1/helper/helpers.go`` ``IsExtendedResourceName``
    and ``IsNativeResource``; not read at a pinned commit here)."""
    ok = isinstance(name, str) and "/" in name and "kubernetes.io/" not in name
    try:
        label_key(f"requests.{name}")
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{_at(where)}{name!r} is not an extended resource name: accepted is "
                         "DOMAIN/NAME outside kubernetes.io, e.g. 'rdma/rdma_shared_device_a'")
    return name
