#!/usr/bin/env python3
"""Qwen3.5 (Gated DeltaNet hybrid) on the CPU: infinity_v3 against
transformers on torch, in the same run, on a random checkpoint of
Qwen3.5-0.8B's shape; and the delta rule op alone, chunked vs token by token.

    make BUILD=build/release build/release/bench_engine build/release/bench_deltanet
    python3 bench/bench_qwen35.py [--build build/release] [--layers 4] [--threads 2] [--quick]
                                  [--out bench/results/qwen35_cpu.json]

The checkpoint (.cache/bench-models/qwen35-0.8b-l<layers>/, not committed) is
Qwen3_5TextModel with Qwen3.5-0.8B's layer shapes: hidden 1024, SwiGLU 3584,
Gated DeltaNet with 16 key and 16 value heads of 128 (conv kernel 4), gated
full attention with 8 query / 2 key-value heads of 256 (partial rotary 0.25),
the 3:1 linear / full layer pattern; but `--layers` layers (default 4: one
period of the pattern, where the real model has 24) and a 32000-token
vocabulary (the real one has 248320: only the embedding lookup, not the
cost per token, depends on it). Weights are transformers' seeded
initialisation; tokenizer and last-token pooling files come from the tiny
qwen35 fixture (ids are drawn directly, the tokenizer is never used).

Workloads (token ids drawn with a fixed seed):
  len256 .. len4096  one sequence of L tokens: time per token against L
  mixed              one packed batch of 7 sequences, 9 .. 4000 tokens
infinity_v3 runs each workload as one iv_engine_run (bench/bench_engine.c);
transformers runs each sequence as its own batch of one (no padding: its
best case), attn_implementation sdpa, its chunked torch DeltaNet kernel
(flash-linear-attention is not installed). Both report wall time; the
first pooled embedding of each is compared (cosine) as a sanity check.

bench_deltanet then times the delta rule op at the DeltaNet layers' shape,
one thread, in CPU time: ns/token of delta_chunk and delta_rule against L.

Writes one JSON file (every time, machine load before and after) and prints
a table. A benchmark, not a test: run it on a quiet machine, once.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "qwen35")
CURVE = [256, 512, 1024, 2048, 4096]
MIXED = [4000, 1000, 300, 120, 60, 20, 9]
VOCAB = 32000


def config_kwargs(layers):
    pattern = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    return dict(vocab_size=VOCAB, hidden_size=1024, intermediate_size=3584, num_hidden_layers=layers,
                layer_types=[pattern[i % 4] for i in range(layers)], num_attention_heads=8, num_key_value_heads=2,
                head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
                linear_value_head_dim=128, linear_conv_kernel_dim=4, max_position_embeddings=32768,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                                    "partial_rotary_factor": 0.25},
                tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def make_checkpoint(layers):
    import torch
    import transformers
    d = os.path.join(ROOT, ".cache", "bench-models", f"qwen35-0.8b-l{layers}")
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(35)
    model = transformers.Qwen3_5TextModel(transformers.Qwen3_5TextConfig(**config_kwargs(layers))).eval()
    model.save_pretrained(d, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json",
                 "config_sentence_transformers.json"):
        shutil.copy(os.path.join(FIXTURE, name), d)
    for sub in ("1_Pooling", "2_Normalize"):
        shutil.copytree(os.path.join(FIXTURE, sub), os.path.join(d, sub), dirs_exist_ok=True)
    return d


def workloads(quick):
    import random
    rng = random.Random(35)
    draw = lambda n: [rng.randrange(3, VOCAB) for _ in range(n)]
    curve = [L for L in CURVE if not quick or L <= 1024]
    mixed = [L for L in MIXED if not quick or L <= 1000]
    out = [dict(name=f"len{L}", seqs=[draw(L)]) for L in curve]
    out.append(dict(name="mixed", seqs=[draw(L) for L in mixed]))
    for w in out:
        w.update(warmup=0, min_runs=1, max_runs=1, max_seconds=0)
    return out


def load_avg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def run_ours(build, model_dir, wls, threads):
    path = os.path.join(ROOT, ".cache", "bench-qwen35-workloads.json")
    with open(path, "w") as f:
        json.dump(dict(workloads=[dict(name="warmup", seqs=[wls[0]["seqs"][0][:64]], warmup=1, min_runs=1,
                                       max_runs=1, max_seconds=0)] + wls), f)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([os.path.join(build, "bench_engine"), "--model-id", model_dir, "--workloads", path],
                         check=True, capture_output=True, text=True, env=env).stdout
    rec = json.loads(out)
    return {name: dict(seconds=min(r["times_s"]), tokens=r["tokens"], first=r.get("first_embedding"))
            for name, r in rec["workloads"].items() if name != "warmup"}


def run_torch(model_dir, wls, threads):
    import torch
    import transformers
    torch.set_num_threads(threads)
    model = transformers.Qwen3_5TextModel.from_pretrained(model_dir, attn_implementation="sdpa",
                                                          dtype=torch.float32).eval()
    res = {}
    with torch.inference_mode():
        model(input_ids=torch.tensor([wls[0]["seqs"][0][:64]]))  # warm-up
        for w in wls:
            t0 = time.perf_counter()
            first = None
            for s in w["seqs"]:
                h = model(input_ids=torch.tensor([s])).last_hidden_state[0, -1]
                if first is None:
                    first = torch.nn.functional.normalize(h, dim=0).tolist()
            res[w["name"]] = dict(seconds=time.perf_counter() - t0, tokens=sum(len(s) for s in w["seqs"]),
                                  first=first)
    return res


def run_op(build, quick):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([os.path.join(build, "bench_deltanet"), "--max", "1024" if quick else "4096"],
                         check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(line[5:]) for line in out.splitlines() if line.startswith("json ")]


def cosine(a, b):
    import math
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="lengths up to 1024 only")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "qwen35_cpu.json"))
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    model_dir = make_checkpoint(args.layers)
    wls = workloads(args.quick)
    import platform
    import torch
    import transformers
    result = dict(checkpoint=dict(config=config_kwargs(args.layers), note="Qwen3.5-0.8B layer shapes, "
                                  f"{args.layers} layers instead of 24, vocabulary {VOCAB} instead of 248320"),
                  machine=dict(cpus=os.cpu_count(), platform=platform.platform(), threads=args.threads),
                  versions=dict(torch=torch.__version__, transformers=transformers.__version__),
                  load_before=load_avg())
    result["infinity_v3"] = run_ours(build, model_dir, wls, args.threads)
    result["torch"] = run_torch(model_dir, wls, args.threads)
    result["load_after_engines"] = load_avg()
    result["delta_rule_op"] = run_op(build, args.quick)
    result["load_after"] = load_avg()

    print(f"Qwen3.5-0.8B shape, {args.layers} layers, {args.threads} threads; load average before "
          f"{result['load_before']}, after {result['load_after']}")
    print(f"{'workload':>9} {'tokens':>7} {'ours tok/s':>11} {'torch tok/s':>12} {'ratio':>6} "
          f"{'ours us/tok':>12} {'torch us/tok':>13} {'cos(first)':>11}")
    for w in wls:
        n = w["name"]
        o, t = result["infinity_v3"][n], result["torch"][n]
        c = cosine(o["first"], t["first"]) if o["first"] and t["first"] else float("nan")
        result.setdefault("cosine_first_embedding", {})[n] = c
        print(f"{n:>9} {o['tokens']:>7} {o['tokens'] / o['seconds']:>11.1f} {t['tokens'] / t['seconds']:>12.1f} "
              f"{t['seconds'] / o['seconds']:>5.2f}x {o['seconds'] / o['tokens'] * 1e6:>12.0f} "
              f"{t['seconds'] / t['tokens'] * 1e6:>13.0f} {c:>11.7f}")
        for e in ("infinity_v3", "torch"):
            result[e][n].pop("first", None)
    print("delta rule op (16 + 16 heads of 128, one thread, CPU time): ns/token")
    print(f"{'L':>6} {'chunked':>9} {'token by token':>15}")
    for r in result["delta_rule_op"]:
        print(f"{r['len']:>6} {r['chunk_ns_per_token']:>9.0f} {r['recurrence_ns_per_token']:>15.0f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
