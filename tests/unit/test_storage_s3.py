"""kfp_gpu.inputs.storage against a real S3 server on loopback (moto's server mode): the same
functions and errors as for gs:// and local paths, the endpoint from the AWS variables."""

from __future__ import annotations

import gzip
import json

import pytest

from kfp_gpu.inputs import storage
from tests.support import s3_server


@pytest.fixture(scope="module")
def s3():
    with s3_server.running() as (bucket, endpoint):
        yield bucket, endpoint


def _tree(root):
    (root / "sub").mkdir(parents=True)
    (root / "model.keras").write_bytes(b"\x00weights\xff" * 100)
    (root / "sub" / "meta.json").write_text(json.dumps({"rows": 3}))
    return {"model.keras": (root / "model.keras").read_bytes(),
            "sub/meta.json": (root / "sub" / "meta.json").read_bytes()}


def test_scheme_predicates():
    assert storage.is_s3("s3://b/k") and not storage.is_gcs("s3://b/k")
    assert storage.is_remote("s3://b/k") and storage.is_remote("gs://b/k")
    assert not storage.is_remote("/mnt/shared/k") and not storage.is_remote("minio://b/k")
    assert storage.split_s3("s3://b/a/b.csv") == ("b", "a/b.csv")
    for bad in ("s3://b", "s3:///k", "gs://b/k"):
        with pytest.raises(ValueError, match="s3://"):
            storage.split_s3(bad)


def test_file_round_trip_keeps_suffix(s3, tmp_path):
    bucket, _ = s3
    src = tmp_path / "d.csv.gz"
    src.write_bytes(gzip.compress(b"review,sentiment\nfine,positive\n"))
    storage.upload(src, f"s3://{bucket}/in/d.csv.gz")
    assert storage.exists(f"s3://{bucket}/in/d.csv.gz")
    with storage.local_copy(f"s3://{bucket}/in/d.csv.gz") as p:
        assert p.name.endswith(".csv.gz")
        assert p.read_bytes() == src.read_bytes()
        kept = p
    assert not kept.exists()  # the temporary copy is removed afterwards


def test_folder_upload_and_download_dir(s3, tmp_path):
    bucket, _ = s3
    want = _tree(tmp_path / "model")
    storage.upload(tmp_path / "model", f"s3://{bucket}/runs/r1/model")
    names = storage.download_dir(f"s3://{bucket}/runs/r1/model/", tmp_path / "back")
    assert names == sorted(want)
    assert {n: (tmp_path / "back" / n).read_bytes() for n in names} == want
    assert storage.exists(f"s3://{bucket}/runs/r1/model")  # a prefix counts
    assert not storage.exists(f"s3://{bucket}/runs/r2")


def test_missing_objects_raise_file_not_found(s3, tmp_path):
    bucket, _ = s3
    with pytest.raises(FileNotFoundError, match=f"s3://{bucket}/in/missing.csv"), \
            storage.local_copy(f"s3://{bucket}/in/missing.csv"):
        pass
    (tmp_path / "x.txt").write_text("x")
    storage.upload(tmp_path / "x.txt", f"s3://{bucket}/pre/fix/x.txt")
    with pytest.raises(FileNotFoundError, match="input not found"), \
            storage.local_copy(f"s3://{bucket}/pre/fix"):  # a prefix is not an object
        pass
    with pytest.raises(FileNotFoundError, match="model not found"):
        storage.download_dir(f"s3://{bucket}/runs/none", tmp_path / "y")
    assert not (tmp_path / "y").exists()
    with pytest.raises(FileNotFoundError, match="nothing to upload"):
        storage.upload(tmp_path / "absent", f"s3://{bucket}/z")


def test_endpoint_comes_from_the_environment(tmp_path):
    """No endpoint argument anywhere: AWS_ENDPOINT_URL_S3 alone (botocore's
    service-specific variable) reaches the server; pointing it elsewhere fails."""
    (tmp_path / "f.txt").write_text("hello")
    with s3_server.running("other-bucket", endpoint_var="AWS_ENDPOINT_URL_S3") as (b, url):
        storage.upload(tmp_path / "f.txt", f"s3://{b}/f.txt")
        with storage.local_copy(f"s3://{b}/f.txt") as p:
            assert p.read_text() == "hello"
        import boto3

        body = boto3.client("s3", endpoint_url=url).get_object(Bucket=b, Key="f.txt")["Body"]
        assert body.read() == b"hello"  # really on that server, not somewhere else
        with s3_server.patched_env({"AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:"
                                    f"{s3_server.free_port()}", "AWS_MAX_ATTEMPTS": "1"}):
            # nothing listens there: a connection error, never "input not found"
            from botocore.exceptions import EndpointConnectionError

            with pytest.raises(EndpointConnectionError, match="127.0.0.1"), \
                    storage.local_copy(f"s3://{b}/f.txt"):
                pass


def test_aws_region_is_used_when_default_region_is_unset():
    assert storage.s3_region({"AWS_REGION": "eu-west-1"}) == "eu-west-1"
    assert storage.s3_region({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "x"}) is None
    assert storage.s3_region({}) is None
