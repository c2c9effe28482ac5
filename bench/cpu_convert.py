#!/usr/bin/env python3
"""Converts a checkpoint for the peers that need their own format, once.

    python3 bench/cpu_convert.py --model DIR --out DIR [--onnx] [--ct2]

  --onnx  OUT/onnx/model.onnx: the transformer plus mean pooling exported with
          torch.onnx.export (TorchScript exporter, opset 17, dynamic batch and
          sequence axes), inputs input_ids, attention_mask[, token_type_ids],
          output sentence_embedding. This is the graph optimum's
          feature-extraction export produces plus the pooling users add.
  --ct2   OUT/ct2/: ctranslate2's Transformers converter, float32.

Each output is checked against sentence-transformers on a padded batch
before it is kept (max |diff| printed, and written to OUT/check.json).
Conversion runs in this separate process so that the harness itself never
imports torch. A stamp (the source's model.safetensors size and mtime)
makes reruns free until the checkpoint changes.
"""
import argparse
import json
import logging
import os
import shutil
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOLERANCE = 1e-3  # FP32 engines on random weights agree to ~1e-5; this only catches a broken export


def stamp_of(model_dir):
    st = os.stat(os.path.join(model_dir, "model.safetensors"))
    return f"{os.path.abspath(model_dir)}:{st.st_size}:{int(st.st_mtime)}"


def is_fresh(out, part, stamp):
    try:
        with open(os.path.join(out, part, "stamp")) as f:
            return f.read() == stamp
    except OSError:
        return False


def quiet():
    warnings.filterwarnings("ignore")
    for name in ("transformers", "sentence_transformers", "torch.onnx"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def sample_batch(vocab_size, pad_id):
    """Three sequences of different lengths, padded: exercises the mask."""
    import torch
    g = torch.Generator().manual_seed(0)
    lengths = [37, 12, 5]
    ids = torch.full((3, max(lengths)), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1000, min(vocab_size, 20000), (n,), generator=g)
        mask[i, :n] = 1
    return ids, mask, lengths


def reference(model_dir, ids, mask):
    import torch
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    st.eval()
    # The exported graph stops at mean pooling; drop a Normalize module, if
    # any, from the reference so both compute the same thing.
    modules = [m for m in st if type(m).__name__ != "Normalize"]
    feats = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    with torch.inference_mode():
        for m in modules:
            feats = m(feats)
    return feats["sentence_embedding"].numpy()


def export_onnx(model_dir, dest, ids, mask, expected):
    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        """Transformer + attention-mask mean pooling, as one graph."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.model(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
            w = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * w).sum(1) / w.sum(1).clamp(min=1e-9)

    # Eager attention traces to plain ops every ONNX runtime knows; ORT then
    # fuses them itself (ORT_ENABLE_ALL).
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", local_files_only=True).eval()
    os.makedirs(dest, exist_ok=True)
    path = os.path.join(dest, "model.onnx")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["sentence_embedding"] = {0: "batch"}
    # Trace with a padded batch: with an all-ones mask transformers skips
    # building the attention mask and the trace would drop it.
    with torch.no_grad():
        torch.onnx.export(MeanPooled(model), (ids, mask, torch.zeros_like(ids)), path, input_names=names,
                          output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": np.zeros_like(ids.numpy())}
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}}
    got = sess.run(None, feeds)[0]
    return float(np.abs(got - expected).max())


def convert_ct2(model_dir, dest, ids, lengths, expected):
    import ctranslate2
    import numpy as np
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        # transformers 5 dropped BertConfig.position_embedding_type (always
        # absolute now); the converter still asserts on it.
        def load_model(self, model_class, model_name_or_path, **kwargs):
            m = super().load_model(model_class, model_name_or_path, **kwargs)
            if not hasattr(m.config, "position_embedding_type"):
                m.config.position_embedding_type = "absolute"
            return m

    Converter(model_dir).convert(dest, quantization="float32", force=True)
    enc = ctranslate2.Encoder(dest, device="cpu", compute_type="float32", intra_threads=1)
    seqs = [ids[i, :n].tolist() for i, n in enumerate(lengths)]
    hidden = np.array(enc.forward_batch(seqs).last_hidden_state)
    got = np.stack([hidden[i, :n].mean(0) for i, n in enumerate(lengths)])
    return float(np.abs(got - expected).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--onnx", action="store_true")
    ap.add_argument("--ct2", action="store_true")
    args = ap.parse_args()
    stamp = stamp_of(args.model)
    todo = [p for p, on in (("onnx", args.onnx), ("ct2", args.ct2)) if on and not is_fresh(args.out, p, stamp)]
    if not todo:
        return 0
    quiet()
    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    ids, mask, lengths = sample_batch(cfg["vocab_size"], cfg.get("pad_token_id") or 0)
    expected = reference(args.model, ids, mask)
    check_path = os.path.join(args.out, "check.json")
    check = {}
    if os.path.exists(check_path):
        with open(check_path) as f:
            check = json.load(f)
    failed = 0
    for part in todo:
        dest = os.path.join(args.out, part)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            diff = (export_onnx(args.model, dest, ids, mask, expected) if part == "onnx"
                    else convert_ct2(args.model, dest, ids, lengths, expected))
        except Exception as e:  # a peer that cannot convert this checkpoint is reported, not fatal
            print(f"{part}: conversion of {args.model} failed: {type(e).__name__}: {e}", file=sys.stderr)
            shutil.rmtree(dest, ignore_errors=True)
            failed = 1
            continue
        check[part] = diff
        if diff > TOLERANCE:
            print(f"{part}: output differs from sentence-transformers by {diff:.2e} (> {TOLERANCE}); not kept",
                  file=sys.stderr)
            shutil.rmtree(dest, ignore_errors=True)
            failed = 1
            continue
        with open(os.path.join(dest, "stamp"), "w") as f:
            f.write(stamp)
        print(f"{part}: {dest} (max |diff| vs sentence-transformers {diff:.1e})", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(check_path, "w") as f:
        json.dump(check, f)
    return failed


if __name__ == "__main__":
    sys.exit(main())
