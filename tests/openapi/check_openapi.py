#!/usr/bin/env python3
"""`make test-openapi`: the OpenAPI document against a live server.

1. tools/gen_openapi.py --check: src/server/openapi.json is what the
   generator writes (the C test `openapi_every_route_documented`, in
   `make test`, holds it to router.c).
2. openapi-spec-validator on the document the server serves, plain and
   under --url-prefix (whose servers field names the prefix).
3. schemathesis against the running server on the tiny BERT fixture: every
   operation, the coverage, fuzzing and stateful phases, with the checks
   not_a_server_error (no 5xx), status_code_conformance,
   content_type_conformance and response_schema_conformance (every answer
   has a documented status, media type and body shape). A shorter run goes
   through the prefix.

Needs `schemathesis` and `openapi-spec-validator` (the Makefile installs
them into .cache/openapi-venv). Exit status 1 on any failure.
"""
import argparse
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyutil"))
from ivserver import ROOT, Server, default_binary, default_model  # noqa: E402

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def validate(url):
    from openapi_spec_validator import validate as osv
    with urllib.request.urlopen(url) as r:
        doc = json.load(r)
    osv(doc)
    ops = sum(len(v) for v in doc["paths"].values())
    print(f"openapi-spec-validator: {url}: OK (OpenAPI {doc['openapi']}, {ops} operations, "
          f"servers {doc['servers'][0]['url']})")
    return doc


def schemathesis(url, examples, seed, report_dir):
    # One worker: with several, hypothesis's ast.parse runs in threads and
    # CPython 3.11 can fail with "AST constructor recursion depth mismatch",
    # an error of the tool, not of the server.
    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    cmd = [exe, "run", url, "-c", CHECKS, "-n", str(examples), "--seed", str(seed), "-w", "1",
           "--request-timeout", "30", "--report", "junit", "--report-dir", report_dir]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=report_dir, capture_output=True, text=True)
    out = p.stdout + p.stderr
    # The summary block is what matters in a log; the full output goes to a file.
    with open(os.path.join(report_dir, "schemathesis.log"), "a") as f:
        f.write(out)
    tail = out[out.rfind("SUMMARY"):] if "SUMMARY" in out else out[-4000:]
    print(tail.strip())
    if p.returncode:
        print(f"schemathesis exited {p.returncode}")
    return p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=default_binary())
    ap.add_argument("--model-id", default=default_model())
    ap.add_argument("--examples", type=int, default=100, help="schemathesis examples per operation")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "build/artefacts/openapi"))
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "schemathesis.log"), "w").close()
    rc = subprocess.run([sys.executable, os.path.join(ROOT, "tools/gen_openapi.py"), "--check"]).returncode
    print("gen_openapi --check:", "OK" if rc == 0 else "STALE")
    fails = int(rc != 0)

    s = Server(a.binary, a.model_id, log_dir=a.out).start()
    try:
        validate(s.url + "/openapi.json")
        fails += schemathesis(s.url + "/openapi.json", a.examples, a.seed, a.out) != 0
    finally:
        if s.stop() != 0:
            print("server did not exit 0 on SIGTERM")
            fails += 1
    p = Server(a.binary, a.model_id, extra=["--url-prefix", "/api/v1"], log_dir=a.out).start()
    try:
        doc = validate(p.url + "/api/v1/openapi.json")
        if doc["servers"][0]["url"] != "/api/v1":
            print("servers field does not name --url-prefix")
            fails += 1
        fails += schemathesis(p.url + "/api/v1/openapi.json", max(5, a.examples // 10), a.seed, a.out) != 0
    finally:
        if p.stop() != 0:
            print("server (--url-prefix) did not exit 0 on SIGTERM")
            fails += 1
    print("test-openapi:", "PASS" if not fails else f"FAIL ({fails})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
