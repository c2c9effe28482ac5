#!/usr/bin/env python3
"""Write tests/fixtures/quantize/reference.json: float embeddings and their
int8 / uint8 / binary / ubinary / base64 forms computed by
sentence-transformers' quantize_embeddings, the reference for
src/server/quantize_embeddings.c (tests/unit/test_quantize_embeddings.c).

The rule (see quantize_embeddings.h): quantize_embeddings(emb, precision,
ranges=R) with R = [[-1]*dim, [1]*dim] (float64) for int8 and uint8, i.e.
fixed ranges for L2-normalised vectors instead of the batch's own min/max.
binary / ubinary are quantize_embeddings' packbits(emb > 0) (- 128 for
binary); ST packs the flattened batch, which equals per-row packing only
when dim is a multiple of 8, so for the odd-width case the expected bits
come from np.packbits(emb > 0, axis=-1) (each row zero-padded), the rule the
server follows. base64 is Cohere's: the little-endian float32 bytes.

Cases: real all-MiniLM-L6-v2 embeddings (sentence-transformers on
.cache/models/all-MiniLM-L6-v2, normalised), seeded random unit vectors,
and edge values (0, -0, +-1, tiny, and every int8 bucket boundary).

    .cache/colbert-venv/bin/python tools/gen_quantize_reference.py
"""
import base64
import json
import os
import sys

import numpy as np
from sentence_transformers.quantization import quantize_embeddings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "quantize", "reference.json")


def ranges(dim):
    return np.vstack((np.full(dim, -1.0, dtype=np.float64), np.full(dim, 1.0, dtype=np.float64)))


def case(name, emb):
    emb = np.asarray(emb, dtype=np.float32)
    n, dim = emb.shape
    out = {"name": name, "dim": dim, "float": [[float(x) for x in row] for row in emb]}
    for p in ("int8", "uint8"):
        q = quantize_embeddings(emb, p, ranges=ranges(dim))
        out[p] = q.astype(int).tolist()
    if dim % 8 == 0:
        out["binary"] = quantize_embeddings(emb, "binary").astype(int).tolist()
        out["ubinary"] = quantize_embeddings(emb, "ubinary").astype(int).tolist()
    else:
        packed = np.packbits(emb > 0, axis=-1)
        out["binary"] = (packed.astype(np.int16) - 128).astype(int).tolist()
        out["ubinary"] = packed.astype(int).tolist()
    out["base64"] = [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in emb]
    return out


def main():
    cases = []
    model_dir = os.path.join(ROOT, ".cache", "models", "all-MiniLM-L6-v2")
    if os.path.isdir(model_dir):
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(model_dir, device="cpu")
        texts = ["What is Deep Learning?", "Hello world", "The cat sat on the mat.", "Paris is in France",
                 "quantization of embeddings", ""]
        cases.append(case("minilm", st.encode(texts, normalize_embeddings=True)))
    else:
        sys.exit(f"missing {model_dir}: run `make models` first")
    rng = np.random.default_rng(1234)
    v = rng.standard_normal((8, 64)).astype(np.float32)
    cases.append(case("random64", v / np.linalg.norm(v, axis=1, keepdims=True)))
    v = rng.standard_normal((3, 13)).astype(np.float32)
    cases.append(case("random13_partial_byte", v / np.linalg.norm(v, axis=1, keepdims=True)))
    # Bucket boundaries: x = k * 2/255 - 1 rounded to float32, and their float32 neighbours.
    k = np.arange(256, dtype=np.float64)
    b = (k * (2.0 / 255.0) - 1.0).astype(np.float32)
    b = np.clip(b, -1.0, 1.0)
    up = np.nextafter(b, np.float32(2)).clip(-1, 1)
    down = np.nextafter(b, np.float32(-2)).clip(-1, 1)
    cases.append(case("bucket_edges", np.stack([b, up, down])))
    edge = np.array([[0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 0.5, -0.5]], dtype=np.float32)
    cases.append(case("edges", edge))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"rule": "sentence_transformers.quantize_embeddings, ranges [-1, 1] per dimension; "
                            "packbits per row", "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
