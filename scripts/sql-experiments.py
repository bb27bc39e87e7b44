#!/usr/bin/env python3
"""SQL over a strata index on an object store (issue 22;
docs/results/scale-out.md, "SQL through DataFusion and Ballista").

One index (KIND, default pgm-disk-cpr) over N osm-like keys (default 2M) is
built to the S3 test server on 127.0.0.1 (tools/s3-server). Then, in one
run, interleaved, REPEAT times (default 3):

- DataFusion in one process (`strata sql`, a fresh process per query: cold,
  no page cache): rows, pages and read calls of the index (from its opening
  on; the opening alone is measured by a query selecting no key), and the
  query's time;
- Ballista: a scheduler and 1, then 2, executors (`strata-ballista`
  processes on 127.0.0.1, 2 task slots each), the same queries through
  `strata-ballista sql`: rows and the query's time. Ballista's rows must
  equal DataFusion's (the script fails otherwise).

Queries: a present key, an absent key, `IN` of 1,000 present keys, ranges of
100 and 10,000 keys, `key > x LIMIT 10`, and a full scan (`COUNT(*)`).

Environment: N, REPEAT, KIND, PARTITIONS (2), STRATA_BIN (a strata built
with --features sql; default: built here), BALLISTA_BIN (default: built
here), WORK (/tmp/strata-sql-exp), OUT (docs/results/scale-out/sql).
Writes OUT/sql.jsonl (one record per run) and prints a Markdown table of
medians with their ranges.
"""

import json
import os
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(os.environ.get("N", "2000000"))
REPEAT = int(os.environ.get("REPEAT", "3"))
KIND = os.environ.get("KIND", "pgm-disk-cpr")
PARTITIONS = int(os.environ.get("PARTITIONS", "2"))
WORK = os.environ.get("WORK", "/tmp/strata-sql-exp")
OUT = os.environ.get("OUT", os.path.join(ROOT, "docs/results/scale-out/sql"))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, what, timeout=60):
    t0 = time.time()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.time() - t0 > timeout:
                sys.exit(f"{what} did not listen on {port}")
            time.sleep(0.05)


def binaries():
    strata = os.environ.get("STRATA_BIN")
    if not strata:
        run(["cargo", "build", "--release", "--quiet", "-p", "strata-cli", "--features", "sql"])
        strata = os.path.join(ROOT, "target/release/strata")
    ballista = os.environ.get("BALLISTA_BIN")
    if not ballista:
        run(["cargo", "build", "--release", "--quiet", "-p", "strata-ballista"])
        ballista = os.path.join(ROOT, "target/release/strata-ballista")
    return strata, ballista


def queries(keys):
    rng = random.Random(7)
    n = len(keys)
    present = keys[rng.randrange(n)]
    # An absent key: one past a key whose successor is not a key.
    i = rng.randrange(n - 1)
    while keys[i] + 1 == keys[i + 1]:
        i = rng.randrange(n - 1)
    absent = keys[i] + 1
    in_keys = sorted({keys[rng.randrange(n)] for _ in range(1000)})
    while len(in_keys) < 1000:
        in_keys = sorted(set(in_keys) | {keys[rng.randrange(n)]})
    r100 = rng.randrange(n - 100)
    r10k = rng.randrange(n - 10_000)
    lim = rng.randrange(n - 100)
    return [
        ("point", f"SELECT key, value FROM t WHERE key = {present}"),
        ("point (absent)", f"SELECT key, value FROM t WHERE key = {absent}"),
        ("IN (1,000 keys)", f"SELECT key, value FROM t WHERE key IN ({', '.join(map(str, in_keys))})"),
        ("range (100 keys)", f"SELECT key, value FROM t WHERE key BETWEEN {keys[r100]} AND {keys[r100 + 99]}"),
        ("range (10,000 keys)", f"SELECT key, value FROM t WHERE key BETWEEN {keys[r10k]} AND {keys[r10k + 9_999]}"),
        ("LIMIT 10", f"SELECT key, value FROM t WHERE key > {keys[lim]} LIMIT 10"),
        ("full scan", "SELECT COUNT(*) FROM t"),
        ("opening only", "SELECT key FROM t WHERE key > 5 AND key < 3"),
    ]


def result_rows(text):
    """The data lines of a pretty-printed table, sorted."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    return sorted(lines[1:])


def main():
    strata, ballista = binaries()
    run(["./scripts/install-s3-server.sh"])
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(os.path.join(WORK, "server", "bench"))
    os.makedirs(OUT, exist_ok=True)
    port = free_port()
    procs = []
    logs = []

    def spawn(args, name):
        log = open(os.path.join(WORK, f"{name}.log"), "w")
        logs.append(log)
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT, start_new_session=True)
        procs.append(p)
        return p

    env = os.environ
    env.update(
        AWS_ENDPOINT=f"http://127.0.0.1:{port}",
        AWS_ALLOW_HTTP="true",
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="strata-exp",
        AWS_SECRET_ACCESS_KEY="strata-exp-secret",
        RUST_LOG="warn",
    )
    try:
        spawn([os.path.join(ROOT, "target/tools/bin/strata-s3-server"), "--host", "127.0.0.1", "--port", str(port),
               "--access-key", "strata-exp", "--secret-key", "strata-exp-secret", os.path.join(WORK, "server")],
              "s3-server")
        wait_port(port, "the S3 server")
        data = os.path.join(WORK, f"osm-like-{N}.keys")
        run([strata, "gen", "--dist", "osm-like", "--n", str(N), "--out", data, "--quiet"])
        with open(data, "rb") as f:
            (count,) = struct.unpack("<Q", f.read(8))
            keys = list(struct.unpack(f"<{count}Q", f.read(8 * count)))
        location = "s3://bench/sql-index"
        run([strata, "build", "--index", KIND, "--data", data, "--out", location, "--quiet"])
        qs = queries(keys)
        records = []
        want = {}

        def df_query(name, sql):
            t0 = time.time()
            p = subprocess.run([strata, "sql", "--table", f"t={location}", "--partitions", str(PARTITIONS), sql],
                               check=True, capture_output=True, text=True, cwd=ROOT)
            wall = (time.time() - t0) * 1e3
            m = re.search(r"t: (\d+) pages in (\d+) read calls", p.stderr)
            r = re.search(r"(\d+) rows in ([\d.]+) ms", p.stderr)
            rows = result_rows(p.stdout)
            want.setdefault(name, rows)
            if rows != want[name]:
                sys.exit(f"DataFusion rows changed between runs: {name}")
            return dict(engine="datafusion", executors=0, query=name, rows=int(r.group(1)), ms=float(r.group(2)),
                        process_ms=wall, pages=int(m.group(1)), read_calls=int(m.group(2)))

        def ballista_query(url, executors, name, sql):
            p = subprocess.run([ballista, "sql", "--scheduler", url, "--table", f"t={location}",
                                "--partitions", str(PARTITIONS), sql],
                               check=True, capture_output=True, text=True, cwd=ROOT)
            r = re.search(r"(\d+) rows in ([\d.]+) ms", p.stderr)
            rows = result_rows(p.stdout)
            if rows != want[name]:
                sys.exit(f"Ballista ({executors} executors) rows differ from DataFusion's: {name}")
            return dict(engine="ballista", executors=executors, query=name, rows=int(r.group(1)), ms=float(r.group(2)))

        # DataFusion first (it sets the rows Ballista must return), then
        # both interleaved.
        for name, sql in qs:
            df_query(name, sql)
        for executors in (1, 2):
            sp = free_port()
            cluster = [spawn([ballista, "scheduler", "--port", str(sp)], f"scheduler-{executors}")]
            wait_port(sp, "the scheduler")
            for e in range(executors):
                fp, gp = free_port(), free_port()
                wd = os.path.join(WORK, f"exec-{executors}-{e}")
                os.makedirs(wd)
                cluster.append(spawn([ballista, "executor", "--scheduler-port", str(sp), "--flight-port", str(fp),
                                      "--grpc-port", str(gp), "--task-slots", "2", "--work-dir", wd],
                                     f"executor-{executors}-{e}"))
                wait_port(fp, "an executor")
                wait_port(gp, "an executor")
            url = f"df://127.0.0.1:{sp}"
            # One warm-up query (connections, executor registration).
            ballista_query(url, executors, qs[0][0], qs[0][1])
            for rep in range(REPEAT):
                for name, sql in qs:
                    if executors == 1:
                        records.append(dict(df_query(name, sql), repeat=rep))
                    records.append(dict(ballista_query(url, executors, name, sql), repeat=rep))
            for p in cluster:
                p.kill()
                p.wait()
                procs.remove(p)
        with open(os.path.join(OUT, "sql.jsonl"), "w") as f:
            for r in records:
                f.write(json.dumps(dict(r, kind=KIND, n=N, partitions=PARTITIONS)) + "\n")
        report(records, [q for q, _ in qs])
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for log in logs:
            log.close()


def med(xs):
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def report(records, names):
    print(f"| query | rows | pages (DataFusion) | read calls | DataFusion ms | Ballista, 1 executor, ms | Ballista, 2 executors, ms |")
    print("|---|---|---|---|---|---|---|")
    for q in names:
        df = [r for r in records if r["engine"] == "datafusion" and r["query"] == q]
        b1 = [r["ms"] for r in records if r["engine"] == "ballista" and r["executors"] == 1 and r["query"] == q]
        b2 = [r["ms"] for r in records if r["engine"] == "ballista" and r["executors"] == 2 and r["query"] == q]
        pages = sorted({r["pages"] for r in df})
        calls = sorted({r["read_calls"] for r in df})
        print(f"| {q} | {df[0]['rows']} | {'/'.join(map(str, pages))} | {'/'.join(map(str, calls))} | "
              f"{med([r['ms'] for r in df])} | {med(b1)} | {med(b2)} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--report":
        recs = [json.loads(l) for l in open(sys.argv[2])]
        seen = []
        for r in recs:
            if r["query"] not in seen:
                seen.append(r["query"])
        report(recs, seen)
    else:
        main()
