#!/usr/bin/env python3
"""Figure of docs/results/machine.md: read time against read size on this disk.

Usage (from the repository root; needs the .venv that ./scripts/test-python.sh
makes):

    .venv/bin/python scripts/report_machine.py docs/results/machine/profile.json docs/results/machine/profile.png

PROFILE.json holds what machine.md reports of `strata profile` (each run's
fitted latency and bandwidth and its mean read times at 4 KiB, 64 KiB and
1 MiB) and of `dd` (sequential reads with O_DIRECT). The figure draws the
runs' means (points) and fits (lines), dd's reads (crosses), and for scale
two storage profiles of docs/benchmarks.md (dashed).
"""
import json
import sys

PROFILES = {"nvme": (70.0, 6.9e9), "sata-ssd": (211.6, 560e6)}  # latency µs, bandwidth bytes/s


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        doc = json.load(f)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from strata.plot import plain_log_axis

    sizes = [2**k for k in range(12, 21)]  # 4 KiB .. 1 MiB
    kib = [s / 1024 for s in sizes]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for run, colour in zip(doc["runs"], ("tab:blue", "tab:orange", "tab:green")):
        lat, bw = run["latency_us"], run["bandwidth_mb_s"] * 1e6
        ax.plot(kib, [lat + s / bw * 1e6 for s in sizes], color=colour, lw=1,
                label=f"run {run['run']}: {lat:.1f} µs + bytes at {run['bandwidth_mb_s']:.0f} MB/s")
        pts = sorted((int(k), v) for k, v in run["mean_us"].items())
        ax.plot([s / 1024 for s, _ in pts], [v for _, v in pts], "o", color=colour, ms=5)
    dd = sorted((int(k), v) for k, v in doc.get("dd_sequential_us", {}).items())
    if dd:
        ax.plot([s / 1024 for s, _ in dd], [v for _, v in dd], "kx", ms=8, mew=2, label="dd, sequential reads")
    for name, (lat, bw) in PROFILES.items():
        ax.plot(kib, [lat + s / bw * 1e6 for s in sizes], "--", color="grey", lw=1)
        ax.annotate(f"profile {name}", (kib[-1], lat + sizes[-1] / bw * 1e6), textcoords="offset points",
                    xytext=(-4, 4), ha="right", fontsize=7, color="dimgrey")
    ax.set_xscale("log", base=2)
    ax.set_xticks(kib)
    ax.set_xticklabels([f"{k:g}" for k in kib])
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("read size (KiB, log scale)")
    ax.set_ylabel("time per read (µs, log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"This machine's disk: random O_DIRECT reads at queue depth 1 ({doc['date']})", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", title_fontsize=7,
              title="points: mean time per size; lines: the fitted\nlatency + bytes / bandwidth")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
