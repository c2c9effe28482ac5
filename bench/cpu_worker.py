#!/usr/bin/env python3
"""One peer engine in its own process, for bench/run_cpu.py.

    python3 bench/cpu_worker.py --engine torch|onnxruntime|ctranslate2 \\
        --model DIR --converted DIR --threads N --workloads FILE --out FILE

Runs the workloads of FILE (see run_cpu.py) and writes, like bench_engine.c,
every run's wall time, the first sequence's embedding, load time and peak RSS
(VmHWM) as JSON to --out. A workload either has "seqs" (token ids: one run
is one padded batch of all of them, as a user batching pre-tokenized inputs
would send it) or "texts" (one run is the whole list through the engine's
usual user path: tokenization, length-sorted batches of "batch_size", padded
to the longest in each batch).

    python3 bench/cpu_worker.py --engine ... --workloads FILE --serve

keeps the engine loaded for the harness to interleave engines run by run,
with the protocol of bench_engine.c --serve: a {"ready", "load_s", ...} line
after loading, then one record line per workload name read from stdin (its
warmup only the first time), and {"peak_rss_kb"} after "quit" or end of
input. Anything the libraries print goes to stderr, not into the protocol.

Each engine computes mean-pooled sentence embeddings:
  torch        sentence-transformers (its own Transformer + Pooling modules)
  onnxruntime  the checkpoint exported with pooling to ONNX (cpu_convert.py),
               graph optimisations at ORT_ENABLE_ALL
  ctranslate2  the checkpoint converted by ctranslate2's converter; its
               Encoder returns hidden states, pooled here with numpy
The thread count is set through each library's own knob; the harness also
sets OMP_NUM_THREADS (and OMP_WAIT_POLICY=PASSIVE for torch).
Nothing from a library that another engine uses is imported, so peak RSS is
each engine's own.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def peak_rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def pad_batch(seqs, pad_id):
    n, width = len(seqs), max(len(s) for s in seqs)
    ids = np.full((n, width), pad_id, dtype=np.int64)
    mask = np.zeros((n, width), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return ids, mask


def mean_pool(hidden, lengths):
    out = np.empty((hidden.shape[0], hidden.shape[2]), dtype=np.float32)
    for i, n in enumerate(lengths):
        out[i] = hidden[i, :n].mean(axis=0)
    return out


def max_seq_length(model_dir, default=512):
    try:
        with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
            return int(json.load(f).get("max_seq_length") or default)
    except (OSError, ValueError):
        return default


def load_tokenizer(model_dir, pad):
    """The checkpoint's tokenizer.json through the `tokenizers` library (what
    optimum and ctranslate2 users call), truncating like sentence-transformers."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(max_seq_length(model_dir))
    if pad:
        tok.enable_padding()
    else:
        tok.no_padding()
    return tok


def sorted_batches(texts, batch_size):
    """Length-sorted batches, like SentenceTransformer.encode (longest first)."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


class TorchEngine:
    def __init__(self, model_dir, converted, threads):
        import torch
        torch.set_num_threads(threads)
        from sentence_transformers import SentenceTransformer
        self.torch = torch
        self.model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
        self.model.eval()
        self.pad_id = self.model.tokenizer.pad_token_id or 0

    def embed_ids(self, seqs):
        ids, mask = pad_batch(seqs, self.pad_id)
        t = self.torch
        feats = {"input_ids": t.from_numpy(ids), "attention_mask": t.from_numpy(mask),
                 "token_type_ids": t.zeros_like(t.from_numpy(ids))}
        with t.inference_mode():
            return self.model.forward(feats)["sentence_embedding"].numpy()

    def embed_texts(self, texts, batch_size):
        return self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)


class OrtEngine:
    def __init__(self, model_dir, converted, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
            # The harness's --passive: the pool's idle threads sleep.
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(os.path.join(converted, "onnx", "model.onnx"), so,
                                         providers=["CPUExecutionProvider"])
        self.names = {i.name for i in self.sess.get_inputs()}
        self.model_dir, self.tok = model_dir, None

    def _run(self, ids, mask):
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self.sess.run(None, feeds)[0]

    def embed_ids(self, seqs):
        return self._run(*pad_batch(seqs, 0))

    def embed_texts(self, texts, batch_size):
        if self.tok is None:
            self.tok = load_tokenizer(self.model_dir, pad=True)
        out = [None] * len(texts)
        for idx in sorted_batches(texts, batch_size):
            encs = self.tok.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            for i, v in zip(idx, self._run(ids, mask)):
                out[i] = v
        return np.stack(out)


class Ct2Engine:
    def __init__(self, model_dir, converted, threads):
        import ctranslate2
        self.enc = ctranslate2.Encoder(os.path.join(converted, "ct2"), device="cpu", compute_type="float32",
                                       intra_threads=threads, inter_threads=1)
        self.model_dir, self.tok = model_dir, None

    def embed_ids(self, seqs):
        out = self.enc.forward_batch([list(map(int, s)) for s in seqs])
        return mean_pool(np.array(out.last_hidden_state), [len(s) for s in seqs])

    def embed_texts(self, texts, batch_size):
        if self.tok is None:
            self.tok = load_tokenizer(self.model_dir, pad=False)
        out = [None] * len(texts)
        for idx in sorted_batches(texts, batch_size):
            encs = self.tok.encode_batch([texts[i] for i in idx])
            for i, v in zip(idx, self.embed_ids([e.ids for e in encs])):
                out[i] = v
        return np.stack(out)


ENGINES = {"torch": TorchEngine, "onnxruntime": OrtEngine, "ctranslate2": Ct2Engine}


def run_workload(engine, w, warmup=True):
    if "texts" in w:
        call = lambda: engine.embed_texts(w["texts"], w.get("batch_size", 32))  # noqa: E731
    else:
        call = lambda: engine.embed_ids(w["seqs"])  # noqa: E731
    for _ in range(w.get("warmup", 1) if warmup else 0):
        call()
    times, first = [], None
    start = time.perf_counter()
    for r in range(max(w.get("max_runs", 10), w.get("min_runs", 3))):
        if r >= w.get("min_runs", 3) and time.perf_counter() - start >= w.get("max_seconds", 10.0):
            break
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
        if first is None:
            first = np.asarray(out[0], dtype=np.float64).tolist()
    rec = {"times_s": times, "first_embedding": first}
    rec["sequences"] = len(w["texts"]) if "texts" in w else len(w["seqs"])
    if "seqs" in w:
        rec["tokens"] = sum(len(s) for s in w["seqs"])
    return rec


def serve(engine, workloads, ready, proto):
    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()
    send(dict(ready, ready=True))
    warmed = set()
    for line in sys.stdin:
        name = line.strip()
        if name == "quit":
            break
        if name not in workloads:
            print(f"cpu_worker: no workload named {name!r}", file=sys.stderr)
            return 1
        send(dict(run_workload(engine, workloads[name], name not in warmed), name=name))
        warmed.add(name)
    send({"peak_rss_kb": peak_rss_kb()})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, choices=sorted(ENGINES))
    ap.add_argument("--model", required=True)
    ap.add_argument("--converted", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--out", help="where the JSON goes (without --serve)")
    ap.add_argument("--serve", action="store_true", help="take workload names on stdin (see above)")
    args = ap.parse_args()
    if not args.serve and not args.out:
        ap.error("--out is needed without --serve")
    proto = None
    if args.serve:
        proto = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    with open(args.workloads) as f:
        spec = json.load(f)
    t0 = time.perf_counter()
    engine = ENGINES[args.engine](args.model, args.converted, args.threads)
    result = {"engine": args.engine, "threads": args.threads, "load_s": time.perf_counter() - t0,
              "rss_after_load_kb": peak_rss_kb(), "workloads": {}}
    if proto:
        return serve(engine, {w["name"]: w for w in spec["workloads"]}, result, proto)
    for w in spec["workloads"]:
        result["workloads"][w["name"]] = run_workload(engine, w)
    result["peak_rss_kb"] = peak_rss_kb()
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    sys.exit(main())
