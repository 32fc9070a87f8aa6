"""``kfp-gpu doctor`` says which training backends the cluster has (MPIJob CRD; Trainer's
TrainJob + JobSet CRDs and the kfp-gpu-horovod ClusterTrainingRuntime) and fails a
distributed pipeline only for the backend ``--backend`` names. Pure report + the command
over HTTP against tests/doubles/k8s_cluster.py, with the rendered manifests/rbac and
manifests/trainer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kfp_gpu.cluster import doctor
from kfp_gpu.cluster.doctor import backends as db
from kfp_gpu.cluster.doctor.model import Runtime, RuntimeFacts
from tests.doubles.k8s_cluster import FakeCluster, mpijob_crd, trainer_crds
from tests.support.doctor_double import IMAGE, crds, run
from tests.support.kustomize import kustomize

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runtime() -> dict:
    (doc,) = kustomize(REPO / "manifests" / "trainer")
    return doc


def test_runtime_facts_from_the_shipped_runtime(runtime):
    rt = Runtime.from_api(runtime)
    assert (rt.name, rt.mpi, rt.launcher_as_node, rt.images) == (
        "kfp-gpu-horovod", True, True, (IMAGE,))
    ok = RuntimeFacts([rt], listed=True)
    assert db.runtime_status(ok, IMAGE) == f"ok ({IMAGE})"
    assert db.problems("trainjob", crds(mpi=False), ok, IMAGE) == []
    assert "another build" in db.runtime_status(ok, "registry.example/kfp-gpu-horovod:0.2.0")
    other = RuntimeFacts([Runtime("deepspeed-distributed", mpi=True)], listed=True)
    assert db.runtime_status(other, IMAGE) == (
        "not installed (MPI runtimes here: deepspeed-distributed); apply manifests/trainer")


def test_problems_name_what_to_install():
    none = RuntimeFacts()
    probs = db.problems("trainjob", crds(trainer=False), none, IMAGE)
    assert probs[0].startswith("backend trainjob: CRD trainjobs.trainer.kubeflow.org not "
                               "installed; install Kubeflow Trainer v2.3.0")
    assert any("JobSet v0.12.0" in p for p in probs)
    assert any("ClusterTrainingRuntime kfp-gpu-horovod not installed" in p for p in probs)
    assert db.problems("mpijob", crds(trainer=False), none, IMAGE) == []
    assert "use --backend trainjob" in db.problems("mpijob", crds(mpi=False), none, IMAGE)[0]


def test_report_gates_on_the_chosen_backend(runtime):
    facts = doctor.ClusterFacts(crds=crds(mpi=False), runtimes=RuntimeFacts(
        [Runtime.from_api(runtime)], listed=True))
    mpi_run = doctor.Needs(mpi=True)
    rep = doctor.build_report(facts, mpi_run)
    assert not rep.ok and any("MPI Operator is not installed" in p for p in rep.problems)
    rep = doctor.build_report(facts, doctor.Needs(mpi=True, backend="trainjob"))
    assert rep.ok, rep.problems
    text = rep.render()
    assert "== Training backends" in text and f"ok ({IMAGE})" in text


def test_missing_trainjob_permissions_only_matter_for_trainjob():
    access = [doctor.Access(g, r, v, r != "trainjobs") for g, r, v in doctor.LAUNCHER_PERMISSIONS]
    facts = doctor.ClusterFacts(crds=crds(), subject="sa", access=access)
    rep = doctor.build_report(facts, doctor.Needs(mpi=True))
    assert not any("trainjobs" in p for p in rep.problems)
    assert any("create trainjobs" in w and "other backend" in w for w in rep.warnings)
    rep = doctor.build_report(facts, doctor.Needs(mpi=True, backend="trainjob"))
    assert any("may not create trainjobs" in p for p in rep.problems)


def test_doctor_command_with_trainer_installed(tmp_path, rbac_objects, runtime):
    with FakeCluster(rbac_objects=rbac_objects, crds=trainer_crds(), runtimes=[runtime]) as c:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--backend", "trainjob",
                  "--gpu", "none")
        assert res.exit_code == 0, res.output
        table = res.output.split("== Training backends")[1].split("\n\n")[0]
        assert re.search(rf"trainjob +ClusterTrainingRuntime kfp-gpu-horovod +ok \({IMAGE}\)",
                         table)
        assert re.search(r"mpijob +CRD mpijobs.kubeflow.org v2beta1 +not installed", table)
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--gpu", "none")
        assert res.exit_code == 1 and "MPI Operator is not installed" in res.output
    with FakeCluster(rbac_objects=rbac_objects, crds={"mpijobs.kubeflow.org": mpijob_crd()}) as c:
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--backend", "trainjob",
                  "--gpu", "none")
        assert res.exit_code == 1
        assert "install Kubeflow Trainer v2.3.0" in res.output
        assert not [r for r in c.requests if r["path"] == "/apis/trainer.kubeflow.org/v1alpha1/"
                    "clustertrainingruntimes"]  # no LIST without the CRD
        res = run(c, tmp_path, "--pipeline", "resnet-horovod", "--backend", "pytorchjob")
        assert res.exit_code == 2 and "accepted: mpijob, trainjob" in res.output


def test_doctor_expects_the_runtime_image_the_pipeline_was_compiled_for(tmp_path, runtime):
    """A pipeline compiled with ``--registry R`` expects the runtime on R's Horovod image
    (its compiled ``runtime_image``): the checked-in runtime (default registry) is then a
    problem for a trainjob run, and a runtime with R's image is not."""
    from typer.testing import CliRunner

    from kfp_gpu.cli.app import app
    from kfp_gpu.cluster.doctor.needs import needs_from_pipeline

    mine = "registry.example.com/ml/kfp-gpu-horovod:0.1.0"
    res = CliRunner().invoke(app, ["compile", "--registry", "registry.example.com/ml",
                                   "-o", str(tmp_path), "--only", "resnet-horovod"])
    assert res.exit_code == 0, res.output
    spec = list(yaml.safe_load_all((tmp_path / "pipelines" / "resnet_horovod.yaml")
                                   .read_text()))
    needs = needs_from_pipeline(spec)
    assert (needs.mpi, needs.runtime_image) == (True, mine)
    needs.backend = "trainjob"
    shipped = doctor.ClusterFacts(crds=crds(mpi=False), runtimes=RuntimeFacts(
        [Runtime.from_api(runtime)], listed=True))
    rep = doctor.build_report(shipped, needs)
    assert any("another build" in p for p in rep.problems), rep.problems
    repointed = doctor.ClusterFacts(crds=crds(mpi=False), runtimes=RuntimeFacts(
        [Runtime("kfp-gpu-horovod", mpi=True, launcher_as_node=True, images=(mine,))],
        listed=True))
    problems = doctor.build_report(repointed, needs).problems
    assert not any("ClusterTrainingRuntime" in p for p in problems), problems
    # The checked-in pipeline expects the default registry's image.
    default = needs_from_pipeline(list(yaml.safe_load_all(
        (REPO / "pipelines" / "resnet_horovod.yaml").read_text())))
    assert default.runtime_image == IMAGE
