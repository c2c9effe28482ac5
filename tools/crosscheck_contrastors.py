#!/usr/bin/env python3
"""Runs nomic-ai/contrastors' own Nomic BERT code on the hub-layout fixtures and
compares with their expected hidden states (which come from transformers or
from tools/fixtures/enc_reference.py). An optional check, outside the normal
fixture build: contrastors is not a dependency of this project.

    git clone https://github.com/nomic-ai/contrastors /tmp/contrastors   # any checkout
    pip install einops
    python3 tools/crosscheck_contrastors.py /tmp/contrastors

Each input runs alone through a freshly loaded model (its dynamic NTK rotary
table keeps state between calls). Prints the largest absolute difference per
fixture and fails above 2e-5.
"""
import argparse
import importlib.util
import json
import os
import sys
import types

import safetensors.torch
import torch

FIXTURES = ["nomic_bert_hub", "nomic_bert_hub_seqcls", "nomic_bert_partial", "nomic_bert_ntk"]
TOL = 2e-5


def load_contrastors(root):
    """The two files of src/contrastors/models/huggingface as a package (they import each other relatively)."""
    base = os.path.join(root, "src", "contrastors", "models", "huggingface")
    pkg = types.ModuleType("nomic_hf")
    pkg.__path__ = [base]
    sys.modules["nomic_hf"] = pkg
    mods = {}
    for name in ("configuration_hf_nomic_bert", "modeling_hf_nomic_bert"):
        spec = importlib.util.spec_from_file_location(f"nomic_hf.{name}", os.path.join(base, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"nomic_hf.{name}"] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    modeling = mods["modeling_hf_nomic_bert"]
    if not hasattr(modeling.NomicBertModel, "get_extended_attention_mask"):
        # transformers 5 dropped this PreTrainedModel helper the contrastors code calls: the usual
        # [B, 1, 1, L] additive mask (0 for tokens, the most negative float for padding).
        def get_extended_attention_mask(self, attention_mask, input_shape):
            m = attention_mask[:, None, None, :].to(torch.float32)
            return (1.0 - m) * torch.finfo(torch.float32).min
        modeling.NomicBertModel.get_extended_attention_mask = get_extended_attention_mask
    return mods["configuration_hf_nomic_bert"].NomicBertConfig, modeling


def fresh_model(Config, modeling, d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg = {k: v for k, v in cfg.items() if k not in ("auto_map", "architectures", "model_type")}
    config = Config(**cfg)
    sd = safetensors.torch.load_file(os.path.join(d, "model.safetensors"))
    sd = {(k[len("bert."):] if k.startswith("bert.") else k): v for k, v in sd.items()}
    model = modeling.NomicBertModel(config, add_pooling_layer="pooler.dense.weight" in sd)
    missing, unexpected = model.load_state_dict({k: v for k, v in sd.items() if not k.startswith("classifier.")},
                                                strict=False)
    if missing or unexpected:
        raise SystemExit(f"{d}: contrastors model does not take these tensors: {missing} {unexpected}")
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("contrastors", help="a checkout of github.com/nomic-ai/contrastors")
    ap.add_argument("--fixtures", default=os.path.join("tests", "fixtures", "models"))
    args = ap.parse_args()
    Config, modeling = load_contrastors(args.contrastors)
    failed = False
    for name in FIXTURES:
        d = os.path.join(args.fixtures, name)
        doc = json.load(open(os.path.join(d, "cases.json")))
        expected = safetensors.torch.load_file(os.path.join(d, "expected.safetensors"))
        worst = 0.0
        for i, case in enumerate(doc["inputs"]):
            model = fresh_model(Config, modeling, d)
            ids = torch.tensor([case["ids"]])
            with torch.no_grad():
                out = model(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.tensor([case["type_ids"]]))
            worst = max(worst, (out.last_hidden_state[0] - expected[f"hidden.{i}"]).abs().max().item())
        ok = worst <= TOL
        failed |= not ok
        print(f"{name:24s} max abs diff {worst:.2e} {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
