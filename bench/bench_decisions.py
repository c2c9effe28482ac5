#!/usr/bin/env python3
"""Typed decisions: questions per second on a Laya-shaped random checkpoint,
infinity_v3 (POST /v1/systemone over HTTP) against the reference Python
code (PyPI laya 0.4.15, Agent.predict in process, torch on the CPU), in one
run, for 1, 4 and 16 questions on one state.

    python3 -m venv --system-site-packages .cache/dvenv && .cache/dvenv/bin/pip install laya==0.4.15
    .cache/dvenv/bin/python bench/bench_decisions.py --binary build/release/infinity_v3 [--shape large|base]

The checkpoint (.cache/bench-models/laya-<shape>/, not committed) is written
on first use in Laya's file layout: ModernBERT-large (28 layers, d 1024) or
-base (22 layers, d 768) with transformers' seeded initialisation, the
committed ModernBERT tokenizer, a 2-layer head and the English
checkpoint's rl_agent_config.json (max_len 512, head_max_len 192). The
numbers the model gives are meaningless; the cost is the real one. Both
sides answer the same request (a ~250-token state; noul, choice and score
questions in turn); each point is the median of --repeat timed requests
after one warm-up. Prints one line per point and the ratio of a 16-question
request to 16 one-question requests (below 1: batching or sharing pays).

--contract continuation|letters runs the option-token contracts on a causal
random checkpoint instead (.cache/bench-models/causal-qwen3-l<N>/, not
committed): Qwen3ForCausalLM with Qwen3-0.6B's widths and --layers of its
28 layers (default 4, as bench_prefix.c, for a 2-core machine), the
committed Llama 3 tokenizer and Llama 3.1's chat template. The server runs
with --decision-continuation sum (or --decision-letters) and prefix folding
on (--prefix-fold false with --no-fold, for the comparison). There is no
Python peer for these contracts' timings (--no-reference is implied).

    python3 bench/bench_decisions.py --binary build/release/infinity_v3 --contract continuation [--no-fold]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "modernbert-base", "tokenizer.json")
SHAPES = {
    "large": dict(num_hidden_layers=28, hidden_size=1024, num_attention_heads=16, intermediate_size=2624),
    "base": dict(num_hidden_layers=22, hidden_size=768, num_attention_heads=12, intermediate_size=1152),
}
AGENT_CFG = {"encoder": "answerdotai/ModernBERT-large", "head_layers": 2, "max_len": 512, "head_max_len": 192,
             "max_prefixes": 6, "temperature": [1.6369, 1.2514, 1.9834],
             "temperature_by_options": {"choice:3-5": 1.7602, "noul:2": 1.9834}}
STATE = ("Customer ticket #4411. The customer writes that the parcel with order 42 was marked as delivered "
         "on Monday but never arrived; the neighbour did not receive it either. They ask for a refund or a "
         "replacement, mention that this is the second time this year, and say they will cancel their "
         "subscription if it is not solved by Friday. Previous agent notes: address verified, courier "
         "contacted, no photo proof of delivery. ") * 3


def build_checkpoint(shape):
    import safetensors.torch
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    sys.path.insert(0, os.path.join(ROOT, "tools", "fixtures"))
    from synthetic_laya import DecisionModel

    out = os.path.join(ROOT, ".cache", "bench-models", "laya-" + shape)
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    os.makedirs(os.path.join(out, "encoder"), exist_ok=True)
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    torch.manual_seed(5)
    cfg = ModernBertConfig(vocab_size=50368, max_position_embeddings=8192, global_attn_every_n_layers=3,
                           local_attention=128, global_rope_theta=160000.0, local_rope_theta=10000.0,
                           hidden_activation="gelu", pad_token_id=50283, bos_token_id=50281, eos_token_id=50282,
                           cls_token_id=50281, sep_token_id=50282, **SHAPES[shape])
    model = DecisionModel(ModernBertModel(cfg), 2, 1).eval()
    cfg.save_pretrained(os.path.join(out, "encoder"))
    safetensors.torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                                os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "rl_agent_config.json"), "w") as f:
        json.dump(AGENT_CFG, f, indent=1)
    with open(TOKENIZER) as f:
        tok = f.read()
    with open(os.path.join(out, "tokenizer", "tokenizer.json"), "w") as f:
        f.write(tok)
    with open(os.path.join(out, "tokenizer", "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "cls_token": "[CLS]", "sep_token": "[SEP]",
                   "mask_token": "[MASK]", "pad_token": "[PAD]", "unk_token": "[UNK]", "model_max_length": 8192}, f)
    return out


def build_causal_checkpoint(layers):
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out = os.path.join(ROOT, ".cache", "bench-models", "causal-qwen3-l%d" % layers)
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(4)
    cfg = Qwen3Config(num_hidden_layers=layers, hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
                      head_dim=128, intermediate_size=3072, vocab_size=151936, max_position_embeddings=40960,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu")
    Qwen3ForCausalLM(cfg).eval().save_pretrained(out)
    tcfg = json.load(open(os.path.join(ROOT, "tests", "fixtures", "chat_templates", "Llama-3.1-8B-Instruct",
                                       "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(ROOT, "tests", "fixtures", "tokenizers", "llama-3",
                                                              "tokenizer.json"),
                                  bos_token=tcfg["bos_token"], eos_token=tcfg["eos_token"])
    tok.chat_template = tcfg["chat_template"]
    tok.save_pretrained(out)
    return out


def questions(n):
    qs = {}
    for i in range(n):
        kind = i % 3
        if kind == 0:
            qs["q%d" % i] = {"type": "noul", "instructions": "Does the customer threaten to cancel? (%d)" % i}
        elif kind == 1:
            qs["q%d" % i] = {"type": "choice", "instructions": "What does the customer want? (%d)" % i,
                             "criteria": {"refund": "money back", "replacement": "a new parcel",
                                          "information": "where the parcel is", "other": None}}
        else:
            qs["q%d" % i] = {"type": "score", "instructions": "How urgent is this ticket? (%d)" % i,
                             "criteria": ["can wait", "this week", "today", "right now"]}
    return qs


def start_server(binary, model, extra=()):
    log = open("/tmp/iv_bench_decisions.log", "w")
    proc = subprocess.Popen([binary, "serve", "--model-id", model, "--served-model-name", "laya", "--port", "0",
                             "--hostname", "127.0.0.1"] + list(extra), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while time.time() < deadline:
        m = re.search(r"Ready: listening on 127\.0\.0\.1:(\d+)", open("/tmp/iv_bench_decisions.log").read())
        if m:
            return proc, "http://127.0.0.1:%s" % m.group(1)
        if proc.poll() is not None:
            sys.exit("server exited:\n" + open("/tmp/iv_bench_decisions.log").read())
        time.sleep(0.1)
    proc.kill()
    sys.exit("server did not start")


def post(base, body):
    req = urllib.request.Request(base + "/v1/systemone", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def timed(fn, repeat):
    fn()  # warm-up
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "infinity_v3"))
    ap.add_argument("--shape", choices=sorted(SHAPES), default="large")
    ap.add_argument("--counts", default="1,4,16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--contract", choices=["laya", "continuation", "letters"], default="laya")
    ap.add_argument("--layers", type=int, default=4, help="causal checkpoint depth (continuation, letters)")
    ap.add_argument("--no-fold", action="store_true", help="serve with --prefix-fold false")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    extra = ["--prefix-fold", "false"] if a.no_fold else []
    if a.contract == "laya":
        model = build_checkpoint(a.shape)
        name = "laya-" + a.shape
    else:
        model = build_causal_checkpoint(a.layers)
        name = "causal-qwen3-l%d, %s contract" % (a.layers, a.contract)
        extra += ["--decision-continuation", "sum"] if a.contract == "continuation" else ["--decision-letters"]
        a.no_reference = True
    import torch
    print("%s, prefix folding %s, state %d chars, %d CPU threads (torch %d), median of %d" % (
        name, "off" if a.no_fold else "on", len(STATE), os.cpu_count(), torch.get_num_threads(), a.repeat))
    ours, ref = {}, {}
    proc, base = start_server(a.binary, model, extra)
    try:
        for n in counts:
            body = {"model": "laya", "state": STATE, "questions": questions(n)}
            toks = post(base, body)["usage"]["input_tokens"]
            ours[n] = timed(lambda: post(base, body), a.repeat)
            print("infinity_v3 %2d questions: %7.3f s/request, %6.2f questions/s (%d tokens)"
                  % (n, ours[n], n / ours[n], toks), flush=True)
    finally:
        folded = re.findall(r'te_prefix_fold_(batches|tokens|computed_tokens)_total\{[^}]*\} (\d+)',
                            urllib.request.urlopen(base + "/metrics", timeout=60).read().decode())
        if folded:
            print("prefix folding over the run: " + ", ".join("%s %s" % kv for kv in folded))
        proc.terminate()
        proc.wait()
    if not a.no_reference:
        from laya import Agent
        agent = Agent(model, device="cpu")
        for n in counts:
            qs = questions(n)
            ref[n] = timed(lambda: agent.predict(STATE, qs), a.repeat)
            print("laya 0.4.15 %2d questions: %7.3f s/request, %6.2f questions/s (torch CPU)"
                  % (n, ref[n], n / ref[n]), flush=True)
    for n in counts:
        line = "%2d questions: infinity_v3 %.2f q/s" % (n, n / ours[n])
        if n in ref:
            line += ", laya %.2f q/s, speedup %.2fx" % (n / ref[n], ref[n] / ours[n])
        print(line)
    if 1 in counts and 16 in counts:
        r = ours[16] / (16 * ours[1])
        line = "16 questions cost %.2f of 16 single requests (infinity_v3)" % r
        if ref:
            line += ", %.2f (laya)" % (ref[16] / (16 * ref[1]))
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
