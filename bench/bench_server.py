#!/usr/bin/env python3
"""Serving benchmark: infinity_v3 vs infinity-emb (PyPI) on the same local
all-MiniLM-L6-v2 directory, in one run, on this machine's CPU.

Both servers get the same requests on the route they share, POST
/embeddings ({"model", "input": [...]}), from closed-loop client threads
with keep-alive connections:

  short:  one sentence per request (8-24 words), 16 concurrent clients;
  batch:  32 sentences of mixed length (5-60 words) per request, 4 clients.

Both servers run at once (an idle one takes no CPU) and each scenario
alternates between them in rounds, so a change in the machine's other load
hits both alike. For each it reports requests/s, inputs/s, p50/p99 latency
and errors, the server's peak RSS, the ratio infinity_v3 / infinity-emb,
and a numeric check that the two servers return the same vectors. Results
go to bench/results/server.json.

Setup (infinity-emb needs transformers<=5.0 and sentence-transformers 3,
so it lives in its own virtualenv on top of the system torch):

    python3 -m venv --system-site-packages .cache/venv-bench
    .cache/venv-bench/bin/pip install "infinity-emb[server,torch]==0.0.77" "click==8.1.8"
    make build/release/infinity_v3 && scripts/fetch-models.sh
    python3 bench/bench_server.py [--seconds 12] [--infinity-python .cache/venv-bench/bin/python]

infinity-emb runs with --engine torch --device cpu --no-bettertransformer
(BetterTransformer does not import with current optimum/transformers) and
telemetry off. The client threads share the CPU with the server under test;
both servers pay that cost alike.
"""
import argparse
import http.client
import json
import math
import os
import platform
import random
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact be have do say get make go know take see come think look "
         "want give use find tell ask work seem feel try leave call good new first last long great little own "
         "other old right big high different small large next early young important few public bad same able").split()


def sentences(n, lo, hi, seed):
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(lo, hi))).capitalize() + "." for _ in range(n)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_health(port, proc, seconds, log_path):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("server exited:\n" + open(log_path).read()[-4000:])
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("server on port %d did not become healthy:\n%s" % (port, open(log_path).read()[-4000:]))


def start_v3(binary, model_dir):
    port = free_port()
    log_path = "/tmp/bench_v3_%d.log" % os.getpid()
    proc = subprocess.Popen([binary, "serve", "--model-id", model_dir, "--served-model-name", "minilm",
                             "--port", str(port), "--hostname", "127.0.0.1", "--log-level", "warn",
                             "--max-client-batch-size", "64"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    wait_health(port, proc, 60, log_path)
    return proc, port, log_path


def start_infinity(python, model_dir):
    port = free_port()
    log_path = "/tmp/bench_infinity_%d.log" % os.getpid()
    env = dict(os.environ, DO_NOT_TRACK="1", INFINITY_ANONYMOUS_USAGE_STATS="0", HF_HUB_OFFLINE="1")
    cli = os.path.join(os.path.dirname(python), "infinity_emb")  # the package's console script
    proc = subprocess.Popen([python, cli, "v2", "--model-id", model_dir,
                             "--served-model-name", "minilm", "--port", str(port), "--host", "127.0.0.1",
                             "--engine", "torch", "--device", "cpu", "--no-bettertransformer",
                             "--log-level", "warning"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env)
    wait_health(port, proc, 300, log_path)
    return proc, port, log_path


def peak_rss_mb(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/embeddings", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


def load(port, bodies, clients, seconds):
    """Closed loop: each client sends its next request as soon as the last answer arrived.
    Returns (latencies in seconds, errors, elapsed seconds)."""
    lat, errors = [], [0]
    lock = threading.Lock()
    start = time.perf_counter()
    stop = start + seconds

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine, k = [], i
        while time.perf_counter() < stop:
            body = bodies[k % len(bodies)]
            k += clients
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/embeddings", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            t1 = time.perf_counter()
            if ok:
                mine.append(t1 - t0)
            else:
                with lock:
                    errors[0] += 1
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors[0], time.perf_counter() - start


def summarize(lat, errors, elapsed, n_inputs, clients):
    lat = sorted(lat)

    def pct(p):
        return round(lat[min(len(lat) - 1, int(math.ceil(p / 100.0 * len(lat))) - 1)] * 1000, 2) if lat else None

    return {"requests": len(lat), "seconds": round(elapsed, 2), "requests_per_s": round(len(lat) / elapsed, 2),
            "inputs_per_s": round(len(lat) * n_inputs / elapsed, 1), "p50_ms": pct(50), "p99_ms": pct(99),
            "errors": errors, "clients": clients, "inputs_per_request": n_inputs}


def vectors(port, texts):
    status, data = post(port, json.dumps({"model": "minilm", "input": texts}))
    if status != 200:
        sys.exit("embedding check failed with %d: %s" % (status, data[:300]))
    return [d["embedding"] for d in json.loads(data)["data"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/infinity_v3"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2"))
    ap.add_argument("--infinity-python", default=os.path.join(ROOT, ".cache/venv-bench/bin/python"))
    ap.add_argument("--seconds", type=float, default=12.0, help="measured seconds per scenario and engine")
    ap.add_argument("--rounds", type=int, default=3, help="alternations between the engines per scenario")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each round")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/server.json"))
    args = ap.parse_args()

    short = [json.dumps({"model": "minilm", "input": [s]}) for s in sentences(512, 8, 24, 1)]
    batch = [json.dumps({"model": "minilm", "input": sentences(32, 5, 60, 100 + i)}) for i in range(64)]
    scenarios = [("short", short, 1, 16), ("batch", batch, 32, 4)]
    check_texts = sentences(8, 3, 80, 7)

    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "load_average_at_start": os.getloadavg()},
               "model": os.path.basename(args.model_dir), "route": "POST /embeddings",
               "seconds_per_scenario": args.seconds, "rounds": args.rounds, "engines": {}}
    try:
        versions = subprocess.run([args.infinity_python, "-c", "import infinity_emb, torch, transformers; "
                                   "print(infinity_emb.__version__, torch.__version__, transformers.__version__)"],
                                  capture_output=True, text=True, timeout=120).stdout.split()
        results["infinity_emb_versions"] = dict(zip(["infinity_emb", "torch", "transformers"], versions))
    except (OSError, subprocess.SubprocessError):
        pass
    engines = [("infinity_v3", lambda: start_v3(args.binary, args.model_dir)),
               ("infinity-emb", lambda: start_infinity(args.infinity_python, args.model_dir))]
    # Both servers up at once (an idle server takes no CPU); scenarios alternate
    # between them in rounds so a change in the machine's other load hits both.
    running = {}
    try:
        for name, start in engines:
            print("starting %s ..." % name, flush=True)
            running[name] = start()
        ref = vectors(running["infinity_v3"][1], check_texts)
        other = vectors(running["infinity-emb"][1], check_texts)
        diff = max(abs(a - b) for u, v in zip(ref, other) for a, b in zip(u, v))
        for name in running:
            results["engines"][name] = {}
        for sc, bodies, n_inputs, clients in scenarios:
            acc = {name: ([], 0, 0.0) for name in running}
            for _ in range(args.rounds):
                for name, (proc, port, _) in running.items():
                    load(port, bodies, clients, args.warmup)
                    lat, err, secs = load(port, bodies, clients, args.seconds / args.rounds)
                    l0, e0, s0 = acc[name]
                    acc[name] = (l0 + lat, e0 + err, s0 + secs)
            for name in running:
                r = summarize(*acc[name], n_inputs, clients)
                results["engines"][name][sc] = r
                print("  %-12s %-6s %8.1f req/s %9.1f inputs/s  p50 %7.1f ms  p99 %7.1f ms  errors %d" % (
                    name, sc, r["requests_per_s"], r["inputs_per_s"], r["p50_ms"] or -1, r["p99_ms"] or -1,
                    r["errors"]), flush=True)
        for name, (proc, _, _) in running.items():
            results["engines"][name]["peak_rss_mb"] = peak_rss_mb(proc.pid)
        results["engines"]["infinity-emb"]["max_abs_diff_vs_infinity_v3"] = diff
    finally:
        for name, (proc, _, log_path) in running.items():
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            os.unlink(log_path)

    a, b = results["engines"]["infinity_v3"], results["engines"]["infinity-emb"]
    ratios = {}
    for sc, _, _, _ in scenarios:
        ratios[sc] = {"requests_per_s": round(a[sc]["requests_per_s"] / b[sc]["requests_per_s"], 2),
                      "p50_latency": round(a[sc]["p50_ms"] / b[sc]["p50_ms"], 3),
                      "p99_latency": round(a[sc]["p99_ms"] / b[sc]["p99_ms"], 3)}
    results["ratio_infinity_v3_over_infinity_emb"] = ratios
    results["machine"]["load_average_at_end"] = os.getloadavg()
    print("\ninfinity_v3 / infinity-emb (throughput > 1 and latency < 1 favour infinity_v3)")
    for sc, r in ratios.items():
        print("  %-6s throughput x%.2f   p50 latency x%.3f   p99 latency x%.3f" % (
            sc, r["requests_per_s"], r["p50_latency"], r["p99_latency"]))
    print("  vectors: max abs difference %.2e" % b["max_abs_diff_vs_infinity_v3"])
    print("  peak RSS: %.0f MB vs %.0f MB" % (a["peak_rss_mb"] or -1, b["peak_rss_mb"] or -1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print("saved %s" % args.out)


if __name__ == "__main__":
    main()
