#!/usr/bin/env python3
"""Regenerate the model golden-test fixtures.

    python3 tools/gen_fixtures.py            # everything, then self-check
    python3 tools/gen_fixtures.py bert mpnet # only these synthetic fixtures
    python3 tools/gen_fixtures.py --no-verify

Writes tests/fixtures/models/<name>/ (tiny seeded checkpoints + expected
outputs, see tests/fixtures/models/README.md) and
tests/fixtures/real/all-MiniLM-L6-v2/ (expected outputs of the real model,
which scripts/fetch-models.sh places in .cache/models; the model itself is
not committed). Run from the repository root.
"""
import argparse
import logging
import os
import sys
import time
import warnings

# Set before transformers is imported: everything is local, never ask the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import (common, real_minilm, real_more, synthetic, synthetic_causal_rerank, synthetic_chat_rerank,  # noqa: E402
                      synthetic_colbert,
                      synthetic_deberta, synthetic_decoders, synthetic_enc, synthetic_enc2,
                      synthetic_gemma4, synthetic_gemma4_unified, synthetic_gemma4_vision, synthetic_mistral3_rerank, synthetic_pad_eos, synthetic_pixtral,
                      synthetic_qwen35,
                      synthetic_qwen3vl_vision,
                      synthetic_st6, verify)

# Fixture groups: (SPECS, build(spec, root), verify(spec, root)) of each generator module.
GROUPS = [(synthetic.SPECS, synthetic.build, verify.verify_synthetic),
          (synthetic_decoders.SPECS, synthetic_decoders.build, synthetic_decoders.verify),
          (synthetic_enc.SPECS, synthetic_enc.build, synthetic_enc.verify),
          (synthetic_deberta.SPECS, synthetic_deberta.build, synthetic_deberta.verify),
          (synthetic_colbert.SPECS, synthetic_colbert.build, synthetic_colbert.verify),
          (synthetic_enc2.SPECS, synthetic_enc2.build, synthetic_enc2.verify),
          (synthetic_causal_rerank.SPECS, synthetic_causal_rerank.build, synthetic_causal_rerank.verify),
          (synthetic_st6.SPECS, synthetic_st6.build, synthetic_st6.verify),
          (synthetic_pad_eos.SPECS, synthetic_pad_eos.build, synthetic_pad_eos.verify),
          (synthetic_chat_rerank.SPECS, synthetic_chat_rerank.build, synthetic_chat_rerank.verify),
          (synthetic_mistral3_rerank.SPECS, synthetic_mistral3_rerank.build, synthetic_mistral3_rerank.verify),
          (synthetic_qwen3vl_vision.SPECS, synthetic_qwen3vl_vision.build, synthetic_qwen3vl_vision.verify),
          (synthetic_qwen35.SPECS, synthetic_qwen35.build, synthetic_qwen35.verify),
          (synthetic_pixtral.SPECS, synthetic_pixtral.build, synthetic_pixtral.verify),
          (synthetic_gemma4.SPECS, synthetic_gemma4.build, synthetic_gemma4.verify),
          (synthetic_gemma4_vision.SPECS, synthetic_gemma4_vision.build, synthetic_gemma4_vision.verify),
          (synthetic_gemma4_unified.TEXT_SPECS, synthetic_gemma4_unified.build_text, synthetic_gemma4_unified.verify_text),
          (synthetic_gemma4_unified.VSPECS, synthetic_gemma4_unified.build_vision,
           synthetic_gemma4_unified.verify_vision),
          (synthetic_gemma4_unified.ASPECS, synthetic_gemma4_unified.build_audio,
           synthetic_gemma4_unified.verify_audio)]

MODELS_DIR = os.path.join("tests", "fixtures", "models")
REAL_DIR = os.path.join("tests", "fixtures", "real")


def quiet():
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    try:
        import transformers
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:
        pass


def size_of(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="synthetic fixtures to build (default: all, plus the real model)")
    ap.add_argument("--no-verify", action="store_true", help="skip the reload / padded-batch self-check")
    ap.add_argument("--no-real", action="store_true", help="skip tests/fixtures/real")
    ap.add_argument("--real", action="store_true", help="only tests/fixtures/real (the real models)")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join("tests", "fixtures")):
        sys.exit("run from the repository root")
    quiet()
    common.deterministic_torch()

    known = {s.name: (s, build, check) for specs, build, check in GROUPS for s in specs}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        sys.exit(f"unknown fixture(s) {unknown}; known: {sorted(known)}")
    todo = [known[n] for n in args.names] if args.names else list(known.values())
    if args.real:
        todo = []
    t0 = time.time()
    for spec, build, check in todo:
        d, outputs, n = build(spec, MODELS_DIR)
        line = f"wrote {d}: {spec.model_cls}, {n} inputs, outputs {','.join(outputs)}, {size_of(d) // 1024} KiB"
        if not args.no_verify:
            worst, worst_batch = check(spec, MODELS_DIR)
            line += f"; verified (reload max diff {worst:.1e}, padded batch {worst_batch:.1e})"
        print(line, flush=True)

    real = [(real_minilm.build, real_minilm.verify, "one-by-one vs batch"),
            (real_more.build_mpnet, real_more.verify_mpnet, "one-by-one vs batch"),
            (real_more.build_splade, real_more.verify_splade, "SparseEncoder")]
    for build, check, second in real if not args.names and not args.no_real else []:
        d, n = build(REAL_DIR)
        line = f"wrote {d}: {n} texts, {size_of(d) // 1024} KiB"
        if not args.no_verify:
            worst, worst_second = check(REAL_DIR)
            line += f"; verified (reload max diff {worst:.1e}, {second} {worst_second:.1e})"
        print(line, flush=True)

    total = size_of(MODELS_DIR) + (size_of(REAL_DIR) if os.path.isdir(REAL_DIR) else 0)
    print(f"done in {time.time() - t0:.1f}s; fixtures total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
