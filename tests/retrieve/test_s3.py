"""Scenes read from an S3 API (as Copernicus Data Space serves them): a real S3 server (moto in server
mode) on loopback holds the small demo's scenes; lcflow cube reads them by s3:// hrefs with the keys
from the environment, builds the cube it builds from local files, and never writes the keys down."""

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import moto.server as moto_server
import numpy as np
import pytest
import rasterio

BIN = Path(sys.executable).parent
BUCKET = "lcflow-scenes"
KEY_ID, SECRET = "AKIALCFLOWTESTKEY0001", "lcflow-test-secret-Zx9QwErTy0123456789"
BOUNDS = [640000, 5760000, 640320, 5760320]  # 32 x 32 px of 31UFT


@pytest.fixture(scope="module")
def s3(demo, stages, tmp_path_factory):
    """The server, the demo's 2018 scenes uploaded, and a manifest naming them by s3:// href."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"{host}:{port}"
    client = boto3.client("s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                          aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    client.create_bucket(Bucket=BUCKET)
    items = json.loads(stages["items2018"].read_text())
    for item in items["features"]:
        for asset in item["assets"].values():
            path = Path(asset["href"])
            if path.exists():
                key = str(path.relative_to(demo))
                client.upload_file(str(path), BUCKET, key)
                asset["href"] = f"s3://{BUCKET}/{key}"
    # every asset is read from S3, none from disk: a cube equal to the local one then says something
    hrefs = [a["href"] for item in items["features"] for a in item["assets"].values()]
    assert hrefs and all(h.startswith(f"s3://{BUCKET}/") for h in hrefs), [h for h in hrefs if "s3://" not in h][:3]
    work = tmp_path_factory.mktemp("s3")
    (work / "items.json").write_text(json.dumps(items))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AWS_S3_ENDPOINT": endpoint,
           "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE", "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    yield {"work": work, "env": env, "client": client, "items": items}
    server.stop()


def _cube(manifest: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "lcflow"), "-v", "cube", "--items", str(manifest), "--tile", "31UFT", "--year",
                           "2018", "--bands", "B04,B08", "--bounds", ",".join(map(str, BOUNDS)), "--out",
                           str(out / "cube.tif"), "--valid", str(out / "valid.tif")],
                          env=env, capture_output=True, text=True, timeout=600)


def test_a_cube_read_from_s3_is_the_cube_read_from_disk(s3, stages, tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir(), remote.mkdir()
    assert _cube(stages["items2018"], local, s3["env"]).returncode == 0
    done = _cube(s3["work"] / "items.json", remote, s3["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("cube.tif", "valid.tif"):
        with rasterio.open(local / name) as a, rasterio.open(remote / name) as b:
            assert np.array_equal(a.read(), b.read()) and a.profile == b.profile, name
    # the keys are in the environment only: not in the log, the manifest or the cube's metadata
    said = done.stdout + done.stderr
    with rasterio.open(remote / "cube.tif") as ds:
        tags = json.dumps([ds.tags(), *(ds.tags(i) for i in ds.indexes)])
    for secret in (KEY_ID, SECRET):
        assert secret not in said and secret not in tags
        assert secret not in (s3["work"] / "items.json").read_text()


def test_without_keys_the_cube_stops_in_one_line_naming_the_asset(s3, tmp_path):
    env = {k: v for k, v in s3["env"].items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")
    done = _cube(s3["work"] / "items.json", tmp_path, env)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("lcflow cube: error:")]
    assert len(lines) == 1 and f"s3://{BUCKET}/" in lines[0], done.stderr[-3000:]
    assert not (tmp_path / "cube.tif").exists()


def test_a_missing_object_is_named_and_no_key_is_shown(s3, tmp_path):
    items = json.loads(json.dumps(s3["items"]))
    items["features"][2]["assets"]["red"]["href"] = f"s3://{BUCKET}/no/such/red.tif"
    (tmp_path / "items.json").write_text(json.dumps(items))
    done = _cube(tmp_path / "items.json", tmp_path, s3["env"])
    assert done.returncode == 2
    said = done.stdout + done.stderr
    line = [line for line in said.splitlines() if line.startswith("lcflow cube: error:")]
    assert len(line) == 1 and f"s3://{BUCKET}/no/such/red.tif" in line[0], said[-3000:]
    assert KEY_ID not in said and SECRET not in said
    assert not (tmp_path / "cube.tif").exists()


def test_wrong_keys_are_refused_in_one_line_naming_the_asset_and_no_key(s3, tmp_path, monkeypatch):
    """With the server checking signatures (moto's INITIAL_NO_AUTH_ACTION_COUNT at 0): a user's own keys
    read the scenes, the same key id with a wrong secret stops the cube in one line that names the asset
    and shows neither secret."""
    import moto.settings

    endpoint = f"http://{s3['env']['AWS_S3_ENDPOINT']}"
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID,
                       aws_secret_access_key=SECRET)
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    good = {**s3["env"], "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    (tmp_path / "good").mkdir(), (tmp_path / "bad").mkdir()
    done = _cube(s3["work"] / "items.json", tmp_path / "good", good)
    assert done.returncode == 0, done.stderr[-3000:]
    wrong = "wrong-" + key["SecretAccessKey"][6:]
    done = _cube(s3["work"] / "items.json", tmp_path / "bad", {**good, "AWS_SECRET_ACCESS_KEY": wrong})
    assert done.returncode == 2
    said = done.stdout + done.stderr
    lines = [line for line in said.splitlines() if line.startswith("lcflow cube: error:")]
    assert len(lines) == 1 and f"s3://{BUCKET}/" in lines[0], said[-3000:]
    assert wrong not in said and key["SecretAccessKey"] not in said
    assert not (tmp_path / "bad" / "cube.tif").exists()
