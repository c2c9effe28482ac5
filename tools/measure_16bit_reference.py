#!/usr/bin/env python3
"""Measure how close the FP32 reference stack itself stays to its own FP32
outputs when run in 16 bits, fixture by fixture.

    python3 tools/measure_16bit_reference.py              # every fixture
    python3 tools/measure_16bit_reference.py bert qwen3   # only these

Why: the C engine's 16-bit device tables (BF16 / FP16 storage, FP32 maths)
are held to the coverage spec's cosine (>= 0.999 in BF16, >= 0.9995 in FP16)
against the FP32 expectations. The tiny random fixtures (hidden 32, weights
N(0, 0.3)) amplify storage rounding so much that the reference libraries
themselves miss that on many of them. tests/golden/test_device_fixtures.c
therefore holds each output to min(spec, what the reference stack reaches in
that dtype), read from the reference_16bit.json this tool writes next to each
fixture's cases.json.

What: for every tests/fixtures/models/<name>/ with a cases.json, every output
cases.json lists is recomputed through the generator's own reference path
(tools/fixtures: the same loader, the same compute function, the same
per-input batches of one, the same post-processing: pooling modules,
Normalize, Matryoshka truncation, SPLADE max, ColBERT / PyLate masks), once
with the model in torch.bfloat16 and once in torch.float16; inputs are the
stored ids unchanged. The model is put in the dtype the way transformers runs
a checkpoint in 16 bits: every from_pretrained the loaders make gets
dtype=<dtype> (parameters in that dtype; what the library builds in float32 at
init, such as rotary inv_freq tables, stays float32), and the modules that do
not come from from_pretrained (sentence-transformers / PyLate Dense,
tools/fixtures/enc_reference.py's remote-code models) are cast with .to().
(A plain model.to(dtype) would also round the rotary tables to 16 bits, which
neither transformers' own 16-bit loading nor the engine does.) Each result is
cast to float32 after the computation and compared with the committed
expected.safetensors "<output>.<i>" as the C test compares: cosine per row
for 2-D outputs (hidden, token_logits, multivector: one row per token),
per vector for 1-D ones (pooled, pooled_dim16, logits, sparse,
rerank_logits); the cosine of two zero vectors is 1, of a zero and a non-zero
vector 0. Recorded: the minimum over inputs and rows, per dtype and output.
The same path is first run in float32 and must give back the committed
expectations (cosine >= 0.999999 everywhere), or the tool stops: that is the
check that it is the generator's path.

Output tests/fixtures/models/<name>/reference_16bit.json:
  {"tool": ..., "torch": ..., "transformers": ..., "sentence_transformers": ...,
   "bfloat16": {"<output>": min_cos, ...}, "float16": {...}}
(cosines rounded down to 6 decimals, so a recorded floor never exceeds what was measured) with the versions of the interpreter that ran the reference (the colbert /
pylate fixtures run in the colbert reference interpreter, as the generator
does: tools/fixtures/colbert_venv.sh). An output the reference cannot produce
in a dtype is null there, with a "note" saying why.
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS_DIR)

import torch  # noqa: E402

TOOL = "tools/measure_16bit_reference.py"
MODELS_DIR = os.path.join("tests", "fixtures", "models")
OUT_NAME = "reference_16bit.json"
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
# The same path in float32 must give back the committed expectations (CPU GEMM blocking may move the last bits).
SELF_CHECK = ("float32", torch.float32, 0.999999)


# ---------------------------------------------------------------- comparison

def min_cosine(got, want):
    """Worst cosine of got against want (float64), per row when 2-D, else of the whole vector;
    two zero vectors count 1, a zero and a non-zero one 0. None when got holds inf / nan."""
    got, want = got.detach().to(torch.float32).to(torch.float64), want.to(torch.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {tuple(got.shape)} vs expected {tuple(want.shape)}")
    if not torch.isfinite(got).all():
        return None
    if got.dim() < 2:
        got, want = got.reshape(1, -1), want.reshape(1, -1)
    worst = 1.0
    for a, b in zip(got, want):
        aa, bb = float((a * a).sum()), float((b * b).sum())
        if aa == 0 and bb == 0:
            c = 1.0
        elif aa == 0 or bb == 0:
            c = 0.0
        else:
            c = float((a * b).sum()) / math.sqrt(aa * bb)
        worst = min(worst, c)
    return worst


def worst_by_output(results, expected, outputs):
    """{output: min cosine over inputs} from results {"<output>.<i>": tensor}; None (and a reason) for an
    output with non-finite values."""
    per, why = {}, {}
    for o in outputs:
        keys = sorted((k for k in expected if k.rsplit(".", 1)[0] == o), key=lambda k: int(k.rsplit(".", 1)[1]))
        if not keys:
            raise AssertionError(f"no expected values for output {o}")
        worst = 1.0
        for k in keys:
            if k not in results:
                raise AssertionError(f"the reference gave no {k}")
            c = min_cosine(results[k], expected[k])
            if c is None:
                worst = None
                why[o] = f"{k} has non-finite values"
                break
            worst = min(worst, c)
        per[o] = worst
    return per, why


# ---------------------------------------------------------------- putting a model in a dtype

@contextlib.contextmanager
def transformers_loads_in(dtype, **extra):
    """Every PreTrainedModel.from_pretrained made inside (by tools/fixtures' loaders, by
    sentence-transformers, by colbert-ai / PyLate) loads with dtype=dtype (and the keyword arguments extra)."""
    import transformers
    cls = transformers.PreTrainedModel
    original = cls.__dict__["from_pretrained"]
    func = original.__func__

    def from_pretrained(klass, *args, **kwargs):
        kwargs.pop("torch_dtype", None)
        kwargs["dtype"] = dtype
        kwargs.update(extra)
        return func(klass, *args, **kwargs)

    cls.from_pretrained = classmethod(from_pretrained)
    try:
        yield
    finally:
        cls.from_pretrained = original


def cast_the_rest(root, dtype):
    """.to(dtype) on every part of root that from_pretrained did not load (sentence-transformers and
    PyLate Dense modules, enc_reference.py's remote-code models); transformers models are left as
    from_pretrained(dtype=...) made them."""
    from transformers import PreTrainedModel
    if isinstance(root, PreTrainedModel):
        return
    if not any(isinstance(m, PreTrainedModel) for m in root.modules()):
        root.to(dtype)
        return
    for p in root.parameters(recurse=False):
        p.data = p.data.to(dtype)
    for name, b in list(root.named_buffers(recurse=False)):
        if b is not None and b.is_floating_point():
            setattr(root, name, b.to(dtype))
    for child in root.children():
        cast_the_rest(child, dtype)


def check_parameters(roots, dtype):
    """Names of floating-point parameters not in dtype (kept in float32 by the library, if any)."""
    left = set()
    for root in roots:
        if root is None:
            continue
        for n, p in root.named_parameters():
            if p.is_floating_point() and p.dtype != dtype:
                left.add(n)
    return sorted(left)


def runs():
    """(name, dtype) of the float32 self-check, then of each dtype measured."""
    return [SELF_CHECK[:2]] + list(DTYPES.items())


def self_check(name, res):
    """Stops when the path in float32 does not reproduce the committed expectations: then it is not the
    generator's path."""
    per, why, _ = res[SELF_CHECK[0]]
    bad = {o: c for o, c in per.items() if c is None or c < SELF_CHECK[2]}
    if bad:
        sys.exit(f"{name}: the reference path in float32 does not reproduce expected.safetensors: {bad} {why}")


# ---------------------------------------------------------------- the generator's reference paths

def reference_path(spec, d, doc):
    """(compute, model, st_model, with_types) exactly as the fixture's generator module computes and
    verifies its expectations, loaded from d (inside transformers_loads_in, so in the dtype asked)."""
    import transformers
    from fixtures import (common, reference, synthetic, synthetic_causal_rerank, synthetic_deberta,
                          synthetic_decoders, synthetic_enc, synthetic_mistral3_rerank, synthetic_st6)
    from fixtures import verify as checks
    module = sys.modules[type(spec).__module__]
    if module is synthetic_decoders:
        if spec.remote:
            model = checks.load_checked(getattr(transformers, spec.model_cls), d, config=spec.config())
            return synthetic_decoders.compute, model, None, False
        model, st_model = checks.reload(spec, d)
        return synthetic_decoders.compute, model, st_model, False
    if module is synthetic_enc:  # also synthetic_enc2's specs (EncSpec)
        model, st_model = synthetic_enc.load_reference(spec, d)
        return common.encoder_outputs, model, st_model, reference.accepts_token_types(model)
    if module is synthetic:
        model, st_model = checks.reload(spec, d)
        return common.encoder_outputs, model, st_model, reference.accepts_token_types(model)
    if module is synthetic_deberta:
        model, st_model = checks.reload(spec, d)
        return common.encoder_outputs, model, st_model, True
    if module is synthetic_causal_rerank:
        model = checks.load_checked(getattr(transformers, spec.model_cls), d)
        return synthetic_causal_rerank.compute_for(doc["rerank_ids"]), model, None, False
    if module is synthetic_st6:  # the stored ids (and prompt_len) sentence-transformers fed the model
        model, st_model = common.load_st(d)
        return synthetic_st6.compute_for(doc), model, st_model, False
    if module is synthetic_mistral3_rerank:  # remote-code reranker re-derived on transformers' Mistral3Model
        return synthetic_mistral3_rerank.compute, synthetic_mistral3_rerank.Reference.load(d), None, False
    raise SystemExit(f"{d}: no reference path known for specs of {module.__name__}")


def measure(d, run):
    """{dtype name: ({output: min cosine | None}, {output: why it is None}, [parameters not in the dtype])}
    for the float32 self-check and each dtype measured; run(dtype) gives ({"<output>.<i>": tensor},
    [parameters not in the dtype]). A dtype the reference fails in (an op torch lacks for it) gives None
    for every output, with torch's message."""
    import safetensors.torch
    doc = json.load(open(os.path.join(d, "cases.json")))
    expected = safetensors.torch.load_file(os.path.join(d, "expected.safetensors"))
    res = {}
    for name, dtype in runs():
        try:
            results, left = run(dtype)
        except (RuntimeError, NotImplementedError) as e:
            if dtype == torch.float32:
                raise
            msg = f"the reference fails in {name}: {type(e).__name__}: {str(e).splitlines()[0]}"
            res[name] = ({o: None for o in doc["outputs"]}, {o: msg for o in doc["outputs"]}, [])
            continue
        res[name] = (*worst_by_output(results, expected, doc["outputs"]), left)
    return res


def load_reference(spec, d, doc, dtype, **extra):
    """reference_path's (compute, model, st_model, with_types) with the model in dtype: transformers
    models as from_pretrained(dtype=..., **extra) makes them, the other modules cast."""
    with transformers_loads_in(dtype, **extra):
        compute, model, st_model, with_types = reference_path(spec, d, doc)
    for root in (st_model, model):
        if root is not None:
            cast_the_rest(root, dtype)
    return compute, model, st_model, with_types


def measure_transformers(spec, d):
    """measure() through reference_path: the generator's loader and compute, one input at a time."""
    from fixtures import common
    doc = json.load(open(os.path.join(d, "cases.json")))

    def run(dtype):
        compute, model, st_model, with_types = load_reference(spec, d, doc, dtype)
        results = common.per_input(compute, spec, model, st_model, doc["inputs"], doc["special_ids"]["pad"],
                                   with_types)
        return results, check_parameters((model, st_model), dtype)

    return measure(d, run)


# ---------------------------------------------------------------- colbert-ai / PyLate fixtures

def measure_colbert(spec, d):
    """measure() for synthetic_colbert's fixtures (run in the colbert reference interpreter): its _load
    gives the library's compute (colbert-ai ColBERT.query / .doc, or PyLate's forward + encode masks),
    fed the stored ids and key_mask as its self-check does."""
    from fixtures import synthetic_colbert
    doc = json.load(open(os.path.join(d, "cases.json")))

    def run(dtype):
        with transformers_loads_in(dtype):
            _, compute, ref = synthetic_colbert._load(spec, d)
        cast_the_rest(ref, dtype)
        results = {}
        for i, c in enumerate(doc["inputs"]):
            ids = torch.tensor([c["ids"]])
            mask = torch.tensor([c.get("key_mask", [1] * len(c["ids"]))])
            for out, val in compute(c["kind"], ids, mask).items():
                results[f"{out}.{i}"] = val
        return results, check_parameters((ref,), dtype)

    return measure(d, run)


def versions():
    import sentence_transformers
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__}


def colbert_worker(name, root):
    """Entry point in the colbert reference interpreter: prints one JSON line."""
    from fixtures import synthetic_colbert
    synthetic_colbert._quiet()
    # common.deterministic_torch(); fixtures.common itself needs the newer sentence-transformers.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    spec = next(s for s in synthetic_colbert.SPECS if s.name == name)
    res = measure_colbert(spec, os.path.join(root, name))
    print(json.dumps({"versions": versions(), "res": res}))


def measure_colbert_delegated(spec, root):
    """measure_colbert where colbert-ai and pylate are importable: here, or in the reference interpreter
    synthetic_colbert finds ($IV_COLBERT_PYTHON, .cache/colbert-venv)."""
    from fixtures import synthetic_colbert
    if synthetic_colbert._have_reference_libs():
        return versions(), measure_colbert(spec, os.path.join(root, spec.name))
    py = synthetic_colbert._reference_python()
    if not py:
        return None, "colbert-ai and pylate are not installed (run tools/fixtures/colbert_venv.sh)"
    out = subprocess.run([py, os.path.abspath(__file__), "--colbert-worker", spec.name, os.path.abspath(root)],
                         capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    if out.returncode:
        sys.exit(f"{spec.name}: the colbert reference interpreter {py} failed:\n{out.stderr[-4000:]}")
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return doc["versions"], {k: tuple(v) for k, v in doc["res"].items()}


# ---------------------------------------------------------------- writing

def write_json(d, vers, res):
    doc = {"tool": TOOL, **vers}
    notes = []
    for name in DTYPES:
        per, why, _ = res[name]
        # 6 decimals, rounded down: the recorded floor never exceeds what was measured.
        doc[name] = {o: (None if c is None else math.floor(c * 1e6) / 1e6) for o, c in per.items()}
        for o, w in why.items():
            notes.append(f"{name} {o}: {w}")
    if notes:
        doc["note"] = "; ".join(notes)
    with open(os.path.join(d, OUT_NAME), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    return doc


def summary(name, doc, res):
    parts = []
    for dt in DTYPES:
        vals = " ".join(f"{o} {'null' if c is None else f'{c:.6f}'}" for o, c in doc[dt].items())
        left = res[dt][2]
        parts.append(f"{dt}: {vals}" + (f" (float32 params kept: {len(left)})" if left else ""))
    return f"{name:28s} " + " | ".join(parts) + (f"  [note: {doc['note']}]" if "note" in doc else "")


def fixture_specs(names):
    """({name: generator spec}, the fixtures to measure: names, or every one with a cases.json), with
    torch set up as the generators run it. Run from the repository root."""
    if not os.path.isdir(MODELS_DIR):
        sys.exit("run from the repository root")
    import gen_fixtures
    from fixtures import common
    gen_fixtures.quiet()
    common.deterministic_torch()
    specs = {s.name: s for group, _, _ in gen_fixtures.GROUPS for s in group}
    names = names or sorted(n for n in os.listdir(MODELS_DIR)
                            if os.path.isfile(os.path.join(MODELS_DIR, n, "cases.json")))
    unknown = [n for n in names if n not in specs]
    if unknown:
        sys.exit(f"no generator spec for {unknown}")
    return specs, names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="fixtures to measure (default: every one with a cases.json)")
    ap.add_argument("--colbert-worker", nargs=2, metavar=("NAME", "ROOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.colbert_worker:
        colbert_worker(*args.colbert_worker)
        return
    from fixtures import synthetic_colbert
    specs, names = fixture_specs(args.names)
    t0 = time.time()
    for name in names:
        spec, d = specs[name], os.path.join(MODELS_DIR, name)
        if isinstance(spec, synthetic_colbert.Spec):
            vers, res = measure_colbert_delegated(spec, MODELS_DIR)
            if vers is None:
                print(f"{name:28s} not measured: {res}", flush=True)
                continue
        else:
            vers, res = versions(), measure_transformers(spec, d)
        self_check(name, res)
        doc = write_json(d, vers, res)
        print(summary(name, doc, res), flush=True)
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
