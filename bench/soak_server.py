#!/usr/bin/env python3
"""Memory soak and load check of the server: does RSS stay flat over 10,000
requests, and is every answer under load the answer computed alone?

    make build/release/infinity_v3 && scripts/fetch-models.sh
    python3 bench/soak_server.py [--requests 10000] [--clients 4] [--model-dir DIR]
    python3 bench/soak_server.py --requests 2000 --clients 64   # the load check of issue 22

Starts `infinity_v3 serve` on the model (default: the real all-MiniLM-L6-v2)
and sends it --requests requests from closed-loop keep-alive clients, a
fixed mix that exercises every path a request can take:
  70%  one sentence (POST /embeddings)
  15%  32 sentences of mixed length (POST /embeddings)
   5%  TEI /embed with truncation of a long text
  10%  bad requests that must get a 4xx and leave nothing behind: malformed
       JSON, invalid UTF-8, an empty input list, a wrong type, an unknown
       route
Before the load, every distinct request that must succeed is sent once,
alone, and its answer kept; under load each 200 is compared with it (as
parsed JSON, ignoring Infinity's per-response "id" and "created"): a wrong
answer is an error, as is a lost one (no response). Latency p50/p99 of the
requests under load are reported.
The server's resident memory (VmRSS, /proc) is sampled every --sample
requests. Memory that is held per request and never given back grows with
the count, while the allocator's per-thread arenas only wobble (a few MB up
and down); so once the activation arena has reached the largest batch
(--settle requests, default 1,000) the verdict compares the highest sample
of the second half with the highest of the first, allowing --tolerance-mb. Unexpected statuses count as errors. Results go to
bench/results/soak.json; the exit status is 1 when RSS grew or a request
failed, so the script can guard a release.
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time

import bench_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            for key in ("VmRSS:", "VmHWM:"):
                if line.startswith(key):
                    out[key[:-1]] = int(line.split()[1]) / 1024.0
    return out


def request_mix(seed):
    """pick(i) -> (method, path, body, acceptable statuses) of request i:
    out of every 20, 14 single sentences, 3 batches, 1 TEI truncation, 1 bad
    body and 1 unknown route, each drawn from its kind's variants."""
    short = [json.dumps({"model": "minilm", "input": [s]}).encode() for s in bench_server.sentences(256, 8, 24, seed)]
    batch = [json.dumps({"model": "minilm", "input": bench_server.sentences(32, 5, 60, seed + i)}).encode()
             for i in range(16)]
    long_text = " ".join(bench_server.sentences(80, 20, 40, seed + 99))
    tei = [json.dumps({"inputs": long_text[:n], "truncate": True}).encode() for n in (2000, 4000, 8000)]
    bad = [b'{"model": "minilm", "input": ["unterminated',
           b'{"model": "minilm", "input": ["\xff\xfe invalid utf-8"]}',
           b'{"model": "minilm", "input": []}',
           b'{"model": "minilm", "input": 42}']
    kinds = {"short": ("/embeddings", short, (200,)), "batch": ("/embeddings", batch, (200,)),
             "tei": ("/embed", tei, (200,)), "bad": ("/embeddings", bad, (400, 413, 422)),
             "route": ("/nowhere", [b"{}"], (404,))}
    slots = ["short"] * 14 + ["batch"] * 3 + ["tei", "bad", "route"]

    def pick(i):
        path, bodies, ok = kinds[slots[i % len(slots)]]
        return "POST", path, random.Random(seed * 1000003 + i).choice(bodies), ok
    pick.successes = [(kinds[k][0], b) for k in ("short", "batch", "tei") for b in kinds[k][1]]
    return pick


def normalise(data):
    j = json.loads(data)
    if isinstance(j, dict):
        j.pop("id", None)
        j.pop("created", None)
    return j


def answers_alone(port, pick):
    """Each distinct request that must succeed, sent once with nothing else running."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    want = {}
    for path, body in pick.successes:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path} alone answered {r.status}: {data[:200]!r}")
        want[(path, body)] = normalise(data)
    conn.close()
    return want


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/infinity_v3"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2"))
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sample", type=int, default=250, help="requests between RSS samples")
    ap.add_argument("--settle", type=int, default=1000, help="requests before the baseline sample")
    ap.add_argument("--tolerance-mb", type=float, default=4.0)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/soak.json"))
    args = ap.parse_args()

    proc, port, log_path = bench_server.start_v3(args.binary, args.model_dir)
    pick = request_mix(11)
    t0 = time.perf_counter()
    want = answers_alone(port, pick)
    print("answers computed alone: %d distinct requests in %.1f s" % (len(want), time.perf_counter() - t0))
    lock = threading.Lock()
    state = {"next": 0, "done": 0, "errors": [], "samples": [], "wrong": 0, "lost": 0, "latency": []}
    t_start = time.perf_counter()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                i = state["next"]
                if i >= args.requests:
                    return
                state["next"] += 1
            method, path, body, ok = pick(i)
            wrong = False
            t = time.perf_counter()
            try:
                conn.request(method, path, body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                status = r.status
                if status == 200 and normalise(data) != want[(path, body)]:
                    wrong = True
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            except (OSError, http.client.HTTPException) as e:
                status = repr(e)
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                state["latency"].append(time.perf_counter() - t)
                if status not in ok or wrong:
                    state["errors"].append({"request": i, "path": path, "status": status, "wrong": wrong})
                    state["wrong"] += wrong
                    state["lost"] += not isinstance(status, int)
                state["done"] += 1
                d = state["done"]
                if d % args.sample == 0 or d == args.requests:
                    state["samples"].append(dict(rss_mb(proc.pid), requests=d,
                                                 seconds=round(time.perf_counter() - t_start, 2)))

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        alive = proc.poll() is None
        proc.terminate()
        proc.wait(60)
    samples = state["samples"]
    settled = [s for s in samples if s["requests"] >= args.settle] or samples
    half = (settled[0]["requests"] + settled[-1]["requests"]) / 2
    base = max((s for s in settled if s["requests"] <= half), key=lambda s: s["VmRSS"])
    last = max((s for s in settled if s["requests"] > half), key=lambda s: s["VmRSS"], default=settled[-1])
    growth = last["VmRSS"] - base["VmRSS"]
    ok = alive and not state["errors"] and growth <= args.tolerance_mb
    lat = sorted(state["latency"])
    p50, p99 = (lat[int(q * (len(lat) - 1))] * 1000 for q in (0.5, 0.99))
    result = {"model_dir": args.model_dir, "requests": args.requests, "clients": args.clients,
              "seconds": round(time.perf_counter() - t_start, 1), "server_alive_at_end": alive,
              "errors": state["errors"][:50], "error_count": len(state["errors"]),
              "lost": state["lost"], "wrong": state["wrong"], "p50_ms": round(p50, 2), "p99_ms": round(p99, 2),
              "baseline": base, "last": last, "growth_mb": round(growth, 2),
              "tolerance_mb": args.tolerance_mb, "flat": ok, "samples": samples}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("soak: %d requests (%d clients) in %.0f s, %d unexpected statuses (%d lost, %d wrong answers), server %s"
          % (args.requests, args.clients, result["seconds"], len(state["errors"]), state["lost"], state["wrong"],
             "alive" if alive else "DEAD"))
    print("  latency p50 %.1f ms, p99 %.1f ms; VmRSS %.1f MB at the first sample, %.1f MB at the last"
          % (p50, p99, samples[0]["VmRSS"], samples[-1]["VmRSS"]))
    print("  highest VmRSS %.1f MB in the first half (at %d requests), %.1f MB in the second (at %d): "
          "growth %+.1f MB, tolerance %.1f; peak %.1f MB"
          % (base["VmRSS"], base["requests"], last["VmRSS"], last["requests"], growth, args.tolerance_mb,
             samples[-1]["VmHWM"]))
    print("  " + ("flat" if ok else "NOT FLAT or errors: see " + args.out))
    if not alive:
        print(open(log_path).read()[-3000:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
