#!/usr/bin/env python3
"""Tokenizer throughput: the Python `tokenizers` library against `infinity_v3 tokenize`.

A benchmark harness, not a test. It builds a deterministic ~1 MB corpus of
mixed documents (English, other scripts, code, emoji, edge cases; from
tools/tokenizer_corpus.py), then for a WordPiece (bert-base-uncased), a
byte-level BPE (roberta-base) and a Unigram (xlm-roberta-unigram) tokenizer
from tests/fixtures/tokenizers/ measures single-thread tokens per second:

  py batch   Tokenizer.encode_batch over all documents, RAYON_NUM_THREADS=1
  py loop    Tokenizer.encode on each document in turn
  C total    `infinity_v3 tokenize` reading the documents as JSON lines on
             stdin, wall time of the whole process (startup included)
  C steady   the same minus the wall time of a run on empty input (startup:
             process start and tokenizer.json load)

Token counts come from the Python library (with special tokens); the C side
must produce the same ids, which the tokenizer tests check, so the same count
holds. Each figure is the best of --repeat runs. Results are printed as a
table with C/Python ratios and saved to bench/results/tokenizer.json.

The C command line is a template (--c-args); {tokenizer} is replaced by the
fixture directory holding tokenizer.json. Each stdin line is, by default, a
JSON object {"inputs": text} (the /tokenize request body, one per line); use
--c-line string to send bare JSON strings instead. When the binary is missing
or the command fails, the C columns are left empty and the reason is shown.

Usage: python3 bench/bench_tokenizer.py [--bin build/release/infinity_v3] [--repeat 3]
"""

import os

# Must be set before `tokenizers` is imported: the library's thread pool is
# created once, on first use, from this variable.
os.environ["RAYON_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import tokenizer_corpus  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
TOKENIZERS = [
    ("bert-base-uncased", "WordPiece"),
    ("roberta-base", "byte-level BPE"),
    ("xlm-roberta-unigram", "Unigram"),
]
TARGET_BYTES = 1_000_000


def build_documents(target_bytes=TARGET_BYTES):
    """Documents of 1 to 8 corpus strings joined by spaces, drawn with a fixed
    seed until their UTF-8 size reaches target_bytes. Strings with U+0000 are
    left out so that any line-oriented reader can take the input."""
    pool = [s for s in tokenizer_corpus.build_corpus() if s and "\u0000" not in s]
    state = 12345
    docs, size = [], 0
    while size < target_bytes:
        state = (1664525 * state + 1013904223) & 0xFFFFFFFF
        n = 1 + (state >> 8) % 8
        parts = []
        for _ in range(n):
            state = (1664525 * state + 1013904223) & 0xFFFFFFFF
            parts.append(pool[(state >> 8) % len(pool)])
        doc = " ".join(parts)
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    return docs


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def load(name):
    tok = Tokenizer.from_file(os.path.join(FIXTURES, name, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def bench_python(tok, docs, repeat):
    n_tokens = sum(len(e.ids) for e in tok.encode_batch(docs))
    t_batch = best_of(repeat, lambda: tok.encode_batch(docs))

    def loop():
        for d in docs:
            tok.encode(d)

    t_loop = best_of(repeat, loop)
    return n_tokens, t_batch, t_loop


def c_input_file(docs, line_format, directory):
    path = os.path.join(directory, f"input-{line_format}.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            value = {"inputs": d} if line_format == "inputs" else d
            f.write(json.dumps(value, ensure_ascii=False) + "\n")
    return path


def run_c(argv, input_path):
    """Wall time of one run with stdin from input_path, and its output line count."""
    with open(input_path, "rb") as stdin:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"exit {proc.returncode}: {msg[-1] if msg else 'no message'}")
    return elapsed, proc.stdout.count(b"\n")


def bench_c(args, name, docs_path, empty_path, n_docs):
    if not os.path.exists(args.bin):
        return {"error": f"{args.bin} not found (build it with make)"}
    argv = [args.bin] + args.c_args.format(tokenizer=os.path.join(FIXTURES, name)).split()
    try:
        run_c(argv, docs_path)  # warm the page cache
        totals, lines = [], 0
        for _ in range(args.repeat):
            t, lines = run_c(argv, docs_path)
            totals.append(t)
        startup = min(run_c(argv, empty_path)[0] for _ in range(args.repeat))
    except (OSError, RuntimeError) as e:
        return {"error": f"{' '.join(argv)}: {e}"}
    out = {"argv": argv, "total_s": min(totals), "startup_s": startup, "output_lines": lines}
    if lines != n_docs:
        out["warning"] = f"{lines} output lines for {n_docs} inputs"
    return out


def fmt_rate(x):
    return f"{x / 1e6:.2f}M" if x else "-"


def fmt_ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join("build", "release", "infinity_v3"))
    ap.add_argument("--c-args", default="tokenize --model-id {tokenizer}",
                    help="arguments after the binary; {tokenizer} is the fixture directory")
    ap.add_argument("--c-line", choices=["inputs", "string"], default="inputs",
                    help='stdin line format: {"inputs": text} objects or bare JSON strings')
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=TARGET_BYTES, help="corpus size in UTF-8 bytes")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "tokenizer.json"))
    args = ap.parse_args(argv)

    docs = build_documents(args.bytes)
    corpus_bytes = sum(len(d.encode("utf-8")) for d in docs)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        docs_path = c_input_file(docs, args.c_line, tmp)
        empty_path = os.path.join(tmp, "empty.jsonl")
        open(empty_path, "w").close()
        for name, kind in TOKENIZERS:
            tok = load(name)
            n_tokens, t_batch, t_loop = bench_python(tok, docs, args.repeat)
            r = {"tokenizer": name, "kind": kind, "tokens": n_tokens,
                 "py_batch_s": t_batch, "py_loop_s": t_loop,
                 "py_batch_tok_s": n_tokens / t_batch, "py_loop_tok_s": n_tokens / t_loop}
            c = bench_c(args, name, docs_path, empty_path, len(docs))
            r["c"] = c
            if "error" not in c:
                r["c_total_tok_s"] = n_tokens / c["total_s"]
                steady = c["total_s"] - c["startup_s"]
                r["c_steady_tok_s"] = n_tokens / steady if steady > 0 else None
            results.append(r)

    header = ["tokenizer", "kind", "tokens", "py batch", "py loop", "C total", "C steady",
              "C/py batch", "C/py loop"]
    rows = []
    for r in results:
        rows.append([r["tokenizer"], r["kind"], str(r["tokens"]), fmt_rate(r["py_batch_tok_s"]),
                     fmt_rate(r["py_loop_tok_s"]), fmt_rate(r.get("c_total_tok_s")),
                     fmt_rate(r.get("c_steady_tok_s")),
                     fmt_ratio(r.get("c_steady_tok_s"), r["py_batch_tok_s"]),
                     fmt_ratio(r.get("c_steady_tok_s"), r["py_loop_tok_s"])])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(f"{len(docs)} documents, {corpus_bytes / 1e6:.2f} MB UTF-8; tokens/s, single thread, "
          f"best of {args.repeat}; tokenizers {tokenizers.__version__}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    for r in results:
        if "error" in r["c"]:
            print(f"C {r['tokenizer']}: {r['c']['error']}")
        elif "warning" in r["c"]:
            print(f"C {r['tokenizer']}: {r['c']['warning']}")

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    report = {
        "documents": len(docs), "corpus_bytes": corpus_bytes, "repeat": args.repeat,
        "tokenizers_version": tokenizers.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "cpu_count": os.cpu_count(), "c_line_format": args.c_line,
        "results": results,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"saved {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
