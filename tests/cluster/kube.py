"""Small Kubernetes helpers for the cluster tests (the official ``kubernetes`` client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tests.support import waiting

T = TypeVar("T")


def core(api):
    from kubernetes import client

    return client.CoreV1Api(api)


def custom(api):
    from kubernetes import client

    return client.CustomObjectsApi(api)


def create_namespace(api, ns: str, labels: dict | None = None) -> None:
    core(api).create_namespace({"metadata": {"name": ns, "labels": labels or {}}})


def delete_namespace(api, ns: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core(api).delete_namespace(ns)
    except ApiException as e:
        if e.status != 404:
            raise


def wait_for(fn: Callable[[], T], timeout: float = 60.0, what: str = "condition",
             interval: float = 0.3) -> T:
    """:func:`tests.support.waiting.wait_for` at the plane's pace (60 s, every 0.3 s): call ``fn``
    until it returns something truthy; return that, or raise after timeout."""
    return waiting.wait_for(fn, timeout, what, interval)


def pods(api, ns: str, selector: str = "") -> list:
    return core(api).list_namespaced_pod(ns, label_selector=selector).items


def annotate_pod(api, ns: str, name: str, annotations: dict[str, str]) -> None:
    """Merge-patch annotations onto a live pod (kwok re-evaluates its stages)."""
    core(api).patch_namespaced_pod(name, ns, {"metadata": {"annotations": annotations}})


def events(api, ns: str) -> list:
    return core(api).list_namespaced_event(ns).items


def get_custom(api, group: str, version: str, ns: str, plural: str, name: str) -> dict | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return custom(api).get_namespaced_custom_object(group, version, ns, plural, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def conditions(obj: dict | None) -> dict[str, dict]:
    """``{type: condition}`` of an object's status.conditions."""
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}
