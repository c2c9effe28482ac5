#!/usr/bin/env python3
"""`make test-fleet`: three infinity_v3 replicas behind nginx, one killed
and restarted under load, no answer lost or wrong.

1. Starts --replicas servers (default 3) on the real all-MiniLM-L6-v2 in
   .cache/models when present, else the tiny BERT fixture
   (tests/fixtures/models/bert), on free loopback ports.
2. Renders deploy/nginx/infinity_v3.conf (the configuration docs/deployment.md
   describes, unchanged but for its placeholders) into a temporary prefix
   and runs Debian's nginx as the current user in the foreground.
3. Builds --requests (2000) mixed requests (TEI /embed, /embed_all,
   /similarity, /tokenize, OpenAI /v1/embeddings float and base64,
   Infinity /embeddings, Cohere /v2/embed with int8, vLLM /score) from a
   seeded corpus, and computes each answer alone: one at a time, straight
   to replica 0, before any load.
4. Sends all of them through nginx from --clients (32) threads on
   keep-alive connections, each with its own x-request-id; when a quarter
   are answered replica 1 is SIGKILLed (its in-flight requests die with it),
   and when 55% are answered it is started again on the same port; it
   must serve again before the end.
5. Checks every answer: status 200, body equal to the answer computed
   alone (ignoring only the per-response `id`/`created` fields), and the
   x-request-id it was sent. Prints requests, lost, wrong, latency p50/p99,
   how many nginx retried on another replica, and each replica's share
   (from nginx's access log). Exit status 1 when anything was lost or wrong.

Standard library only; needs nginx (apt-get install nginx-light).
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyutil"))
from ivserver import ROOT, Server, default_binary, default_model  # noqa: E402

TEMPLATE = os.path.join(ROOT, "deploy/nginx/infinity_v3.conf")
PAYLOAD_LIMIT = 2000000  # the replicas' --payload-limit (the server's default)

WORDS = ("deep learning model vector search query document ranking embedding sentence paris berlin "
         "river mountain quick brown fox jumps over lazy dog neural network token batch replica "
         "server latency memory cache tensor matrix apple banana orange music piano violin").split()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentence(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 24))).capitalize() + "."


def make_requests(n, seed):
    """(path, body) pairs, a mix of routes and batch sizes."""
    rng = random.Random(seed)
    reqs = []
    for _ in range(n):
        k = rng.randint(1, 6)
        texts = [sentence(rng) for _ in range(k)]
        kind = rng.choices(range(9), weights=[5, 1, 2, 2, 4, 2, 3, 2, 2])[0]
        if kind == 0:
            reqs.append(("/embed", {"inputs": texts if k > 1 else texts[0]}))
        elif kind == 1:
            reqs.append(("/embed_all", {"inputs": texts[:2]}))
        elif kind == 2:
            reqs.append(("/similarity", {"inputs": {"source_sentence": texts[0], "sentences": texts}}))
        elif kind == 3:
            reqs.append(("/tokenize", {"inputs": texts}))
        elif kind == 4:
            reqs.append(("/v1/embeddings", {"input": texts, "model": "m"}))
        elif kind == 5:
            reqs.append(("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"}))
        elif kind == 6:
            reqs.append(("/embeddings", {"input": texts}))
        elif kind == 7:
            reqs.append(("/v2/embed", {"texts": texts, "embedding_types": ["float", "int8"],
                                       "input_type": "search_document"}))
        else:
            reqs.append(("/score", {"text_1": texts[0], "text_2": texts}))
    return reqs


def normalise(path, body):
    """The answer without the fields that differ between two identical requests."""
    j = json.loads(body)
    if isinstance(j, dict):
        j.pop("id", None)
        j.pop("created", None)
    return j


def compute_alone(host, port, reqs):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    out = []
    for path, body in reqs:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"reference {path} answered {r.status}: {data[:200]!r}")
        out.append(normalise(path, data))
    conn.close()
    return out


def render_nginx(prefix, addrs, listen, post_retry=True):
    os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
    ups = "\n    ".join(f"server {a} max_fails=1 fail_timeout=2s;" for a in addrs)
    values = {"@UPSTREAMS@": ups, "@LISTEN@": f"127.0.0.1:{listen}", "@PAYLOAD_LIMIT@": str(PAYLOAD_LIMIT),
              "@ACCESS_LOG@": os.path.join(prefix, "access.log")}
    lines = []
    for line in open(TEMPLATE).read().splitlines():
        if not line.lstrip().startswith("#"):  # the header names the placeholders
            for k, v in values.items():
                line = line.replace(k, v)
        lines.append(line)
    conf = "\n".join(lines) + "\n"
    if not post_retry:
        conf = conf.replace(" non_idempotent;", ";")
    leftover = re.findall(r"^[^#]*(@[A-Z_]+@)", conf, re.M)
    if leftover:
        raise RuntimeError(f"unrendered placeholders {leftover}")
    with open(os.path.join(prefix, "infinity_v3.conf"), "w") as f:
        f.write(conf)
    t = os.path.join(prefix, "tmp")
    # As root, nginx would switch its workers to `nobody`, who cannot use a
    # private temporary prefix: keep them as the current user.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    with open(os.path.join(prefix, "nginx.conf"), "w") as f:
        f.write(f"""{user}worker_processes 2;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {t}/body;
    proxy_temp_path {t}/proxy;
    fastcgi_temp_path {t}/fastcgi;
    uwsgi_temp_path {t}/uwsgi;
    scgi_temp_path {t}/scgi;
    include infinity_v3.conf;
}}
""")


def start_nginx(exe, prefix, listen):
    subprocess.run([exe, "-t", "-q", "-p", prefix, "-c", os.path.join(prefix, "nginx.conf"), "-e",
                    os.path.join(prefix, "error.log")], check=True)
    p = subprocess.Popen([exe, "-p", prefix, "-c", os.path.join(prefix, "nginx.conf"), "-e",
                          os.path.join(prefix, "error.log"), "-g", "daemon off;"])
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", listen, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("nginx did not come up:\n" + open(os.path.join(prefix, "error.log")).read())


class Hosts:
    """--netns: each replica on a host of its own, made here: network
    namespace ivfleetN joined to this one by a veth pair, 10.78.N.1 on this
    side and 10.78.N.2 on the replica's (root only). nginx stays here and
    reaches each replica over its link, as across machines."""

    def __init__(self, n):
        self.names = []
        for i in range(n):
            ns, here, there = f"ivfleet{i}", f"ivf{i}a", f"ivf{i}b"
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # a leftover of a killed run
            self.names.append(ns)
            for cmd in (["ip", "netns", "add", ns],
                        ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
                        ["ip", "link", "set", there, "netns", ns],
                        ["ip", "addr", "add", f"10.78.{i}.1/24", "dev", here],
                        ["ip", "link", "set", here, "up"],
                        ["ip", "netns", "exec", ns, "ip", "addr", "add", f"10.78.{i}.2/24", "dev", there],
                        ["ip", "netns", "exec", ns, "ip", "link", "set", there, "up"],
                        ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    self.close()
                    sys.exit(f"--netns: {' '.join(cmd)} failed: {r.stderr.strip()} (needs root)")

    def server_args(self, i):
        return {"host": f"10.78.{i}.2", "wrap": ["ip", "netns", "exec", self.names[i]]}

    def close(self):
        for ns in self.names:  # deleting the namespace deletes its end of the pair, and so the pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def percentile(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=default_binary())
    minilm = os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2")
    ap.add_argument("--model-id", default=minilm if os.path.isdir(minilm) else default_model(),
                    help="default: the real all-MiniLM-L6-v2 when scripts/fetch-models.sh fetched it, "
                         "else the tiny BERT fixture")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--kill-at", type=float, default=0.25, help="fraction answered when replica 1 is killed")
    ap.add_argument("--restart-at", type=float, default=0.55, help="fraction answered when it starts again")
    ap.add_argument("--rate", type=float, default=None,
                    help="requests/s offered in all; 0: as fast as the clients go (default with MiniLM, whose "
                         "requests are slow enough that the kill catches many in flight); default 250 with the "
                         "tiny fixture, so that the run lasts long enough for the restarted replica to serve again")
    ap.add_argument("--no-post-retry", action="store_true",
                    help="drop non_idempotent from proxy_next_upstream, to see what it saves")
    ap.add_argument("--netns", action="store_true",
                    help="each replica in a network namespace of its own, over a veth link (root)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/artefacts/fleet"))
    a = ap.parse_args()
    if a.rate is None:
        a.rate = 250.0 if os.path.samefile(a.model_id, default_model()) else 0.0
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        sys.exit("nginx not found: apt-get install nginx-light")
    os.makedirs(a.out, exist_ok=True)
    prefix = tempfile.mkdtemp(prefix="iv-fleet-nginx-")

    # Each replica gets a share of the cores (2 tokenizer and 2 HTTP threads).
    extra = ["--tokenization-workers", "2", "--http-threads", "2", "--log-level", "debug"]
    hosts = Hosts(a.replicas) if a.netns else None
    servers = [Server(a.binary, a.model_id, extra=extra, log_dir=a.out, **(hosts.server_args(i) if hosts else {}))
               for i in range(a.replicas)]
    addr = {s: None for s in servers}
    nginx = None
    try:
        for s in servers:
            s.start()
            addr[s] = f"{s.host}:{s.port}"
        print(f"replicas: {', '.join(addr.values())} on {os.path.relpath(a.model_id, ROOT)}"
              + (" (each in its own network namespace)" if hosts else ""))
        reqs = make_requests(a.requests, a.seed)
        t0 = time.time()
        want = compute_alone(servers[0].host, servers[0].port, reqs)
        print(f"reference answers computed alone: {len(want)} in {time.time() - t0:.1f}s")

        listen = free_port()
        render_nginx(prefix, list(addr.values()), listen, post_retry=not a.no_post_retry)
        nginx = start_nginx(exe, prefix, listen)
        print(f"nginx {prefix} on 127.0.0.1:{listen}")

        lock = threading.Lock()
        next_i = [0]
        done = [0]
        results = [None] * len(reqs)  # (status, normalised body or error, id echoed, seconds)
        events = {}
        victim = servers[1] if len(servers) > 1 else servers[0]

        def client():
            conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=120)
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= len(reqs):
                    break
                path, body = reqs[i]
                if a.rate > 0:  # open loop: request i is due at i / rate
                    delay = t_start + i / a.rate - time.time()
                    if delay > 0:
                        time.sleep(delay)
                rid = f"fleet-{a.seed}-{i}"
                t = time.perf_counter()
                try:
                    conn.request("POST", path, json.dumps(body),
                                 {"Content-Type": "application/json", "X-Request-ID": rid})
                    r = conn.getresponse()
                    data = r.read()
                    got = normalise(path, data) if r.status == 200 else data[:300]
                    res = (r.status, got, r.getheader("x-request-id") == rid, time.perf_counter() - t)
                except (OSError, http.client.HTTPException, ValueError) as e:
                    res = (0, repr(e), False, time.perf_counter() - t)
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=120)
                results[i] = res
                with lock:
                    done[0] += 1
            conn.close()

        def chaos():
            n = len(reqs)
            while done[0] < a.kill_at * n:
                time.sleep(0.002)
            events["kill"] = (time.time(), done[0])
            victim.kill()  # SIGKILL: no drain, its connections reset
            while done[0] < a.restart_at * n:
                time.sleep(0.002)
            victim.start()
            events["restart"] = (time.time(), done[0])

        threads = [threading.Thread(target=client) for _ in range(a.clients)]
        ch = threading.Thread(target=chaos, daemon=True)
        t_start = time.time() + 0.05
        ch.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t_start
        ch.join(60)

        lost = [i for i, r in enumerate(results) if r is None or r[0] != 200]
        wrong = [i for i, r in enumerate(results) if r and r[0] == 200 and r[1] != want[i]]
        bad_id = [i for i, r in enumerate(results) if r and r[0] == 200 and not r[2]]
        lat = [r[3] * 1000 for r in results if r]
        time.sleep(0.3)  # let nginx flush its access log
        log = open(os.path.join(prefix, "access.log")).read().splitlines()
        shutil.copy(os.path.join(prefix, "access.log"), os.path.join(a.out, "nginx-access.log"))
        shutil.copy(os.path.join(prefix, "error.log"), os.path.join(a.out, "nginx-error.log"))
        per = {addr[s]: 0 for s in servers}
        retried = 0
        after_restart = 0
        for line in log:
            m = re.search(r"upstream=(\S+(?:, \S+)*) upstream_status", line)
            if not m or "/health" in line:
                continue
            addrs = m.group(1).split(", ")
            retried += len(addrs) > 1
            if addrs[-1] in per:
                per[addrs[-1]] += 1
        # The restarted replica is back in rotation when it answered after
        # its restart (its second log, at --log-level debug, has a line per request).
        after_restart = len(re.findall(r"POST /\S* 200", open(victim.log_path).read()))

        print(f"fleet: {len(reqs)} requests ({a.clients} clients, {a.replicas} replicas, "
              f"{'rate ' + str(int(a.rate)) + '/s' if a.rate else 'closed loop'}) in {wall:.1f}s "
              f"= {len(reqs) / wall:.0f} req/s")
        if "kill" in events:
            print(f"  replica {addr[victim]} SIGKILLed after {events['kill'][1]} answers, "
                  f"restarted after {events.get('restart', (0, '?'))[1]} "
                  f"({events['restart'][0] - events['kill'][0]:.2f}s later)" if "restart" in events else "")
        print(f"  lost (no 200): {len(lost)}   wrong answer: {len(wrong)}   x-request-id not echoed: {len(bad_id)}")
        print(f"  latency through nginx: p50 {percentile(lat, 0.5):.1f} ms, p99 {percentile(lat, 0.99):.1f} ms, "
              f"max {max(lat):.1f} ms")
        print(f"  nginx retried on another replica: {retried}; final replica per request: "
              + ", ".join(f"{p}: {c}" for p, c in per.items()))
        print(f"  restarted replica {addr[victim]}: {per[addr[victim]]} requests in all, "
              f"{after_restart} after its restart")
        for i in (lost + wrong)[:5]:
            print(f"  e.g. #{i} {reqs[i][0]}: {results[i][0] if results[i] else None} "
                  f"{str(results[i][1])[:200] if results[i] else ''}")
        ok = not lost and not wrong and not bad_id and "restart" in events and after_restart > 0
        print("test-fleet:", "PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if nginx:
            nginx.terminate()
            nginx.wait(10)
        for s in servers:
            s.stop()
        if hosts:
            hosts.close()
        shutil.rmtree(prefix, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
