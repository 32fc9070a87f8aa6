"""Pod statuses of Workers that do not start, as the real components write them, for the
API double to serve (``ScriptedController(pending=...)``, tests/doubles/k8s_resources.py)
and the tests to compare against."""

from __future__ import annotations

#: kube-scheduler v1.36.3's words for Workers asking more GPUs than any node has (read on
#: the test control plane: tests/cluster/test_fidelity.py pins them)
UNSCHEDULABLE = {"phase": "Pending", "conditions": [{
    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
    "message": "0/7 nodes are available: 1 node(s) were unschedulable, 6 Insufficient "
               "nvidia.com/gpu. no new claims to deallocate, preemption: 0/7 nodes are "
               "available: 7 Preemption is not helpful for scheduling."}]}
#: The kubelet's status for a Worker whose image cannot be pulled.
IMAGE_PULL = {"phase": "Pending",
              "conditions": [{"type": "PodScheduled", "status": "True"}],
              "containerStatuses": [{"name": "worker", "ready": False, "restartCount": 0,
                                     "state": {"waiting": {
                                         "reason": "ImagePullBackOff",
                                         "message": 'Back-off pulling image "horovod:nope"'}}}]}
