#!/usr/bin/env python3
"""GPU benchmark: infinity_v3 on CUDA against transformers on torch, same GPU, same run.

    python3 bench/run_gpu.py --bench-engine build/cuda/bench_engine [--dtype bfloat16] [--out FILE.json]

Random-weight checkpoints of two real shapes are built here with transformers
(seeded; the numbers are meaningless, the cost is the real model's):
BERT-base (bidirectional, 12 x 768, 12 heads of 64) and Qwen3-0.6B (causal,
28 x 1024, 16 query / 8 key-value heads of 128). Each runs three workloads:

  mixed   256 sequences, lengths uniform in 16..512 (one packed batch for us;
          torch pads to the longest, as its users do, with SDPA attention)
  equal   64 x 512
  single  one 8-token request, p50 latency

Both engines compute the same sentence embedding (mean pooling, in the same
dtype). Printed per workload: tokens/s of each, the ratio, p50, and our
achieved TFLOP/s (matmul FLOPs 2 * params_linear * tokens plus attention
4 * sum(L^2) * heads * head_dim per layer, halved when causal).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

SHAPES = {
    "bert-base": dict(
        kind="bert", causal=False, layers=12, hidden=768, heads=12, kv_heads=12, head_dim=64, inter=3072, vocab=30522
    ),
    "qwen3-0.6b": dict(
        kind="qwen3", causal=True, layers=28, hidden=1024, heads=16, kv_heads=8, head_dim=128, inter=3072, vocab=151936
    ),
}


def build_checkpoint(name, spec, root):
    """Saves a seeded random model plus a mean-pooling sentence-transformers layout."""
    from transformers import BertConfig, BertModel, Qwen3Config, Qwen3Model

    torch.manual_seed(0)
    if spec["kind"] == "bert":
        cfg = BertConfig(
            vocab_size=spec["vocab"], hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"], intermediate_size=spec["inter"], max_position_embeddings=512,
        )
        model = BertModel(cfg, add_pooling_layer=False)
    else:
        cfg = Qwen3Config(
            vocab_size=spec["vocab"], hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"], head_dim=spec["head_dim"],
            intermediate_size=spec["inter"], max_position_embeddings=4096, tie_word_embeddings=True,
        )
        model = Qwen3Model(cfg)
    out = os.path.join(root, name)
    model.save_pretrained(out)
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], f)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": spec["hidden"], "pooling_mode_mean_tokens": True}, f)
    return out, model


def workloads(vocab, rng):
    ids = lambda n: [int(x) for x in rng.integers(1000, vocab - 1, size=n)]
    mixed = [ids(int(n)) for n in rng.integers(16, 513, size=256)]
    return {
        "mixed": dict(seqs=mixed, warmup=2, min_runs=5, max_runs=20, max_seconds=8),
        "equal": dict(seqs=[ids(512) for _ in range(64)], warmup=2, min_runs=5, max_runs=20, max_seconds=8),
        "single": dict(seqs=[ids(8)], warmup=10, min_runs=50, max_runs=200, max_seconds=4),
    }


def flops(spec, lens):
    h, i, L = spec["hidden"], spec["inter"], spec["layers"]
    q, kv = spec["heads"] * spec["head_dim"], spec["kv_heads"] * spec["head_dim"]
    mlp = (3 if spec["kind"] == "qwen3" else 2) * h * i
    per_tok = 2 * L * (h * (q + 2 * kv) + q * h + mlp)
    attn = 4 * L * q * sum(n * n for n in lens) * (0.5 if spec["causal"] else 1.0)
    return per_tok * sum(lens) + attn


def torch_times(model, seqs, dtype, warmup, runs):
    """Padded batch with an attention mask, mean pooling, synchronised wall time per run."""
    dev = torch.device("cuda")
    n, longest = len(seqs), max(len(s) for s in seqs)
    ids = torch.zeros((n, longest), dtype=torch.long)
    mask = torch.zeros((n, longest), dtype=torch.long)
    for k, s in enumerate(seqs):
        ids[k, : len(s)] = torch.tensor(s)
        mask[k, : len(s)] = 1
    ids, mask = ids.to(dev), mask.to(dev)
    times = []
    with torch.inference_mode():
        for r in range(warmup + runs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            hs = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(hs.dtype)
            pooled = (hs * m).sum(1) / m.sum(1)
            pooled.float().cpu()
            t1 = time.perf_counter()
            if r >= warmup:
                times.append(t1 - t0)
    return times


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-engine", required=True)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--out")
    ap.add_argument("--profile", action="store_true",
                    help="also run the mixed and equal workloads once more with IV_CUDA_PROFILE=sync and print the per-op GPU time")
    args = ap.parse_args()
    import numpy as np

    tdtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float16
    results = {"gpu": torch.cuda.get_device_name(0), "dtype": args.dtype, "torch": torch.__version__, "shapes": {}}
    print(f"gpu-bench: {results['gpu']}, {args.dtype}, torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as root:
        for name in args.shapes:
            spec = SHAPES[name]
            path, model = build_checkpoint(name, spec, root)
            wl = workloads(spec["vocab"], np.random.default_rng(1))
            wl_file = os.path.join(root, name + ".json")
            with open(wl_file, "w") as f:
                json.dump({"workloads": [dict(name=k, **v) for k, v in wl.items()]}, f)
            proc = subprocess.run(
                [args.bench_engine, "--model-id", path, "--workloads", wl_file, "--device", "cuda", "--dtype", args.dtype],
                capture_output=True, text=True,
            )
            if proc.returncode:
                print(f"gpu-bench {name}: infinity_v3 failed: {proc.stderr.strip()[-2000:]}", flush=True)
                results["shapes"][name] = {"error": proc.stderr[-2000:]}
                continue
            ours = json.loads(proc.stdout.strip().splitlines()[-1])["workloads"]
            if args.profile:
                for wname in ("mixed", "equal"):
                    one = os.path.join(root, f"{name}-{wname}.json")
                    with open(one, "w") as f:
                        json.dump({"workloads": [dict(wl[wname], name=wname, warmup=1, min_runs=3, max_runs=3)]}, f)
                    prof = subprocess.run(
                        [args.bench_engine, "--model-id", path, "--workloads", one, "--device", "cuda", "--dtype", args.dtype],
                        capture_output=True, text=True, env=dict(os.environ, IV_CUDA_PROFILE="sync"),
                    )
                    lines = [l for l in prof.stderr.splitlines() if "IV_CUDA_PROFILE" in l or l.startswith("  ")]
                    print(f"gpu-profile {name} {wname} (4 runs):", flush=True)
                    for l in lines[:24]:
                        print(f"gpu-profile   {l.strip()}", flush=True)
            model = model.to("cuda", dtype=tdtype).eval()
            model.config._attn_implementation = "sdpa"
            rec = {}
            for wname, w in wl.items():
                lens = [len(s) for s in w["seqs"]]
                tok = sum(lens)
                t_ours = median(ours[wname]["times_s"])
                t_torch = median(torch_times(model, w["seqs"], tdtype, w["warmup"], min(w["min_runs"] * 2, 40)))
                tf = flops(spec, lens) / t_ours / 1e12
                rec[wname] = dict(tokens=tok, ours_s=t_ours, torch_s=t_torch, speedup=t_torch / t_ours, tflops=tf)
                print(
                    f"gpu-bench {name} {wname}: infinity_v3 {tok / t_ours:,.0f} tok/s (p50 {t_ours * 1e3:.2f} ms), "
                    f"torch {tok / t_torch:,.0f} tok/s (p50 {t_torch * 1e3:.2f} ms), {t_torch / t_ours:.2f}x torch, "
                    f"{tf:.1f} TFLOP/s",
                    flush=True,
                )
            results["shapes"][name] = rec
            del model
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
