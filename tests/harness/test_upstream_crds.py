"""tests/support/upstream_crds.py: the upstream CRDs (read in place) as jsonschema validators."""

from __future__ import annotations

import pytest
import yaml

from tests.support import upstream_crds
from tests.support.upstream_crds import CRDValidationError

TRAINER = "trainer.kubeflow.org/v1alpha1"


def trainjob(**trainer) -> dict:
    return {"apiVersion": TRAINER, "kind": "TrainJob",
            "metadata": {"name": "resnet-0123456789", "namespace": "ml"},
            "spec": {"runtimeRef": {"name": "kfp-gpu-horovod"},
                     "trainer": {"numNodes": 2, **trainer}}}


def paths(obj, **kw) -> list[str]:
    return [e.json_path for e in upstream_crds.errors(obj, **kw)]


def test_every_upstream_kind_is_found():
    assert set(upstream_crds.kinds()) >= {("kubeflow.org/v2beta1", "MPIJob"),
                                          (TRAINER, "TrainJob"),
                                          (TRAINER, "ClusterTrainingRuntime")}
    for kind in ("MPIJob", "TrainJob", "ClusterTrainingRuntime"):
        v = upstream_crds.validator(kind)
        assert v.schema["type"] == "object" and "spec" in v.schema["properties"]


def test_the_upstream_runtime_and_a_minimal_trainjob_pass():
    runtime = yaml.safe_load((upstream_crds.upstream_dir() / "kubeflow-trainer-v2.3.0"
                              / "deepspeed_distributed.yaml").read_text())
    upstream_crds.validate(runtime)
    upstream_crds.validate(trainjob(resourcesPerNode={"limits": {"nvidia.com/gpu": 8}}))


def test_wrong_type_fails_with_the_json_path():
    with pytest.raises(CRDValidationError) as e:
        upstream_crds.validate(trainjob(numNodes="two"))
    assert e.value.paths == ["$.spec.trainer.numNodes"]
    assert "$.spec.trainer.numNodes: 'two' is not of type 'integer'" in str(e.value)


def test_missing_required_field_fails():
    job = trainjob()
    del job["spec"]["runtimeRef"]
    assert paths(job) == ["$.spec"]
    assert "'runtimeRef' is a required property" in upstream_crds.errors(job)[0].message
    patched = trainjob()
    patched["spec"]["runtimePatches"] = [{"trainingRuntimeSpec": {}}]  # manager is the key
    assert paths(patched) == ["$.spec.runtimePatches[0]"]


def test_unknown_fields_fail_only_when_strict():
    job = trainjob(numNode=2)  # a typo of numNodes
    assert paths(job) == ["$.spec.trainer"]
    assert "'numNode' was unexpected" in upstream_crds.errors(job)[0].message
    assert paths(job, strict=False) == []
    upstream_crds.validate(job, strict=False)


def test_int_or_string_quantities():
    ok = trainjob(resourcesPerNode={"limits": {"nvidia.com/gpu": 8, "memory": "64Gi",
                                               "cpu": "500m"}})
    upstream_crds.validate(ok)
    for bad in (True, {"n": 1}, ["1"], "eight"):
        job = trainjob(resourcesPerNode={"limits": {"nvidia.com/gpu": bad}})
        assert paths(job) == ["$.spec.trainer.resourcesPerNode.limits['nvidia.com/gpu']"], bad


def test_int_or_string_without_anyof_and_nullable_are_translated():
    schema = upstream_crds.to_json_schema({
        "type": "object",
        "properties": {"port": {"x-kubernetes-int-or-string": True},
                       "note": {"type": "string", "nullable": True},
                       "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {"a": {"type": "string"}}},
                       "rules": {"type": "array", "x-kubernetes-validations": [{"rule": "x"}],
                                 "items": {"type": "string"}}}})
    props = schema["properties"]
    assert props["port"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["note"]["type"] == ["string", "null"]
    assert "additionalProperties" not in props["free"] and schema["additionalProperties"] is False
    assert not any(k.startswith("x-kubernetes") for k in repr(schema).split("'"))


def test_list_map_keys_must_be_unique():
    job = trainjob(env=[{"name": "NCCL_DEBUG", "value": "INFO"},
                        {"name": "NCCL_DEBUG", "value": "WARN"}])
    errs = upstream_crds.errors(job)
    assert [e.json_path for e in errs] == ["$.spec.trainer.env[1]"]
    assert "duplicate entry (name='NCCL_DEBUG') at items 0 and 1" in errs[0].message


def test_mpijob_errors_carry_deep_paths():
    container = {"name": "w", "image": "i", "resources": {"limits": {"cpu": "2"}}}
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m"},
           "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {"Worker": {
               "replicas": 1, "template": {"spec": {"containers": [container]}}}}}}
    upstream_crds.validate(job)
    container["resources"]["limits"]["cpu"] = []
    assert paths(job) == [
        "$.spec.mpiReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu"]


def test_unknown_kind_names_the_known_ones():
    with pytest.raises(KeyError, match="no upstream CRD for PyTorchJob.*TrainJob"):
        upstream_crds.validator("PyTorchJob")
    with pytest.raises(KeyError, match="no upstream CRD for kubeflow.org/v1 MPIJob"):
        upstream_crds.validate({"apiVersion": "kubeflow.org/v1", "kind": "MPIJob"})
