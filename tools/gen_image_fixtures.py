#!/usr/bin/env python3
"""Image fixtures for src/image (tests/golden/test_image_fixtures.c).

Writes tests/fixtures/images/: real images of many formats and odd sizes
(scikit-image's bundled sample pictures re-encoded, Debian's pixmaps, and
images made here with Pillow or written byte by byte where Pillow cannot
make them), and expected.json with, per image:
  - what PIL's Image.open(f).convert("RGB") gives (size, sha256 of the RGB
    bytes, the bytes themselves for tiny images) and, when PIL sees
    transparency, the sha256 of convert("RGBA")'s alpha band;
  - per processor config (configs/*.json, a Qwen3-VL-like and a
    Qwen2-VL-like preprocessor_config.json): what transformers'
    Qwen2VLImageProcessorPil (the slow, PIL path) gives: image_grid_thw,
    the image token count, sha256 of pixel_values (float32 little-endian),
    their sum, min, max, and 64 sampled (index, value) pairs; or the
    processor's error.

Needs Pillow 13.0, scikit-image, numpy and transformers: `make
image-fixtures` makes .cache/image-venv (with the system's transformers)
and runs this script.

--compare BIN: instead, runs `BIN preprocess-image --dump` on every
fixture and prints the largest |pixel_values - transformers| per config.
"""
import argparse
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "images")

CONFIGS = {
    # Qwen3-VL-2B-Instruct's preprocessor_config.json, verbatim.
    "qwen3vl": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    # Qwen2-VL's keys (min_pixels/max_pixels, CLIP mean/std), with a
    # max_pixels small enough that most pictures are shrunk.
    "qwen2vl": {
        "min_pixels": 3136,
        "max_pixels": 200704,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2VLProcessor",
    },
}


def skdata(name):
    import skimage

    return Image.open(os.path.join(os.path.dirname(skimage.__file__), "data", name))


# ---- byte-level writers for what Pillow cannot save -------------------------


def png_bytes(w, h, depth, ctype, rows, plte=None, trns=None, interlace=0):
    """rows: list of bytes, already packed at the bit depth (filter 0 added here)."""

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
    if plte is not None:
        out += chunk(b"PLTE", bytes(plte))
    if trns is not None:
        out += chunk(b"tRNS", bytes(trns))
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def pack_bits(vals, depth):
    out, acc, n = bytearray(), 0, 0
    for v in vals:
        acc = acc << depth | v
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def gif_lzw(indices, min_code=8):
    """A valid (if large) LZW stream: a clear code every 254 literals keeps the
    code width at min_code+1 bits."""
    clear, eoi, width = 1 << min_code, (1 << min_code) + 1, min_code + 1
    codes = [clear]
    for i, v in enumerate(indices):
        if i and i % 254 == 0:
            codes.append(clear)
        codes.append(v)
    codes.append(eoi)
    bits, nbits, data = 0, 0, bytearray()
    for c in codes:
        bits |= c << nbits
        nbits += width
        while nbits >= 8:
            data.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        data.append(bits & 0xFF)
    blocks = bytearray([min_code])
    for i in range(0, len(data), 255):
        blk = data[i : i + 255]
        blocks += bytes([len(blk)]) + blk
    return bytes(blocks) + b"\0"


def gif_partial_frame():
    """40x30 screen, 256-colour global palette, a transparent index 7, the
    first frame 17x11 at (9, 5), interlaced: PIL fills the rest with index 7."""
    sw, sh, fw, fh = 40, 30, 17, 11
    pal = b"".join(bytes(((i * 37) % 256, (i * 91) % 256, 255 - i)) for i in range(256))
    out = b"GIF89a" + struct.pack("<HHBBB", sw, sh, 0xF7, 3, 0) + pal
    out += b"\x21\xF9\x04\x01\x00\x00\x07\x00"  # GCE: transparent index 7
    rows = [[(x * 13 + y * 29) % 256 for x in range(fw)] for y in range(fh)]
    rows[2][3] = 7
    order = [y for start, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for y in range(start, fh, step)]
    idx = [v for y in order for v in rows[y]]
    out += b"\x2C" + struct.pack("<HHHHB", 9, 5, fw, fh, 0x40) + gif_lzw(idx)
    return out + b"\x3B"


def ycck_jpeg(cmyk, quality):
    """A YCCK JPEG through tools/ycck_jpeg.c (built here with cc -ljpeg)."""
    exe = os.path.join(tempfile.gettempdir(), "iv_ycck_jpeg")
    subprocess.run(["cc", "-O1", os.path.join(ROOT, "tools", "ycck_jpeg.c"), "-ljpeg", "-o", exe], check=True)
    # Pillow's CMYK JPEGs hold inverted samples (Adobe); write the same.
    inv = bytes(255 - b for b in cmyk.tobytes())
    w, h = cmyk.size
    return subprocess.run([exe, str(w), str(h), str(quality)], input=inv, stdout=subprocess.PIPE, check=True).stdout


# ---- the images --------------------------------------------------------------


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def make_images():
    imgs = {}
    astro = skdata("astronaut.png").convert("RGB")
    chelsea = skdata("chelsea.png").convert("RGB")
    coffee = skdata("coffee.png").convert("RGB")
    camera = skdata("camera.png")
    coins = skdata("coins.png")
    moon = skdata("moon.png")
    logo = skdata("logo.png")
    ihc = skdata("ihc.png").convert("RGB")
    color = skdata("color.png").convert("RGB")
    moto = skdata("motorcycle_left.png").convert("RGB")

    def raw(name):
        import skimage

        with open(os.path.join(os.path.dirname(skimage.__file__), "data", name), "rb") as f:
            return f.read()

    # Files as shipped.
    imgs["rocket.jpg"] = raw("rocket.jpg")
    imgs["retina.jpg"] = raw("retina.jpg")
    imgs["no_time_for_that_tiny.gif"] = raw("no_time_for_that_tiny.gif")  # animated: first frame
    imgs["horse_rgba.png"] = raw("horse.png")
    imgs["phantom.png"] = raw("phantom.png")
    imgs["chessboard_gray.png"] = raw("chessboard_GRAY.png")
    imgs["microaneurysms.png"] = raw("microaneurysms.png")
    for name in ("debian-logo.png", "chromium.png"):
        p = os.path.join("/usr/share/pixmaps", name)
        if os.path.exists(p):
            imgs["debian_" + name] = open(p, "rb").read()

    # JPEG: subsamplings, progressive, grayscale, CMYK, restart markers, EXIF orientation.
    imgs["astronaut_420_q90.jpg"] = save(astro.resize((333, 333)), "JPEG", quality=90)
    imgs["astronaut_444_crop.jpg"] = save(astro.crop((100, 50, 357, 249)), "JPEG", quality=92, subsampling=0)
    imgs["astronaut_422_crop.jpg"] = save(astro.crop((7, 3, 220, 180)), "JPEG", quality=80, subsampling=1)
    imgs["coffee_progressive.jpg"] = save(coffee.resize((301, 201)), "JPEG", quality=85, progressive=True)
    imgs["chelsea_q40_optimized.jpg"] = save(chelsea, "JPEG", quality=40, optimize=True)
    imgs["camera_gray.jpg"] = save(camera.resize((301, 257)), "JPEG", quality=88)
    imgs["chelsea_cmyk.jpg"] = save(chelsea.resize((151, 101)).convert("CMYK"), "JPEG", quality=90)
    imgs["chelsea_ycck.jpg"] = ycck_jpeg(chelsea.resize((123, 82)).convert("CMYK"), 88)
    imgs["moto_restart.jpg"] = save(moto.resize((247, 167)), "JPEG", quality=75, restart_marker_blocks=3)
    ex = Image.Exif()
    ex[0x0112] = 6  # rotate 90 CW on display: PIL's open ignores it, so do we
    imgs["chelsea_exif_orient6.jpg"] = save(chelsea.resize((97, 64)), "JPEG", quality=90, exif=ex.tobytes())
    imgs["tall_5x900.jpg"] = save(coffee.resize((5, 900)), "JPEG", quality=90)
    imgs["pixel_1x1.jpg"] = save(Image.new("RGB", (1, 1), (200, 30, 90)), "JPEG")
    imgs["hubble_crop.jpg"] = save(skdata("hubble_deep_field.jpg").crop((300, 300, 557, 500)), "JPEG", quality=95)

    # PNG: every colour type and depth Pillow writes.
    imgs["coins_gray.png"] = save(coins.crop((20, 20, 171, 212)), "PNG")
    imgs["moon_la.png"] = save(Image.merge("LA", (moon.resize((97, 83)), moon.resize((97, 83)).point(lambda v: 255 - v))), "PNG")
    imgs["logo_rgba.png"] = save(logo.resize((125, 125)), "PNG")
    pal = chelsea.resize((113, 75)).quantize(64)
    imgs["chelsea_p64.png"] = save(pal, "PNG")
    pt = chelsea.resize((90, 60)).quantize(32)
    pt.info["transparency"] = 5
    imgs["chelsea_p_trns1.png"] = save(pt, "PNG", transparency=5)
    pa = chelsea.resize((71, 47)).quantize(16)
    imgs["chelsea_p_trns_many.png"] = save(pa, "PNG", transparency=bytes([0, 64, 128, 200, 255, 10]))
    imgs["chelsea_p4bit.png"] = save(chelsea.resize((61, 41)).quantize(16), "PNG", bits=4)
    rgb_small = np.asarray(ihc.resize((64, 48)))
    imgs["ihc_rgb_trns.png"] = save(Image.fromarray(rgb_small), "PNG", transparency=tuple(int(v) for v in rgb_small[3, 5]))
    gsmall = camera.resize((53, 67))
    imgs["camera_l_trns.png"] = save(gsmall, "PNG", transparency=int(np.asarray(gsmall)[10, 10]))
    imgs["horse_1bit.png"] = save(skdata("horse.png").convert("L").point(lambda v: 255 if v > 127 else 0).convert("1"), "PNG")
    cam16 = (np.asarray(camera.resize((131, 97))).astype(np.uint16) * 257)
    imgs["camera_16bit.png"] = save(Image.fromarray(cam16), "PNG")
    low16 = (np.arange(29 * 17, dtype=np.uint16).reshape(17, 29) * 3 % 400).astype(np.uint16)
    imgs["low_16bit_gray.png"] = save(Image.fromarray(low16), "PNG")
    imgs["low_16bit_gray_trns.png"] = save(Image.fromarray(low16), "PNG", transparency=int(low16[3, 4]))
    imgs["wide_1000x7.png"] = save(astro.resize((1000, 7)), "PNG")
    imgs["wide_400x2_ratio200.png"] = save(coffee.resize((400, 2)), "PNG")
    imgs["wide_603x3_ratio201.png"] = save(coffee.resize((603, 3)), "PNG")
    imgs["pixel_1x1.png"] = save(Image.new("RGB", (1, 1), (1, 2, 250)), "PNG")
    imgs["pixel_1x1_rgba.png"] = save(Image.new("RGBA", (1, 1), (10, 200, 30, 77)), "PNG")
    imgs["small_27x13_rgba_half.png"] = save(Image.fromarray(np.dstack([np.asarray(ihc.resize((27, 13))), np.tile(np.arange(27, dtype=np.uint8) * 9, (13, 1))])), "PNG")

    # PNG written byte by byte: 2/4-bit gray (one with tRNS), 16-bit RGB,
    # RGBA and gray+alpha, 16-bit RGB with tRNS, Adam7 interlacing, a
    # palette shorter than the indices used.
    w, h = 37, 23
    g2 = [[(x + y) % 4 for x in range(w)] for y in range(h)]
    imgs["gray_2bit.png"] = png_bytes(w, h, 2, 0, [pack_bits(r, 2) for r in g2])
    g4 = [[(x * 3 + y) % 16 for x in range(w)] for y in range(h)]
    imgs["gray_4bit_trns.png"] = png_bytes(w, h, 4, 0, [pack_bits(r, 4) for r in g4], trns=struct.pack(">H", 5))
    a16 = np.asarray(astro.resize((w, h))).astype(np.uint16) * 257 + np.arange(w, dtype=np.uint16)[None, :, None]
    imgs["astro_rgb16.png"] = png_bytes(w, h, 16, 2, [a16[y].astype(">u2").tobytes() for y in range(h)])
    imgs["astro_rgb16_trns.png"] = png_bytes(w, h, 16, 2, [a16[y].astype(">u2").tobytes() for y in range(h)],
                                             trns=struct.pack(">HHH", *[int(v) for v in a16[4, 4]]))
    alpha16 = (np.arange(w * h, dtype=np.uint32).reshape(h, w) * 977 % 65536).astype(np.uint16)
    rgba16 = np.dstack([a16, alpha16[..., None]])
    imgs["astro_rgba16.png"] = png_bytes(w, h, 16, 6, [rgba16[y].astype(">u2").tobytes() for y in range(h)])
    ga16 = np.dstack([a16[..., 1], alpha16])
    imgs["gray_alpha16.png"] = png_bytes(w, h, 16, 4, [ga16[y].astype(">u2").tobytes() for y in range(h)])
    # Adam7 with one row/col of each pass: PNG filter 0 per sub-image row.
    iw, ih = 19, 11
    src = np.asarray(color.resize((iw, ih)))
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw_rows = b""
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, iw, dx), range(y0, ih, dy)
        if len(xs) == 0 or len(ys) == 0:
            continue
        for y in ys:
            raw_rows += b"\0" + bytes(src[y, list(xs)].reshape(-1))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    imgs["color_interlaced.png"] = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", iw, ih, 8, 2, 0, 0, 1))
                                    + chunk(b"IDAT", zlib.compress(raw_rows)) + chunk(b"IEND", b""))
    imgs["palette_short.png"] = png_bytes(9, 5, 8, 3, [bytes((x * 7 + y * 3) % 12 for x in range(9)) for y in range(5)],
                                          plte=[c for i in range(6) for c in (i * 40, 255 - i * 40, 100)])

    # WebP: lossy, lossless, lossy with alpha, animated.
    imgs["ihc_lossy.webp"] = save(ihc.resize((211, 163)), "WEBP", quality=80)
    imgs["coffee_lossless.webp"] = save(coffee.resize((150, 100)), "WEBP", lossless=True)
    imgs["logo_lossy_alpha.webp"] = save(logo.resize((149, 149)), "WEBP", quality=70)
    imgs["logo_lossless_alpha.webp"] = save(logo.resize((75, 75)), "WEBP", lossless=True)
    imgs["page_gray_lossy.webp"] = save(skdata("page.png").convert("RGB").resize((192, 95)), "WEBP", quality=60)
    frames = [chelsea.resize((64, 43)), coffee.resize((64, 43))]
    imgs["animated.webp"] = save(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, quality=75)
    grad = np.dstack([np.asarray(ihc.resize((83, 59))), np.tile(np.linspace(0, 255, 83).astype(np.uint8), (59, 1))])
    imgs["rgba_gradient_lossy.webp"] = save(Image.fromarray(grad), "WEBP", quality=80)
    imgs["rgba_gradient_lossless.webp"] = save(Image.fromarray(grad), "WEBP", lossless=True, exact=True)
    imgs["pixel_1x1.webp"] = save(Image.new("RGB", (1, 1), (9, 99, 199)), "WEBP", lossless=True)

    # GIF: quantized photo, gray, transparency, animated, partial interlaced frame.
    imgs["chelsea.gif"] = save(chelsea.resize((150, 100)), "GIF")
    imgs["text_gray.gif"] = save(skdata("text.png").resize((224, 86)), "GIF")
    gt = chelsea.resize((77, 51)).quantize(64)
    imgs["chelsea_trns.gif"] = save(gt, "GIF", transparency=3)
    af = [astro.resize((48, 48)).quantize(32), coffee.resize((48, 48)).quantize(32)]
    imgs["animated.gif"] = save(af[0], "GIF", save_all=True, append_images=af[1:], duration=100)
    imgs["partial_frame_interlaced.gif"] = gif_partial_frame()
    imgs["pixel_1x1.gif"] = save(Image.new("P", (1, 1), 0), "GIF")
    return imgs


# ---- expected values --------------------------------------------------------


def sha(b):
    return hashlib.sha256(b).hexdigest()


def pil_expect(data):
    im = Image.open(io.BytesIO(data))
    rgb = im.convert("RGB")
    e = {"format": im.format.lower(), "mode": im.mode, "width": rgb.size[0], "height": rgb.size[1],
         "rgb_sha256": sha(rgb.tobytes())}
    if rgb.size[0] * rgb.size[1] <= 64:
        e["rgb_hex"] = rgb.tobytes().hex()
    if "A" in im.getbands() or im.info.get("transparency") is not None:
        e["alpha_sha256"] = sha(im.convert("RGBA").tobytes()[3::4])
        if im.mode == "I;16":
            # PIL's I;16 -> RGBA conversion with a transparency key marks
            # pixels other than those equal to the key (a PIL bug); we mark
            # the equal ones. docs/images.md lists it.
            e["known_difference"] = "PIL's I;16 transparency key marks the wrong pixels"
    return e


def processor(cfg):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    kw = {k: v for k, v in cfg.items() if k not in ("processor_class", "image_processor_type")}
    return Qwen2VLImageProcessorPil(**kw)


def proc_expect(proc, data, cfg, rng):
    im = Image.open(io.BytesIO(data))
    try:
        out = proc(images=im, return_tensors="np")
    except ValueError as ex:
        return {"error": str(ex)}
    pv = np.ascontiguousarray(out["pixel_values"], dtype=np.float32)
    grid = [int(v) for v in out["image_grid_thw"][0]]
    m = cfg["merge_size"]
    idx = sorted(set(int(i) for i in rng.integers(0, pv.size, 64))) + [0, pv.size - 1]
    flat = pv.reshape(-1)
    return {"grid_thw": grid, "tokens": grid[0] * grid[1] * grid[2] // (m * m), "shape": list(pv.shape),
            "pv_sha256": sha(pv.astype("<f4").tobytes()), "sum": float(pv.astype(np.float64).sum()),
            "min": float(pv.min()), "max": float(pv.max()),
            "samples": [[i, float(flat[i])] for i in sorted(set(idx))]}


def generate():
    os.makedirs(os.path.join(OUT, "configs"), exist_ok=True)
    imgs = make_images()
    for name, cfg in CONFIGS.items():
        d = os.path.join(OUT, "configs", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    procs = {n: processor(c) for n, c in CONFIGS.items()}
    rng = np.random.default_rng(17)
    expected = []
    for name in sorted(imgs):
        data = imgs[name]
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        e = {"file": name, "bytes": len(data)}
        e.update(pil_expect(data))
        e["preprocess"] = {n: proc_expect(procs[n], data, CONFIGS[n], rng) for n in CONFIGS}
        expected.append(e)
        print(name, e["format"], e["mode"], e["width"], e["height"], len(data),
              {n: v.get("grid_thw", v.get("error", "")[:30]) for n, v in e["preprocess"].items()})
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"generator": "tools/gen_image_fixtures.py",
                   "pillow": Image.__version__, "transformers": __import__("transformers").__version__,
                   "images": expected}, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, e["file"])) for e in expected)
    print(f"{len(expected)} images, {total} bytes")


def compare(binary):
    """Largest |ours - transformers| over every fixture, per config."""
    procs = {n: processor(c) for n, c in CONFIGS.items()}
    exp = json.load(open(os.path.join(OUT, "expected.json")))
    worst = {n: 0.0 for n in CONFIGS}
    identical = {n: 0 for n in CONFIGS}
    count = {n: 0 for n in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for e in exp["images"]:
            data = open(os.path.join(OUT, e["file"]), "rb").read()
            for n in CONFIGS:
                if "error" in e["preprocess"][n]:
                    continue
                ref = np.asarray(procs[n](images=Image.open(io.BytesIO(data)), return_tensors="np")["pixel_values"], np.float32)
                dump = os.path.join(tmp, "pv.bin")
                subprocess.run([binary, "preprocess-image", "--model-id", os.path.join(OUT, "configs", n),
                                "--dump", dump, os.path.join(OUT, e["file"])], check=True, stdout=subprocess.DEVNULL)
                ours = np.fromfile(dump, dtype="<f4")
                count[n] += 1
                if ours.size != ref.size:
                    print(f"{e['file']} {n}: size {ours.size} != {ref.size}")
                    worst[n] = float("inf")
                    continue
                d = float(np.abs(ours - ref.reshape(-1)).max())
                identical[n] += int(d == 0.0)
                worst[n] = max(worst[n], d)
                if d:
                    print(f"{e['file']} {n}: max |diff| {d:.3g}")
    for n in CONFIGS:
        print(f"{n}: {identical[n]}/{count[n]} bit-identical, max |diff| {worst[n]:.3g}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", metavar="BIN")
    a = ap.parse_args()
    compare(a.compare) if a.compare else generate()
