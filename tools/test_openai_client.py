#!/usr/bin/env python3
"""Checks infinity_v3's OpenAI-compatible embeddings with the official
`openai` Python client (pip install openai).

Against a running server:
    python3 tools/test_openai_client.py --base-url http://127.0.0.1:7997

or let the script start one (the binary on a free port, a model directory):
    python3 tools/test_openai_client.py --binary build/release/infinity_v3 \
        --model-id .cache/models/all-MiniLM-L6-v2

It calls both paths the client can reach: <base>/v1/embeddings (TEI's
OpenAI route) and <base>/embeddings (Infinity's), with encoding_format
float, base64, and the client's default (it asks for base64 and decodes it
itself), token-id inputs and `dimensions`, and checks that the vectors
agree, are unit length, and that usage counts tokens. Exit status 0 when
every check passes.
"""
import argparse
import math
import os
import re
import struct
import subprocess
import sys
import time

try:
    import openai
except ImportError:
    sys.exit("the openai package is missing: pip install openai")

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello world", "Embeddings, served in C!"]


def as_f32(v):
    """JSON floats are the shortest decimals of float32 values: round them back."""
    return list(struct.unpack("<%df" % len(v), struct.pack("<%df" % len(v), *v)))


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def start_server(binary, model_id, api_key):
    log_path = "/tmp/iv_openai_client_%d.log" % os.getpid()
    args = [binary, "serve", "--model-id", model_id, "--port", "0", "--hostname", "127.0.0.1"]
    if api_key:
        args += ["--api-key", api_key]
    log = open(log_path, "w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        text = open(log_path).read()
        m = re.search(r"Ready: listening on 127\.0\.0\.1:(\d+)", text)
        if m:
            return proc, "http://127.0.0.1:%s" % m.group(1), log_path
        if proc.poll() is not None:
            sys.exit("server exited:\n" + text)
        time.sleep(0.05)
    proc.kill()
    sys.exit("server did not start:\n" + open(log_path).read())


def check_route(client, model, label, failures):
    def fail(msg):
        failures.append("%s: %s" % (label, msg))

    flt = client.embeddings.create(model=model, input=TEXTS, encoding_format="float")
    b64 = client.embeddings.create(model=model, input=TEXTS, encoding_format="base64")
    dflt = client.embeddings.create(model=model, input=TEXTS)  # the client picks base64 and decodes
    if len(flt.data) != len(TEXTS):
        fail("%d embeddings for %d inputs" % (len(flt.data), len(TEXTS)))
    for i, d in enumerate(flt.data):
        if d.index != i:
            fail("index %d at position %d" % (d.index, i))
        if abs(norm(d.embedding) - 1.0) > 1e-5:
            fail("embedding %d has norm %f" % (i, norm(d.embedding)))
    for other, name in ((b64, "base64"), (dflt, "default encoding")):
        for a, b in zip(flt.data, other.data):
            vec = b.embedding
            if isinstance(vec, str):  # older clients hand base64 back undecoded
                import base64
                raw = base64.b64decode(vec)
                vec = list(struct.unpack("<%df" % (len(raw) // 4), raw))
            # Bit for bit: a sequence's vector does not depend on what it was
            # batched with (ops/cpu/gemm_panel.h), and JSON floats round-trip.
            if as_f32(a.embedding) != as_f32(list(vec)):
                fail("%s vector differs from float" % name)
    if flt.usage.prompt_tokens <= len(TEXTS) or flt.usage.total_tokens != flt.usage.prompt_tokens:
        fail("usage %r does not count tokens" % (flt.usage,))
    # Token ids: [CLS] hello world [SEP] for BERT-style vocabularies equals the text.
    ids = client.embeddings.create(model=model, input=[[101, 7592, 2088, 102]], encoding_format="float")
    if ids.usage.prompt_tokens != 4:
        fail("token-id input counted %d tokens" % ids.usage.prompt_tokens)
    if as_f32(ids.data[0].embedding) != as_f32(flt.data[1].embedding):
        fail("token ids [101, 7592, 2088, 102] do not embed like 'Hello world'")
    small = client.embeddings.create(model=model, input=TEXTS[:1], dimensions=64, encoding_format="float")
    if len(small.data[0].embedding) != 64:
        fail("dimensions=64 gave %d values" % len(small.data[0].embedding))
    try:
        client.embeddings.create(model=model, input=[], encoding_format="float")
        fail("an empty input list was accepted")
    except openai.APIStatusError as e:
        if e.status_code not in (400, 422):
            fail("empty input list: status %d" % e.status_code)
    return flt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="server root, e.g. http://127.0.0.1:7997")
    ap.add_argument("--binary", default="build/release/infinity_v3")
    ap.add_argument("--model-id", default=".cache/models/all-MiniLM-L6-v2")
    ap.add_argument("--model", default=None, help="`model` field to send (default: the server's first model)")
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args()

    proc = None
    base = args.base_url
    if not base:
        proc, base, log_path = start_server(args.binary, args.model_id, args.api_key)
    key = args.api_key or "not-needed"
    failures = []
    try:
        model = args.model
        if model is None:
            listed = openai.OpenAI(base_url=base + "/v1", api_key=key).models.list()
            model = listed.data[0].id
        v1 = check_route(openai.OpenAI(base_url=base + "/v1", api_key=key), model, "/v1/embeddings", failures)
        inf = check_route(openai.OpenAI(base_url=base, api_key=key), model, "/embeddings", failures)
        for a, b in zip(v1.data, inf.data):
            if as_f32(a.embedding) != as_f32(b.embedding):
                failures.append("/v1/embeddings and /embeddings disagree")
        if args.api_key:
            try:
                openai.OpenAI(base_url=base + "/v1", api_key="wrong").embeddings.create(model=model, input="x")
                failures.append("a wrong API key was accepted")
            except openai.AuthenticationError:
                pass
    finally:
        if proc:
            proc.terminate()
            if proc.wait(timeout=30) != 0:
                failures.append("server exit status %d" % proc.returncode)
            os.unlink(log_path)
    for f in failures:
        print("FAIL", f)
    print("openai %s client: %s" % (openai.__version__, "all checks passed" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
