"""Doctor, subject KAI Scheduler: is it running, and does the queue the GPU pods land in
exist? Its Queue CRD (:mod:`.crds`) shows it is installed, not that a scheduler runs.

Names (NVIDIA/KAI-Scheduler, kai-scheduler/KAI-Scheduler at v0.17):
- scheduler name ``kai-scheduler`` (pkg/common/constants/constants.go
  ``DefaultSchedulerName``), its Deployment ``<scheduler name>-<shard>``
  (pkg/operator/operands/scheduler/resources_for_shard.go ``DeploymentName``; the chart's
  shard is ``default``, deployments/kai-scheduler/templates/default-shard.yaml), so
  ``kai-scheduler-default``, in the namespace ``kai-scheduler`` by default;
- Queues ``scheduling.run.ai/v2`` ``queues`` (cluster-scoped,
  deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml); a pod without the queue
  label ``kai.scheduler/queue`` goes to ``default-queue`` (:meth:`.model.Needs.kai_queue`).

KFP 2.17 writes no ``schedulerName`` (the recorded KFP 2.17.0 pods have
``default-scheduler``), so KAI must be the namespace's scheduler by other means; doctor
says so as a warning.
"""

from __future__ import annotations

from kfp_gpu.cluster.doctor.model import (
    ClusterFacts,
    KaiFacts,
    Needs,
    Report,
    api_error,
    list_named,
)

SCHEDULER_NAME = "kai-scheduler"
#: The scheduler Deployment of the chart's default shard.
SCHEDULER_DEPLOYMENT = f"{SCHEDULER_NAME}-default"
QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL = "scheduling.run.ai", "v2", "queues"


def kai_section(rep: Report, facts: ClusterFacts, needs: Needs) -> None:
    """The KAI Scheduler table; problems when KAI pods find no ready scheduler or no queue."""
    kai = facts.kai
    if kai is None or not needs.kai:
        return
    rows = [(f"Deployment {ns}/{name}", f"{ready} ready") for ns, name, ready in kai.deployments]
    if kai.error:
        rows.append((f"Deployment {SCHEDULER_DEPLOYMENT}", f"? {kai.error}"))
    elif not kai.deployments:
        rows.append((f"Deployment {SCHEDULER_DEPLOYMENT}", "not found in any namespace"))
    queue = needs.kai_queue()
    present = kai.queues.get(queue)
    rows.append((f"Queue {queue}", {True: "present", False: "not found"}.get(present, "?")))
    rep.sections.append(("KAI Scheduler", ("object", "status"), rows))
    if not kai.error and not any(ready for _, _, ready in kai.deployments):
        rep.problems.append(f"the KAI Scheduler is not running (no ready Deployment "
                            f"{SCHEDULER_DEPLOYMENT}): pods asking for a GPU share "
                            f"({', '.join(sorted(needs.annotations)) or needs.request}) would "
                            "stay Pending or run without a GPU; install KAI (helm chart "
                            "kai-scheduler)")
    if present is False:
        rep.problems.append(f"the KAI queue {queue!r} does not exist ({QUEUE_PLURAL}."
                            f"{QUEUE_GROUP}); create it or name an existing one with "
                            "queue=Q in the GPU request")
    rep.warnings.append(f"KFP writes no schedulerName: the GPU-share pods reach "
                        f"{SCHEDULER_NAME} only if it schedules the run's namespace by default")


def read_kai(api_client, facts: ClusterFacts, needs: Needs | None = None) -> None:
    """List the scheduler Deployments (all namespaces) and GET the needed queue into
    ``facts.kai`` (never raises). Nothing is read when ``needs`` asks for no KAI pods."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    if needs is None or not needs.kai:
        return
    kai = KaiFacts()
    try:
        for item in list_named(client.AppsV1Api(api_client).list_deployment_for_all_namespaces,
                               SCHEDULER_DEPLOYMENT):
            kai.deployments.append((item["metadata"].get("namespace", ""),
                                    item["metadata"]["name"],
                                    int((item.get("status") or {}).get("readyReplicas") or 0)))
        kai.read = True
    except ApiException as e:
        kai.error = api_error(e)
    except Exception as e:  # noqa: BLE001 - doctor reports, never raises
        kai.error = str(e)
    queue = needs.kai_queue()
    try:
        client.CustomObjectsApi(api_client).get_cluster_custom_object(
            QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL, queue, _request_timeout=30)
        kai.queues[queue] = True
    except ApiException as e:
        kai.queues[queue] = False if e.status == 404 else None
    except Exception:  # noqa: BLE001
        kai.queues[queue] = None
    facts.kai = kai
