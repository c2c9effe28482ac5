#!/usr/bin/env python3
"""Pixtral / Mistral3 image preprocessing expectations for
tests/golden/test_pixtral_image.c.

Runs transformers' PixtralImageProcessorPil (the slow, PIL path) over every
image of tests/fixtures/images (made by tools/gen_image_fixtures.py) under
a few processor configs (configs/pixtral_*/: preprocessor_config.json and
processor_config.json as a Mistral3 checkpoint ships them), the way
PixtralProcessor calls it: patch_size = patch_size * spatial_merge_size,
one image at a time (so no batch padding). Writes
tests/fixtures/images/pixtral_expected.json with, per image and config:
image_sizes (the resized height and width), the sha256 of pixel_values
[3, H, W] (float32 little-endian), sum, min, max, sampled values, and the
image token layout PixtralProcessor.replace_image_token inserts (rows,
columns and the sha256 of the token strings joined), or the processor's
error.

Needs Pillow and transformers with vision: `.cache/image-venv/bin/python
tools/gen_pixtral_image_fixtures.py` (the venv `make image-fixtures` makes).
"""
import hashlib
import io
import json
import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "images")

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
CONFIGS = {
    # Mistral-Small-3.1 / Ministral 3's files (patch 14, merge 2, 1540).
    "pixtral_mistral3": (
        {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
         "image_mean": CLIP_MEAN, "image_std": CLIP_STD, "image_processor_type": "PixtralImageProcessorFast",
         "patch_size": 14, "processor_class": "PixtralProcessor", "resample": 3,
         "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 1540}},
        {"image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]", "image_token": "[IMG]",
         "patch_size": 14, "processor_class": "PixtralProcessor", "spatial_merge_size": 2},
    ),
    # Pixtral-12B's (patch 16, no merge, 1024).
    "pixtral_12b": (
        {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
         "image_mean": CLIP_MEAN, "image_std": CLIP_STD, "image_processor_type": "PixtralImageProcessor",
         "patch_size": {"height": 16, "width": 16}, "resample": 3, "rescale_factor": 0.00392156862745098,
         "size": {"longest_edge": 1024}},
        {"patch_size": 16, "processor_class": "PixtralProcessor", "spatial_merge_size": 1},
    ),
    # A small longest edge, so that nearly every picture is shrunk.
    "pixtral_small": (
        {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
         "image_processor_type": "PixtralImageProcessor", "patch_size": 14, "size": {"longest_edge": 150}},
        {"patch_size": 14, "spatial_merge_size": 2},
    ),
}
IGNORED = ("processor_class", "image_processor_type")


def sha(b):
    return hashlib.sha256(b).hexdigest()


def processor(pre):
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    return PixtralImageProcessorPil(**{k: v for k, v in pre.items() if k not in IGNORED})


def layout(h, w, patch, merge):
    """PixtralProcessor.replace_image_token (processing_pixtral.py), line for
    line: that module imports torchvision at the top, which the reference
    venv lacks, so its few lines are restated here."""
    patch_size = patch * merge
    num_height_tokens, num_width_tokens = h // patch_size, w // patch_size
    replace_tokens = [["[IMG]"] * num_width_tokens + ["[IMG_BREAK]"]] * num_height_tokens
    replace_tokens = [item for sublist in replace_tokens for item in sublist]
    replace_tokens[-1] = "[IMG_END]"
    return "".join(replace_tokens)


def expect(proc, data, patch, merge, rng):
    im = Image.open(io.BytesIO(data))
    try:
        out = proc(images=im, patch_size=patch * merge, return_tensors="np")
    except Exception as ex:  # the processor's refusal (a zero-sized resize, ...)
        return {"error": f"{type(ex).__name__}: {ex}"[:200]}
    pv = np.ascontiguousarray(out["pixel_values"][0], dtype=np.float32)
    h, w = (int(v) for v in out["image_sizes"][0])
    assert pv.shape == (3, h, w), (pv.shape, h, w)
    text = layout(h, w, patch, merge)
    flat = pv.reshape(-1)
    idx = sorted(set(int(i) for i in rng.integers(0, flat.size, 16)) | {0, flat.size - 1})
    return {"image_size": [h, w], "rows": h // (patch * merge), "cols": w // (patch * merge),
            "layout_sha256": sha(text.encode()), "layout_tokens": text.count("[IMG]"),
            "pv_sha256": sha(pv.astype("<f4").tobytes()), "sum": float(pv.astype(np.float64).sum()),
            "min": float(pv.min()), "max": float(pv.max()),
            "samples": [[i, float(flat[i])] for i in idx]}


def main():
    # known_difference: PIL's 16-bit gray tRNS defect (docs/images.md); the
    # flattening over white differs there, so pixel_values are not compared.
    known = {e["file"]: e.get("known_difference") for e in json.load(open(os.path.join(OUT, "expected.json")))["images"]}
    files = list(known)
    rng = np.random.default_rng(21)
    procs = {}
    for name, (pre, proc_cfg) in CONFIGS.items():
        d = os.path.join(OUT, "configs", name)
        os.makedirs(d, exist_ok=True)
        for fname, obj in (("preprocessor_config.json", pre), ("processor_config.json", proc_cfg)):
            with open(os.path.join(d, fname), "w") as f:
                json.dump(obj, f, indent=2)
                f.write("\n")
        procs[name] = (processor(pre), proc_cfg["patch_size"], proc_cfg.get("spatial_merge_size", 1))
    images = []
    for fname in files:
        data = open(os.path.join(OUT, fname), "rb").read()
        e = {"file": fname, "preprocess": {n: expect(p, data, ps, m, rng) for n, (p, ps, m) in procs.items()}}
        if known[fname]:
            e["known_difference"] = known[fname]
        images.append(e)
        print(fname, {n: v.get("image_size", v.get("error", "")[:40]) for n, v in e["preprocess"].items()})
    with open(os.path.join(OUT, "pixtral_expected.json"), "w") as f:
        json.dump({"generator": "tools/gen_pixtral_image_fixtures.py", "pillow": Image.__version__,
                   "transformers": __import__("transformers").__version__, "images": images}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
