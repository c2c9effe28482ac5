"""Reads the published tokenizer test vectors under /work/shared/tokenizers/vectors
and returns the ones that belong to a tokenizer in the fixtures, in one form:
{"text", "add_special_tokens", "ids", "source"}, plus "pair" for a pair input
and "tokens" where the source gives tokens (some misc cases give tokens only,
with "ids" null).

Which set belongs to which tokenizer, and with which special-token setting,
follows /work/shared/tokenizers/README.md:
  - llama.cpp ggml-vocab-*.gguf.inp/.out: ids without special tokens.
  - transformers.js cases: ids of tokenizer(text), i.e. with special tokens.
  - swift-transformers *_encoded.json and tokenizer_tests.json: with special tokens.
  - misc_vectors.json: without special tokens unless a case says otherwise.
"""

import json
import os

# llama.cpp vocab name -> fixtures it was validated against (README).
LLAMA_CPP = {
    "bert-bge": ["bge-small-en-v1.5", "bert-base-uncased", "all-MiniLM-L6-v2", "vespa-real-tokenizer"],
    "gpt-2": ["gpt2"],
    "llama-spm": ["llama-2"],
    "llama-bpe": ["llama-3"],
    "mpt": ["modernbert-base"],
    "phi-3": ["phi-3-mini"],
    "roberta-bpe": ["roberta-base"],
}

# transformers.js model -> fixture.
TRANSFORMERS_JS = {
    "Xenova/bert-base-uncased": "bert-base-uncased",
    "Xenova/distilbert-base-uncased-finetuned-sst-2-english": "bert-base-uncased",
    "Xenova/bert-base-cased": "bert-base-cased",
    "google-bert/bert-base-cased": "bert-base-cased",
    "Xenova/distilbert-base-cased-distilled-squad": "bert-base-cased",
    "Xenova/gpt2": "gpt2",
    "Xenova/llama-tokenizer": "llama-2",
    "Xenova/llama3-tokenizer-new": "llama-3",
    "Xenova/all-mpnet-base-v2": "mpnet-RECONSTRUCTED",
    "Xenova/all-distilroberta-v1": "roberta-base",
    "Xenova/paraphrase-multilingual-mpnet-base-v2": "xlm-roberta-unigram",
}

# swift-transformers encoded-text file -> fixture. distilbert_cased_encoded.json
# is left out: its ids are distilbert-base-multilingual-cased's (ids above
# bert-base-cased's 28996), a tokenizer not in the fixtures.
SWIFT_ENCODED = {
    "bert_uncased_encoded.json": "bert-base-uncased",
    "gpt2_encoded_tokens.json": "gpt2",
    "llama_encoded.json": "llama-2",
    "llama_3.2_encoded.json": "llama-3",
}

# swift-transformers tokenizer_tests.json model -> fixture.
SWIFT_TESTS = {
    "bert-base-uncased": "bert-base-uncased",
    "google-bert/bert-base-uncased": "bert-base-uncased",
    "distilgpt2": "gpt2",
    "coreml-projects/Llama-2-7b-chat-coreml": "llama-2",
    "pcuenq/Llama-3.2-1B-Instruct-tokenizer": "llama-3",
}

# misc_vectors.json "tokenizer" field -> fixture.
MISC = {
    "vespa-bert-base-uncased/tokenizer.json (== bert-base-uncased)": "bert-base-uncased",
    "bert-base-uncased/tokenizer.json": "bert-base-uncased",
    "paraphrase-multilingual-mpnet-base-v2/tokenizer.json": "xlm-roberta-unigram",
    "llama-3/tokenizer.RECONSTRUCTED.json": "llama-3",
    "vespa-real-tokenizer/tokenizer.json": "vespa-real-tokenizer",
}

LLAMA_CPP_SEP = "\n__ggml_vocab_test__\n"


def _read_llama_cpp(vec_dir):
    out = []
    for vocab, fixtures in LLAMA_CPP.items():
        base = os.path.join(vec_dir, "llama.cpp", f"ggml-vocab-{vocab}.gguf")
        with open(base + ".inp", encoding="utf-8", newline="") as f:
            texts = f.read().split(LLAMA_CPP_SEP)
        if texts and texts[-1] == "":
            texts.pop()
        with open(base + ".out", encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) != len(texts):
            raise ValueError(f"{base}: {len(texts)} inputs but {len(lines)} outputs")
        for i, (text, line) in enumerate(zip(texts, lines)):
            ids = [int(x) for x in line.split()]
            for fx in fixtures:
                out.append((fx, {"text": text, "add_special_tokens": False, "ids": ids,
                                 "source": f"llama.cpp ggml-vocab-{vocab}.gguf #{i}"}))
    return out


def _read_transformers_js(vec_dir):
    with open(os.path.join(vec_dir, "transformersjs_tokenizer_vectors.json"), encoding="utf-8") as f:
        models = json.load(f)["models"]
    out = []
    for model, fx in TRANSFORMERS_JS.items():
        for case, v in models[model]["cases"].items():
            rec = {"text": v["text"], "add_special_tokens": True, "ids": v["ids"],
                   "source": f"transformers.js {model} {case}"}
            if "text_pair" in v:
                rec["pair"] = v["text_pair"]
            out.append((fx, rec))
    return out


def _read_swift(vec_dir):
    out = []
    for fname, fx in SWIFT_ENCODED.items():
        with open(os.path.join(vec_dir, "swift", fname), encoding="utf-8") as f:
            v = json.load(f)
        out.append((fx, {"text": v["text"], "add_special_tokens": True, "ids": v["token_ids"],
                         "source": f"swift-transformers {fname}"}))
    with open(os.path.join(vec_dir, "swift", "tokenizer_tests.json"), encoding="utf-8") as f:
        tests = json.load(f)
    for model, fx in SWIFT_TESTS.items():
        for i, v in enumerate(tests[model]):
            out.append((fx, {"text": v["input"], "add_special_tokens": True,
                             "ids": v["encoded"]["input_ids"],
                             "source": f"swift-transformers tokenizer_tests.json {model} #{i}"}))
    return out


def _read_misc(vec_dir):
    with open(os.path.join(vec_dir, "misc_vectors.json"), encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for source, v in data.items():
        if source.startswith("_"):
            continue
        fx = MISC[v["tokenizer"]]
        for i, case in enumerate(v["cases"]):
            rec = {"text": case["text"], "add_special_tokens": bool(case.get("add_special_tokens", False)),
                   "ids": case.get("ids"), "source": f"{source} #{i}"}
            if "tokens" in case:
                rec["tokens"] = case["tokens"]
            out.append((fx, rec))
    return out


def collect(vec_dir):
    """Returns [(fixture name, vector)] for every published vector that names a
    tokenizer in the fixtures, in a fixed order."""
    return _read_llama_cpp(vec_dir) + _read_transformers_js(vec_dir) + _read_swift(vec_dir) + _read_misc(vec_dir)
