#!/usr/bin/env python3
"""Per-layer reference states of the tiny model fixtures, so that a mismatch
on any device names the first layer where it starts.

    python3 tools/gen_layer_references.py              # every fixture with "hidden"
    python3 tools/gen_layer_references.py bert llama   # only these
    python3 tools/gen_layer_references.py --check      # recompute, compare with the files, write nothing

For every tests/fixtures/models/<name>/ whose cases.json "outputs" lists
"hidden", the fixture's reference backbone is loaded the way the generator
loads it for its expectations (tools/measure_16bit_reference.py's
reference_path: the same loaders, FP32, eager attention; colbert-ai / PyLate
fixtures in the colbert reference interpreter, as the generator runs them),
and each stored input runs alone (a batch of one, the stored ids, type ids
and key_mask). Written: tests/fixtures/models/<name>/layers.safetensors with

  "layer.<l>.<i>"  FP32 [len, hidden]: the residual stream after layer l for
                   input i, what the engine's "layer" activation tap of layer
                   l shows (src/models/taps.h, block.c): for post-norm layers
                   after the layer's last norm, for pre-norm / sandwich layers
                   x after its last `x += ...` (per-layer input and
                   layer_scalar included), before any final norm or output
                   projection;

and metadata "tool" (this script and the versions of the interpreter that
ran the reference), "layers" (the saved layer indices) and, where the file
does not hold the plain hidden_states entries, "layers_note" saying why.

Where the states come from: transformers models run with
output_hidden_states=True, and hidden_states[l + 1] is saved as layer l when
it is exactly (bit for bit) the output of layer l's module, read by a forward
hook on that module in the same run. Where the two differ, the entry is not
the residual stream our tap shows, and the module's output is saved instead,
with the reason in layers_note; the cases met:
  - the last entry of decoder-style models (Llama, Mistral, Qwen, Gemma,
    ModernBERT, UltraBERT, EmbeddingGemma 2, ...) is last_hidden_state, after
    the final norm (and our "final" tap, for models without an output
    projection, which the fixture's "hidden" expectation already covers);
  - DeBERTa-v2 with a ConvLayer: hidden_states[1] is layer 0's output with
    the convolution mixed in, while our tap of layer 0 is taken before it
    (models/forward.c run_layers applies the convolution after the first
    block stack call); layer 1 on sees the mixed state in both.
The remote-code models reimplemented in tools/fixtures/enc_reference.py (GTE
new-impl, Jina BERT v2 / JinaCode, contrastors' Nomic BERT) have no
hidden_states output and no per-layer module call: their layer outputs are
read by forward hooks on the norm that ends each layer (mlp_ln,
mlp.layernorm / layer_norm_2, norm2). Every file is checked before it is
written: the last saved layer of a model without a final norm must equal
last_hidden_state, and last_hidden_state must reproduce the fixture's
expected "hidden.<i>" (max abs diff < 1e-5 of its largest |value|): the proof that this is the
generator's path. tests/golden/test_layer_references.c proves each saved
layer's correspondence with the engine's tap (FP32 CPU, and FP16 on the
emulated device).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS_DIR)

import torch  # noqa: E402

TOOL = "tools/gen_layer_references.py"
MODELS_DIR = os.path.join("tests", "fixtures", "models")
OUT_NAME = "layers.safetensors"
# last_hidden_state against the committed expectation, relative to its largest |value|: the same path, but
# CPU GEMM blocking (thread count, the alignment a reload maps weights at) may move the last bits.
REPRODUCE_TOL = 1e-5


# ---------------------------------------------------------------- finding the layers

def text_layer_list(root):
    """(dotted path, nn.ModuleList) of the text backbone's decoder / encoder layers under root: the
    ModuleList named layer / layers outside any vision / audio tower."""
    found = []
    for name, m in root.named_modules():
        last = name.rsplit(".", 1)[-1]
        if isinstance(m, torch.nn.ModuleList) and last in ("layer", "layers"):
            if any(w in name for w in ("vision", "visual", "audio", "image")):
                continue
            found.append((name, m))
    if len(found) != 1:
        raise SystemExit(f"expected one text layer list, found {[n for n, _ in found]}")
    return found[0]


def remote_layer_ends(backbone):
    """enc_reference backbones: the module whose output ends each layer (their forwards never call the layer
    containers themselves)."""
    from fixtures import enc_reference as R
    if isinstance(backbone, R.GteNewBackbone):
        return [(f"encoder.layer.{l}.mlp_ln", L.mlp_ln) for l, L in enumerate(backbone.encoder.layer)]
    if isinstance(backbone, R.JinaBackbone):
        if backbone.code:
            return [(f"encoder.layer.{l}.layer_norm_2", L.layer_norm_2) for l, L in enumerate(backbone.encoder.layer)]
        return [(f"encoder.layer.{l}.mlp.layernorm", L.mlp.layernorm) for l, L in enumerate(backbone.encoder.layer)]
    if isinstance(backbone, R.NomicHubBackbone):
        return [(f"encoder.layers.{l}.norm2", L.norm2) for l, L in enumerate(backbone.encoder.layers)]
    raise SystemExit(f"no layer ends known for {type(backbone).__name__}")


class Recorder:
    """Forward hooks keeping the (first) output of each module, per call."""

    def __init__(self, modules):
        self.out = [None] * len(modules)
        self.handles = [m.register_forward_hook(self._hook(i)) for i, m in enumerate(modules)]

    def _hook(self, i):
        def hook(module, args, output):
            if isinstance(output, (tuple, list)):
                output = output[0]
            elif hasattr(output, "last_hidden_state"):
                output = output.last_hidden_state
            if self.out[i] is not None:
                raise AssertionError(f"layer module {i} ran twice in one forward")
            self.out[i] = output.detach().clone()
        return hook

    def take(self):
        out, self.out = self.out, [None] * len(self.out)
        return out

    def close(self):
        for h in self.handles:
            h.remove()


def has_final_norm(*modules):
    """Whether one of modules (the backbone, the owner of its layer list) has a final norm."""
    names = ("norm", "final_norm", "final_layernorm")
    return any(getattr(m, n, None) is not None for m in modules for n in names)


# ---------------------------------------------------------------- computing

@torch.no_grad()
def layer_states_hf(backbone, layers, feats_list):
    """{(l, i): [len, hidden]} and notes for a transformers backbone, per input feats."""
    rec = Recorder(list(layers))
    states, notes = {}, set()
    lasts = []
    try:
        for i, feats in enumerate(feats_list):
            res = backbone(**feats, output_hidden_states=True)
            hooked = rec.take()
            hs = res.hidden_states
            n = len(layers)
            if hs is None or len(hs) != n + 1:
                raise AssertionError(f"hidden_states has {None if hs is None else len(hs)} entries for {n} layers")
            last = res.last_hidden_state[0]
            lasts.append(last)
            for l in range(n):
                if hooked[l] is None:
                    raise AssertionError(f"layer {l} did not run")
                entry, mod = hs[l + 1][0], hooked[l][0]
                if torch.equal(entry, mod):
                    states[(l, i)] = entry
                    continue
                states[(l, i)] = mod
                if l == n - 1 and torch.equal(entry, last):
                    notes.add(f"layer.{l} from a forward hook on layer {l}'s module: hidden_states[{l + 1}] is "
                              "last_hidden_state, after the final norm")
                elif l == 0 and getattr(getattr(backbone, "encoder", None), "conv", None) is not None:
                    notes.add("layer.0 from a forward hook on encoder.layer.0: hidden_states[1] has the ConvLayer "
                              "mixed in, which the engine applies after its layer 0 tap")
                else:
                    raise AssertionError(f"hidden_states[{l + 1}] differs from layer {l}'s module output, "
                                         "no known reason")
    finally:
        rec.close()
    return states, sorted(notes), lasts


@torch.no_grad()
def layer_states_remote(backbone, feats_list):
    ends = remote_layer_ends(backbone)
    rec = Recorder([m for _, m in ends])
    states, lasts = {}, []
    try:
        for i, feats in enumerate(feats_list):
            res = backbone(**feats)
            hooked = rec.take()
            lasts.append(res.last_hidden_state[0])
            for l, h in enumerate(hooked):
                if h is None:
                    raise AssertionError(f"layer {l} did not run")
                states[(l, i)] = h[0]
    finally:
        rec.close()
    where = ", ".join(sorted({n.split(".", 3)[-1] for n, _ in ends}))
    return states, [f"remote-code reference (tools/fixtures/enc_reference.py): layer outputs from forward hooks "
                    f"on each layer's {where}"], lasts


def feats_of(doc, with_types):
    from fixtures import reference
    out = []
    for c in doc["inputs"]:
        feats = reference.batch([c], doc["special_ids"]["pad"], with_types)
        if "key_mask" in c:
            feats["attention_mask"] = torch.tensor([c["key_mask"]], dtype=torch.long)
        out.append(feats)
    return out


def compute_transformers(spec, d, doc):
    """({(l, i): state}, notes, [last_hidden_state per input]) through the generator's loader."""
    import measure_16bit_reference as m16
    from fixtures import enc_reference as R
    _, model, _, with_types = m16.reference_path(spec, d, doc)
    backbone = model.base_model
    feats = feats_of(doc, with_types)
    if isinstance(backbone, R.BaseModel):
        return layer_states_remote(backbone, feats) + ((backbone,),)
    path, layers = text_layer_list(backbone)
    return layer_states_hf(backbone, layers, feats) + ((backbone, owner_of(backbone, path)),)


def owner_of(root, path):
    """The module holding the layer list at dotted path under root."""
    return root.get_submodule(path.rsplit(".", 1)[0]) if "." in path else root


def colbert_backbone(spec, d):
    """The module the colbert fixture's "hidden" comes from (synthetic_colbert._hf_compute / _pylate_compute)."""
    from fixtures import synthetic_colbert as sc
    if spec.layout == "hf":
        return sc._hf_load(spec, d).bert
    return sc._pylate_load(d)[0].auto_model


def compute_colbert(spec, d, doc):
    backbone = colbert_backbone(spec, d)
    path, layers = text_layer_list(backbone)
    feats = []
    for c in doc["inputs"]:
        ids = torch.tensor([c["ids"]])
        mask = torch.tensor([c.get("key_mask", [1] * len(c["ids"]))])
        f = {"input_ids": ids, "attention_mask": mask}
        if spec.layout != "hf":
            f["token_type_ids"] = torch.zeros_like(ids)
        feats.append(f)
    return layer_states_hf(backbone, layers, feats) + ((backbone, owner_of(backbone, path)),)


# ---------------------------------------------------------------- checking and writing

def versions():
    import sentence_transformers
    import transformers
    v = f"torch {torch.__version__}, transformers {transformers.__version__}, " \
        f"sentence-transformers {sentence_transformers.__version__}"
    try:
        from importlib.metadata import version
        v += f", colbert-ai {version('colbert-ai')}, pylate {version('pylate')}"
    except Exception:
        pass
    return v


def relative_diff(got, want):
    """max |got - want| / max |want|."""
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def check_and_pack(name, d, doc, states, notes, lasts, owners):
    import safetensors.torch
    expected = safetensors.torch.load_file(os.path.join(d, "expected.safetensors"))
    n_in = len(doc["inputs"])
    n_layers = 1 + max(l for l, _ in states)
    for i in range(n_in):
        want = expected[f"hidden.{i}"]
        got = lasts[i]
        if got.shape != want.shape or relative_diff(got, want) >= REPRODUCE_TOL:
            raise SystemExit(f"{name}: last_hidden_state of input {i} does not reproduce expected hidden.{i}: "
                             "not the generator's path")
        if not has_final_norm(*owners) and not torch.equal(states[(n_layers - 1, i)], got):
            raise SystemExit(f"{name}: no final norm, yet the last layer's state is not last_hidden_state")
        for l in range(n_layers):
            s = states[(l, i)]
            if s.dim() != 2 or s.shape[0] != len(doc["inputs"][i]["ids"]):  # [len, hidden]
                raise SystemExit(f"{name}: layer {l} input {i} has shape {tuple(s.shape)}")
            if not torch.isfinite(s).all():
                raise SystemExit(f"{name}: layer {l} input {i} is not finite")
    tensors = {f"layer.{l}.{i}": s.detach().to(torch.float32).contiguous().clone() for (l, i), s in states.items()}
    meta = {"format": "pt", "tool": f"{TOOL} ({versions()})", "layers": ",".join(str(l) for l in range(n_layers))}
    if notes:
        meta["layers_note"] = "; ".join(notes)
    return tensors, meta


def write(d, tensors, meta):
    import safetensors.torch
    safetensors.torch.save_file(dict(sorted(tensors.items(), key=lambda kv: _key(kv[0]))), os.path.join(d, OUT_NAME),
                                metadata=meta)


def _key(k):
    _, l, i = k.split(".")
    return int(l), int(i)


def compare_with_file(name, d, tensors):
    import safetensors.torch
    path = os.path.join(d, OUT_NAME)
    if not os.path.exists(path):
        return f"{name}: {OUT_NAME} missing"
    old = safetensors.torch.load_file(path)
    if set(old) != set(tensors):
        return f"{name}: tensors differ: {sorted(set(old) ^ set(tensors))}"
    worst = max(relative_diff(tensors[k], old[k]) for k in old)
    return None if worst < REPRODUCE_TOL else f"{name}: differs from {OUT_NAME} by {worst:.2e}"


# ---------------------------------------------------------------- colbert worker

def colbert_worker(name, root, out_path):
    """In the colbert reference interpreter: computes one fixture's states and writes them (with the
    metadata) to out_path."""
    from fixtures import synthetic_colbert
    synthetic_colbert._quiet()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    spec = next(s for s in synthetic_colbert.SPECS if s.name == name)
    d = os.path.join(root, name)
    doc = json.load(open(os.path.join(d, "cases.json")))
    tensors, meta = check_and_pack(name, d, doc, *compute_colbert(spec, d, doc))
    import safetensors.torch
    safetensors.torch.save_file(tensors, out_path, metadata=meta)


def colbert_delegated(spec, root):
    """(tensors, meta) of a colbert-ai / PyLate fixture, computed where those libraries are importable."""
    from fixtures import synthetic_colbert
    import safetensors
    d = os.path.join(root, spec.name)
    if synthetic_colbert._have_reference_libs():
        doc = json.load(open(os.path.join(d, "cases.json")))
        return check_and_pack(spec.name, d, doc, *compute_colbert(spec, d, doc))
    py = synthetic_colbert._reference_python()
    if not py:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "layers.safetensors")
        r = subprocess.run([py, os.path.abspath(__file__), "--colbert-worker", spec.name, os.path.abspath(root), out],
                           capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
        if r.returncode:
            sys.exit(f"{spec.name}: the colbert reference interpreter {py} failed:\n{r.stderr[-4000:]}")
        with safetensors.safe_open(out, "pt") as f:
            meta = f.metadata()
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    return tensors, meta


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="fixtures (default: every one whose cases.json lists hidden)")
    ap.add_argument("--check", action="store_true", help="recompute and compare with the written files only")
    ap.add_argument("--colbert-worker", nargs=3, metavar=("NAME", "ROOT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.colbert_worker:
        colbert_worker(*args.colbert_worker)
        return
    if not os.path.isdir(MODELS_DIR):
        sys.exit("run from the repository root")

    import gen_fixtures
    from fixtures import common, synthetic_colbert
    gen_fixtures.quiet()
    common.deterministic_torch()
    specs = {s.name: s for group, _, _ in gen_fixtures.GROUPS for s in group}
    names = args.names or sorted(n for n in os.listdir(MODELS_DIR)
                                 if os.path.isfile(os.path.join(MODELS_DIR, n, "cases.json")))
    t0, total, bad = time.time(), 0, []
    for name in names:
        d = os.path.join(MODELS_DIR, name)
        doc = json.load(open(os.path.join(d, "cases.json")))
        if "hidden" not in doc["outputs"]:
            print(f"{name:28s} skipped: no hidden output")
            continue
        if name not in specs:
            sys.exit(f"{name}: no generator spec")
        spec = specs[name]
        if isinstance(spec, synthetic_colbert.Spec):
            r = colbert_delegated(spec, MODELS_DIR)
            if r is None:
                print(f"{name:28s} not computed: colbert-ai / pylate not installed (tools/fixtures/colbert_venv.sh)")
                continue
            tensors, meta = r
        else:
            tensors, meta = check_and_pack(name, d, doc, *compute_transformers(spec, d, doc))
        if args.check:
            msg = compare_with_file(name, d, tensors)
            if msg:
                bad.append(msg)
            print(f"{name:28s} {'ok' if not msg else msg}", flush=True)
            continue
        write(d, tensors, meta)
        size = os.path.getsize(os.path.join(d, OUT_NAME))
        total += size
        print(f"{name:28s} layers {meta['layers']:8s} {size // 1024:4d} KiB"
              + (f"  [{meta['layers_note']}]" if "layers_note" in meta else ""), flush=True)
    if args.check:
        if bad:
            sys.exit("\n".join(bad))
        print(f"all match ({time.time() - t0:.1f}s)")
    else:
        print(f"done in {time.time() - t0:.1f}s; {total / 1e6:.2f} MB written")


if __name__ == "__main__":
    main()
