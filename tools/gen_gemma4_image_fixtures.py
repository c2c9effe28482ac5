#!/usr/bin/env python3
"""Gemma4 image preprocessing expectations for
tests/golden/test_gemma4_image.c.

Runs transformers' Gemma4ImageProcessorPil (the slow, PIL path) over every
image of tests/fixtures/images (made by tools/gen_image_fixtures.py) under
a few processor configs (configs/gemma4_*/preprocessor_config.json), one
image at a time as Gemma4Processor calls it. Writes
tests/fixtures/images/gemma4_expected.json with, per image and config: the
resized size, num_soft_tokens_per_image, the number of real (unpadded)
patch rows and the checks that the rest are padding (position -1, zeros)
and that the real rows' positions are (x, y) in raster order, the sha256
of the real pixel_values rows [n, p * p * 3] (float32 little-endian), sum,
min, max and sampled values; or the processor's error.

Needs Pillow and transformers with vision: `.cache/image-venv/bin/python
tools/gen_gemma4_image_fixtures.py` (the venv `make image-fixtures` makes).
"""
import hashlib
import io
import json
import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "images")

CONFIGS = {
    # The Gemma 4 checkpoints' files: patch 16, 280 soft tokens, pooling 3, no normalisation.
    "gemma4_default": {
        "do_convert_rgb": True, "do_normalize": False, "do_rescale": True, "do_resize": True,
        "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0], "image_processor_type": "Gemma4ImageProcessor",
        "image_seq_length": 280, "max_soft_tokens": 280, "patch_size": 16, "pooling_kernel_size": 3,
        "processor_class": "Gemma4Processor", "resample": 3, "rescale_factor": 0.00392156862745098},
    # The smallest budget, so that every picture is resized and thin ones hit the 0-side rule.
    "gemma4_small": {"image_processor_type": "Gemma4ImageProcessor", "max_soft_tokens": 70, "patch_size": 16},
    # Other switches: patch 14, pooling 2, bilinear, normalisation on.
    "gemma4_k2_bilinear": {
        "image_processor_type": "Gemma4ImageProcessorPil", "max_soft_tokens": 140, "patch_size": 14,
        "pooling_kernel_size": 2, "resample": 2, "do_normalize": True, "image_mean": [0.5, 0.4, 0.3],
        "image_std": [0.5, 0.6, 0.7]},
}
IGNORED = ("processor_class", "image_processor_type", "image_seq_length")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def processor(pre):
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    return Gemma4ImageProcessorPil(**{k: v for k, v in pre.items() if k not in IGNORED})


def expect(proc, data, rng):
    im = Image.open(io.BytesIO(data))
    try:
        out = proc(images=im, return_tensors="np")
    except Exception as ex:  # the processor's refusal (a 0 x 0 resize, ...)
        return {"error": f"{type(ex).__name__}: {ex}"[:200]}
    pv = np.asarray(out["pixel_values"][0], dtype=np.float32)
    pos = np.asarray(out["image_position_ids"][0])
    n_soft = int(out["num_soft_tokens_per_image"][0])
    real = int((pos[:, 0] >= 0).sum())
    p = proc.patch_size
    # The real rows come first, then padding (position -1, zero pixels).
    assert (pos[:real] >= 0).all() and (pos[real:] == -1).all() and not pv[real:].any()
    gw = int(pos[:real, 0].max()) + 1
    gh = real // gw
    assert gw * gh == real
    want = np.stack(np.meshgrid(np.arange(gw), np.arange(gh), indexing="xy"), -1).reshape(real, 2)
    assert (pos[:real] == want).all()
    rows = np.ascontiguousarray(pv[:real])
    flat = rows.reshape(-1)
    idx = sorted(set(int(i) for i in rng.integers(0, flat.size, 16)) | {0, flat.size - 1})
    return {"image_size": [gh * p, gw * p], "soft_tokens": n_soft, "patches": real, "padded_to": int(pv.shape[0]),
            "pv_sha256": sha(rows.astype("<f4").tobytes()), "sum": float(rows.astype(np.float64).sum()),
            "min": float(rows.min()), "max": float(rows.max()),
            "samples": [[i, float(flat[i])] for i in idx]}


def main():
    # known_difference: PIL's 16-bit gray tRNS defect (docs/images.md); the
    # flattening over white differs there, so pixel_values are not compared.
    known = {e["file"]: e.get("known_difference") for e in json.load(open(os.path.join(OUT, "expected.json")))["images"]}
    rng = np.random.default_rng(21)
    procs = {}
    for name, pre in CONFIGS.items():
        d = os.path.join(OUT, "configs", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(pre, f, indent=2)
            f.write("\n")
        procs[name] = processor(pre)
    images = []
    for fname in known:
        data = open(os.path.join(OUT, fname), "rb").read()
        e = {"file": fname, "preprocess": {n: expect(p, data, rng) for n, p in procs.items()}}
        if known[fname]:
            e["known_difference"] = known[fname]
        images.append(e)
        print(fname, {n: v.get("image_size", v.get("error", "")[:40]) for n, v in e["preprocess"].items()})
    with open(os.path.join(OUT, "gemma4_expected.json"), "w") as f:
        json.dump({"generator": "tools/gen_gemma4_image_fixtures.py", "pillow": Image.__version__,
                   "transformers": __import__("transformers").__version__, "images": images}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
