"""strata.build / strata.open at s3://bucket/prefix against the S3 test server
(issue 22).

Runs only with STRATA_TEST_S3=1, which scripts/s3-tests.sh sets after it built
the package with the cargo feature `s3` and installed the server
(target/tools/bin/strata-s3-server); skipped otherwise (the default wheel
refuses s3:// locations: test_errors.py). The server runs on 127.0.0.1 at a
free port over a temporary directory, for this module only.
"""

import os
import pathlib
import socket
import subprocess
import time

import numpy as np
import pytest

import strata

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "target" / "tools" / "bin" / "strata-s3-server"
BUCKET = "strata-py-test"
ACCESS, SECRET = "STRATAPYACCESS", "strata-py-secret-4c1d9e"

pytestmark = pytest.mark.skipif(
    os.environ.get("STRATA_TEST_S3") != "1",
    reason="needs the package built with the cargo feature `s3` and the S3 test server (scripts/s3-tests.sh)",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3")
    (root / BUCKET).mkdir()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(
        [str(SERVER), "--host", "127.0.0.1", "--port", str(port), "--access-key", ACCESS, "--secret-key", SECRET, str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    t0 = time.time()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.time() - t0 < 20, "the S3 test server did not start"
            time.sleep(0.05)
    env = {
        "AWS_ENDPOINT": f"http://127.0.0.1:{port}",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": ACCESS,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield root
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    proc.kill()
    proc.wait()


def test_build_and_open_on_s3_answer_as_locally(server, tmp_path):
    keys = strata.gen("osm-like", 20_000, seed=3)
    url = f"s3://{BUCKET}/py/idx"
    idx = strata.build(keys, kind="pgm-disk", path=url)
    local = strata.build(keys, kind="pgm-disk", path=tmp_path / "idx")
    q = np.concatenate([keys[::53], keys[::101] + np.uint64(1)])
    np.testing.assert_array_equal(idx.get_many(q), local.get_many(q))
    idx.close()
    # The server holds the build's files under the prefix.
    assert (server / BUCKET / "py" / "idx").is_dir()
    with strata.open(url) as again:
        np.testing.assert_array_equal(again.get_many(q), local.get_many(q))
        r = again.range(int(keys[100]), int(keys[300]))
        np.testing.assert_array_equal(r[:, 0], keys[100:300])
        # No credential in what the index shows.
        text = repr(again) + str(again.stats())
        assert SECRET not in text and ACCESS not in text
    local.close()


def test_missing_prefix_and_read_write_kinds_are_errors(server):
    with pytest.raises(strata.NotFoundError) as e:
        strata.open(f"s3://{BUCKET}/py/none")
    assert SECRET not in str(e.value)
    keys = np.arange(100, dtype=np.uint64)
    with pytest.raises(strata.UnsupportedError):
        strata.build(keys, kind="btree", path=f"s3://{BUCKET}/py/btree")
