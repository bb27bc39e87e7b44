"""strata.tune runs AirTune and builds the tuned index (kind ``air``)."""

import json

import pytest

import strata


@pytest.fixture(scope="module")
def keys():
    return strata.gen("fb-like", 60_000, seed=7)


def test_tune_only_reports_the_design(keys):
    r = strata.tune(keys, profile="nfs", top_k=2, samples=4000)
    d = r["design"]
    assert r["n"] == 60_000 and r["tune_s"] >= 0
    assert r["profile"]["name"] == "nfs" and r["profile"]["latency_us"] == 50_000
    assert d["tuner"] == "airtune" and d["top_k"] == 2
    assert 1 <= len(d["layers"]) and d["modelled_ns"] > 0
    for layer in d["layers"]:
        for f in ("builder", "lambda", "entries", "bytes", "pages", "reads_below_bytes", "reads_below_ns"):
            assert f in layer, f
    # Deterministic: the same keys and options give the same design.
    again = strata.tune(keys, profile="nfs", top_k=2, samples=4000, threads=1)
    assert again["design"] == d
    # A high-latency device gets no deeper a stack than a fast one.
    fast = strata.tune(keys, profile="nvme", top_k=2, samples=4000)["design"]
    assert len(d["layers"]) <= len(fast["layers"])
    json.dumps(r)


def test_tune_builds_an_air_index(keys, tmp_path):
    out = tmp_path / "air"
    r = strata.tune(keys, profile="sata-ssd", out=out, top_k=2, samples=4000)
    assert r["out"] == str(out) and r["build"]["n"] == 60_000
    assert r["spec"].startswith("air:")
    idx = strata.open(out, resident="none", profile="sata-ssd")
    assert idx.kind == "air"
    sample = keys[::97]
    assert idx.get_many(sample).tolist() == list(range(0, 60_000, 97))
    # The manifest stores the design; one by one, every lookup reads one
    # range per level; batched, a level's identical windows are read once.
    levels = len(r["design"]["layers"]) + 1
    io = idx.io()
    assert 0 < io["read_calls"] <= levels * len(sample)
    idx.reset_io()
    for k in sample:
        idx.get(int(k))
    assert idx.io()["read_calls"] == levels * len(sample)
    # The same spec through strata.build gives the same design.
    again = strata.build(keys, r["spec"], tmp_path / "again")
    assert again.kind == "air" and again.get(int(keys[5])) == 5


def test_tune_from_a_key_file_with_a_budget(keys, tmp_path):
    path = tmp_path / "k.keys"
    strata.write_keys(path, keys)
    r = strata.tune(path, profile="hdd", memory_budget=64 << 10, top_k=1, samples=2000)
    d = r["design"]
    assert d["memory_budget"] == 64 << 10 and "resident_layers" in d
    pinned = [layer for layer in d["layers"] if layer["resident"]]
    assert sum(layer["memory_bytes"] for layer in pinned) <= 64 << 10


def test_tune_errors(keys, tmp_path):
    with pytest.raises(strata.OutOfOrderError):
        strata.tune(keys[::-1])
    with pytest.raises(strata.InvalidInputError):
        strata.tune(keys, profile="floppy")
    with pytest.raises(strata.InvalidInputError):
        strata.tune(keys, top_k=0)
    with pytest.raises(strata.InvalidInputError):
        strata.tune(keys, builders="nope")
