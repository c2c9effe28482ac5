#!/usr/bin/env python3
"""Serving benchmark on a GPU: `infinity_v3 serve` end to end under closed-loop load.

    python3 bench/serve_gpu.py --bin build/cuda/infinity_v3 --load build/cuda/serve_load \
        [--devices cuda cuda:0,0] [--shapes bert-base] [--seconds 8] [--out FILE.json]

For each random-weight checkpoint (built as bench/run_gpu.py builds them) and
each --device list (one server per list: `cuda` is one replica, `cuda:0,0`
two replicas on one GPU), the C client bench/serve_load.c sends token-id
requests to POST /embed on keep-alive connections:

  1x32  c64   one 32-token sequence per request, 64 concurrent clients
  32x512 c64  32 sequences of 512 tokens per request, 64 clients
  1x32  c1    one client, one request at a time (latency)

Printed per scenario: requests/s, tokens/s, client-side p50/p99 over
loopback (an upper bound of the server's time), the server's own mean time
per request (te_request_duration from /metrics), the GPU's busy fraction
from nvidia-smi sampling (utilization.gpu every 100 ms) and each replica's
busy fraction from the server's own /info (time inside forward passes).

Without a GPU, --model DIR --devices cpu runs the same harness on the CPU
(the figures then say nothing about GPUs; it checks the harness).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

SCENARIOS = [("1x32", 1, 32, 64), ("32x512", 32, 512, 64), ("1x32", 1, 32, 1)]


def start_server(binary, model, devices, log_path):
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [binary, "serve", "--model-id", model, "--device", devices, "--port", "0", "--hostname", "127.0.0.1",
         "--max-batch-tokens", "65536", "--max-concurrent-requests", "100000", "--max-client-batch-size", "64"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited during start: {open(log_path).read()[-2000:]}")
        m = re.search(r"Ready: listening on [^:\s]+:(\d+)", open(log_path).read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start in 300 s")


def request_duration(port):
    """(sum seconds, count) of the server's te_request_duration histogram."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    total = re.search(r"^te_request_duration_sum (\S+)$", text, re.M)
    count = re.search(r"^te_request_duration_count (\S+)$", text, re.M)
    return (float(total.group(1)) if total else 0.0), (float(count.group(1)) if count else 0.0)


def info(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/info", timeout=30) as r:
        return json.load(r)


class GpuSampler:
    """Mean utilization.gpu of GPU 0 while running (nvidia-smi -lms 100)."""

    def __init__(self):
        self.values = []
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100", "-i", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.values.append(float(line.strip()))
            except ValueError:
                pass

    def stop(self):
        if not self.proc:
            return None
        self.proc.terminate()
        self.proc.wait()
        # The first samples can predate the load by up to one period.
        vals = self.values[2:] if len(self.values) > 4 else self.values
        return sum(vals) / len(vals) if vals else None


def run_scenario(load_bin, port, root, n_seqs, seq_len, clients, seconds, vocab):
    rnd = random.Random(n_seqs * 1000 + seq_len)
    body = {"inputs": [[rnd.randrange(min(1000, vocab // 2), vocab) for _ in range(seq_len)] for _ in range(n_seqs)]}
    path = os.path.join(root, f"body-{n_seqs}x{seq_len}.json")
    with open(path, "w") as f:
        json.dump(body, f)
    # Warm up (first batches of each shape tune the GEMM algorithms).
    subprocess.run([load_bin, "--port", str(port), "--body", path, "--clients", str(min(clients, 8)),
                    "--seconds", "1.5"], capture_output=True, check=False)
    before = info(port)["replicas"]
    dur0 = request_duration(port)
    sampler = GpuSampler()
    t0 = time.time()
    out = subprocess.run([load_bin, "--port", str(port), "--body", path, "--clients", str(clients),
                          "--seconds", str(seconds)], capture_output=True, text=True)
    wall = time.time() - t0
    gpu_busy = sampler.stop()
    after = info(port)["replicas"]
    dur1 = request_duration(port)
    if out.returncode:
        raise RuntimeError(f"serve_load failed: {out.stderr}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["tokens_per_s"] = res["rps"] * n_seqs * seq_len
    res["gpu_busy"] = gpu_busy
    # The server's own time per request (first byte in to response queued), mean.
    res["server_mean_ms"] = (dur1[0] - dur0[0]) / (dur1[1] - dur0[1]) * 1e3 if dur1[1] > dur0[1] else None
    res["replica_busy"] = [(a["busy_seconds"] - b["busy_seconds"]) / wall for a, b in zip(after, before)]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--load", required=True)
    ap.add_argument("--devices", nargs="*", default=["cuda", "cuda:0,0"])
    ap.add_argument("--shapes", nargs="*", default=["bert-base"])
    ap.add_argument("--model", help="an existing checkpoint instead of the random shapes (CPU harness check)")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    results = {"scenarios": []}
    with tempfile.TemporaryDirectory() as root:
        models = []
        if args.model:
            with open(os.path.join(args.model, "config.json")) as f:
                models.append(("model", args.model, json.load(f)["vocab_size"]))
        else:
            sys.path.insert(0, HERE)
            from run_gpu import SHAPES, build_checkpoint  # torch and transformers, on the GPU machine
            for name in args.shapes:
                path, _ = build_checkpoint(name, SHAPES[name], root)
                models.append((name, path, SHAPES[name]["vocab"]))
        for name, path, vocab in models:
            for devices in args.devices:
                log_path = os.path.join(root, "server.log")
                try:
                    proc, port = start_server(args.bin, path, devices, log_path)
                except RuntimeError as e:
                    print(f"gpu-serve {name} {devices}: {e}", flush=True)
                    results["scenarios"].append(dict(model=name, devices=devices, error=str(e)))
                    continue
                try:
                    for label, n_seqs, seq_len, clients in SCENARIOS:
                        r = run_scenario(args.load, port, root, n_seqs, seq_len, clients, args.seconds, vocab)
                        r.update(model=name, devices=devices, scenario=label, clients=clients)
                        results["scenarios"].append(r)
                        gpu = f"{r['gpu_busy']:.0f}%" if r["gpu_busy"] is not None else "n/a"
                        rb = "/".join(f"{b * 100:.0f}%" for b in r["replica_busy"])
                        print(f"gpu-serve {name} --device {devices} {label} c{clients}: {r['rps']:,.0f} req/s, "
                              f"{r['tokens_per_s']:,.0f} tok/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                              f"server mean {r['server_mean_ms']:.2f} ms, "
                              f"errors {r['errors']}, GPU busy {gpu} (nvidia-smi), replicas busy {rb}", flush=True)
                finally:
                    proc.terminate()
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
