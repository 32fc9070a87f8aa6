"""The inventory of bad inputs: options, parameters, files and environments a user gets wrong.

Each case states what the user types (argv, with the environment and the files it
prepares), the exit status, and a regex of the ONE line the user sees; no case may show a
Python traceback. Exit statuses (README "Exit codes"): 1 the job ran and failed, 2 usage or
input error, 3 cluster or engine unreachable. No case runs a task: each is refused before
kfp.local, the KFP API or a Docker engine would be used (a case that got that far would
fail on the exit status or its timeout). ``{tmp}`` in argv/env is the case's folder with
the files of :func:`_files`.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from kfp_gpu.catalog import discover
from kfp_gpu.catalog import params as catalog_params
from kfp_gpu.cli import app, errors
from kfp_gpu.dsl import parameters

REPO = Path(__file__).resolve().parents[2]
DEAD_URL = "http://127.0.0.1:1"  # nothing listens on port 1: connection refused at once
NO_ENGINE = "unix:///nonexistent/docker.sock"
#: Environment every case starts from: nothing of the user's leaks in.
CLEAN_ENV = ("KUBECONFIG", "KFP_HOST", "KFP_GPU_REGISTRY", "KFP_GPU_DATA_DIR", "KFP_TOKEN",
             "AWS_ENDPOINT_URL_S3", "AWS_PROFILE")


def _files(tmp: Path) -> None:
    """The files cases refer to as {tmp}/NAME."""
    (tmp / "truncated.yaml").write_text("apiVersion: v1\nitems: [1, 2\n")
    (tmp / "tabs.yaml").write_text("a:\n\tb: 1\n")
    (tmp / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "empty.yaml").write_text("")
    (tmp / "binary.yaml").write_bytes(b"\xff\xfe\x00\x01garbage")
    (tmp / "gz.yaml").write_bytes(gzip.compress(b"kind: MPIJob\n")[:12])
    (tmp / "adir").mkdir()
    (tmp / "adir.yaml").mkdir()
    (tmp / "kc-text").write_text("just some text\n")
    (tmp / "kc-list").write_text("- clusters\n")
    (tmp / "kc-dead").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    _data_files(tmp)
    (tmp / "job.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "j"},
        "spec": {"mpiReplicaSpecs": {}}}))


REVIEWS = "review,sentiment\ngood film,positive\nbad film,negative\n"


def _data_files(tmp: Path) -> None:
    """Data files a new user might point a pipeline at: real bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp / "wrongcol.csv.gz").write_bytes(gzip.compress(b"text,sentiment\nnice,positive\n"))
    (tmp / "dd" / "imdb").mkdir(parents=True)  # --data-dir: the issue's own case
    (tmp / "dd" / "imdb" / "imdb_50k.csv.gz").write_bytes((tmp / "wrongcol.csv.gz").read_bytes())
    (tmp / "empty.csv").write_bytes(b"")
    (tmp / "empty.csv.gz").write_bytes(gzip.compress(b""))
    (tmp / "latin1.csv").write_bytes(REVIEWS.replace("good", "tr\u00e8s bon").encode("latin-1"))
    (tmp / "plain.csv.gz").write_text(REVIEWS)
    (tmp / "cut.csv.gz").write_bytes(gzip.compress(REVIEWS.encode() * 200)[:-30])
    (tmp / "nolabel.parquet").write_bytes(b"")
    pq.write_table(pa.table({"review": ["good"], "stars": [5]}), tmp / "nolabel.parquet")
    (tmp / "junk.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp / "reviews.txt").write_text(REVIEWS)
    (tmp / "nomodel").mkdir()
    (tmp / "notzip.keras").write_text("not a model")


def C(argv: str | list[str], code: int, line: str, env: dict | None = None,
      many: bool = False, id: str | None = None):
    """One case: ``argv`` (a string is split on spaces), exit ``code``, the regex ``line``
    of the one line shown (``many``: a report precedes it, the line is among them)."""
    args = argv.split(" ") if isinstance(argv, str) else argv
    return pytest.param(args, code, line, env or {}, many, id=id or " ".join(args)[:90])


RANGE = r"parameter {}=.* is refused: accepted is {}"
IMDB = "run imdb-lstm --local -p "
RESNET = "run resnet-horovod --local -p "
FRAC = "run fractional-eval --local -p model_uri=/ -p test_data_uri=/ -p "
GPU_FORMS = r"accepted: 'none', 'gpu:N"
UNUSABLE = [
    # ---------------------------------------------------------------- front door
    C("nosuch", 2, r"^error: No such command 'nosuch'"),
    C("--bogus", 2, r"^error: No such option: --bogus"),
    C("version extra", 2, r"^error: Got unexpected extra argument.* \(extra\)"),
    C("-v nosuch", 2, r"^error: No such command"),
    C("params nope", 2, r"^error: unknown pipeline 'nope'; accepted: fractional-eval"),
    C("params", 2, r"^error: Missing argument '(?i:pipeline)'"),
    # ---------------------------------------------------------------- compile
    C("compile --only nope", 2, r"^error: unknown component or pipeline 'nope'; accepted"),
    C("compile --check --gpu gpu:1", 2, r"takes no --gpu"),
    C("compile --gpu gpu:2", 2, r"need --output-dir DIR"),
    C(["compile", "--gpu", "", "-o", "{tmp}/o"], 2, r"^error: Invalid value for '--gpu': "
      r"empty GPU request; give e.g. 'gpu:1'"),
    C(["compile", "--gpu", " ", "-o", "{tmp}/o"], 2, r"empty GPU request"),
    C("compile --gpu gpu:-1 -o {tmp}/o", 2, r"count must be an integer >= 0, got '-1'"),
    C("compile --gpu gpu:1.5 -o {tmp}/o", 2, r"count must be an integer >= 0, got '1.5'"),
    C("compile --gpu gpu:1e9 -o {tmp}/o", 2, r"count must be an integer"),
    C("compile --gpu gpu:17 -o {tmp}/o", 2, r"17 GPUs in one pod can never be scheduled: the "
      r"largest GPU nodes hold 16"),
    C("compile --gpu gpu:100000 -o {tmp}/o", 2, r"100000 GPUs in one pod can never be sched"),
    C("compile --gpu shared:64 -o {tmp}/o", 2, r"refuses more than one time-slicing/MPS replica"),
    C("compile --gpu shared:64,allow-multiple=true -o {tmp}/o", 2, r"64 GPUs in one pod"),
    C("compile --gpu hami:32 -o {tmp}/o", 2, r"32 GPUs in one pod"),
    C(["compile", "--gpu", "gpu:1,product=a b", "-o", "{tmp}/o"], 2,
      r"node selector nvidia.com/gpu.product: 'a b' is not a valid label value"),
    C(["compile", "--gpu", "gpu:1,product=" + "x" * 64, "-o", "{tmp}/o"], 2,
      r"is not a valid label value: accepted is empty or at most 63"),
    C(["compile", "--gpu", "gpu:1,product=-H100", "-o", "{tmp}/o"], 2,
      r"'-H100' is not a valid label value"),
    C(["compile", "--gpu", "gpu:1,product=H100é", "-o", "{tmp}/o"], 2,
      r"is not a valid label value"),
    C(["compile", "--gpu", "fraction:0.5,queue=Bad Q", "-o", "{tmp}/o"], 2,
      r"pod label kai.scheduler/queue: 'Bad Q' is not a valid label value"),
    C(["compile", "--gpu", "fraction:0.5,queue=a,queue-label=bad key!", "-o", "{tmp}/o"], 2,
      r"pod label key: 'bad key!' is not a valid label key"),
    C(["compile", "--gpu", "fraction:0.5,queue=a,queue-label=a/b/c", "-o", "{tmp}/o"], 2,
      r"'a/b/c' is not a valid label key"),
    C(["compile", "--gpu", "fraction:0.5,queue=a,queue-label=Ex.com/q", "-o", "{tmp}/o"], 2,
      r"'Ex.com/q' is not a valid label key"),
    C("compile --gpu fraction:0 -o {tmp}/o", 2, r"fraction must be a number with 0 < F < 1"),
    C("compile --gpu fraction:1 -o {tmp}/o", 2, r"fraction must be a number with 0 < F < 1"),
    C("compile --gpu fraction:1.5 -o {tmp}/o", 2, r"fraction must be a number with 0 < F < 1"),
    C("compile --gpu fraction:nan -o {tmp}/o", 2, r"fraction must be a number"),
    C("compile --gpu mig:9g.9gb -o {tmp}/o", 2, r"unknown MIG profile '9g.9gb'; accepted: "),
    C("compile --gpu metagpu:0 -o {tmp}/o", 2, r"metagpu: units must be an integer 1..100"),
    C("compile --gpu metagpu:101 -o {tmp}/o", 2, r"metagpu: units must be an integer 1..100"),
    C("compile --gpu hami:1,mem=0 -o {tmp}/o", 2, r"hami: mem \(MiB\) must be an integer >= 1"),
    C("compile --gpu hami:1,cores=101 -o {tmp}/o", 2, r"hami: cores"),
    C("compile --gpu nonsense -o {tmp}/o", 2, r"invalid GPU request 'nonsense'; " + GPU_FORMS),
    C("compile --gpu gpu:1,foo=bar -o {tmp}/o", 2, r"invalid option 'foo=bar' for 'gpu'"),
    C(["compile", "--registry", "a b", "-o", "{tmp}/o"], 2,
      r"^error: Invalid value for '--registry'.*invalid registry 'a b': accepted is an image "
      r"name prefix"),
    C(["compile", "--registry", "", "-o", "{tmp}/o"], 2, r"invalid registry '': accepted"),
    C("compile --registry Registry.example.com/ML -o {tmp}/o", 2, r"invalid registry"),
    C("compile --registry registry.example.com/ml/ -o {tmp}/o", 2, r"no trailing slash"),
    C(["compile", "--registry", "régistry.example.com/ml", "-o", "{tmp}/o"], 2,
      r"invalid registry 'régistry"),
    C(["compile", "--registry", "r.example.com/" + "a" * 260, "-o", "{tmp}/o"], 2,
      r"at most 255 characters"),
    C("compile --registry registry.example.com:port/ml -o {tmp}/o", 2, r"invalid registry"),
    C("compile --check", 2, r"takes no --gpu/--output-dir/--registry",
      env={"KFP_GPU_REGISTRY": "registry.example.com/ml"}, id="compile --check with "
      "$KFP_GPU_REGISTRY set"),
    C("compile -o {tmp}/o", 2, r"invalid registry 'bad registry'",
      env={"KFP_GPU_REGISTRY": "bad registry"}, id="compile with a bad $KFP_GPU_REGISTRY"),
    C("compile --bogus", 2, r"^error: No such option: --bogus"),
    C("compile -o /dev/null/x --only imdb-lstm", 2, r"^error: --output-dir /dev/null/x: "
      r"/dev/null is not a folder, so nothing can be created under it; name a folder$"),
    C("compile -o /dev/null/x/y --only imdb-lstm", 2, r"/dev/null is not a folder"),
    C("compile -o {tmp}/job.yaml --only imdb-lstm", 2, r"job.yaml: exists and is not a folder"),
    # ---------------------------------------------------------------- run --local
    C("run imdb-lstm", 2, r"only --local runs are supported by `run`.*kfp-gpu submit"),
    C("run nope --local", 2, r"unknown pipeline 'nope'"),
    C("run --local", 2, r"^error: Missing argument '(?i:pipeline)'"),
    C(IMDB + "bogus=1", 2, r"unknown parameter 'bogus'; accepted: accuracy_threshold"),
    C(IMDB + "epochs", 2, r"--param takes key=value, got 'epochs'"),
    C(IMDB + "=3", 2, r"--param takes key=value, got '=3'"),
    C(IMDB + "epochs=two", 2, r"parameter epochs: 'two' is not an integer"),
    C(IMDB + "epochs=1.5", 2, r"parameter epochs: '1.5' is not an integer"),
    C(IMDB + "epochs=0", 2, RANGE.format("epochs", "an integer >= 1") + r" \(training epochs\)"),
    C(IMDB + "epochs=-3", 2, RANGE.format("epochs", "an integer >= 1")),
    C(IMDB + "learning_rate=nan", 2, RANGE.format("learning_rate", "a number > 0")),
    C(IMDB + "learning_rate=inf", 2, RANGE.format("learning_rate", "a number > 0")),
    C(IMDB + "learning_rate=-0.1", 2, RANGE.format("learning_rate", "a number > 0")),
    C(IMDB + "learning_rate=0", 2, RANGE.format("learning_rate", "a number > 0")),
    C(IMDB + "learning_rate=fast", 2, r"parameter learning_rate: 'fast' is not a number"),
    C(IMDB + "dropout=1", 2, RANGE.format("dropout", r"a number in \[0, 1\)")),
    C(IMDB + "dropout=1.5", 2, RANGE.format("dropout", r"a number in \[0, 1\)")),
    C(IMDB + "dropout=-0.1", 2, RANGE.format("dropout", r"a number in \[0, 1\)")),
    C(IMDB + "dropout=nan", 2, RANGE.format("dropout", r"a number in \[0, 1\)")),
    C(IMDB + "batch_size=0", 2, RANGE.format("batch_size", "an integer >= 1")),
    C(IMDB + "maxlen=0", 2, RANGE.format("maxlen", "an integer >= 1")),
    C(IMDB + "num_words=2", 2, RANGE.format("num_words", "an integer >= 3")),
    C(IMDB + "embedding_dim=0", 2, RANGE.format("embedding_dim", "an integer >= 1")),
    C(IMDB + "lstm_units=0", 2, RANGE.format("lstm_units", "an integer >= 1")),
    C(IMDB + "max_rows_per_split=-1", 2, RANGE.format("max_rows_per_split", "an integer >= 0")),
    C(IMDB + "seed=-1", 2, RANGE.format("seed", r"an integer in \[0, 4294967295\]")),
    C(IMDB + "seed=4294967296", 2, RANGE.format("seed", r"an integer in \[0, 4294967295\]")),
    C(IMDB + "accuracy_threshold=1.5", 2,
      RANGE.format("accuracy_threshold", r"a number in \[0, 1\]")),
    C(IMDB + "accuracy_threshold=-0.01", 2,
      RANGE.format("accuracy_threshold", r"a number in \[0, 1\]")),
    C(IMDB + "mixed_precision=maybe", 2, r"parameter mixed_precision: 'maybe' is not a boolean"),
    C(IMDB + "source=", 2, RANGE.format("source", "non-empty text")),
    C(["run", "imdb-lstm", "--local", "-p", "source=  "], 2,
      RANGE.format("source", "non-empty text")),
    C(RESNET + "execution=gpu", 2, RANGE.format("execution", "one of auto, local, cluster")),
    C(RESNET + "backend=pytorchjob", 2, RANGE.format("backend", "one of mpijob, trainjob")),
    C(RESNET + "workers=0", 2, RANGE.format("workers", "an integer >= 1")),
    C(RESNET + "local_processes=0", 2, RANGE.format("local_processes", "an integer >= 1")),
    C(RESNET + "optimizer=rmsprop", 2, RANGE.format("optimizer", "one of sgd, adam")),
    C(RESNET + "model_name=resnet18", 2, RANGE.format("model_name", "one of small, resnet50")),
    C(RESNET + "blocks=0", 2, RANGE.format("blocks", "an integer >= 1")),
    C(RESNET + "width=0", 2, RANGE.format("width", "an integer >= 1")),
    C(RESNET + "epochs=0", 2, RANGE.format("epochs", "an integer >= 1")),
    C(RESNET + "batch_size=-8", 2, RANGE.format("batch_size", "an integer >= 1")),
    C(RESNET + "steps_per_epoch=-1", 2, RANGE.format("steps_per_epoch", "an integer >= 0")),
    C(RESNET + "lr_warmup_steps=-1", 2, RANGE.format("lr_warmup_steps", "an integer >= 0")),
    C(RESNET + "learning_rate=nan", 2, RANGE.format("learning_rate", "a number > 0")),
    C(RESNET + "rdma=perhaps", 2, r"parameter rdma: 'perhaps' is not a boolean"),
    C(RESNET + "xla=2", 2, r"parameter xla: '2' is not a boolean"),
    C(RESNET + "rdma_resource=", 2, RANGE.format("rdma_resource", "an extended resource")),
    C(RESNET + "rdma_resource=rdma", 2, RANGE.format("rdma_resource", "an extended resource")),
    C(RESNET + "rdma_resource=kubernetes.io/rdma", 2,
      RANGE.format("rdma_resource", "an extended resource")),
    C(RESNET + "source=", 2, RANGE.format("source", "non-empty text")),
    C(["run", "resnet-horovod", "--local", "-p", "rdma_resource=rdma shared"], 2,
      RANGE.format("rdma_resource", "an extended resource name DOMAIN/NAME")),
    C(RESNET + "rdma_resource=a/b/c", 2, RANGE.format("rdma_resource", "an extended resource")),
    C(RESNET + "accuracy_threshold=2", 2,
      RANGE.format("accuracy_threshold", r"a number in \[0, 1\]")),
    C(RESNET + "epochs=1 -p nope=1", 2, r"unknown parameter 'nope'"),
    C(FRAC + "num_shards=0", 2, RANGE.format("num_shards", "an integer >= 1")),
    C(FRAC + "batch_size=0", 2, RANGE.format("batch_size", "an integer >= 1")),
    C(FRAC + "accuracy_threshold=-0.1", 2,
      RANGE.format("accuracy_threshold", r"a number in \[0, 1\]")),
    C("run fractional-eval --local -p model_uri= -p test_data_uri=/", 2,
      RANGE.format("model_uri", "non-empty text")),
    C(IMDB + "source=/nonexistent/reviews.csv.gz", 2, r"parameter source='/nonexistent/"
      r"reviews.csv.gz': no such file or folder on this machine \(reviews: .*\); accepted: "
      r"keras:imdb, a gs:// / s3:// URI, an existing path"),
    C(RESNET + "source=fashion_mnist", 2, r"parameter source='fashion_mnist': no such file or "
      r"folder .*accepted: fashion-mnist, synthetic, a gs:// / s3:// URI"),
    C("run fractional-eval --local -p model_uri=/nonexistent/model -p test_data_uri=/", 2,
      r"parameter model_uri='/nonexistent/model': no such file or folder on this machine"),
    C("run fractional-eval --local -p model_uri=/ -p test_data_uri=nowhere", 2,
      r"parameter test_data_uri='nowhere': no such file or folder"),
    # store URIs: the form before any task starts (run --local and submit), one line naming
    # the accepted form; an endpoint that does not answer: 3 (tests/unit/test_store_errors.py
    # has the missing objects, against a real S3 server and the GCS emulator)
    C(IMDB + "source=s3://", 2,
      r"^error: parameter source: 's3://' names no bucket: accepted is s3://BUCKET/KEY$"),
    C(IMDB + "source=gs:///x", 2,
      r"^error: parameter source: 'gs:///x' names no bucket: accepted is gs://BUCKET/OBJECT$"),
    C(IMDB + "source=s3://bucket/", 2, r"^error: parameter source: 's3://bucket/' names no "
      r"object in bucket 'bucket': accepted is s3://BUCKET/KEY$"),
    C(IMDB + "source=minio://b/k.csv", 2, r"^error: parameter source: 'minio://b/k.csv' is "
      r"not a URI this reads: accepted is gs://BUCKET/OBJECT or s3://BUCKET/KEY$"),
    C(RESNET + "work_dir=gs://", 2, r"^error: parameter work_dir: 'gs://' names no bucket"),
    C(IMDB + "checkpoint_dir=gs:///ckpt", 2, r"^error: parameter checkpoint_dir: 'gs:///ckpt' "
      r"names no bucket: accepted is gs://BUCKET/OBJECT$"),
    C("run fractional-eval --local -p model_uri=s3:///m -p test_data_uri=/", 2,
      r"^error: parameter model_uri: 's3:///m' names no bucket: accepted is s3://BUCKET/KEY$"),
    C("submit imdb-lstm --host " + DEAD_URL + " -p source=s3://", 2,
      r"^error: parameter source: 's3://' names no bucket: accepted is s3://BUCKET/KEY$"),
    C("submit resnet-horovod --host " + DEAD_URL + " -p source=gs:///x.npz", 2,
      r"^error: parameter source: 'gs:///x.npz' names no bucket"),
    C(IMDB + "source=s3://b/reviews.csv", 3, r"^error: cannot connect: parameter source: "
      r"s3://b/reviews.csv: the store at http://127.0.0.1:1 \(AWS_ENDPOINT_URL\) does not "
      r"answer \(Could not connect to the endpoint URL: \"http://127.0.0.1:1/b/reviews.csv\"\)$",
      env={"AWS_ENDPOINT_URL": DEAD_URL, "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1"},
      id="run --local, an S3 endpoint that does not answer"),
    # fractional-eval: num_shards against the GPU fraction compiled into its shard tasks
    C(FRAC + "num_shards=8", 2, r"^error: num_shards=8 does not fit the GPU fraction this "
      r"pipeline was compiled with: 8 shards x gpu-fraction 0.25 = 2 GPUs, .*accepted is "
      r"num_shards <= 4, or compile for 8 shards \(kfp-gpu compile -o DIR --only "
      r"fractional-eval --gpu fraction:0.125\)$"),
    C(FRAC + "num_shards=8 --gpu fraction:0.2", 2, r"num_shards=8 does not fit .* accepted is "
      r"num_shards <= 5,"),
    C("run fractional-eval --local", 2, r"^error: fractional-eval needs -p model_uri=\.\.\. "
      r"\(the Keras model to evaluate \(folder or gs:// / s3:// / minio:// URI\)\); "
      r"-p test_data_uri=\.\.\."),
    C("run fractional-eval --local -p model_uri=/", 2, r"needs -p test_data_uri=\.\.\. \("),
    C("submit fractional-eval --host " + DEAD_URL, 2, r"fractional-eval needs -p model_uri"),
    C(["run", "imdb-lstm", "--local", "--gpu", ""], 2, r"empty GPU request"),
    C("run imdb-lstm --local --gpu gpu:64", 2, r"64 GPUs in one pod can never be scheduled"),
    C("run imdb-lstm --local --gpu fraction:2", 2, r"fraction must be a number with 0 < F < 1"),
    C("run imdb-lstm --local --data-dir /nonexistent", 2, r"not found \(data dir /nonexist"),
    C("run imdb-lstm --local --data-dir /dev/null/x", 2, r"not found \(data dir /dev/null/x\)"),
    C("run imdb-lstm --local", 2, r"not found \(data dir /nonexistent/data\)",
      env={"KFP_GPU_DATA_DIR": "/nonexistent/data"}, id="run with $KFP_GPU_DATA_DIR nowhere"),
    C("run imdb-lstm --local --runner podman", 2, r"unknown runner 'podman'; accepted"),
    C("run imdb-lstm --local --summary-json /dev/null/x/s.json", 2,
      r"--summary-json /dev/null/x/s.json: .*not an existing folder"),
    C("run imdb-lstm --local --summary-json {tmp}/adir", 2,
      r"--summary-json .*adir: is a folder; name a file"),
    C("run imdb-lstm --local --pipeline-root /dev/null/x", 2, r"--pipeline-root /dev/null/x"),
    C("run imdb-lstm --local --pipeline-root {tmp}/job.yaml", 2,
      r"--pipeline-root .*job.yaml: exists and is not a folder"),
    C("run imdb-lstm --local --runner docker", 3, r"Docker engine",
      env={"DOCKER_HOST": NO_ENGINE}, id="run --runner docker without an engine"),
    C("run imdb-lstm --local --bogus", 2, r"^error: No such option: --bogus"),
    # ------------------------------------- run --local: data files, checked before any task
    C("run imdb-lstm --local --data-dir {tmp}/dd", 2, r"^error: .*imdb_50k.csv.gz: "
      r"text_column 'review' not found; the columns are \['text', 'sentiment'\]$"),
    C(IMDB + "source={tmp}/wrongcol.csv.gz", 2, r"text_column 'review' not found"),
    C(IMDB + "source={tmp}/empty.csv", 2, r"empty.csv: the file is empty \(no header row\)"),
    C(IMDB + "source={tmp}/empty.csv.gz", 2, r"empty.csv.gz: the file is empty"),
    C(IMDB + "source={tmp}/latin1.csv", 2, r"latin1.csv: undecodable bytes at offset 19 "
      r"\(b'\\xe8s b'\): the file must be UTF-8"),
    C(IMDB + "source={tmp}/plain.csv.gz", 2, r"plain.csv.gz: not a complete gzip file "
      r"\(Not a gzipped file"),
    C(IMDB + "source={tmp}/cut.csv.gz", 2, r"cut.csv.gz: not a complete gzip file \(Compressed "
      r"file ended before the end-of-stream marker"),
    C(IMDB + "source={tmp}/nolabel.parquet", 2, r"nolabel.parquet: label_column 'sentiment' "
      r"not found; the columns are \['review', 'stars'\]"),
    C(IMDB + "source={tmp}/junk.parquet", 2, r"junk.parquet: cannot parse as parquet"),
    C(IMDB + "source={tmp}/reviews.txt", 2, r"cannot tell the format of .*reviews.txt'; "
      r"accepted suffixes"),
    C(FRAC + "model_uri={tmp}/nomodel", 2, r"no Keras model at .*nomodel \(expected "
      r"model.keras\)"),
    C(FRAC + "model_uri={tmp}/notzip.keras", 2, r"notzip.keras is not a Keras model file"),
    # ---------------------------------------------------------------- submit
    C("submit imdb-lstm", 2, r"^error: Missing option '--host'"),
    C("submit imdb-lstm --host foo", 2, r"'foo' is not a URL; accepted: http\(s\)://HOST"),
    C("submit imdb-lstm --host ftp://kfp.example.com", 2, r"'ftp://kfp.example.com' is not a"),
    C("submit imdb-lstm --host http://", 2, r"'http://' is not a URL"),
    C(["submit", "imdb-lstm", "--host", "http://a b"], 2, r"'http://a b' is not a URL"),
    C("submit imdb-lstm --host http://kfp:port", 2, r"'http://kfp:port' is not a URL"),
    C("submit imdb-lstm", 2, r"'kfp.example.com' is not a URL",
      env={"KFP_HOST": "kfp.example.com"}, id="submit with $KFP_HOST without a scheme"),
    C("submit imdb-lstm --host " + DEAD_URL + " --ui-host nope", 2, r"'nope' is not a URL"),
    C("submit nope --host " + DEAD_URL, 2, r"unknown pipeline 'nope'; accepted: a catalog"),
    C("submit {tmp}/missing.yaml --host " + DEAD_URL, 2, r"unknown pipeline '.*missing.yaml'"),
    C("submit {tmp}/adir.yaml --host " + DEAD_URL, 2, r"unknown pipeline '.*adir.yaml'"),
    C("submit {tmp}/truncated.yaml --host " + DEAD_URL, 2,
      r"^error: invalid YAML: .*truncated.yaml, line 3, column 1: expected ',' or ']'"),
    C("submit {tmp}/tabs.yaml --host " + DEAD_URL, 2, r"^error: invalid YAML: .*tabs.yaml"),
    C("submit {tmp}/deployment.yaml --host " + DEAD_URL, 2,
      r"deployment.yaml: not a compiled KFP pipeline \(no pipelineInfo and root\)"),
    C("submit {tmp}/list.yaml --host " + DEAD_URL, 2, r"list.yaml: not a compiled KFP pipel"),
    C("submit {tmp}/empty.yaml --host " + DEAD_URL, 2, r"empty.yaml: not a compiled KFP pipe"),
    C("submit {tmp}/binary.yaml --host " + DEAD_URL, 2, r"codec can't decode byte 0xff"),
    C("submit imdb-lstm --host " + DEAD_URL + " -p bogus=1", 2, r"unknown parameter 'bogus'"),
    C("submit imdb-lstm --host " + DEAD_URL + " -p novalue", 2, r"--param takes key=value"),
    C("submit imdb-lstm --host " + DEAD_URL + " -p epochs=0", 2,
      RANGE.format("epochs", "an integer >= 1")),
    C("submit imdb-lstm --host " + DEAD_URL + " -p learning_rate=nan", 2,
      RANGE.format("learning_rate", "a number > 0")),
    C("submit resnet-horovod --host " + DEAD_URL + " -p backend=slurm", 2,
      RANGE.format("backend", "one of mpijob, trainjob")),
    C("submit imdb-lstm --host " + DEAD_URL + " --timeout 0", 2,
      r"'--timeout': 0.0 seconds: accepted is a number > 0"),
    C("submit imdb-lstm --host " + DEAD_URL + " --timeout -5", 2, r"accepted is a number > 0"),
    C("submit imdb-lstm --host " + DEAD_URL + " --timeout nan", 2, r"accepted is a number > 0"),
    C("submit imdb-lstm --host " + DEAD_URL + " --timeout abc", 2,
      r"^error: Invalid value for '--timeout'"),
    C("submit imdb-lstm --host " + DEAD_URL + " --poll 0", 2, r"'--poll': 0.0 seconds"),
    C("submit imdb-lstm --host " + DEAD_URL + " -n Team_A", 2,
      r"'Team_A' is not a valid name: accepted is a DNS-1123 label"),
    C("submit imdb-lstm --host " + DEAD_URL + " -n " + "a" * 64, 2, r"is not a valid name"),
    C(["submit", "imdb-lstm", "--host", DEAD_URL, "--service-account", "Bad SA"], 2,
      r"'Bad SA' is not a valid name: accepted is a DNS-1123 subdomain"),
    C("submit imdb-lstm --host " + DEAD_URL + " --ssl-ca-cert /nonexistent/ca.pem", 2,
      r"'--ssl-ca-cert': /nonexistent/ca.pem: no such file"),
    C("submit imdb-lstm --host " + DEAD_URL + " --ssl-ca-cert {tmp}/adir", 2,
      r"adir: is a directory"),
    C("submit imdb-lstm --host " + DEAD_URL, 3,
      r"^error: the KFP API at http://127.0.0.1:1 does not answer: ConnectionError"),
    # ---------------------------------------------------------------- doctor
    C("doctor --kubeconfig /nonexistent/kc", 2, r"'--kubeconfig'.*/nonexistent/kc: no such"),
    C("doctor --kubeconfig {tmp}/adir", 2, r"adir: is a directory"),
    C("doctor --kubeconfig {tmp}/truncated.yaml", 2,
      r"truncated.yaml is not a kubeconfig: invalid YAML: .*line 3"),
    C("doctor --kubeconfig {tmp}/kc-text", 2, r"kc-text is not a kubeconfig: not a YAML map"),
    C("doctor --kubeconfig {tmp}/kc-list", 2, r"kc-list is not a kubeconfig"),
    C("doctor --kubeconfig {tmp}/binary.yaml", 2, r"binary.yaml is not a kubeconfig: not UTF-8"),
    C("doctor", 2, r"/nonexistent/kc: no such file", env={"KUBECONFIG": "/nonexistent/kc"},
      id="doctor with $KUBECONFIG nowhere"),
    C("doctor", 2, r"truncated.yaml is not a kubeconfig", id="doctor with a corrupt $KUBECONFIG",
      env={"KUBECONFIG": "{tmp}/truncated.yaml"}),
    C(["doctor", "--gpu", ""], 2, r"empty GPU request"),
    C("doctor --gpu gpu:1.5", 2, r"count must be an integer >= 0"),
    C("doctor --gpu gpu:33", 2, r"33 GPUs in one pod"),
    C(["doctor", "--gpu", "gpu:1,product=A 100"], 2, r"'A 100' is not a valid label value"),
    C("doctor -n BAD", 2, r"'BAD' is not a valid name: accepted is a DNS-1123 label"),
    C("doctor -n -x-", 2, r"'-x-' is not a valid name"),
    C(["doctor", "--service-account", "Pipeline Runner"], 2, r"is not a valid name"),
    C("doctor --kfp-host kfp.local", 2, r"'kfp.local' is not a URL"),
    C("doctor", 2, r"'nope' is not a URL", env={"KFP_HOST": "nope"},
      id="doctor with $KFP_HOST without a scheme"),
    C("doctor --ssl-ca-cert /nonexistent/ca.pem", 2, r"/nonexistent/ca.pem: no such file"),
    C("doctor --backend slurm", 2, r"invalid --backend 'slurm'; accepted: mpijob, trainjob"),
    C("doctor --pipeline nope", 2, r"unknown pipeline 'nope'"),
    C("doctor --pipeline {tmp}/truncated.yaml", 2, r"^error: invalid YAML: .*truncated.yaml"),
    C("doctor --pipeline {tmp}/deployment.yaml", 2, r"not a compiled KFP pipeline"),
    C("doctor --kubeconfig {tmp}/kc-dead", 3, r"^verdict: NOT READY", many=True,
      id="doctor, Kubernetes API unreachable"),
    C("doctor --kubeconfig {tmp}/kc-dead --kfp-host " + DEAD_URL, 3,
      r"^http://127.0.0.1:1 +FAILED ConnectionError", many=True,
      id="doctor --kfp-host shows its check without a cluster"),
    # ---------------------------------------------------------------- mpijob run-local
    C("mpijob run-local", 2, r"^error: Missing argument '(?i:file)'"),
    C("mpijob run-local {tmp}/missing.yaml", 2, r"missing.yaml: no such file"),
    C("mpijob run-local {tmp}/adir", 2, r"adir: is a directory"),
    C("mpijob run-local {tmp}/job.yaml --pvc scratch", 2, r"'scratch': accepted is CLAIM=DIR"),
    C("mpijob run-local {tmp}/job.yaml --pvc =/tmp", 2, r"accepted is CLAIM=DIR"),
    C("mpijob run-local {tmp}/job.yaml --pvc Scratch=/tmp", 2,
      r"claim of 'Scratch=/tmp': 'Scratch' is not a valid name"),
    C("mpijob run-local {tmp}/job.yaml --pvc scratch=/nonexistent", 2,
      r"/nonexistent is not an existing folder"),
    C(["mpijob", "run-local", "{tmp}/job.yaml", "--image", "my image"], 2,
      r"'my image' is not an image reference"),
    C("mpijob run-local {tmp}/job.yaml --image Horovod:dev", 2, r"is not an image reference"),
    C("mpijob run-local {tmp}/job.yaml --image horovod@sha256:xyz", 2,
      r"is not an image reference"),
    C("mpijob run-local {tmp}/job.yaml --ready-timeout 0", 2, r"0.0 seconds: accepted is a"),
    C("mpijob run-local {tmp}/job.yaml --ready-timeout -1", 2, r"accepted is a number > 0"),
    C("mpijob run-local {tmp}/job.yaml --ready-timeout soon", 2, r"'--ready-timeout'"),
    C("mpijob run-local {tmp}/job.yaml --runtime /nonexistent.yaml", 2,
      r"'--runtime': /nonexistent.yaml: no such file"),
    C("mpijob run-local {tmp}/job.yaml --bogus", 2, r"No such option: --bogus"),
    C("mpijob nosuch", 2, r"No such command 'nosuch'"),
    C("mpijob run-local {tmp}/truncated.yaml", 2, r"truncated.yaml|invalid YAML",
      env={"DOCKER_HOST": NO_ENGINE}),
    C("mpijob run-local {tmp}/binary.yaml", 2, r"binary.yaml|UTF-8",
      env={"DOCKER_HOST": NO_ENGINE}),
    C("mpijob run-local {tmp}/gz.yaml", 2, r"gz.yaml|UTF-8", env={"DOCKER_HOST": NO_ENGINE},
      id="mpijob run-local with a gzip file"),
    C("mpijob run-local {tmp}/deployment.yaml", 2, r"no document with kind MPIJob or TrainJob",
      env={"DOCKER_HOST": NO_ENGINE}),
    # ---------------------------------------------------------------- train-resnet
    C("train-resnet --epochs 0", 2, r"epochs must be >= 1, got 0"),
    C("train-resnet --batch-size 0", 2, r"batch_size must be >= 1, got 0"),
    C("train-resnet --image-size 0", 2, r"image_size must be >= 1"),
    C("train-resnet --classes 0", 2, r"classes must be >= 1"),
    C("train-resnet --steps -1", 2, r"steps must be >= 0, got -1"),
    C("train-resnet --warmup-steps -1", 2, r"warmup_steps must be >= 0"),
    C("train-resnet --lr-warmup-steps -1", 2, r"lr_warmup_steps must be >= 0"),
    C("train-resnet --lr 0", 2, r"lr must be > 0, got 0.0"),
    C("train-resnet --lr nan", 2, r"lr must be > 0, got nan"),
    C("train-resnet --mode infer", 2, r"mode 'infer'; accepted: train, benchmark"),
    C("train-resnet --model vgg", 2, r"model 'vgg'; accepted: small, resnet50"),
    C("train-resnet --optimizer rmsprop", 2, r"optimizer 'rmsprop'; accepted: sgd, adam"),
    C("train-resnet --epochs many", 2, r"^error: Invalid value for '--epochs'"),
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for var in CLEAN_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.kube/config, no kfp context


def _expand(value: str, tmp: Path) -> str:
    return value.replace("{tmp}", str(tmp))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv,code,line,env,many", UNUSABLE)
def test_bad_input_is_one_line_with_its_exit_status(argv, code, line, env, many, tmp_path,
                                                    monkeypatch):
    _files(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, _expand(value, tmp_path))
    res = CliRunner().invoke(app, [_expand(a, tmp_path) for a in argv])
    out = res.output
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert res.exit_code == code, out
    if not many:
        assert len(lines) == 1, out
    assert any(re.search(line, ln) for ln in lines), out


def test_the_inventory_is_well_over_a_hundred_cases():
    assert len(UNUSABLE) >= 150


# -------------------------------------------------------------------- the one mapping
@pytest.mark.parametrize("exc,code,text", [
    (errors.UsageError("bad"), 2, "bad"),
    (errors.Unreachable("no engine"), 3, "no engine"),
    (errors.JobFailed("task failed"), 1, "task failed"),
    (ValueError("line one\n  line two"), 2, "line one line two"),
    (FileNotFoundError(2, "No such file or directory", "/x/y"), 2,
     "No such file or directory: /x/y"),
    (PermissionError(13, "Permission denied", "/root/z"), 2, "Permission denied: /root/z"),
    (NotADirectoryError(20, "Not a directory", "/dev/null/x"), 2, "Not a directory: /dev/null/x"),
    (IsADirectoryError(21, "Is a directory", "/tmp"), 2, "Is a directory: /tmp"),
    (gzip.BadGzipFile("Not a gzipped file (b'ab')"), 2, "Not a gzipped file"),
    (EOFError("Compressed file ended before the end-of-stream marker was reached"), 2,
     "truncated input: Compressed file ended"),
    (zlib.error("Error -3 while decompressing data: invalid block type"), 2,
     "corrupt compressed data"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), 2, "not UTF-8 text"),
    (ConnectionRefusedError(111, "Connection refused"), 3, "cannot connect"),
    (TimeoutError("timed out"), 3, "cannot connect"),
    (KeyError("boom"), 1, "internal error: KeyError: 'boom' (run with -v for the traceback)"),
    (RuntimeError(""), 1, "internal error: RuntimeError (run with -v"),
])
def test_classify_maps_each_class_to_its_status(exc, code, text):
    got_code, message = errors.classify(exc)
    assert got_code == code and text in message and "\n" not in message


def test_classify_third_party_errors_without_importing_them_first():
    import docker.errors
    import requests
    import urllib3
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException

    assert errors.classify(requests.ConnectionError("refused"))[0] == 3
    assert errors.classify(urllib3.exceptions.MaxRetryError(None, "/x", "refused"))[0] == 3
    assert errors.classify(docker.errors.DockerException("image has no tag"))[0] == 1
    assert errors.classify(ApiException(status=0, reason="connection refused"))[0] == 3
    assert errors.classify(ApiException(status=403, reason="Forbidden")) == (
        1, "the API refused: HTTP 403 Forbidden")
    assert errors.classify(ConfigException("Invalid kube-config file."))[0] == 2
    with pytest.raises(yaml.YAMLError) as e:
        yaml.safe_load("a: [1")
    code, message = errors.classify(e.value)
    assert code == 2 and message.startswith("invalid YAML: line 1, column 6: expected")


@pytest.mark.parametrize("host", [NO_ENGINE, "tcp://127.0.0.1:1"])
def test_an_unreachable_docker_engine_has_its_own_rule(host, monkeypatch):
    """The Docker SDK's own error from a real engine-less client, told by
    its cause (a connection failure), not by its text."""
    import docker

    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(docker.errors.DockerException) as caught:
        docker.from_env().ping()
    assert errors.classify(caught.value) == (
        3, (f"no Docker engine answers at {host} (DOCKER_HOST); start one "
            "(scripts/dockerd.sh start) or point DOCKER_HOST at a running engine"))
    text_only = docker.errors.DockerException("Error while fetching server API version: "
                                              "Connection aborted")
    assert errors.classify(text_only)[0] == 1


def test_trainjob_run_local_is_there_as_the_docs_say():
    """README and docs/architecture.md name `kfp-gpu trainjob run-local`;
    it is the same command as `mpijob run-local` (either kind of file)."""
    res = CliRunner().invoke(app, ["trainjob", "run-local", "--help"])
    assert res.exit_code == 0 and "TrainJob" in res.output
    res = CliRunner().invoke(app, ["trainjob", "run-local", "/nonexistent.yaml"])
    assert res.exit_code == 2 and "/nonexistent.yaml" in res.output
    docs = (REPO / "README.md").read_text() + (REPO / "docs/architecture.md").read_text()
    assert "trainjob run-local" in docs


def test_verbose_shows_the_traceback_and_still_one_error_line():
    res = CliRunner().invoke(app, ["-v", "run", "imdb-lstm", "--local", "-p", "epochs=0"])
    assert res.exit_code == 2
    assert "Traceback" in res.output
    assert [ln for ln in res.output.splitlines() if ln.startswith("error:")] == [
        "error: parameter epochs=0 is refused: accepted is an integer >= 1 (training epochs)"]


def test_an_unexpected_exception_is_one_internal_error_line(monkeypatch):
    def boom(name):
        raise KeyError("surprise")

    monkeypatch.setattr(catalog_params, "rows", boom)
    res = CliRunner().invoke(app, ["params", "imdb-lstm"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == ("error: internal error: KeyError: 'surprise' (run with -v for "
                                  "the traceback)")
    res = CliRunner().invoke(app, ["-v", "params", "imdb-lstm"])
    assert res.exit_code == 1 and "Traceback" in res.output and "KeyError" in res.output
    # -v ends with its invocation: code called in the same process afterwards (an app of
    # its own, a library function that reports) shows no traceback
    from kfp_gpu.cli import errors as cli_errors

    assert cli_errors._state["verbose"] is False


# -------------------------------------------------------------------- the front door
def test_version_option_and_completion_are_there():
    import kfp_gpu

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"kfp-gpu {kfp_gpu.__version__}"
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    assert "--install-completion" in res.output and "--show-completion" in res.output
    assert "--verbose" in res.output


@pytest.mark.parametrize("argv", [[], ["mpijob"]])
def test_no_arguments_shows_the_help_and_no_error_line(argv):
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2 and "Usage:" in res.output
    assert "error:" not in res.output and "Traceback" not in res.output


@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv,code,line", [
    (["--version"], 0, r"^kfp-gpu \d+\.\d+"),
    (["run", "imdb-lstm", "--local", "-p", "learning_rate=nan"], 2,
     r"^error: parameter learning_rate=nan is refused: accepted is a number > 0"),
    (["submit", "imdb-lstm", "--host", "kfp.example.com"], 2, r"is not a URL"),
    (["nosuch"], 2, r"^error: No such command"),
])
def test_console_script_and_python_m_behave_the_same(argv, code, line, tmp_path):
    """The real entry points (pyproject's console script, ``python -m kfp_gpu``) give the
    same status and line as the app."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    script = Path(sys.executable).parent / "kfp-gpu"
    outs = []
    for cmd in ([str(script), *argv], [sys.executable, "-m", "kfp_gpu", *argv]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=100, check=False)
        out = p.stdout + p.stderr
        assert p.returncode == code and "Traceback" not in out, out
        lines = [ln for ln in out.splitlines() if ln.strip()]
        assert len(lines) == 1 and re.search(line, lines[0]), out
        outs.append(lines[0])
    assert outs[0] == outs[1]


# -------------------------------------------------------------------- the declaration
def _fake_pipeline(**inputs):
    specs = {k: SimpleNamespace(type=t, default=d, optional=d is not None)
             for k, (t, d) in inputs.items()}
    return SimpleNamespace(name="fake", component_spec=SimpleNamespace(inputs=specs))


def test_compile_refuses_a_default_outside_its_declaration():
    decl = parameters.declare(parameters.integer("epochs", "epochs", 1),
                              parameters.number("lr", "rate", 0, low_open=True))
    parameters.check_signature(decl, _fake_pipeline(epochs=("Integer", 2), lr=("Float", 0.1)))
    with pytest.raises(ValueError, match=r"parameter epochs=0 is refused"):
        parameters.check_signature(decl, _fake_pipeline(epochs=("Integer", 0),
                                                        lr=("Float", 0.1)))
    with pytest.raises(ValueError, match=r"parameter lr=nan is refused"):
        parameters.check_signature(decl, _fake_pipeline(epochs=("Integer", 1),
                                                        lr=("Float", math.nan)))
    with pytest.raises(ValueError, match=r"not declared: \['extra'\]"):
        parameters.check_signature(decl, _fake_pipeline(epochs=("Integer", 1), lr=("Float", 1.),
                                                        extra=("String", "")))
    with pytest.raises(ValueError, match=r"lr is NUMBER_INTEGER but declared NUMBER_DOUBLE"):
        parameters.check_signature(decl, _fake_pipeline(epochs=("Integer", 1),
                                                        lr=("Integer", 1)))


@pytest.mark.parametrize("name", ["imdb-lstm", "resnet-horovod", "fractional-eval"])
def test_every_catalog_pipeline_declares_every_parameter(name):
    entry = discover.entry(name)
    parameters.check_signature(entry.parameters, entry.pipeline())  # what compile runs
    assert all(p.meaning for p in entry.parameters.values())


def test_docs_parameters_md_is_generated_from_the_declarations():
    page = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"
    assert page.read_text(encoding="utf-8") == catalog_params.docs_page(), (
        "docs/parameters.md is stale: python -c 'from kfp_gpu.catalog import params; "
        "print(params.docs_page(), end=\"\")' > docs/parameters.md")


def test_params_command_lists_types_ranges_and_meanings():
    res = CliRunner().invoke(app, ["params", "imdb-lstm"])
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if ln.startswith("dropout "))
    assert "a number in [0, 1)" in row and "LSTM input dropout" in row


@pytest.mark.parametrize("name", ["imdb-lstm", "resnet-horovod", "fractional-eval"])
def test_compiled_yaml_carries_each_parameters_meaning_and_range(name):
    """The declaration reaches the KFP UI: each root parameter's description in the
    checked-in YAML is its meaning and accepted values (parameters.documented)."""
    from kfp_gpu.compiler.compile import compiled_pipeline

    path, _ = compiled_pipeline(name)
    spec = next(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    compiled = spec["root"]["inputDefinitions"]["parameters"]
    for key, p in catalog_params.declared(name).items():
        assert compiled[key]["description"] == f"{p.meaning}; accepted: {p.accepted()}."


def test_a_training_failure_keeps_its_traceback_for_the_rank_log(monkeypatch):
    """train-resnet runs on MPI ranks: a bad setting is one line, but a failure inside the
    training is not a user error, so its traceback stays in the log."""
    from kfp_gpu.training import horovod_train, worker_env

    def crash(cfg):
        raise RuntimeError("NCCL error: unhandled system error")

    monkeypatch.setattr(worker_env, "load_worker_env", lambda: None)
    monkeypatch.setattr(horovod_train, "run", crash)
    res = CliRunner().invoke(app, ["train-resnet", "--data", "synthetic"])
    assert res.exit_code == 1
    assert "Traceback" in res.output and "NCCL error: unhandled system error" in res.output
    assert res.output.rstrip().splitlines()[-1].startswith("error: internal error: RuntimeError")


# ------------------------------------------- a task that fails: four lines
@pytest.mark.timeout(180)
def test_a_failed_task_ends_in_four_lines_and_exit_2_for_its_input(tmp_path):
    """prep-text runs under kfp.local and refuses labels that are not the two declared
    classes (the header is fine, so no pre-check stops it): the task's start and progress
    lines, then at most four: the task failed, the error's own line, the input, the log."""
    data = tmp_path / "labels.csv"
    data.write_text("review,sentiment\n" + "".join(
        f"film {i},{'pos' if i % 2 else 'neg'}\n" for i in range(20)))
    res = CliRunner().invoke(app, ["run", "imdb-lstm", "--local", "-p", f"source={data}",
                                   "--pipeline-root", str(tmp_path / "root")])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "executor" not in res.output.lower()
    end = lines[next(i for i, ln in enumerate(lines) if ln.startswith("[prep-text] failure")):]
    assert len(end) == 4, res.output
    assert end[1] == ("error: task prep-text failed: label column 'sentiment' has values "
                      "outside the declared classes ['negative', 'positive']: ['neg', 'pos'] "
                      "(set positive_label/negative_label)")
    assert end[2] == f"  input: {data}"
    log = Path(end[3].removeprefix("  full log: "))
    assert log.name == "prep-text.log" and "Traceback" in log.read_text()
    res = CliRunner().invoke(app, ["run", "imdb-lstm", "--local", "-v", "-p", f"source={data}",
                                   "--pipeline-root", str(tmp_path / "root")])
    assert res.exit_code == 2 and "Traceback (most recent call last)" in res.output


def test_the_record_tells_input_errors_from_job_failures(tmp_path):
    """The family's record (not the message text) decides exit 2 or 1; a task without a
    record falls back to its traceback's last line and exit 1."""
    from kfp_gpu.inputs import errors as ie
    from kfp_gpu.local import log as run_log
    from kfp_gpu.local import run as local_run

    def failed(lines: list[str]) -> local_run.TaskFailed:
        stream = run_log.TaskLogStream(tmp_path / str(len(lines)), io.StringIO())
        for line in ["Executing task 't'", *lines, "Task 't' finished with status FAILURE"]:
            stream.write(line + "\n")
        stream.close()
        return local_run._failure(RuntimeError("FAILURE"), stream, tmp_path)

    for exc, code in ((ie.NotBinaryLabels("labels 'x'", "/d.csv"), 2),
                      (ie.MissingColumn("text_column 'Error: x'"), 2),
                      (ValueError("InputError: shapes differ"), 1)):
        e = failed(["Traceback (most recent call last):", "    " + ie.record(exc)])
        assert (2 if e.input_error else 1) == code and e.message == str(exc)
        assert e.input == getattr(exc, "input", None) and len(e.lines()) <= 3
    e = failed(["Traceback (most recent call last):", "numpy.linalg.LinAlgError: singular"])
    assert not e.input_error and e.message == "LinAlgError: singular" and e.input is None
    assert failed(["Killed"]).message.startswith("the task process failed")


def test_reported_writes_one_record_and_reraises(capsys):
    from kfp_gpu.inputs import errors as ie

    with pytest.raises(ie.EmptyInput) as caught, ie.reported(input="/data/x.csv"):
        raise ie.EmptyInput("the test split is empty")
    assert caught.value.input == "/data/x.csv" and isinstance(caught.value, ValueError)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and ie.record_of(err[0]) == {
        "type": "EmptyInput", "input_error": True, "environment": False,
        "message": "the test split is empty", "input": "/data/x.csv"}
    assert ie.record_of("ValueError: kfp-gpu-task-error: {broken") is None
