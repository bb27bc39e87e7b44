"""strata.plot draws every kind of figure from records and from the CLI."""

import json
import math
import subprocess
import sys

import pytest

from strata import plot


def rec(spec, workload, tput, bits, pages, dataset="fb-like", cache="cold", p50=10_000):
    return {
        "index": spec.split(":")[0], "spec": spec, "config": {}, "dataset": dataset, "n": 1000,
        "workload": workload, "ops": 100, "profile": "nvme", "cache": cache,
        "throughput_ops_s": tput,
        "latency_ns": {"p50": p50, "p99": p50 * 3, "p999": p50 * 6, "max": p50 * 20},
        "io": {"pages_per_op": pages, "reads_per_op": pages, "bytes_per_op": None,
               "modelled_us_per_op": None if pages is None else pages * 70.0, "writes_per_op": 0.0},
        "memory_bytes": int(bits * 1000 / 8), "bits_per_key": bits, "disk_bytes": 1, "build_s": 0.1,
        "build_keys_per_s": 1e4, "models": None, "wrong": 0,
    }


RECORDS = [
    rec("btree", "lookup", 5000, 2.0, 1.0),
    rec("pgm-disk-cpr", "lookup", 6000, 0.1, 1.2),
    rec("lmdb", "lookup", 4000, 40.0, None),
    rec("btree", "scan", 3000, 2.0, 2.0),
    rec("pgm-disk-cpr", "scan", 2500, 0.1, 2.1),
    rec("btree", "lookup", 4000, 2.0, 1.0, dataset="osm-like"),
]


def is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_pareto_frontier():
    assert plot.pareto_frontier([(1, 5), (2, 3), (3, 4), (0.5, 9), (4, 1)]) == [(0.5, 9), (1, 5), (2, 3), (4, 1)]


def test_latency_points():
    pts = plot.latency_points(RECORDS[0])
    assert [q for _, q in pts] == [0.5, 0.99, 0.999, 1.0]
    assert pts[0][0] == pytest.approx(10.0)


@pytest.mark.parametrize("kind", ["pareto", "bars", "latency"])
def test_figures_from_functions(tmp_path, kind):
    out = tmp_path / f"{kind}.png"
    getattr(plot, kind)(RECORDS, str(out))
    assert is_png(out)


def test_pareto_rejects_empty_selection(tmp_path):
    with pytest.raises(ValueError):
        plot.pareto(RECORDS, str(tmp_path / "x.png"), workload="ycsb-a")


def test_cli_every_kind(tmp_path):
    data = tmp_path / "r.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n\n")
    for kind in ("pareto", "bars", "latency"):
        out = tmp_path / f"cli-{kind}.png"
        subprocess.run([sys.executable, "-m", "strata.plot", str(data), "--out", str(out), "--kind", kind,
                        "--dataset", "fb-like", "--baseline", "btree"], check=True, capture_output=True)
        assert is_png(out)
    design = tmp_path / "design.json"
    design.write_text(json.dumps({
        "dataset": "fb-like", "profile": "nvme",
        "designs": [
            {"label": f"band({e})", "memory_bytes": 10**6 // e, "modelled_us": 70 + math.log2(e) * 10,
             "chosen": e == 64}
            for e in (16, 64, 256, 1024)
        ],
    }))
    out = tmp_path / "design.png"
    subprocess.run([sys.executable, "-m", "strata.plot", str(design), "--out", str(out), "--kind", "design-map"],
                   check=True, capture_output=True)
    assert is_png(out)


def test_cli_reports_bad_input(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    p = subprocess.run([sys.executable, "-m", "strata.plot", str(bad), "--out", str(tmp_path / "o.png")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "not JSON" in p.stderr
