#!/usr/bin/env python3
"""Random-weight checkpoints of real model shapes, for bench/.

    python3 tools/gen_bench_models.py                 # every shape below
    python3 tools/gen_bench_models.py minilm-l6       # only this one
    python3 tools/gen_bench_models.py --force         # rebuild even when present

Writes .cache/bench-models/<name>/ (not committed): config.json,
model.safetensors, tokenizer files, and the sentence-transformers layout
(modules.json, 1_Pooling/config.json with mean pooling,
sentence_bert_config.json), saved by sentence-transformers itself so the
layout is exactly what users download. Weights are the architecture's own
seeded initialisation: the numbers are meaningless, the shapes and therefore
the cost are those of the real model.

To add a shape (ModernBERT-base, Qwen3-0.6B, ...) add an entry to SHAPES:
the transformers class, its config kwargs and the tokenizer.json to ship.
The benchmark takes any checkpoint directory, so nothing else changes.
Run from the repository root.
"""
import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings

# Everything is local: never ask the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

OUT_DIR = os.path.join(".cache", "bench-models")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Real tokenizer.json files committed with the tokenizer tests.
TOKENIZER_FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizers")

# name -> what to build. `tokenizer` names a folder of tests/fixtures/tokenizers
# (or a path) holding a tokenizer.json whose vocabulary fits `vocab_size`.
SHAPES = {
    "bert-base": dict(
        cls="BertModel",
        config=dict(model_type="bert", num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                    intermediate_size=3072, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2, hidden_act="gelu"),
        tokenizer="bert-base-uncased", max_seq_length=512, seed=1),
    "minilm-l6": dict(
        cls="BertModel",
        config=dict(model_type="bert", num_hidden_layers=6, hidden_size=384, num_attention_heads=12,
                    intermediate_size=1536, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2, hidden_act="gelu"),
        tokenizer="bert-base-uncased", max_seq_length=256, seed=2),
    # ModernBERT-base: gated GELU MLP, RoPE, sliding-window attention (128)
    # in two of every three layers, no biases; as gte-/nomic-modernbert
    # embedders are served, mean-pooled.
    "modernbert-base": dict(
        cls="ModernBertModel",
        config=dict(model_type="modernbert", num_hidden_layers=22, hidden_size=768, num_attention_heads=12,
                    intermediate_size=1152, vocab_size=50368, max_position_embeddings=8192,
                    global_attn_every_n_layers=3, local_attention=128, global_rope_theta=160000.0,
                    local_rope_theta=10000.0, hidden_activation="gelu", pad_token_id=50283, bos_token_id=50281,
                    eos_token_id=50282, cls_token_id=50281, sep_token_id=50282),
        tokenizer="modernbert-base", max_seq_length=8192, seed=3),
    # Qwen3-0.6B (the decoder of Qwen3-Embedding-0.6B): grouped-query
    # attention (16 query, 8 key/value heads of 128), q/k RMSNorm, SwiGLU,
    # tied embeddings; causal. Mean-pooled like the others so every engine
    # pools alike (Qwen3-Embedding pools the last token; the cost is the
    # same). No Qwen tokenizer is committed: Llama 3's byte-level BPE stands
    # in (its 128,256 ids fit the 151,936-row table), which only changes the
    # CLI workload's token counts.
    "qwen3-0.6b": dict(
        cls="Qwen3Model",
        config=dict(model_type="qwen3", num_hidden_layers=28, hidden_size=1024, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=151936,
                    max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                    tie_word_embeddings=True, hidden_act="silu"),
        tokenizer="llama-3", max_seq_length=8192, seed=4),
    # Qwen3-0.6B's widths with 4 of its 28 layers, for benchmarks whose
    # ratios do not depend on depth (bench/bench_prefix.c: prefix folding)
    # on machines too small to run the full stack many times.
    "qwen3-0.6b-l4": dict(
        cls="Qwen3Model",
        config=dict(model_type="qwen3", num_hidden_layers=4, hidden_size=1024, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=151936,
                    max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                    tie_word_embeddings=True, hidden_act="silu"),
        tokenizer="llama-3", max_seq_length=8192, seed=4),
    # For the last layer's head rows (docs/head-rows.md, bench/bench_head_rows.c):
    # a MiniLM-L6-shaped cross-encoder (one label, the classifier reads
    # [CLS] through the pooler), saved as transformers saves it, and
    # BERT-base CLS-pooled.
    "minilm-l6-crossenc": dict(
        cls="BertForSequenceClassification",
        config=dict(model_type="bert", num_hidden_layers=6, hidden_size=384, num_attention_heads=12,
                    intermediate_size=1536, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2, hidden_act="gelu", num_labels=1),
        tokenizer="bert-base-uncased", max_seq_length=512, seed=5, plain=True),
    "bert-base-cls": dict(
        cls="BertModel",
        config=dict(model_type="bert", num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                    intermediate_size=3072, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2, hidden_act="gelu"),
        tokenizer="bert-base-uncased", max_seq_length=512, seed=1, pooling="cls"),
}


def quiet():
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def find_tokenizer(name):
    """Path of tokenizer.json for a tests/fixtures/tokenizers folder name or a path."""
    candidates = [name, os.path.join(name, "tokenizer.json"),
                  os.path.join(TOKENIZER_FIXTURES, name, "tokenizer.json")]
    for c in candidates:
        if os.path.isfile(c) and c.endswith(".json"):
            return c
    sys.exit(f"tokenizer.json for {name!r} not found (looked in {candidates})")


def make_tokenizer(tokenizer_json):
    from transformers import PreTrainedTokenizerFast
    with open(tokenizer_json) as f:
        tj = json.load(f)
    vocab = set(tj["model"].get("vocab", {})) | {t["content"] for t in tj.get("added_tokens", [])}
    specials = {k: v for k, v in dict(unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                                      cls_token="[CLS]", mask_token="[MASK]").items() if v in vocab}
    return PreTrainedTokenizerFast(tokenizer_file=tokenizer_json, **specials)


def build(name, shape, out_root):
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer

    d = os.path.join(out_root, name)
    cfg = dict(shape["config"])
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(shape["seed"])
    model = getattr(transformers, shape["cls"])._from_config(config)
    model.eval()
    tok = make_tokenizer(find_tokenizer(shape["tokenizer"]))
    if len(tok) > config.vocab_size:
        sys.exit(f"{name}: tokenizer has {len(tok)} tokens, more than vocab_size {config.vocab_size}")

    # Save the bare checkpoint first, then let sentence-transformers load it
    # back and write its own layout around it.
    if shape.get("plain"):  # a transformers checkpoint, no sentence-transformers layout
        if os.path.isdir(d):
            shutil.rmtree(d)
        model.save_pretrained(d)
        tok.save_pretrained(d)
        return d
    tmp = tempfile.mkdtemp(prefix=f"bench-{name}-", dir=out_root)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        del model
        transformer = Transformer(tmp, max_seq_length=shape["max_seq_length"])
        pooling = Pooling(config.hidden_size, shape.get("pooling", "mean"))
        st = SentenceTransformer(modules=[transformer, pooling], device="cpu")
        if os.path.isdir(d):
            shutil.rmtree(d)
        st.save(d, create_model_card=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def size_mb(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"shapes to build (default: all of {sorted(SHAPES)})")
    ap.add_argument("--out", default=OUT_DIR, help="output root (default %(default)s)")
    ap.add_argument("--force", action="store_true", help="rebuild checkpoints that already exist")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in SHAPES]
    if unknown:
        sys.exit(f"unknown shape(s) {unknown}; known: {sorted(SHAPES)}")
    quiet()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or list(SHAPES):
        d = os.path.join(args.out, name)
        if not args.force and os.path.isfile(os.path.join(d, "model.safetensors")) \
                and os.path.isfile(os.path.join(d, "modules.json")):
            print(f"{d}: present", flush=True)
            continue
        build(name, SHAPES[name], args.out)
        print(f"wrote {d}: {SHAPES[name]['cls']}, {size_mb(d):.0f} MB", flush=True)


if __name__ == "__main__":
    main()
