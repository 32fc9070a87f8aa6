"""Runtime memory cap: the computed limit for every request kind (CPU), and the CPU no-op.

The GPU path itself (TensorFlow logical devices on a real GPU, K capped processes side by
side) is exercised by benchmarks/gpu_share_bench.py on a GPU machine.
"""

import subprocess
import sys

import pytest

from kfp_gpu import gpu
from kfp_gpu.gpu import memory_cap

TOTAL = 81559  # MiB, an H100 80GB HBM3 as nvidia-smi reports it
R = memory_cap.DEFAULT_RESERVE_MIB


@pytest.mark.parametrize("text, total, limit", [
    ("none", TOTAL, None),
    ("gpu:1", TOTAL, None),
    ("gpu:4", TOTAL, None),
    ("mig:1g.10gb,model=H100-80GB", 9984, None),  # hardware-enforced slice
    ("shared:1", TOTAL, None),  # replicas unknown: no share to cap to
    ("shared:1,replicas=4", TOTAL, 20389 - R),  # floor(81559 / 4) - reserve
    ("shared:1,replicas=4,strategy=mps", TOTAL, 20389 - R),
    ("fraction:0.5", TOTAL, 40779 - R),
    ("fraction:0.25", 40960, 10240 - R),
    ("gpu-memory:8192", TOTAL, 8192 - R),  # absolute caps keep headroom too
    ("gpu-memory:90000", TOTAL, None),  # more than the device: nothing to cap
    ("metagpu:25", TOTAL, 20389 - R),
    ("metagpu:100", TOTAL, None),
    ("hami:1", TOTAL, None),
    ("hami:1,mem=8000,cores=30", TOTAL, 8000 - R),
])
def test_limit_for_every_kind(text, total, limit):
    env = gpu.parse(text).env()
    p = memory_cap.plan(env, total)
    assert p["limit_mib"] == limit, p["reason"]
    assert p["kind"] == gpu.parse(text).kind
    if limit is not None:
        assert 1 <= limit < total


def test_share_rounds_down_and_reserve_is_subtracted():
    assert memory_cap.memory_limit_mib("fraction", 1 / 3, None, 1000, reserve_mib=0) == (
        333, "fraction: share 0.333333 of 1000 MiB")
    limit, reason = memory_cap.memory_limit_mib("fraction", 0.5, None, 1000, reserve_mib=100)
    assert limit == 400 and "100 MiB reserve" in reason
    env = {**gpu.parse("fraction:0.5").env(), memory_cap.RESERVE_ENV: "256"}
    assert memory_cap.plan(env, 16384)["limit_mib"] == 8192 - 256


def test_default_reserve_applies_to_absolute_caps_and_refuses_tiny_shares():
    """Headroom for the CUDA context/libraries outside TensorFlow's pool."""
    assert R == 768
    assert memory_cap.plan(gpu.parse("gpu-memory:8192").env(), 40960)["limit_mib"] == 8192 - 768
    with pytest.raises(ValueError, match="reserve"):
        memory_cap.plan(gpu.parse("fraction:0.01").env(), 24576)
    # an explicit 0 keeps the plain share
    env = {**gpu.parse("fraction:0.5").env(), memory_cap.RESERVE_ENV: "0"}
    assert memory_cap.plan(env, 16384)["limit_mib"] == 8192


@pytest.mark.parametrize("env, total, limit, source", [
    ({"CUDA_DEVICE_MEMORY_LIMIT_0": "8000m", "KFP_GPU_KIND": "hami",
      "KFP_GPU_MEMORY_MIB": "6000"}, 81559, 8000 - 768, "CUDA_DEVICE_MEMORY_LIMIT_0"),
    ({"CUDA_DEVICE_MEMORY_LIMIT": "8g", "KFP_GPU_KIND": "hami", "KFP_GPU_SHARE": "1"},
     8192, 8192 - 768, "CUDA_DEVICE_MEMORY_LIMIT"),
    ({"CUDA_DEVICE_MEMORY_LIMIT": str(4096 * 2**20), "KFP_GPU_KIND": "hami"},
     81559, 4096 - 768, "CUDA_DEVICE_MEMORY_LIMIT"),
    ({"METAGPU_MAX_MEM": "10240", "KFP_GPU_KIND": "metagpu", "KFP_GPU_SHARE": "0.5"},
     40960, 10240 - 768, "METAGPU_MAX_MEM"),
    ({"GPU_PORTION": "0.50", "KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "0.25"},
     81920, 40960 - 768, "GPU_PORTION"),
])
def test_limit_injected_by_the_sharing_system_wins(env, total, limit, source):
    """HAMi CUDA_DEVICE_MEMORY_LIMIT[_i], MetaGPU METAGPU_MAX_MEM, KAI GPU_PORTION."""
    p = memory_cap.plan(env, total)
    assert (p["limit_mib"], p["source"]) == (limit, source), p["reason"]
    assert source in p["reason"]


def test_malformed_injected_limit_is_refused():
    with pytest.raises(ValueError, match="k/m/g"):
        memory_cap.plan({"CUDA_DEVICE_MEMORY_LIMIT_0": "8x", "KFP_GPU_KIND": "hami"}, 8000)
    assert memory_cap.parse_hami_limit("512k") == 0 and memory_cap.parse_hami_limit("2G") == 2048


def test_share_without_total_is_not_capped_and_says_why():
    limit, reason = memory_cap.memory_limit_mib("fraction", 0.5, None, None)
    assert limit is None and memory_cap.TOTAL_ENV in reason
    # an absolute cap needs no total
    assert memory_cap.memory_limit_mib("gpu-memory", 1.0, 4096, None)[0] == 4096 - R


@pytest.mark.parametrize("env, needle", [
    ({"KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "half"}, "KFP_GPU_SHARE must be a number"),
    ({"KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "0"}, "> 0"),
    ({"KFP_GPU_KIND": "fraction", "KFP_GPU_SHARE": "-1"}, "> 0"),
    ({"KFP_GPU_KIND": "gpu-memory", "KFP_GPU_MEMORY_MIB": "8g"}, "integer (MiB)"),
])
def test_malformed_environment_is_refused(env, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        memory_cap.plan(env, TOTAL)


def test_total_memory_from_declared_env():
    assert memory_cap.total_memory_mib({memory_cap.TOTAL_ENV: "40960"}) == [40960]


def test_import_does_not_pull_tensorflow():
    code = "import sys, kfp_gpu.gpu.memory_cap, kfp_gpu.gpu; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_apply_gpu_share_is_a_logged_noop_on_cpu(caplog):
    """Real TensorFlow on this CPU machine: no GPU, nothing applied, the reason logged."""
    env = {**gpu.parse("fraction:0.25").env(), memory_cap.TOTAL_ENV: "16384"}
    with caplog.at_level("INFO", logger="kfp_gpu.gpu.memory_cap"):
        r = memory_cap.apply_gpu_share(env)
    assert r["gpus"] == 0 and r["applied"] is False
    assert r["kind"] == "fraction" and r["share"] == 0.25
    assert "no GPU visible" in r["reason"]
    assert any("no GPU visible" in m for m in caplog.messages)
    import tensorflow as tf

    # the CPU device configuration was left alone
    assert len(tf.config.list_logical_devices("CPU")) == 1


def test_apply_gpu_share_sets_logical_device_limit_per_gpu(monkeypatch):
    """Wiring check with TensorFlow's device list replaced by two fake GPU entries (no GPU
    here): every visible GPU gets one logical device with the computed MiB limit."""
    import tensorflow as tf

    fake = [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU"),
            tf.config.PhysicalDevice("/physical_device:GPU:1", "GPU")]
    calls = []
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: fake if kind == "GPU" else [])
    monkeypatch.setattr(tf.config, "set_logical_device_configuration",
                        lambda dev, cfgs: calls.append((dev.name, [c.memory_limit for c in cfgs])))
    env = {**gpu.parse("metagpu:25").env(), memory_cap.TOTAL_ENV: "40000"}
    r = memory_cap.apply_gpu_share(env)
    assert r["applied"] is True and r["limit_mib"] == 10000 - R and r["gpus"] == 2
    assert calls == [("/physical_device:GPU:0", [10000 - R]),
                     ("/physical_device:GPU:1", [10000 - R])]
    calls.clear()
    # HAMi numbers its limit per visible device: each GPU gets its own
    r = memory_cap.apply_gpu_share({**gpu.parse("hami:2").env(),
                                    "CUDA_DEVICE_MEMORY_LIMIT_0": "8000m",
                                    "CUDA_DEVICE_MEMORY_LIMIT_1": "6000m"})
    assert calls == [("/physical_device:GPU:0", [8000 - R]), ("/physical_device:GPU:1", [6000 - R])]
    calls.clear()
    r = memory_cap.apply_gpu_share({**gpu.parse("gpu:2").env(), memory_cap.TOTAL_ENV: "40000"})
    assert r["applied"] is False and calls == []


def test_horovod_rank_caps_only_its_pinned_gpu(monkeypatch):
    """A Horovod rank (kfp_gpu.training.horovod_runtime.setup_devices) pins GPU local_rank and caps
    that one device to a fractional share; with a whole-GPU request it uses memory growth."""
    import tensorflow as tf

    from kfp_gpu.training import horovod_runtime

    fake = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
    calls = []
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: fake if kind == "GPU" else [])
    monkeypatch.setattr(tf.config, "set_visible_devices",
                        lambda dev, kind=None: calls.append(("visible", dev.name)))
    monkeypatch.setattr(tf.config, "set_logical_device_configuration",
                        lambda dev, cfgs: calls.append(("cap", dev.name, cfgs[0].memory_limit)))
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth",
                        lambda dev, on: calls.append(("growth", dev.name)))

    class Rank1:
        @staticmethod
        def local_rank():
            return 1

    for key, value in {**gpu.parse("fraction:0.5").env(), memory_cap.TOTAL_ENV: "80000"}.items():
        monkeypatch.setenv(key, value)
    assert horovod_runtime.setup_devices(Rank1) == "/physical_device:GPU:1"
    assert calls == [("visible", "/physical_device:GPU:1"),
                     ("cap", "/physical_device:GPU:1", 40000 - R)]
    calls.clear()
    for key, value in gpu.parse("gpu:2").env().items():
        monkeypatch.setenv(key, value)
    horovod_runtime.setup_devices(Rank1)
    assert calls == [("visible", "/physical_device:GPU:1"), ("growth", "/physical_device:GPU:1")]


def test_shared_gpu_without_a_cap_turns_memory_growth_on(monkeypatch):
    """shared:1 (replicas unknown): no MiB cap, but TensorFlow must not take the whole GPU."""
    import tensorflow as tf

    fake = [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
    calls = []
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: fake if kind == "GPU" else [])
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth",
                        lambda dev, on: calls.append((dev.name, on)))
    r = memory_cap.apply_gpu_share({**gpu.parse("shared:1").env(), memory_cap.TOTAL_ENV: "80000"})
    assert r["applied"] is False and r.get("memory_growth") is True
    assert calls == [("/physical_device:GPU:0", True)]
    calls.clear()
    r = memory_cap.apply_gpu_share({**gpu.parse("gpu:1").env(), memory_cap.TOTAL_ENV: "80000"})
    assert calls == [] and "memory_growth" not in r  # a whole GPU is this pod's alone
