#!/usr/bin/env python3
"""Generates the tokenizer verification fixtures under tests/fixtures/tokenizers/.

For every real tokenizer in the shared folder and every small trained one
(tools/tokenizer_trained.py) it writes NAME/tokenizer.json (a byte-identical
copy, or the trained file) and NAME/expected.jsonl: the output of the Python
`tokenizers` library over the corpus (tools/tokenizer_corpus.py) and the
query/document pairs, each with and without special tokens. It also writes
truncation cases (expected_trunc.jsonl) for three tokenizers, converts the
published test vectors to NAME/published.jsonl after checking each one against
the library, and writes COVERAGE.md (which fixture exercises which component).

Run from the repository root:
    python3 tools/tokenizer_corpus.py
    python3 tools/gen_tokenizer_vectors.py [--shared /work/shared/tokenizers] [--retrain]

Truncation and padding declared in a tokenizer file are switched off before
encoding (no_truncation, no_padding), as the C tests encode without them.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys

# Single-threaded: the outputs do not depend on it, but the machine is shared.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import tokenizer_corpus  # noqa: E402
import tokenizer_coverage  # noqa: E402
import tokenizer_published  # noqa: E402
import tokenizer_trained  # noqa: E402

# Fixture name -> (tokenizer file in the shared folder, corpus). The tokenizer
# files alone take 34 MB, so only one fixture per kind of pipeline gets the
# full corpus (WordPiece: bert-base-uncased, byte-level BPE: gpt2,
# SentencePiece-style BPE: llama-2); the others get the core subset
# (tokenizer_corpus.core_subset, about 600 strings).
REAL = {
    "all-MiniLM-L6-v2": ("all-MiniLM-L6-v2/tokenizer.json", "core"),
    "bert-base-cased": ("bert-base-cased/tokenizer.RECONSTRUCTED.json", "core"),
    "bert-base-uncased": ("bert-base-uncased/tokenizer.json", "full"),
    "bge-small-en-v1.5": ("bge-small-en-v1.5/tokenizer.json", "core"),
    "gpt2": ("gpt2/tokenizer.json", "full"),
    "llama-2": ("llama-2/tokenizer.json", "full"),
    "llama-3": ("llama-3/tokenizer.RECONSTRUCTED.json", "core"),
    "modernbert-base": ("modernbert-base/tokenizer.json", "core"),
    "mpnet-RECONSTRUCTED": ("mpnet-RECONSTRUCTED/tokenizer.RECONSTRUCTED.json", "core"),
    "phi-3-mini": ("phi-3-mini/tokenizer.json", "core"),
    "roberta-base": ("roberta-base/tokenizer.json", "core"),
    "vespa-real-tokenizer": ("vespa-real-tokenizer/tokenizer.json", "core"),
    "xlm-roberta-unigram": ("xlm-roberta-unigram/tokenizer.json", "core"),
}

TRAINED_CORPUS = "core"

TRUNC_TOKENIZERS = ["bert-base-uncased", "roberta-base", "xlm-roberta-unigram"]

TRUNC_A = "The Manhattan Project was a research and development undertaking during World War II."
TRUNC_B = "Paris is the capital and most populous city of France."
TRUNC_SHORT = "Hi there"

# (text, pair, add_special_tokens, max_length, strategy, direction). The
# cases the library refuses (a strategy naming a missing or too-short
# sequence, a budget below the special tokens) are kept with their error.
TRUNC_CASES = [
    (TRUNC_A, None, True, 8, "longest_first", "right"),
    (TRUNC_A, None, True, 8, "longest_first", "left"),
    (TRUNC_A, None, False, 5, "longest_first", "right"),
    (TRUNC_A, None, False, 5, "longest_first", "left"),
    (TRUNC_A, None, True, 3, "longest_first", "right"),
    (TRUNC_A, None, True, 200, "longest_first", "right"),
    (TRUNC_A, None, True, 10, "only_first", "left"),
    (TRUNC_A, None, True, 10, "only_second", "right"),
    (TRUNC_A, None, True, 1, "longest_first", "right"),
    (TRUNC_A, TRUNC_B, True, 16, "longest_first", "right"),
    (TRUNC_A, TRUNC_B, True, 16, "longest_first", "left"),
    (TRUNC_A, TRUNC_B, False, 7, "longest_first", "right"),
    (TRUNC_A, TRUNC_B, False, 7, "longest_first", "left"),
    (TRUNC_A, TRUNC_SHORT, True, 12, "only_first", "right"),
    (TRUNC_A, TRUNC_SHORT, True, 12, "only_first", "left"),
    (TRUNC_SHORT, TRUNC_A, True, 12, "only_second", "right"),
    (TRUNC_SHORT, TRUNC_A, True, 12, "only_second", "left"),
    (TRUNC_A, TRUNC_B, False, 12, "only_second", "left"),
    (TRUNC_A, TRUNC_B, True, 16, "only_second", "right"),
    (TRUNC_SHORT, TRUNC_A, True, 12, "only_first", "right"),
    (TRUNC_SHORT, TRUNC_B, True, 9, "longest_first", "right"),
    (TRUNC_B, TRUNC_B, True, 13, "longest_first", "right"),
    (TRUNC_B, TRUNC_B, True, 13, "longest_first", "left"),
    (TRUNC_A, "", True, 9, "longest_first", "right"),
    (TRUNC_A, TRUNC_B, True, 200, "only_first", "right"),
]


def json_line(value):
    """Compact JSON; U+0085/U+2028/U+2029 escaped (see tokenizer_corpus.py)."""
    s = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return s.replace("\u0085", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in records:
            f.write(json_line(r) + "\n")


def load_tokenizer(path):
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


def encode_record(tok, text, pair, add_special):
    enc = tok.encode(text, pair, add_special_tokens=add_special)
    return {
        "text": text,
        "pair": pair,
        "add_special_tokens": add_special,
        "ids": enc.ids,
        "type_ids": enc.type_ids,
        "tokens": enc.tokens,
        "offsets": [list(o) for o in enc.offsets],
        "decoded": tok.decode(enc.ids, skip_special_tokens=True),
    }


def expected_records(tok, texts, pairs):
    records = []
    for add_special in (True, False):
        for t in texts:
            records.append(encode_record(tok, t, None, add_special))
        for q, d in pairs:
            records.append(encode_record(tok, q, d, add_special))
    return records


def trunc_records(tok):
    records = []
    for text, pair, add_special, max_length, strategy, direction in TRUNC_CASES:
        tok.enable_truncation(max_length, stride=0, strategy=strategy, direction=direction)
        rec = {"text": text, "pair": pair, "add_special_tokens": add_special, "max_length": max_length,
               "strategy": strategy, "direction": direction}
        try:
            enc = tok.encode(text, pair, add_special_tokens=add_special)
        except Exception as e:  # the library refuses the case; the C side must refuse it too
            rec["error"] = str(e)
        else:
            rec.update({"ids": enc.ids, "type_ids": enc.type_ids, "tokens": enc.tokens,
                        "offsets": [list(o) for o in enc.offsets]})
        records.append(rec)
    tok.no_truncation()
    return records


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().split("\n") if line]


def check_published(tok, vec):
    """Fills ids from tokens where a source gives tokens only; returns whether
    the library reproduces the vector."""
    enc = tok.encode(vec["text"], vec.get("pair"), add_special_tokens=vec["add_special_tokens"])
    if vec["ids"] is None:
        ids = [tok.token_to_id(t) for t in vec["tokens"]]
        if None in ids:
            return False
        vec["ids"] = ids
        vec["ids_from_tokens"] = True
    ok = enc.ids == vec["ids"]
    if "tokens" in vec:
        ok = ok and enc.tokens == vec["tokens"]
    return ok


def sha16(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default="/work/shared/tokenizers")
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "tokenizers"))
    ap.add_argument("--retrain", action="store_true", help="retrain the trained-* tokenizers")
    ap.add_argument("--only", nargs="*", help="fixture names to regenerate (default: all)")
    args = ap.parse_args(argv)

    corpus = tokenizer_corpus.build_corpus()
    pairs = tokenizer_corpus.build_pairs(corpus)
    committed = read_jsonl(os.path.join(args.out, "corpus.jsonl"))
    if committed != corpus:
        sys.exit("corpus.jsonl differs from tools/tokenizer_corpus.py: run it first")
    core = tokenizer_corpus.core_subset(corpus)
    subsets = {"full": corpus, "core": core}
    wanted = set(args.only) if args.only else None
    summary = []

    def want(name):
        return wanted is None or name in wanted

    published = tokenizer_published.collect(os.path.join(args.shared, "vectors"))
    report = []
    for name, (rel, subset) in REAL.items():
        if not want(name):
            continue
        src = os.path.join(args.shared, rel)
        dst_dir = os.path.join(args.out, name)
        os.makedirs(dst_dir, exist_ok=True)
        shutil.copyfile(src, os.path.join(dst_dir, "tokenizer.json"))
        cfg = os.path.join(os.path.dirname(src), "tokenizer_config.json")
        if os.path.exists(cfg):
            shutil.copyfile(cfg, os.path.join(dst_dir, "tokenizer_config.json"))
        tok = load_tokenizer(src)
        texts = subsets[subset]
        write_jsonl(os.path.join(dst_dir, "expected.jsonl"), expected_records(tok, texts, pairs))
        summary.append((name, len(texts), sha16(src)))
        if name in TRUNC_TOKENIZERS:
            write_jsonl(os.path.join(dst_dir, "expected_trunc.jsonl"), trunc_records(tok))
        vecs = [dict(v) for fx, v in published if fx == name]
        if vecs:
            results = [check_published(tok, v) for v in vecs]
            passing = [v for v, ok in zip(vecs, results) if ok]
            failing = [v for v, ok in zip(vecs, results) if not ok]
            write_jsonl(os.path.join(dst_dir, "published.jsonl"), passing)
            report.append((name, len(passing), len(vecs), [v["source"] for v in failing]))

    trained_texts = corpus
    for name, build in tokenizer_trained.BUILDERS.items():
        if not want(name):
            continue
        dst_dir = os.path.join(args.out, name)
        path = os.path.join(dst_dir, "tokenizer.json")
        if args.retrain or not os.path.exists(path):
            os.makedirs(dst_dir, exist_ok=True)
            build(trained_texts).save(path, pretty=True)
        tok = load_tokenizer(path)
        texts = subsets[TRAINED_CORPUS]
        write_jsonl(os.path.join(dst_dir, "expected.jsonl"), expected_records(tok, texts, pairs))
        summary.append((name, len(texts), sha16(path)))

    names = list(REAL) + list(tokenizer_trained.BUILDERS)
    missing = tokenizer_coverage.write_coverage(args.out, names)

    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"tokenizers {tokenizers.__version__}; corpus {len(corpus)} strings (core {len(core)}), "
          f"{len(pairs)} pairs")
    for name, n, digest in summary:
        print(f"  {name}: {n} texts, tokenizer sha256[:16] {digest}")
    for name, ok, n, failing in report:
        print(f"  published {name}: {ok}/{n} reproduced by the library" +
              (f"; left out: {failing}" if failing else ""))
    print(f"fixtures total: {total / 1e6:.1f} MB")
    if missing:
        print("components with no fixture: " + ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
