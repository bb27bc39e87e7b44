"""strata.bench runs the CLI's experiment runner and returns its records."""

import json

import pytest

import strata

FIXED = [
    "index", "config", "dataset", "n", "workload", "ops", "profile", "cache",
    "throughput_ops_s", "latency_ns", "io", "memory_bytes", "bits_per_key",
    "disk_bytes", "build_s", "build_keys_per_s", "models", "wrong",
]


def test_bench_records(tmp_path):
    keys = strata.gen("osm-like", 50_000, seed=1)
    recs = strata.bench(
        keys, ["btree", "pgm-disk-cpr:epsilon=64"], ["lookup", "scan"],
        ops=2_000, profile="hdd", work_dir=tmp_path, dataset="osm-like", direct=False, repeat=2,
    )
    assert [(r["index"], r["workload"]) for r in recs] == [
        ("btree", "lookup"), ("pgm-disk-cpr", "lookup"), ("btree", "scan"), ("pgm-disk-cpr", "scan"),
    ]
    for r in recs:
        for f in FIXED:
            assert f in r, f
        assert r["wrong"] == 0 and r["n"] == 50_000 and r["dataset"] == "osm-like"
        assert set(r["latency_ns"]) == {"p50", "p99", "p999", "max"}
        assert r["io"]["pages_per_op"] > 0 and r["throughput_ops_s"] > 0
        assert len(r["throughput_runs"]) == 2
        json.dumps(r)  # plain JSON types only
    assert recs[1]["config"]["epsilon"] == 64


def test_bench_write_workload_and_errors(tmp_path):
    keys = strata.gen("uniform", 20_000, seed=3)
    recs = strata.bench(keys, "btree", "balanced", ops=1_000, work_dir=tmp_path, direct=False)
    assert recs[0]["workload"] == "balanced" and recs[0]["io"]["writes_per_op"] is not None
    with pytest.raises(strata.UnsupportedError, match="static"):
        strata.bench(keys, "pgm", "write-only", ops=100, work_dir=tmp_path, direct=False)
    with pytest.raises(strata.InvalidInputError):
        strata.bench(keys, "btree", "no-such-workload", work_dir=tmp_path)


def test_bench_matches_json_lines_plot_input(tmp_path):
    from strata import plot

    keys = strata.gen("fb-like", 30_000, seed=2)
    recs = strata.bench(keys, ["btree", "zonemap"], ["lookup"], ops=500, work_dir=tmp_path, direct=False)
    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert plot.load_jsonl([p]) == recs
