#!/usr/bin/env python3
"""`make test-clients`: the client libraries people point at embedding
servers, run against the real infinity_v3 binary, every call they make
checked against the server's own answers or against numpy.

    make test-clients              # builds, installs the clients, runs
    .cache/clients-venv/bin/python tests/clients/test_clients.py \
        --binary build/release/infinity_v3 --model-id .cache/models/all-MiniLM-L6-v2

The clients are pip-installed into .cache/clients-venv by the make target
when missing (openai, cohere, huggingface_hub, langchain-openai,
langchain-community, llama-index-embeddings-openai-like,
llama-index-embeddings-text-embeddings-inference, infinity_client, numpy).
Servers: the real all-MiniLM-L6-v2 (served as "minilm"), plus the tiny
reranker fixture tests/fixtures/models/bert_seqcls1 ("rr") and the
3-label classifier fixture bert_seqcls3 ("cls"); a second server with the
classifier first answers huggingface_hub's text_classification (POST / routes
by the first model's type, as TEI). Prints one line per library and exits 0
when every check passed.
"""
import argparse
import base64
import math
import os
import re
import struct
import subprocess
import sys
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "secret-key"
TEXTS = ["What is Deep Learning?", "Hello world", "The cat sat on the mat.", "Paris is the capital of France."]
MANY = ["sentence number %d about %s" % (i, ["cats", "dogs", "finance", "rockets", "cooking"][i % 5]) for i in range(500)]


def start_server(binary, models, key):
    log_path = "/tmp/iv_clients_%d_%d.log" % (os.getpid(), len(models))
    args = [binary, "serve", "--port", "0", "--hostname", "127.0.0.1"] + (["--api-key", key] if key else [])
    for path, name in models:
        args += ["--model-id", path, "--served-model-name", name]
    log = open(log_path, "w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        text = open(log_path).read()
        m = re.search(r"Ready: listening on 127\.0\.0\.1:(\d+)", text)
        if m:
            return proc, "http://127.0.0.1:%s" % m.group(1)
        if proc.poll() is not None:
            sys.exit("server exited:\n" + text)
        time.sleep(0.05)
    proc.kill()
    sys.exit("server did not start:\n" + open(log_path).read())


def post(base, path, body):
    import json
    import urllib.request

    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def close(a, b, tol=1e-5):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol, "max abs diff %g > %g" % (err, tol)


def quantize_reference(emb, precision):
    """The server's rule: sentence-transformers' quantize_embeddings with
    ranges [-1, 1] per dimension; numpy packbits per row."""
    emb = np.asarray(emb, dtype=np.float32)
    if precision in ("int8", "uint8"):
        ranges = np.vstack((np.full(emb.shape[1], -1.0), np.full(emb.shape[1], 1.0)))
        starts, steps = ranges[0, :], (ranges[1, :] - ranges[0, :]) / 255
        if precision == "uint8":
            return ((emb - starts) / steps).astype(np.uint8).astype(int)
        return ((emb - starts) / steps - 128).astype(np.int8).astype(int)
    packed = np.packbits(emb > 0, axis=-1)
    return (packed.astype(int) - 128) if precision == "binary" else packed.astype(int)


class Ctx:
    def __init__(self, base, base_cls):
        self.base, self.base_cls = base, base_cls
        # The server's own vectors: TEI /embed (normalised), the reference for every client.
        self.ref = {t: v for t, v in zip(TEXTS, post(base, "/embed", {"inputs": TEXTS, "model": "minilm"}))}
        self.ref_many = []
        for i in range(0, len(MANY), 32):
            self.ref_many += post(base, "/embed", {"inputs": MANY[i:i + 32], "model": "minilm"})
        self.calls = 0


def check_openai(c):
    import openai

    cl = openai.OpenAI(base_url=c.base + "/v1", api_key=KEY)
    r = cl.embeddings.create(model="minilm", input=TEXTS)  # the client's default: base64
    close([d.embedding for d in r.data], [c.ref[t] for t in TEXTS]); c.calls += 1
    assert r.usage.prompt_tokens > len(TEXTS)
    r = cl.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    close([d.embedding for d in r.data], [c.ref[t] for t in TEXTS]); c.calls += 1
    r = cl.embeddings.create(model="minilm", input=MANY)
    assert len(r.data) == 500 and [d.index for d in r.data] == list(range(500))
    close([d.embedding for d in r.data], c.ref_many); c.calls += 1
    r = cl.embeddings.create(model="minilm", input="Hello world", dimensions=64)
    v = np.asarray(c.ref["Hello world"][:64]); close(r.data[0].embedding, v / np.linalg.norm(v)); c.calls += 1
    ids = [m.id for m in cl.models.list().data]; c.calls += 1
    assert ids == ["minilm", "rr", "cls"], ids
    m = cl.models.retrieve("rr"); c.calls += 1
    assert m.id == "rr" and m.object == "model"
    try:
        cl.models.retrieve("nope")
        raise AssertionError("retrieve(nope) did not fail")
    except openai.NotFoundError:
        c.calls += 1
    try:
        openai.OpenAI(base_url=c.base + "/v1", api_key="wrong").embeddings.create(model="minilm", input="x")
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError:
        c.calls += 1
    ic = openai.OpenAI(base_url=c.base, api_key=KEY)  # Infinity's /embeddings
    r = ic.embeddings.create(model="minilm", input=TEXTS)
    close([d.embedding for d in r.data], [c.ref[t] for t in TEXTS]); c.calls += 1


def check_hf_hub(c):
    from huggingface_hub import InferenceClient

    cl = InferenceClient(model=c.base, token=KEY)
    v = cl.feature_extraction("Hello world"); c.calls += 1
    close(np.asarray(v).reshape(-1), c.ref["Hello world"])
    v = cl.feature_extraction("Hello world", normalize=True, truncate=True); c.calls += 1
    close(np.asarray(v).reshape(-1), c.ref["Hello world"])
    sims = cl.sentence_similarity("What is Deep Learning?", other_sentences=TEXTS[1:]); c.calls += 1
    a = np.asarray(c.ref[TEXTS[0]])
    close(sims, [float(a @ np.asarray(c.ref[t])) for t in TEXTS[1:]], 1e-4)
    cc = InferenceClient(model=c.base_cls, token=KEY)
    out = cc.text_classification("I love this movie"); c.calls += 1
    want = post(c.base_cls, "/predict", {"inputs": "I love this movie"})
    assert len(out) == 3 and [o.label for o in out] == [w["label"] for w in want], (out, want)
    close([o.score for o in out], [w["score"] for w in want][: len(out)])


def check_langchain(c):
    from langchain_openai import OpenAIEmbeddings
    from langchain_community.embeddings import InfinityEmbeddings

    e = OpenAIEmbeddings(model="minilm", base_url=c.base + "/v1", api_key=KEY, check_embedding_ctx_length=False)
    close(e.embed_documents(MANY), c.ref_many); c.calls += 1
    close(e.embed_query("Hello world"), c.ref["Hello world"]); c.calls += 1
    inf = InfinityEmbeddings(model="minilm", infinity_api_url=c.base_cls)  # no API key support
    close(inf.embed_documents(MANY), c.ref_many, 1e-5); c.calls += 1
    close(inf.embed_query("Hello world"), c.ref["Hello world"]); c.calls += 1


def check_llama_index(c):
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding
    from llama_index.embeddings.text_embeddings_inference import TextEmbeddingsInference

    e = OpenAILikeEmbedding(model_name="minilm", api_base=c.base + "/v1", api_key=KEY, embed_batch_size=500)
    close(e.get_text_embedding_batch(MANY), c.ref_many); c.calls += 1
    close(e.get_query_embedding("Hello world"), c.ref["Hello world"]); c.calls += 1
    t = TextEmbeddingsInference(model_name="minilm", base_url=c.base, auth_token=KEY, embed_batch_size=32,
                                timeout=120)
    close(t.get_text_embedding_batch(MANY), c.ref_many); c.calls += 1
    close(t.get_text_embedding("Hello world"), c.ref["Hello world"]); c.calls += 1


def check_infinity_client(c):
    from infinity_client import AuthenticatedClient
    from infinity_client.api.default import classify, embeddings, models, rerank
    from infinity_client.models import ClassifyInput, OpenAIEmbeddingInputText, RerankInput

    cl = AuthenticatedClient(base_url=c.base, token=KEY, timeout=120)
    r = embeddings.sync(client=cl, body=OpenAIEmbeddingInputText(input_=MANY, model="minilm")); c.calls += 1
    close([d.embedding for d in r.data], c.ref_many)
    m = models.sync(client=cl); c.calls += 1
    assert [x.id for x in m.data] == ["minilm", "rr", "cls"]
    docs = ["Paris is in France", "cats purr", "the capital of France is Paris"]
    r = rerank.sync(client=cl, body=RerankInput(query="capital of France", documents=docs, model="rr",
                                                return_documents=True, top_n=2)); c.calls += 1
    want = post(c.base, "/rerank", {"query": "capital of France", "texts": docs, "model": "rr"})
    assert [x.index for x in r.results] == [w["index"] for w in want][:2]
    close([x.relevance_score for x in r.results], [w["score"] for w in want][:2])
    assert r.results[0].document == docs[r.results[0].index]
    r = classify.sync(client=cl, body=ClassifyInput(input_=["I love it", "meh"], model="cls")); c.calls += 1
    assert len(r.data) == 2 and len(r.data[0]) == 3


def check_cohere(c):
    import cohere

    docs = ["Paris is in France", "cats purr", "the capital of France is Paris", "rockets fly"]
    want = post(c.base, "/rerank", {"query": "capital of France", "texts": docs, "model": "rr"})
    v2 = cohere.ClientV2(api_key=KEY, base_url=c.base)
    r = v2.rerank(model="rr", query="capital of France", documents=docs, top_n=3); c.calls += 1
    assert [x.index for x in r.results] == [w["index"] for w in want][:3]
    close([x.relevance_score for x in r.results], [w["score"] for w in want][:3])
    types = ["float", "int8", "uint8", "binary", "ubinary", "base64"]
    for input_type in ("search_document", "search_query"):
        r = v2.embed(model="minilm", texts=TEXTS, input_type=input_type, embedding_types=types); c.calls += 1
        fl = np.asarray(r.embeddings.float_, dtype=np.float32)
        close(fl, [c.ref[t] for t in TEXTS])
        for p in ("int8", "uint8", "binary", "ubinary"):
            got = np.asarray(getattr(r.embeddings, p))
            exp = quantize_reference(fl, p)
            assert got.shape == exp.shape and np.array_equal(got, exp), "%s differs at %d codes" % (
                p, int(np.sum(got != exp)))
        for row, b64 in zip(fl, r.embeddings.base64):
            assert np.array_equal(np.frombuffer(base64.b64decode(b64), dtype="<f4"), row)
        assert r.texts == TEXTS and r.meta.billed_units.input_tokens > 0
    r = v2.embed(model="minilm", texts=MANY, input_type="search_document", embedding_types=["float"]); c.calls += 1
    close(r.embeddings.float_, c.ref_many)
    v1 = cohere.Client(api_key=KEY, base_url=c.base)
    r = v1.rerank(model="rr", query="capital of France", documents=docs, return_documents=True, top_n=2); c.calls += 1
    assert [x.index for x in r.results] == [w["index"] for w in want][:2]
    assert r.results[0].document.text == docs[r.results[0].index]
    r = v1.embed(model="minilm", texts=TEXTS, input_type="search_query"); c.calls += 1
    close(r.embeddings, [c.ref[t] for t in TEXTS])
    r = v1.embed(model="minilm", texts=TEXTS, input_type="classification", embedding_types=["int8", "ubinary"])
    c.calls += 1
    fl = np.asarray([c.ref[t] for t in TEXTS], dtype=np.float32)
    assert np.array_equal(np.asarray(r.embeddings.int8), quantize_reference(fl, "int8"))
    assert np.array_equal(np.asarray(r.embeddings.ubinary), quantize_reference(fl, "ubinary"))
    try:
        v2.embed(model="minilm", texts=["x"], input_type="search_query", embedding_types=["float"], truncate="MIDDLE")
        raise AssertionError("truncate=MIDDLE accepted")
    except cohere.core.api_error.ApiError as e:
        assert e.status_code == 400; c.calls += 1


def check_vllm_score(c):
    # vLLM's /score has no client library of its own: the body its docs show.
    r = post(c.base, "/v1/score", {"model": "rr", "text_1": "capital of France",
                                   "text_2": ["Paris is in France", "cats purr"]}); c.calls += 1
    want = post(c.base, "/predict", {"inputs": [["capital of France", "Paris is in France"],
                                                ["capital of France", "cats purr"]], "model": "rr"})
    close([d["score"] for d in r["data"]], [w[0]["score"] for w in want])
    r = post(c.base, "/score", {"model": "minilm", "text_1": TEXTS[0], "text_2": TEXTS[1:]}); c.calls += 1
    a = np.asarray(c.ref[TEXTS[0]])
    close([d["score"] for d in r["data"]], [float(a @ np.asarray(c.ref[t])) for t in TEXTS[1:]], 1e-5)


CHECKS = [("openai", check_openai), ("huggingface_hub InferenceClient", check_hf_hub),
          ("langchain (langchain-openai, langchain-community Infinity)", check_langchain),
          ("llama-index (openai-like, TEI)", check_llama_index), ("infinity_client", check_infinity_client),
          ("cohere (v1 and v2 clients)", check_cohere), ("vLLM /score (HTTP)", check_vllm_score)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/infinity_v3"))
    ap.add_argument("--model-id", default=os.path.join(ROOT, ".cache/models/all-MiniLM-L6-v2"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    fixtures = os.path.join(ROOT, "tests/fixtures/models")
    rr, cls = os.path.join(fixtures, "bert_seqcls1"), os.path.join(fixtures, "bert_seqcls3")
    p1, base = start_server(a.binary, [(a.model_id, "minilm"), (rr, "rr"), (cls, "cls")], KEY)
    # Without an API key (langchain-community's InfinityEmbeddings sends none); the
    # classifier first, for POST / (huggingface_hub's text_classification).
    p2, base_cls = start_server(a.binary, [(cls, "cls"), (a.model_id, "minilm")], None)
    failed = 0
    try:
        ctx = Ctx(base, base_cls)
        for name, fn in CHECKS:
            if a.only and a.only not in name:
                continue
            before, t0 = ctx.calls, time.time()
            try:
                fn(ctx)
                print("PASS %-58s %3d calls %6.1fs" % (name, ctx.calls - before, time.time() - t0), flush=True)
            except Exception:
                failed += 1
                print("FAIL %-58s after %d calls" % (name, ctx.calls - before), flush=True)
                traceback.print_exc()
    finally:
        for p in (p1, p2):
            p.terminate()
            rc = p.wait(timeout=120)
            if rc != 0:  # a clean SIGTERM exit is 0 (a sanitizer report is not)
                failed += 1
                print("FAIL server exited with status %d" % rc, flush=True)
    print("%d of %d libraries passed" % (len([c for c in CHECKS if not a.only or a.only in c[0]]) - failed,
                                          len([c for c in CHECKS if not a.only or a.only in c[0]])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
