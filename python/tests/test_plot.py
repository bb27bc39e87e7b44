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


def test_help_describes_every_option_without_markup():
    p = subprocess.run([sys.executable, "-m", "strata.plot", "--help"], capture_output=True, text=True, check=True)
    text = " ".join(p.stdout.split())
    assert "``" not in text
    assert "bars: throughput per index and workload" in text
    assert "latency: latency CDFs" in text
    assert "--title TITLE title of the figure" in text


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions save, kept open for inspection."""
    import matplotlib.figure

    saved = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self, *args, **kwargs):
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return saved


def renderer(fig):
    """A renderer of a saved (and closed) figure, laid out as it was saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def inside(fig, ax, texts):
    r = renderer(fig)
    frame = ax.get_window_extent(r)
    return all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
               for b in (t.get_window_extent(r) for t in texts))


def test_bar_labels_inside_the_frame_and_the_data_set_in_the_title(tmp_path, figures):
    # A tall bar among short ones (log scale) and a linear case.
    for scale, tputs in (("log", [5000, 400_000, 3000]), ("linear", [5000, 9000, 7000])):
        recs = [rec(s, "lookup", t, 1.0, 1.0, dataset="osm-like") for s, t in zip(["btree", "zonemap", "pgm"], tputs)]
        plot.bars(recs, str(tmp_path / f"b-{scale}.png"), baseline="btree")
        fig = figures[-1]
        ax = fig.axes[0]
        assert ax.get_yscale() == scale
        assert ax.get_title().startswith("osm-like: throughput"), ax.get_title()
        labels = [t for t in ax.texts if t.get_text().endswith("×")]
        assert len(labels) == 3 and inside(fig, ax, labels)
    # A title of one's own gets the data set when it names none.
    plot.bars(RECORDS, str(tmp_path / "t.png"), dataset="fb-like", title="throughput")
    assert figures[-1].axes[0].get_title() == "throughput (fb-like)"


def test_log_ticks_are_plain_and_sparse():
    plt = plot._plt()
    for lo, hi, want in ((1, 5, ["1", "2", "3", "5"]), (1, 40, ["1", "2", "5", "10", "20"]),
                         (0.05, 2000, ["0.1", "1", "10", "100", "1k"])):
        fig, ax = plt.subplots()
        ax.plot([lo, hi], [1, 2])
        ax.set_xscale("log")
        plot.plain_log_axis(ax.xaxis)
        ax.set_xlim(lo, hi)
        fig.canvas.draw()
        shown = [t.get_text() for t in ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels()
                 if t.get_text() and lo <= t.get_position()[0] <= hi]
        assert sorted(set(shown)) == sorted(want) and len(shown) == len(want), (lo, hi, shown)
        assert not any("$" in s or "10^" in s for s in shown)
        plt.close(fig)


def test_labels_of_coinciding_points_do_not_overlap(tmp_path, figures):
    recs = [rec("leco-zonemap-d", "lookup", 5000, 0.11, 1.0), rec("db:memory=budget", "lookup", 5000, 0.11, 1.0),
            rec("btree", "lookup", 5000, 4.0, 1.0)]
    plot.pareto(recs, str(tmp_path / "p.png"))
    fig = figures[-1]
    ax = fig.axes[0]
    r = renderer(fig)
    boxes = [t.get_window_extent(r) for t in ax.texts]
    assert len(boxes) == 3
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert inside(fig, ax, ax.texts)


def test_latency_legend_beside_the_curves(tmp_path, figures):
    plot.latency(RECORDS, str(tmp_path / "l.png"), dataset="fb-like")
    fig = figures[-1]
    ax = fig.axes[0]
    r = renderer(fig)
    assert ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1
    assert "fb-like" in ax.get_title()
