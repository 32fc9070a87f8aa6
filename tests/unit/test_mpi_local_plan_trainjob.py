"""The local runner's TrainJob side, pure parts: plan (TrainJob + runtime -> containers),
the strategic merge of runtimePatches, TrainJob status, the workspace files, the CLI's
loading of job and runtime.

Expected values are what kubeflow/trainer v2.3.0 (pkg/runtime/framework/plugins/mpi/mpi.go,
plugins/jobset/jobset.go and builder.go, pkg/runtime/core/trainingruntime.go) and JobSet
v0.12.0 make of the same objects; the runtime is the project's own
manifests/trainer/horovod-runtime.yaml, read from the file (not restated here). The Docker
side runs in tests/containers/test_local_trainjob.py.
"""

from __future__ import annotations

import copy
import os
import stat

import pytest
import yaml

from kfp_gpu.cli import run_local as local_cli
from kfp_gpu.mpi.local import plan_trainjob as lpt
from kfp_gpu.mpi.local import runner as local_runner
from kfp_gpu.mpi.local import status as local_status
from kfp_gpu.mpi.local import workspace as local_workspace
from kfp_gpu.mpi.local.model import Mount
from kfp_gpu.mpi.spec import mpijob, trainjob
from kfp_gpu.mpi.spec import strategic_merge as smp
from kfp_gpu.mpi.spec.options import MPIJobOptions
from tests.support.mpijob_options import PROGRAM, SETTINGS


@pytest.fixture(scope="module")
def runtime() -> dict:
    return yaml.safe_load(local_cli.DEFAULT_RUNTIME_FILE.read_text(encoding="utf-8"))


def built(**kw) -> dict:
    return trainjob.build(MPIJobOptions.from_settings(**{**SETTINGS, "name": "tj-ab12", **kw}))


def _rjob(runtime: dict, name: str) -> dict:
    return next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
                if r["name"] == name)


def _runtime_node_container(runtime: dict, rjob: str) -> dict:
    return _rjob(runtime, rjob)["template"]["spec"]["template"]["spec"]["containers"][0]


def test_plan_of_the_builders_trainjob(runtime):
    job = built()
    p = lpt.plan(job, runtime)
    assert p.kind == "TrainJob" and p.network == "kfp-gpu-ml-tj-ab12"
    # runLauncherAsNode: numNodes 3 -> 2 node pods + the launcher, 2 slots (numProcPerNode)
    assert [w.name for w in p.workers] == ["tj-ab12-node-0-0", "tj-ab12-node-0-1"]
    assert p.launcher.name == "tj-ab12-launcher-0-0"
    assert p.hostfile == ("tj-ab12-node-0-0.tj-ab12 slots=2\ntj-ab12-node-0-1.tj-ab12 slots=2\n"
                          "tj-ab12-launcher-0-0.tj-ab12 slots=2\n")
    assert p.hostfile == trainjob.hostfile("tj-ab12", 3, 2)  # the builder's own model
    w0, la = p.workers[0], p.launcher
    assert "tj-ab12-node-0-0.tj-ab12" in w0.aliases
    assert w0.aliases[-1] == "tj-ab12-node-0-0.tj-ab12.ml.svc.cluster.local"
    assert all(not s.endswith("tj-ab12.ml.svc.cluster.local") for s in w0.dns_search)
    # node pods run the runtime's node command and image; the launcher the TrainJob's
    node_c = _runtime_node_container(runtime, "node")
    assert w0.entrypoint == tuple(node_c["command"]) and w0.command == tuple(node_c["args"])
    assert w0.image == node_c["image"] and la.image == "reg.test/horovod:1"
    assert la.entrypoint == tuple(job["spec"]["trainer"]["command"]) and la.command is None
    # pod securityContext of the runtime; no IPC_LOCK for its uid 1000 (trainjob.py)
    assert w0.security.user == "1000:1000" and w0.security.group_add == ("1000",)
    assert w0.security.cap_add == () and la.security.cap_add == ()
    assert w0.resources.shm_size == la.resources.shm_size == 2 * 2**30  # dshm sizeLimit from the patch
    pvcs = (Mount("pvc", "shared", "/mnt/shared"), Mount("pvc", "data", "/data", True, "fm"))
    ssh_mount = Mount("ssh", "ssh", "/home/mpiuser/.ssh", True)
    assert w0.mounts == (*pvcs, ssh_mount)
    assert la.mounts == (*pvcs, ssh_mount, Mount("config", "config", "/etc/mpi", True))
    assert p.ssh.file_modes() == {"id_rsa": 0o640, "id_rsa.pub": 0o644,
                                  "authorized_keys": 0o644}
    assert p.ssh.gid == 1000 and p.controller.discover_hosts is False
    assert p.policy.clean_pod_policy == "Running" and p.policy.backoff_limit == 0
    assert p.policy.launcher_creation_policy == "WaitForWorkersReady"
    assert p.controller.failure_reason == "ReachedMaxRestarts"  # the runtime has a failurePolicy
    assert any("resourcesPerNode dropped" in n for n in p.notes)


def test_env_the_plugins_add(runtime):
    job = built(env={"EXTRA": "1"})
    p = lpt.plan(job, runtime)
    rank_env = mpijob.rank_env(MPIJobOptions.from_settings(
        name="tj-ab12", namespace="ml", image="i", program=PROGRAM, workers=3, gpu="gpu:2",
        rdma=True, env={"EXTRA": "1"}))
    w, la = p.workers[1].environment, p.launcher.environment
    assert rank_env["EXTRA"] == "1" and len(rank_env) > 1
    assert w == rank_env  # trainer.env reaches the node job too (runLauncherAsNode)
    assert la == {**trainjob.launcher_env(2), **rank_env}
    assert la["OMPI_MCA_orte_set_default_slots"] == "2" and "K_MPI_JOB_ROLE" not in la


def test_pod_counts_and_slots_follow_the_mpi_plugin(runtime):
    one = lpt.plan(built(workers=1), runtime)  # max(numNodes - 1, 1): still one node pod
    assert [w.name for w in one.workers] == ["tj-ab12-node-0-0"]
    not_as_node = copy.deepcopy(runtime)
    not_as_node["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    p = lpt.plan(built(workers=3), not_as_node)
    assert len(p.workers) == 3 and "launcher" not in p.hostfile
    assert p.workers[0].environment == {}  # trainer.env: the trainer-ancestor job only
    assert p.launcher.environment.keys() > trainjob.launcher_env(2).keys()  # + trainer.env
    job = built()
    del job["spec"]["trainer"]["numProcPerNode"]
    job["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": "4"}}
    assert lpt.plan(job, runtime).hostfile.count("slots=4") == 3  # GPUs per node
    more = copy.deepcopy(runtime)
    more["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = 3
    assert lpt.plan(job, more).hostfile.count("slots=3") == 3  # the runtime's own value
    net = copy.deepcopy(runtime)
    net["spec"]["template"]["spec"]["network"]["subdomain"] = "mesh"
    p = lpt.plan(built(), net)
    assert p.hostfile.splitlines()[0] == "tj-ab12-node-0-0.mesh slots=2"
    assert "tj-ab12-node-0-0.mesh" in p.workers[0].aliases


def test_trainer_overrides_and_runtime_defaults(runtime):
    job = built()
    job["spec"]["trainer"].update({"args": ["--x"], "image": "other:2"})
    job["spec"]["activeDeadlineSeconds"] = 600
    p = lpt.plan(job, runtime)
    assert p.launcher.command == ("--x",) and p.launcher.image == "other:2"
    assert p.workers[0].image != "other:2"  # trainer.image: the trainer-ancestor job only
    assert p.policy.active_deadline_seconds == 600
    bare = copy.deepcopy(runtime)
    spec = bare["spec"]["template"]["spec"]
    del spec["failurePolicy"]
    launcher = _rjob(bare, "launcher")
    del launcher["dependsOn"], launcher["template"]["spec"]["backoffLimit"]
    p = lpt.plan(built(), bare)
    assert p.controller.failure_reason == "FailedJobs" and p.policy.backoff_limit == 6
    assert p.policy.launcher_creation_policy == "AtStartup"


def test_strategic_merge_of_runtime_patches():
    base = {"replicatedJobs": [{"name": "a", "x": 1}, {"name": "b"}],
            "volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}],
            "volumeMounts": [{"name": "v", "mountPath": "/m"}],
            "tolerations": [{"key": "t1"}], "labels": {"k": "1", "gone": "x"}}
    patch = {"replicatedJobs": [{"name": "b", "y": 2}, {"name": "c"}],
             "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}],
             "volumeMounts": [{"name": "v2", "mountPath": "/m", "readOnly": True}],
             "tolerations": [{"key": "t2"}], "labels": {"gone": None, "n": "2"}}
    out = smp.merge(base, patch)
    assert out["replicatedJobs"] == [{"name": "a", "x": 1}, {"name": "b", "y": 2}, {"name": "c"}]
    assert out["volumes"] == [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]
    assert out["volumeMounts"] == [{"name": "v2", "mountPath": "/m", "readOnly": True}]
    assert out["tolerations"] == [{"key": "t2"}] and out["labels"] == {"k": "1", "n": "2"}
    assert base["labels"] == {"k": "1", "gone": "x"}  # inputs untouched
    with pytest.raises(ValueError, match="directive"):
        smp.merge(base, {"volumes": [{"name": "v", "$patch": "delete"}]})
    with pytest.raises(ValueError, match="merge key 'name'"):
        smp.merge(base, {"replicatedJobs": [{"x": 1}]})


def test_bad_input_is_refused_naming_what_is_accepted(runtime):
    job = built()
    with pytest.raises(ValueError, match="not a trainer.kubeflow.org/v1alpha1 TrainJob"):
        lpt.plan({**job, "kind": "MPIJob"}, runtime)
    other = copy.deepcopy(runtime)
    other["metadata"]["name"] = "other"
    with pytest.raises(ValueError, match="references ClusterTrainingRuntime/kfp-gpu-horovod"):
        lpt.plan(job, other)
    intel = copy.deepcopy(runtime)
    intel["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "Intel"
    with pytest.raises(ValueError, match="accepted: 'OpenMPI'"):
        lpt.plan(job, intel)
    torch = copy.deepcopy(runtime)
    torch["spec"]["mlPolicy"] = {"numNodes": 1, "torch": {}}
    with pytest.raises(ValueError, match="no mlPolicy.mpi"):
        lpt.plan(job, torch)
    complete = copy.deepcopy(runtime)
    _rjob(complete, "launcher")["dependsOn"] = [{"name": "node", "status": "Complete"}]
    with pytest.raises(ValueError, match=r"accepted: none, or \[\{name: node, status: Ready"):
        lpt.plan(job, complete)
    with pytest.raises(ValueError, match="needs its ClusterTrainingRuntime"):
        local_runner.plan_job(job)
    with pytest.raises(ValueError, match="accepted: MPIJob"):
        local_runner.plan_job({"kind": "PyTorchJob"})
    assert local_runner.plan_job(job, runtime).kind == "TrainJob"


def test_trainjob_status_conditions():
    s = local_status.TrainJobStatus("j", "ns", "ReachedMaxRestarts")
    s.created()
    s.running()
    assert s.to_dict() == {"conditions": [], "jobsStatus": []}  # Trainer sets neither
    s.replicas("Worker", active=2, total=2)
    s.replicas("Launcher", active=1, total=1)
    assert s.to_dict()["jobsStatus"][0] == {"name": "node", "ready": 1, "succeeded": 0,
                                           "failed": 0, "active": 1, "suspended": 0}
    s.worker_failed("j-node-0-1", 3, "Error", "disk on fire")
    failed = s.condition("Failed")
    assert failed["reason"] == "ReachedMaxRestarts" and not s.is_success() and s.finished()
    assert failed["message"].startswith("jobset failed due to reaching max number of restarts "
                                        "(first failed job: j-node-0); pod j-node-0-1 exited")
    assert "lastUpdateTime" not in failed  # a metav1.Condition
    assert s.set("Failed", "True", failed["reason"], failed["message"]) is False
    s.replicas("Worker", failed=1, total=2)
    assert s.jobs_status["node"]["failed"] == 1 and s.jobs_status["node"]["active"] == 0
    ok = local_status.TrainJobStatus("j", "ns")
    ok.succeeded()
    assert ok.is_success() and ok.condition("Complete")["reason"] == "AllJobsCompleted"
    late = local_status.TrainJobStatus("j", "ns", launcher_backoff_limit=1)
    late.replicas("Launcher", failed=1, total=1)  # one retry left: not a failed Job
    assert late.jobs_status["launcher"]["failed"] == 0
    late.deadline_exceeded()
    assert late.condition("Failed")["reason"] == "DeadlineExceeded"
    late.launcher_failed("j-launcher-0-0", 5, "Error")
    assert "(first failed job: j-launcher-0)" in late.condition("Failed")["message"]
    assert late.condition("Failed")["reason"] == "FailedJobs"


@pytest.mark.skipif(os.getuid() != 0, reason="giving files group 1000 (fsGroup) needs root, "
                    "as kubelet has")
def test_workspace_has_trainers_secret_modes_and_no_discover_hosts(runtime):
    p = lpt.plan(built(), runtime)
    ws = local_workspace.write_workspace(p)
    try:
        ssh = {f.name: (stat.S_IMODE(f.stat().st_mode), f.stat().st_uid, f.stat().st_gid)
               for f in (ws / "ssh").iterdir()}
        assert ssh == {"id_rsa": (0o640, 0, 1000), "id_rsa.pub": (0o644, 0, 1000),
                       "authorized_keys": (0o644, 0, 1000)}
        assert sorted(f.name for f in (ws / "config").iterdir()) == ["hostfile"]
        assert (ws / "config" / "hostfile").read_text() == p.hostfile
    finally:
        import shutil

        shutil.rmtree(ws)


def test_cli_loads_a_trainjob_with_its_runtime(tmp_path, runtime):
    f = tmp_path / "tj.yaml"
    f.write_text(trainjob.to_yaml(built()), encoding="utf-8")
    job, rt = local_cli.load_job(f)
    assert job["kind"] == "TrainJob" and rt == runtime  # the default runtime file
    wrong = tmp_path / "rt.yaml"
    wrong.write_text(yaml.safe_dump({**runtime, "metadata": {"name": "other"}}), "utf-8")
    with pytest.raises(ValueError, match="named 'kfp-gpu-horovod'"):
        local_cli.load_job(f, wrong)
    m = tmp_path / "mpi.yaml"
    m.write_text(mpijob.to_yaml(mpijob.build(MPIJobOptions.from_settings(
        name="m", namespace="ml", image="i", program=PROGRAM, workers=1))), "utf-8")
    with pytest.raises(ValueError, match="--runtime is for a TrainJob"):
        local_cli.load_job(m, wrong)
