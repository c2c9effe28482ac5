"""The server's per-request fixed cost, for bench/run_cpu.py (issue 25:
"keep the per-request fixed cost (HTTP, JSON, batcher wake-up) measured
and small").

One tiny request, `POST /embed {"inputs": "hello"}` (3 tokens with [CLS]
and [SEP]), is sent again and again, each after the last answer, over one
keep-alive connection to `infinity_v3 serve` on the real all-MiniLM-L6-v2;
between requests the connection also asks `GET /health`. run_cpu.py times
bench_engine on the same token ids in-process, in turns with the server.
  fixed cost = p50 of /embed - p50 of the engine alone: HTTP parsing, the
               JSON codec, tokenization, the queue and the batcher's
               wake-up, the result's way back; and this Python client's own
               time to write the request and parse the response.
  /health p50: the same round trip with no engine work, JSON or batcher:
               what HTTP over loopback plus the client cost alone.
The server runs with the engines' environment (OMP_NUM_THREADS and the wait
policy of run_cpu.engine_env). Standard library only, with tokenizers for
the ids (as cpu_workloads).
"""
import http.client
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "pyutil"))

from ivserver import Server  # noqa: E402

TEXT = "hello"
BODY = json.dumps({"inputs": TEXT, "normalize": False})


def token_ids(model_dir, text):
    """The ids the server's tokenizer gives `text`, special tokens included."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()  # all-MiniLM-L6-v2's tokenizer.json pads to 128; the server does not
    return tok.encode(text).ids


def pct(times, q):
    """Percentile q (0..100) of a list of seconds, in ms (nearest rank)."""
    if not times:
        return None
    s = sorted(times)
    return s[min(len(s) - 1, max(0, int(math.ceil(q / 100.0 * len(s))) - 1))] * 1e3


class Client:
    """The server (started on enter, stopped on exit) and one keep-alive
    connection to it; round(n) times n /embed and n /health requests."""

    def __init__(self, binary, model, env):
        # Default log level: ivserver reads the port from the "Ready: listening" line.
        self.server = Server(binary, model, env=env)
        self.embed_s, self.health_s, self.vector, self.round_p50_ms = [], [], None, []

    def __enter__(self):
        self.server.start(timeout=120)
        self.conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
        for _ in range(5):  # warm-up: the first requests page code in and grow buffers
            self._embed()
        return self

    def __exit__(self, *exc):
        self.conn.close()
        self.server.stop()
        return False

    def _send(self, method, path, body=None):
        t0 = time.perf_counter()
        try:
            self.conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
            r = self.conn.getresponse()
            data = r.read()
        except http.client.HTTPException as e:
            raise RuntimeError(f"{method} {path}: {e!r}") from e
        dt = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: status {r.status}: {data[:300]!r}")
        if r.getheader("Connection", "").lower() == "close":
            raise RuntimeError(f"{method} {path}: the server closed the keep-alive connection")
        return dt, data

    def _embed(self):
        dt, data = self._send("POST", "/embed", BODY)
        vecs = json.loads(data)
        if not isinstance(vecs, list) or len(vecs) != 1:
            raise ValueError(f"/embed answered {data[:200]!r}, not one vector")
        self.vector = vecs[0]
        return dt

    def round(self, n):
        times = []
        for _ in range(n):
            times.append(self._embed())
            self.health_s.append(self._send("GET", "/health")[0])
        self.embed_s += times
        self.round_p50_ms.append(pct(times, 50))

    def summary(self):
        return {"embed_times_s": self.embed_s, "health_times_s": self.health_s, "vector": self.vector,
                "round_p50_ms": self.round_p50_ms}


def _cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else None


def summarise(out, engine_times, engine_first, model, ids, threads, engine_round_p50_ms=()):
    """The record run_cpu.py stores as result["server_overhead"]. The fixed
    cost is the median over rounds of (server p50 - engine p50) of that
    round, the two measured seconds apart (the machine's drift cancels, as
    in run_cpu's slices); "rounds_ms" gives each round's difference."""
    embed, health = out["embed_times_s"], out["health_times_s"]
    rec = {"model": model, "text": TEXT, "tokens": len(ids), "threads": threads,
           "requests": len(embed), "engine_runs": len(engine_times),
           "embed_p50_ms": pct(embed, 50), "embed_p99_ms": pct(embed, 99),
           "health_p50_ms": pct(health, 50), "health_p99_ms": pct(health, 99),
           "engine_p50_ms": pct(engine_times, 50), "engine_p99_ms": pct(engine_times, 99),
           "embed_times_s": [round(t, 6) for t in embed], "health_times_s": [round(t, 6) for t in health],
           "engine_times_s": [round(t, 6) for t in engine_times]}
    server_rounds = out.get("round_p50_ms") or []
    if server_rounds and len(server_rounds) == len(engine_round_p50_ms):
        rec["rounds_ms"] = [s - e for s, e in zip(server_rounds, engine_round_p50_ms)]
        rec["fixed_cost_ms"] = statistics.median(rec["rounds_ms"])
    elif rec["embed_p50_ms"] is not None and rec["engine_p50_ms"] is not None:
        rec["fixed_cost_ms"] = rec["embed_p50_ms"] - rec["engine_p50_ms"]
    if out.get("vector") and engine_first and len(out["vector"]) == len(engine_first):
        # The server computed the same thing as the engine: same ids, same model.
        rec["cosine_server_vs_engine"] = _cosine(out["vector"], engine_first)
    return rec
