"""kfp-gpu doctor reads every need of a compiled pipeline, the Kubernetes platform spec
included (KAI's ``gpu-fraction`` pod annotation, queue labels, tolerations, node selectors),
and checks the KAI Scheduler (its Queue CRD, its scheduler Deployment, the queue) against
the Kubernetes API double (tests/doubles/k8s_cluster.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kfp_gpu import gpu
from kfp_gpu.cli import doctor as doctor_cli
from kfp_gpu.cluster import doctor
from kfp_gpu.compiler import compile as comp
from kfp_gpu.gpu.names import KFP_MAIN_CONTAINER
from kfp_gpu.gpu.render import _annotations
from tests.doubles.k8s_cluster import FakeCluster, kai_queue_crd, kai_scheduler_deployment

#: One request per kind (kfp_gpu/gpu/kinds/), with the options that compile to platform-spec
#: fields: product (node selector), strategy (node selector), queue (pod label).
REQUESTS = {
    "none": "none,queue=cpu-q",
    "gpu": "gpu:1,product=NVIDIA-H100-80GB-HBM3,queue=team-a",
    "mig": "mig:1g.10gb,product=NVIDIA-A100-SXM4-40GB",
    "shared": "shared:1,strategy=mps",
    "fraction": "fraction:0.5,queue=team-a",
    "gpu-memory": "gpu-memory:8192",
    "metagpu": "metagpu:25",
    "hami": "hami:1,mem=8000",
    "dra": "dra:gpu=1",
}


def compiled(tmp_path: Path, name: str, request: str) -> Path:
    (target,) = comp.targets(only=name)
    path = tmp_path / f"{name}-{request.replace(':', '_').replace(',', '_')}.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what a KFP task cannot carry (hami)
        path.write_text(comp.compile_text(target, request))
    return path


def run(cluster: FakeCluster, tmp_path: Path, *args: str):
    app = typer.Typer()
    app.command()(doctor_cli.doctor_command)
    kc = cluster.kubeconfig(tmp_path / "kubeconfig")
    return CliRunner().invoke(app, ["--kubeconfig", str(kc), *args])


def kai_cluster(**kw) -> FakeCluster:
    kw.setdefault("crds", {"queues.scheduling.run.ai": kai_queue_crd()})
    kw.setdefault("deployments", [kai_scheduler_deployment()])
    kw.setdefault("kai_queues", ["default-queue"])
    return FakeCluster(**kw)


def test_test_covers_every_kind():
    assert sorted(REQUESTS) == sorted(gpu.KINDS)


def test_fractional_eval_for_a_fraction_is_not_ready_without_kai(tmp_path):
    path = compiled(tmp_path, "fractional-eval", "fraction:0.25")
    needs = doctor.needs_from_pipeline(list(yaml.safe_load_all(path.read_text())))
    assert needs.request is None and needs.resources == {}  # no accelerator: annotations only
    assert needs.annotations == {"gpu-fraction": "0.25", "gpu-fraction-container-name": "main"}
    assert needs.kai and needs.kai_queue() == "default-queue"
    with FakeCluster(crds={}) as c:
        res = run(c, tmp_path, "--pipeline", str(path))
    assert res.exit_code == 1, res.output
    assert "verdict: NOT READY" in res.output
    assert ("PROBLEM: the pipeline's pod annotations gpu-fraction=0.25, "
            "gpu-fraction-container-name=main needs the KAI Scheduler / Run:ai (CRD "
            "queues.scheduling.run.ai not found)") in res.output
    assert "PROBLEM: the KAI Scheduler is not running" in res.output


def test_fractional_eval_passes_the_kai_checks_with_kai_present(tmp_path):
    path = compiled(tmp_path, "fractional-eval", "fraction:0.25")
    with kai_cluster() as c:
        res = run(c, tmp_path, "--pipeline", str(path))
        paths = [r["path"] for r in c.requests]
    assert "== KAI Scheduler" in res.output
    assert "Deployment kai-scheduler/kai-scheduler-default  1 ready" in res.output
    assert "Queue default-queue" in res.output and "present" in res.output
    assert "KAI" not in "".join(line for line in res.output.splitlines()
                                if line.startswith("PROBLEM"))
    assert "/apis/scheduling.run.ai/v2/queues/default-queue" in paths
    assert "/apis/apps/v1/deployments" in paths


def test_kai_scheduler_down_or_queue_missing(tmp_path):
    path = compiled(tmp_path, "fractional-eval", "fraction:0.5,queue=team-a")
    with kai_cluster(deployments=[kai_scheduler_deployment(ready=0)]) as c:
        res = run(c, tmp_path, "--pipeline", str(path))
    assert res.exit_code == 1
    assert "PROBLEM: the KAI Scheduler is not running" in res.output
    assert "PROBLEM: the KAI queue 'team-a' does not exist" in res.output
    with kai_cluster(kai_queues=["team-a"]) as c:
        res = run(c, tmp_path, "--pipeline", str(path))
    assert "Queue team-a" in res.output and "KAI queue" not in res.output


def test_no_kai_reads_for_pipelines_without_kai_pods(tmp_path):
    path = compiled(tmp_path, "imdb-lstm", "gpu:1")
    with FakeCluster() as c:
        res = run(c, tmp_path, "--pipeline", str(path))
        paths = [r["path"] for r in c.requests]
    assert "KAI" not in res.output
    assert not any("deployments" in p or "scheduling.run.ai/v2" in p for p in paths)


@pytest.mark.parametrize("kind", list(REQUESTS))
def test_every_kind_compiles_to_needs_doctor_reads(tmp_path, kind):
    """The compiled pipeline's platform spec gives doctor the same annotations, labels,
    node selector and tolerations as the request itself (pod_fragment); KAI is needed
    exactly for fraction and gpu-memory."""
    request = gpu.parse(REQUESTS[kind])
    name = "resnet-horovod" if kind == "dra" else "imdb-lstm"  # imdb-lstm refuses dra
    needs = doctor.needs_from_pipeline(
        list(yaml.safe_load_all(compiled(tmp_path, name, REQUESTS[kind]).read_text())))
    if kind == "dra":  # the Workers' claim: the compiled worker_gpu constant
        assert needs.request == request and needs.annotations == {}
        return
    assert needs.annotations == _annotations(request, KFP_MAIN_CONTAINER)
    assert needs.labels == request.labels()
    assert needs.node_selector == request.node_selector()
    assert needs.tolerations == request.tolerations()
    assert needs.kai == (kind in ("fraction", "gpu-memory"))
    name, count = request.resource_name, request.resource_count
    if kind == "hami":  # a task carries nvidia.com/gpumem alone (kfp_gpu.gpu.kinds.hami)
        name, count = gpu.HAMI_MEM_RESOURCE, request.memory_mib
    assert needs.resources == ({name: count} if name else {})
    facts = doctor.ClusterFacts(
        nodes=[], crds={doctor.KAI_QUEUE_CRD: doctor.Crd(doctor.KAI_QUEUE_CRD, False)})
    rep = doctor.build_report(facts, needs)
    assert any("needs the KAI Scheduler" in p for p in rep.problems) == needs.kai
