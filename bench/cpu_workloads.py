"""Workloads and model arithmetic for bench/run_cpu.py (no torch needed).

Workloads are token-id sequences built for a checkpoint from its own
tokenizer's special tokens and vocabulary size, with a fixed seed, so every
engine and every run sees the same inputs:
  mixed       32 sequences, lengths uniform in 16..256 (one batch)
  equal       32 sequences of 128 tokens (one batch)
  latency_8   one sequence of 8 tokens (single-request latency)
  latency_64  one sequence of 64 tokens
Lengths include the special tokens the tokenizer adds ([CLS] ... [SEP]).
The CLI workload is text: 1,000 short English sentences from a small
seeded grammar.
"""
import json
import os
import random
import struct

SEED = 1234


def _special_wrap(model_dir):
    """(prefix, suffix) ids the tokenizer adds around a single sequence."""
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(path):
        return [], []
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    word = tok.encode("hello", add_special_tokens=False).ids
    full = tok.encode("hello").ids
    for i in range(len(full) - len(word) + 1):
        if full[i:i + len(word)] == word:
            return full[:i], full[i + len(word):]
    return [], []


def _config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return cfg.get("text_config", cfg) if "num_hidden_layers" not in cfg else cfg


def _sequence(rng, length, prefix, suffix, lo, hi):
    body = max(1, length - len(prefix) - len(suffix))
    return prefix + [rng.randrange(lo, hi) for _ in range(body)] + suffix


def id_workloads(model_dir, profile):
    """The four id workloads for this checkpoint, with the profile's run counts."""
    cfg = _config(model_dir)
    prefix, suffix = _special_wrap(model_dir)
    vocab = int(cfg["vocab_size"])
    # Skip the low ids where BERT-style vocabularies keep specials and
    # unused slots; everything above is ordinary tokens.
    lo, hi = min(1000, vocab // 2), vocab
    rng = random.Random(SEED)
    mixed = [_sequence(rng, rng.randint(16, 256), prefix, suffix, lo, hi) for _ in range(32)]
    equal = [_sequence(rng, 128, prefix, suffix, lo, hi) for _ in range(32)]
    batch, lat = profile["batch"], profile["latency"]
    return [
        dict(name="mixed", label="32 seqs, len 16..256", kind="batch", seqs=mixed, **batch),
        dict(name="equal", label="32 seqs x 128", kind="batch", seqs=equal, **batch),
        dict(name="latency_8", label="1 seq x 8", kind="latency", seqs=[_sequence(rng, 8, prefix, suffix, lo, hi)],
             **lat),
        dict(name="latency_64", label="1 seq x 64", kind="latency",
             seqs=[_sequence(rng, 64, prefix, suffix, lo, hi)], **lat),
    ]


_SUBJECTS = ["The old man", "A young woman", "My neighbour", "The committee", "Our team", "The small dog",
             "A tired student", "The new manager", "Every child", "The local bakery", "A quiet engineer",
             "The city council", "Her brother", "The research group", "A famous painter", "The delivery driver"]
_VERBS = ["reads", "builds", "sells", "describes", "repairs", "discovers", "explains", "paints", "orders",
          "cancels", "reviews", "photographs", "measures", "forgets", "recommends", "carries"]
_OBJECTS = ["a long letter", "the broken bicycle", "fresh bread", "an interesting theory", "the annual report",
            "three blue chairs", "a new recipe", "the train schedule", "a strange noise", "the garden fence",
            "several old maps", "the quarterly budget", "a warm jacket", "the missing keys", "a short film"]
_TAILS = ["every morning", "before lunch", "in the park", "after the meeting", "with great care",
          "near the station", "during the storm", "for the first time", "on Tuesday", "without any help",
          "at the end of the day", "despite the rain", "in a hurry", "for her friends", ""]
_QUESTIONS = ["How do I reset my password?", "What is the capital of Australia?", "Where can I buy cheap tickets?",
              "Why is the sky blue?", "When does the library open?", "Which laptop is best for students?",
              "Is it going to rain tomorrow?", "How long does it take to boil an egg?"]


def sentences(n=1000, seed=SEED):
    """n short English sentences (roughly 6 to 16 words)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.15:
            out.append(rng.choice(_QUESTIONS))
            continue
        tail = rng.choice(_TAILS)
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
        out.append(f"{s} {tail}." if tail else f"{s}.")
    return out


def count_tokens(model_dir, texts, max_len):
    """Real (unpadded) tokens, special tokens included, as the engines see them."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_len)
    tok.no_padding()  # some tokenizer.json files pad to a fixed length
    return sum(len(e.ids) for e in tok.encode_batch(texts))


def _safetensors_tensors(model_dir):
    """{name: (shape, bytes, dtype)} from the safetensors headers."""
    tensors = {}
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    for name in files:
        with open(os.path.join(model_dir, name), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                tensors[k] = (v["shape"], v["data_offsets"][1] - v["data_offsets"][0], v["dtype"])
    return tensors


def model_arith(model_dir):
    """What the FLOP count needs: parameters of the matrix multiplies a token
    goes through (2-D weights, less embedding tables and the BERT pooler, which
    sentence embeddings do not use), layers and attention width; and the
    bytes of all the weights, for the memory budget."""
    cfg = _config(model_dir)
    tensors = _safetensors_tensors(model_dir)
    shapes = {k: t[0] for k, t in tensors.items()}
    linear = 0
    for k, s in shapes.items():
        if len(s) == 2 and "embed" not in k and "pooler" not in k and "lm_head" not in k:
            linear += s[0] * s[1]
    heads = int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // heads)
    return dict(layers=int(cfg["num_hidden_layers"]), hidden=int(cfg["hidden_size"]), heads=heads,
                intermediate=int(cfg.get("intermediate_size", 0)), attn_width=heads * head_dim,
                linear_params=linear, vocab=int(cfg["vocab_size"]),
                weight_bytes=sum(t[1] for t in tensors.values()),
                model_type=cfg.get("model_type", "?"))


def model_flops(arith, lengths):
    """2 * linear params per token, plus 4 * L^2 * width per layer per sequence
    (QK^T and attention x V, 2 FLOPs per multiply-add each)."""
    linear = 2 * arith["linear_params"] * sum(lengths)
    attn = arith["layers"] * sum(4 * n * n * arith["attn_width"] for n in lengths)
    return linear + attn


def weight_stream_bytes(model_dir, seq):
    """Bytes of FP32 weights one forward pass over the token ids `seq` must
    read at least once (issue 25's weight-streaming floor for single short
    requests, which are memory-bound). Counted, at 4 bytes per parameter
    whatever the checkpoint's dtype (the CPU engine computes in FP32):
      matmul      every 2-D weight a token goes through: the same parameters
                  as the FLOP count (model_arith), all of them read once;
      vectors     1-D parameters (biases, norm weights), all read once;
      embeddings  only the rows the pass touches: one row of the token table
                  per distinct id, rows 0..len-1 of a position table, one row
                  of a token-type table; any other embedding table whole;
      other       weights of more than 2 dimensions (convolutions), whole.
    Left out, as sentence embeddings do not use them: the BERT pooler and an
    LM head. Activations, the KV of attention and the output are not counted:
    at 8 to 64 tokens they are a few hundred KB against tens of MB."""
    cfg = _config(model_dir)
    vocab = int(cfg["vocab_size"])
    parts = {"matmul": 0, "vectors": 0, "embeddings": 0, "other": 0}
    rows_of = {}
    for k, (shape, _, dtype) in _safetensors_tensors(model_dir).items():
        if "pooler" in k or "lm_head" in k or dtype.startswith(("I", "U", "BOOL")):
            continue  # unused heads; integer buffers (BERT's position_ids) are not weights
        n = 1
        for d in shape:
            n *= d
        if len(shape) == 2 and "embed" in k:
            if "position" in k:
                rows = min(len(seq), shape[0])
            elif "token_type" in k:
                rows = 1
            elif shape[0] == vocab:
                rows = len(set(seq))
            else:
                rows = shape[0]
            rows_of[k] = rows
            parts["embeddings"] += rows * shape[1]
        elif len(shape) == 2:
            parts["matmul"] += n
        elif len(shape) <= 1:
            parts["vectors"] += n
        else:
            parts["other"] += n
    out = {k + "_bytes": 4 * v for k, v in parts.items()}
    out["total_bytes"] = sum(out.values())
    out["embedding_rows"] = rows_of
    out["tokens"] = len(seq)
    return out
