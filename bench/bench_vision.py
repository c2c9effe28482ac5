"""Image embeddings per second: infinity_v3 against transformers on torch CPU, in one run.

Checkpoint: a random-weight Qwen3-VL of Qwen3-VL-2B's shape (vision: 24 blocks of 1024, 16 heads, MLP 4096,
patch 16, merge 2, temporal 2, 48 x 48 position grid, DeepStack after blocks 5, 11, 17, out width 2048; text:
28 layers of 2048, 16 query / 8 key-value heads of 128, SwiGLU 6144, vocab 151936, mRoPE [24, 20, 20]) with
last-token pooling (sentence-transformers Pooling), a WordLevel tokenizer carrying Qwen's special tokens and a
compact Qwen3-VL chat template, written to .cache/bench-models/ (not committed). --text-layers / --vision-depth
make a shallower variant of the same widths for small machines (say so when quoting figures).

Workload: N distinct 448 x 448 PNG images (random pixels, seeded), each one input: a user message holding the
image (196 image tokens after the 2 x 2 merge) as a data URL, rendered by the chat template. Both sides decode,
preprocess (smart_resize, patches), run the tower and the text model and pool the last token, one image per
forward (batch 1), with the same thread count.
- transformers: Qwen2VLImageProcessorPil + the tokenizer's chat template + Qwen3VLModel (FP32, sdpa), in
  process after one warm-up image.
- infinity_v3: `infinity_v3 embed` over the N images and over 1 image; throughput = (N - 1) / (t_N - t_1), which
  leaves out process start and checkpoint load. Add --batch-tokens to let it pack several images per forward.

Prints one line per engine and the ratio; --out writes the raw times as JSON.
"""
import argparse
import base64
import io
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VISION = dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, out_hidden_size=2048, patch_size=16,
              spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304, in_channels=3,
              hidden_act="gelu_pytorch_tanh", deepstack_visual_indexes=[5, 11, 17])
TEXT = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
            num_key_value_heads=8, head_dim=128, max_position_embeddings=8192, rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                             "mrope_interleaved": True})
SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<|vision_start|>": 151652,
           "<|vision_end|>": 151653, "<|image_pad|>": 151655, "<|video_pad|>": 151656}
TEMPLATE = (
    "{%- for message in messages -%}<|im_start|>{{ message.role }}\n"
    "{%- if message.content is string -%}{{ message.content }}{%- else -%}{%- for c in message.content -%}"
    "{%- if c.type == 'image' or 'image' in c or 'image_url' in c -%}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif c.type == 'text' -%}{{ c.text }}{%- endif -%}{%- endfor -%}{%- endif -%}<|im_end|>\n"
    "{%- endfor -%}")
PREPROCESSOR = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
                "size": {"shortest_edge": 65536, "longest_edge": 16777216},
                "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def make_checkpoint(d, text_layers, vision_depth):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    os.makedirs(d, exist_ok=True)
    vision = dict(VISION, depth=vision_depth,
                  deepstack_visual_indexes=[i for i in VISION["deepstack_visual_indexes"] if i < vision_depth])
    cfg = transformers.Qwen3VLConfig(text_config=dict(TEXT, num_hidden_layers=text_layers), vision_config=vision,
                                     image_token_id=151655, vision_start_token_id=151652, vision_end_token_id=151653,
                                     video_token_id=151656)
    torch.manual_seed(0)
    with torch.no_grad():
        model = transformers.Qwen3VLModel(cfg)
        for p in model.parameters():
            p.normal_(0, 0.02) if p.dim() > 1 else p.fill_(1.0)
    model.save_pretrained(d)
    vocab = {"[UNK]": 0, "describe": 1, "the": 2, "image": 3, ".": 4}
    for t, i in SPECIAL.items():
        vocab[t] = i
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(list(SPECIAL))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                                pad_token="<|endoftext|>", model_max_length=8192)
    fast.chat_template = TEMPLATE
    fast.save_pretrained(d)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    with open(os.path.join(d, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], f)
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 2048, "pooling_mode_lasttoken": True}, f)


def make_images(n, side):
    from PIL import Image
    rng = np.random.default_rng(448)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def data_url(png):
    return "data:image/png;base64," + base64.b64encode(png).decode()


def bench_torch(d, images, threads):
    import torch
    import transformers
    from PIL import Image
    torch.set_num_threads(threads)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ip = transformers.Qwen2VLImageProcessorPil(**PREPROCESSOR)
    model = transformers.Qwen3VLModel.from_pretrained(d, attn_implementation="sdpa").eval()
    msgs = [{"role": "user", "content": [{"type": "image"}]}]

    def one(png):
        img = Image.open(io.BytesIO(png))
        px = ip(images=[img], return_tensors="pt")
        text = tok.apply_chat_template(msgs, tokenize=False)
        n = int(px["image_grid_thw"][0].prod()) // 4
        ids = tok(text.replace("<|image_pad|>", "<|image_pad|>" * n), add_special_tokens=False,
                  return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            h = model(input_ids=ids, pixel_values=px["pixel_values"], image_grid_thw=px["image_grid_thw"],
                      mm_token_type_ids=(ids == 151655).long()).last_hidden_state
        return h[0, -1]

    one(images[0])
    t = time.perf_counter()
    for png in images:
        one(png)
    return time.perf_counter() - t


def bench_ours(d, images, binary, threads, batch_tokens):
    lines = [json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(p)}}]}]}) for p in images]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [binary, "embed", "--model-id", d] + (["--batch-tokens", str(batch_tokens)] if batch_tokens else [])

    def run(ls):
        t = time.perf_counter()
        p = subprocess.run(cmd, input="\n".join(ls) + "\n", capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t
        if p.returncode != 0 or '"error"' in p.stdout:
            sys.exit(f"infinity_v3 failed: {p.stderr[-2000:]} {p.stdout[:500]}")
        return dt

    t1 = run(lines[:1])
    tn = run(lines)
    return t1, tn


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--side", type=int, default=448)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--text-layers", type=int, default=28)
    ap.add_argument("--vision-depth", type=int, default=24)
    ap.add_argument("--batch-tokens", type=int, default=0)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/infinity_v3"))
    ap.add_argument("--out")
    a = ap.parse_args()
    name = "qwen3-vl-2b" if (a.text_layers, a.vision_depth) == (28, 24) else \
        f"qwen3-vl-2b-shape-t{a.text_layers}-v{a.vision_depth}"
    d = os.path.join(ROOT, ".cache/bench-models", name)
    make_checkpoint(d, a.text_layers, a.vision_depth)
    images = make_images(a.images, a.side)
    t1, tn = bench_ours(d, images, a.binary, a.threads, a.batch_tokens)
    ours = (a.images - 1) / (tn - t1)
    t_torch = bench_torch(d, images, a.threads)
    theirs = a.images / t_torch
    print(f"checkpoint {name}, {a.images} images {a.side}x{a.side}, {a.threads} threads")
    print(f"infinity_v3   {ours:8.3f} images/s  (1 image {t1:.2f} s, {a.images} images {tn:.2f} s, load included)")
    print(f"transformers  {theirs:8.3f} images/s  ({a.images} images {t_torch:.2f} s after a warm-up)")
    print(f"ratio         {ours / theirs:8.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(checkpoint=name, images=a.images, side=a.side, threads=a.threads, ours_t1=t1, ours_tn=tn,
                           torch_t=t_torch, ours_ips=ours, torch_ips=theirs), f, indent=1)


if __name__ == "__main__":
    main()
