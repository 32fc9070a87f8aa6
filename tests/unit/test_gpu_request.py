"""GPU request model: every kind compiled into a pipeline and read back (strict IR parse).

Each case compiles a one-task pipeline with ``GpuRequest.apply_to_task``, reads BOTH YAML
documents back with strict protobuf parses (tests/support/ir.py) and compares the exact
accelerator resource/count, environment, tolerations, node selectors, pod annotations and
pod labels against the values the upstream device plugins / schedulers define.
"""


import warnings

import kubernetes_validate
import pytest
from kfp import compiler, dsl

from kfp_gpu import gpu
from kfp_gpu.gpu import mig
from tests.support import ir

TOL = [("nvidia.com/gpu", "Exists", "NoSchedule")]


@dsl.component(base_image="python:3.11-slim")
def noop():
    pass


def compile_one(request, tmp_path, count_param: bool = False):
    """Compile a pipeline with one ``noop`` task carrying ``request``; return the IR."""
    r = gpu.parse(request)
    if count_param:
        @dsl.pipeline(name="gpu-probe")
        def probe(n_gpus: int = 3):
            r.apply_to_task(noop(), count=n_gpus)
    else:
        @dsl.pipeline(name="gpu-probe")
        def probe():
            r.apply_to_task(noop())
    out = tmp_path / "p.yaml"
    compiler.Compiler().compile(probe, str(out))
    spec, platform = ir.load(out)
    c = ir.container(spec, "noop")
    cfg = ir.k8s_config(platform, ir.executor_label(spec, "noop")) if platform else None
    got = {
        "resource": c.resources.accelerator.resource_type,
        "count": c.resources.accelerator.resource_count,
        "env": {e.name: e.value for e in c.env},
        "tolerations": [(t.key, t.operator, t.effect) for t in cfg.tolerations] if cfg else [],
        "node_selector": dict(cfg.node_selector.labels) if cfg else {},
        "annotations": dict(cfg.pod_metadata.annotations) if cfg else {},
        "labels": dict(cfg.pod_metadata.labels) if cfg else {},
    }
    return got, spec


# text -> (resource, count, env, node selector, annotations, labels)
CASES = {
    "gpu:1": ("nvidia.com/gpu", "1", {"KFP_GPU_KIND": "gpu", "KFP_GPU_SHARE": "1"}, {}, {}, {}),
    "gpu:2,product=NVIDIA-H100-80GB-HBM3": (
        "nvidia.com/gpu", "2", {"KFP_GPU_KIND": "gpu", "KFP_GPU_SHARE": "2"},
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, {}, {}),
    "mig:1g.10gb": ("nvidia.com/mig-1g.10gb", "1",
                    {"KFP_GPU_KIND": "mig", "KFP_GPU_SHARE": "1"}, {}, {}, {}),
    "mig:3g.40gb,model=H100-80GB": ("nvidia.com/mig-3g.40gb", "1",
                                    {"KFP_GPU_KIND": "mig", "KFP_GPU_SHARE": "1"}, {}, {}, {}),
    "mig:1g.18gb+me,model=H200-141GB": ("nvidia.com/mig-1g.18gb.me", "1",
                                        {"KFP_GPU_KIND": "mig", "KFP_GPU_SHARE": "1"},
                                        {}, {}, {}),
    "shared:1": ("nvidia.com/gpu", "1", {"KFP_GPU_KIND": "shared", "KFP_GPU_SHARE": "1"},
                 {}, {}, {}),
    "shared:1,replicas=4,strategy=mps,renamed=true": (
        "nvidia.com/gpu.shared", "1", {"KFP_GPU_KIND": "shared", "KFP_GPU_SHARE": "0.25"},
        {"nvidia.com/gpu.sharing-strategy": "mps"}, {}, {}),
    "fraction:0.5": ("", "", {"KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "0.5"},
                     {}, {"gpu-fraction": "0.5", "gpu-fraction-container-name": "main"}, {}),
    "fraction:0.25,queue=team-a": (
        "", "", {"KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "0.25"}, {},
        {"gpu-fraction": "0.25", "gpu-fraction-container-name": "main"},
        {"kai.scheduler/queue": "team-a"}),
    "gpu-memory:8192,queue=q1,queue-label=runai/queue": (
        "", "", {"KFP_GPU_KIND": "gpu-memory", "KFP_GPU_SHARE": "1",
                 "KFP_GPU_MEMORY_MIB": "8192"}, {},
        {"gpu-memory": "8192", "gpu-fraction-container-name": "main"},
        {"runai/queue": "q1"}),
    "metagpu:25": ("cnvrg.io/metagpu", "25", {"KFP_GPU_KIND": "metagpu", "KFP_GPU_SHARE": "0.25"},
                   {}, {}, {}),
    "hami:1": ("nvidia.com/gpu", "1", {"KFP_GPU_KIND": "hami", "KFP_GPU_SHARE": "1"}, {}, {}, {}),
}


@pytest.mark.parametrize("text", list(CASES))
def test_every_kind_compiles_to_exact_ir(text, tmp_path):
    resource, count, env, selector, annotations, labels = CASES[text]
    got, _ = compile_one(text, tmp_path)
    assert got == {"resource": resource, "count": count, "env": env, "tolerations": TOL,
                   "node_selector": selector, "annotations": annotations, "labels": labels}


def test_none_leaves_task_untouched(tmp_path):
    got, _ = compile_one("none", tmp_path)
    assert got == {"resource": "", "count": "", "env": {}, "tolerations": [],
                   "node_selector": {}, "annotations": {}, "labels": {}}
    assert gpu.parse("gpu:0") == gpu.GpuRequest()


def test_hami_memory_split_is_the_one_kfp_resource(tmp_path):
    """HAMi device.go mutateContainerResource adds nvidia.com/gpu: DefaultGPUNum (1) to a
    container with nvidia.com/gpumem only: the task's one resource carries the split."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gpu.KfpCannotExpressWarning)
        got, _ = compile_one("hami:1,mem=8000", tmp_path)
    assert (got["resource"], got["count"]) == ("nvidia.com/gpumem", "8000")
    assert got["env"] == {"KFP_GPU_KIND": "hami", "KFP_GPU_SHARE": "1",
                          "KFP_GPU_MEMORY_MIB": "8000"}
    with pytest.warns(gpu.KfpCannotExpressWarning, match="whole device"):
        got, _ = compile_one("hami:1", tmp_path)
    assert (got["resource"], got["count"]) == ("nvidia.com/gpu", "1")
    with pytest.warns(gpu.KfpCannotExpressWarning, match="mem cannot be carried"):
        got, _ = compile_one("hami:2,mem=8000", tmp_path)
    assert (got["resource"], got["count"]) == ("nvidia.com/gpu", "2")


def test_hami_full_form_warns_on_kfp_task_and_keeps_memory_in_env(tmp_path):
    with pytest.warns(gpu.KfpCannotExpressWarning, match="mem/cores cannot be carried"):
        got, _ = compile_one("hami:1,mem=8000,cores=30", tmp_path)
    assert got["resource"] == "nvidia.com/gpu" and got["count"] == "1"
    assert got["env"] == {"KFP_GPU_KIND": "hami", "KFP_GPU_SHARE": "1",
                          "KFP_GPU_MEMORY_MIB": "8000"}


def test_integer_count_stays_a_pipeline_parameter(tmp_path):
    got, spec = compile_one("gpu:2,product=NVIDIA-A100-SXM4-80GB", tmp_path, count_param=True)
    assert got["resource"] == "nvidia.com/gpu"
    assert got["count"] == "{{$.inputs.parameters['pipelinechannel--n_gpus']}}"
    # the share of a parameterised count is not known at compile time: no SHARE env
    assert got["env"] == {"KFP_GPU_KIND": "gpu"}
    param = spec.root.input_definitions.parameters["n_gpus"]
    assert param.default_value.number_value == 3
    assert got["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def test_count_parameter_refused_for_fractional_kinds():
    r = gpu.parse("fraction:0.5")
    with pytest.raises(ValueError, match="gpu, shared and hami"):
        r.apply_to_task(object(), count=2)


@pytest.mark.parametrize("bad, needle", [
    ("fraction:0", "0 < F < 1"),
    ("fraction:0.0", "0 < F < 1"),
    ("fraction:1.5", "0 < F < 1"),
    ("fraction:1", "KAI rejects gpu-fraction >= 1"),
    ("fraction:-0.1", "0 < F < 1"),
    ("fraction:nan", "0 < F < 1"),
    ("fraction:abc", "0 < F < 1"),
    ("gpu:1.5", "fraction:F"),
    ("gpu:-1", "integer >= 0"),
    ("shared:-2", "integer >= 1"),
    ("hami:-1", "integer >= 1"),
    ("mig:9g.99gb", "1g.10gb"),
    ("mig:1g.5gb,model=H100-80GB", "accepted: 1g.10gb, 1g.10gb+me, 1g.20gb"),
    ("mig:1g.10gb,model=H200-141GB", "1g.18gb"),
    ("mig:1g.10gb,model=B9000", "A100-40GB, A100-80GB, A30-24GB, B200-180GB"),
    ("metagpu:0", "1..100"),
    ("metagpu:-5", "1..100"),
    ("metagpu:2.5", "1..100"),
    ("metagpu:101", "1..100"),
    ("hami:1,cores=0", "1..100"),
    ("hami:1,mem=0", ">= 1"),
    ("gpu-memory:0", ">= 1"),
    ("shared:2,replicas=1", "replicas"),
    ("shared:2,replicas=4", "failRequestsGreaterThanOne"),
    ("shared:1,strategy=magic", "time-slicing"),
    ("tpu:1", "accepted: 'none', 'gpu:N"),
    ("gpu:1,color=red", "options accepted for gpu: product"),
    ("gpu", "accepted"),
])
def test_invalid_requests_name_accepted_values(bad, needle):
    with pytest.raises(ValueError) as e:
        gpu.parse(bad)
    assert needle in str(e.value)


def test_invalid_request_fails_before_compilation_finishes(tmp_path):
    """The pipeline factory parses at definition time: compile never produces a file."""
    @dsl.pipeline(name="p")
    def ok():
        gpu.parse("gpu:1").apply_to_task(noop())

    with pytest.raises(ValueError, match="0 < F < 1"):
        @dsl.pipeline(name="bad")
        def bad():
            gpu.parse("fraction:1.5").apply_to_task(noop())
        compiler.Compiler().compile(bad, str(tmp_path / "bad.yaml"))
    assert not (tmp_path / "bad.yaml").exists()


def test_direct_construction_is_validated_too():
    with pytest.raises(ValueError, match="0 < F < 1"):
        gpu.GpuRequest(kind="fraction", fraction=0.0)
    with pytest.raises(ValueError, match="non-negative integer"):
        gpu.GpuRequest(kind="gpu", count=-1)
    with pytest.raises(ValueError, match="1..100"):
        gpu.GpuRequest(kind="metagpu", units=150)
    with pytest.raises(ValueError, match="one MIG"):
        gpu.GpuRequest(kind="mig", count=2, profile="1g.10gb")


@pytest.mark.parametrize("text", [*CASES, "hami:2,mem=8000,cores=30,product=Tesla-T4", "none"])
def test_text_form_round_trips(text):
    r = gpu.parse(text)
    assert gpu.parse(r.to_text()) == r
    assert str(r) == r.to_text()


def test_share_and_gpus_per_pod():
    expect = {  # text -> (share, gpus_per_pod, physical_share)
        "gpu:2": (2.0, 2, 2.0), "mig:1g.10gb,model=H100-80GB": (1.0, 1, 0.125),
        "mig:3g.20gb,model=A100-40GB": (1.0, 1, 0.5), "mig:7g.141gb": (1.0, 1, 1.0),
        "shared:1": (1.0, 1, 1.0), "shared:1,replicas=8": (0.125, 1, 0.125),
        "fraction:0.125": (0.125, 1, 0.125), "metagpu:40": (0.4, 1, 0.4),
        "hami:2,mem=4000": (2.0, 2, 2.0), "gpu-memory:4096": (1.0, 1, 1.0),
        "none": (0.0, 0, 0.0),
    }
    for text, (share, per_pod, phys) in expect.items():
        r = gpu.parse(text)
        assert (r.share, r.gpus_per_pod, r.physical_share) == (share, per_pod, phys), text


def test_pod_fragment_hami_full_form_and_fraction():
    f = gpu.parse("hami:1,mem=8000,cores=30").pod_fragment()
    want = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "30"}
    assert f["resources"] == {"limits": want, "requests": want}
    assert {"name": "KFP_GPU_MEMORY_MIB", "value": "8000"} in f["env"]
    f = gpu.parse("fraction:0.5,queue=research").pod_fragment()
    assert f["resources"] == {"limits": {}, "requests": {}}
    assert f["annotations"] == {"gpu-fraction": "0.5"}  # one-container pod: KAI's default
    assert gpu.parse("fraction:0.5").pod_fragment(container="worker")["annotations"] == {
        "gpu-fraction": "0.5", "gpu-fraction-container-name": "worker"}
    assert "gpu-fraction-container-name" not in gpu.parse("gpu:1").pod_fragment(
        container="worker")["annotations"]
    assert f["labels"] == {"kai.scheduler/queue": "research"}
    assert f["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                 "effect": "NoSchedule"}]
    assert gpu.parse("none").pod_fragment() == {
        "resources": {"limits": {}, "requests": {}}, "annotations": {}, "labels": {},
        "env": [], "tolerations": [], "nodeSelector": {}}


@pytest.mark.parametrize("text", [*CASES, "hami:1,mem=8000,cores=30", "none"])
def test_pod_fragment_is_a_valid_pod_spec(text):
    """Every fragment, dropped into a Pod, passes the Kubernetes 1.30 schema strictly."""
    f = gpu.parse(text).pod_fragment()
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "w", "annotations": f["annotations"], "labels": f["labels"]},
        "spec": {
            "tolerations": f["tolerations"], "nodeSelector": f["nodeSelector"],
            "containers": [{"name": "worker", "image": "busybox", "env": f["env"],
                            "resources": f["resources"]}],
        },
    }
    kubernetes_validate.validate(pod, "1.30", strict=True)


def test_mig_tables_match_the_mig_user_guide():
    assert list(mig.PROFILES["H100-80GB"]) == [
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert list(mig.PROFILES["A100-40GB"]) == [
        "1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert list(mig.PROFILES["H200-141GB"]) == [
        "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
    assert mig.PROFILES["A100-80GB"] == mig.PROFILES["H100-80GB"]
    for model, table in mig.PROFILES.items():
        total = mig.MODEL_MEMORY_GB[model]
        for p in table.values():
            # the name's memory is the model's memory times the fraction, to within 1 GB
            # (e.g. 71 GB on H200 = 141/2 rounded up; 1g.5gb = 40/8)
            assert abs(p.memory_gb - total * p.memory_fraction) <= 1.0, (model, p)
            assert 1 <= p.max_instances <= 7
    assert mig.resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert mig.normalize_model("h200") == "H200-141GB"
    with pytest.raises(ValueError, match="A100-40GB, A100-80GB"):
        mig.normalize_model("A100")  # ambiguous: 40 or 80 GB


def test_parse_passes_requests_through_and_rejects_non_text():
    r = gpu.parse("gpu:1")
    assert gpu.parse(r) is r
    with pytest.raises(TypeError):
        gpu.parse(1)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpu.parse(" GPU:1 ").count == 1


@pytest.mark.parametrize("pipeline", ["imdb-lstm", "fractional-eval"])
@pytest.mark.parametrize("text", [t for t in CASES if not t.startswith("hami")])
def test_catalog_pipelines_take_the_request_at_compile_time(pipeline, text, tmp_path):
    """What ``kfp-gpu compile --gpu TEXT`` does (kfp_gpu.compiler.compile), read back strictly:
    every GPU task of the pipeline carries exactly the request; the others carry nothing."""
    from kfp_gpu.compiler import compile as kc

    [path] = kc.compile_all(output_dir=tmp_path, gpu=text, only=pipeline)
    spec, platform = ir.load(path)
    resource, count, env, selector, annotations, labels = CASES[text]
    gpu_tasks = 0
    for label, ex in ir.deployment(spec).executors.items():
        if not ex.HasField("container"):
            continue  # importers
        c = ex.container
        got_env = {e.name: e.value for e in c.env if e.name.startswith("KFP_GPU_")}
        has_cfg = platform is not None and \
            label in platform.platforms["kubernetes"].deployment_spec.executors
        cfg = ir.k8s_config(platform, label) if has_cfg else None
        tolerations = [(t.key, t.operator, t.effect) for t in cfg.tolerations] if cfg else []
        if not got_env:
            assert not c.resources.accelerator.resource_type and not tolerations, label
            continue
        gpu_tasks += 1
        assert (c.resources.accelerator.resource_type,
                c.resources.accelerator.resource_count) == (resource, count), label
        assert got_env == env and tolerations == TOL, label
        assert dict(cfg.node_selector.labels) == selector
        assert dict(cfg.pod_metadata.annotations) == annotations
        assert dict(cfg.pod_metadata.labels) == labels
    assert gpu_tasks == 1


def test_fraction_text_round_trips_exactly():
    r = gpu.parse("fraction:0.1234567")
    assert gpu.parse(r.to_text()) == r and r.fraction == 0.1234567


def test_count_parameter_refused_for_shared_replicas():
    from kfp import dsl

    @dsl.component
    def noop():
        pass

    with pytest.raises(ValueError, match="shared:N,replicas=R"):
        @dsl.pipeline
        def p(n: int = 1):
            gpu.parse("shared:1,replicas=4").apply_to_task(noop(), count=n)


def test_shared_many_replicas_needs_explicit_opt_out_and_never_with_mps():
    """k8s-device-plugin internal/rm/rm.go ValidateRequest refuses > 1 shared replica when
    failRequestsGreaterThanOne is set (this project's time-slicing config; forced for MPS)."""
    with pytest.raises(ValueError, match="failRequestsGreaterThanOne"):
        gpu.parse("shared:2")
    r = gpu.parse("shared:2,allow-multiple=true")
    assert (r.resource_name, r.resource_count) == ("nvidia.com/gpu", 2)
    assert gpu.parse(r.to_text()) == r
    with pytest.raises(ValueError, match="failRequestsGreaterThanOne"):
        gpu.parse("shared:2,strategy=mps,allow-multiple=true")
    with pytest.raises(ValueError, match="true or false"):
        gpu.parse("shared:1,allow-multiple=yes")


def test_shared_product_selector_carries_gfd_shared_suffix():
    """GFD internal/lm/resource.go getProductName: shared and not renamed -> '-SHARED'."""
    sel = gpu.parse("shared:1,product=NVIDIA-A100-SXM4-40GB").node_selector()
    assert sel == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}
    assert gpu.parse("shared:1,product=NVIDIA-A100-SXM4-40GB-SHARED").node_selector() == sel
    assert gpu.parse("shared:1,product=NVIDIA-A100-SXM4-40GB,renamed=true").node_selector() == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    # whole GPUs keep the plain product name
    assert gpu.parse("gpu:1,product=NVIDIA-A100-SXM4-40GB").node_selector() == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    frag = gpu.parse("shared:1,product=NVIDIA-A100-SXM4-40GB,strategy=time-slicing")\
        .pod_fragment()
    assert frag["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED",
                                    "nvidia.com/gpu.sharing-strategy": "time-slicing"}


@pytest.mark.parametrize("text, labels", [
    ("gpu:1,queue=team-a", {"kai.scheduler/queue": "team-a"}),
    ("mig:1g.10gb,queue=team-a", {"kai.scheduler/queue": "team-a"}),
    ("shared:1,replicas=4,queue=q,queue-label=runai/queue", {"runai/queue": "q"}),
    ("metagpu:25,queue=q", {"kai.scheduler/queue": "q"}),
    ("hami:1,mem=8000,queue=q", {"kai.scheduler/queue": "q"}),
    ("fraction:0.5,queue=q", {"kai.scheduler/queue": "q"}),
    ("none,queue=cpu-jobs", {"kai.scheduler/queue": "cpu-jobs"}),
])
def test_queue_label_for_every_kind(text, labels, tmp_path):
    """KAI default_grouper.go CalcPodGroupQueue reads the queue label of any pod it
    schedules, whatever it requests."""
    r = gpu.parse(text)
    assert r.labels() == labels
    assert gpu.parse(r.to_text()) == r
    assert r.pod_fragment()["labels"] == labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, _ = compile_one(text, tmp_path)
    assert got["labels"] == labels


def test_queue_label_needs_a_queue_name():
    with pytest.raises(ValueError, match="queue=NAME"):
        gpu.parse("gpu:1,queue-label=runai/queue")
    assert gpu.parse("none") == gpu.GpuRequest() and gpu.parse("cpu").labels() == {}
