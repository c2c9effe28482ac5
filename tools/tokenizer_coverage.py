"""Writes tests/fixtures/tokenizers/COVERAGE.md: which fixture exercises which
normalizer, pre-tokenizer, model, post-processor, decoder and added-token
option. It reads the fixture tokenizer.json files themselves, so the table
cannot drift from the data, and it lists every component class the installed
`tokenizers` library offers so that a component with no fixture stands out.
"""

import json
import os
from collections import defaultdict

from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

CATEGORIES = [
    ("normalizer", normalizers, normalizers.Normalizer),
    ("pre_tokenizer", pre_tokenizers, pre_tokenizers.PreTokenizer),
    ("model", models, models.Model),
    ("post_processor", processors, processors.PostProcessor),
    ("decoder", decoders, decoders.Decoder),
]


def library_components():
    """{category: sorted class names} for every component the library exposes."""
    out = {}
    for cat, mod, base in CATEGORIES:
        names = []
        for n in dir(mod):
            obj = getattr(mod, n)
            if isinstance(obj, type) and issubclass(obj, base) and obj is not base:
                names.append(n)
        out[cat] = sorted(names)
    return out


def _pattern_kind(p):
    return "regex" if "Regex" in p else "string"


def _variant(cat, node):
    """A short description of the options that change behaviour."""
    t = node.get("type")
    if cat == "normalizer":
        if t == "BertNormalizer":
            return ("clean_text={clean_text} handle_chinese_chars={handle_chinese_chars} "
                    "strip_accents={strip_accents} lowercase={lowercase}").format(**node)
        if t == "Strip":
            return f"left={node.get('strip_left')} right={node.get('strip_right')}"
        if t == "Replace":
            return f"{_pattern_kind(node['pattern'])} pattern"
    if cat == "pre_tokenizer":
        if t == "Split":
            return f"{node['behavior']} {_pattern_kind(node['pattern'])}" + (" invert" if node.get("invert") else "")
        if t == "Punctuation":
            return node.get("behavior", "Isolated")
        if t == "Digits":
            return f"individual_digits={node.get('individual_digits')}"
        if t == "ByteLevel":
            return f"add_prefix_space={node.get('add_prefix_space')} use_regex={node.get('use_regex', True)}"
        if t == "Metaspace":
            if "prepend_scheme" in node:
                return f"prepend_scheme={node['prepend_scheme']} split={node.get('split', True)}"
            return f"legacy add_prefix_space={node.get('add_prefix_space')}"
        if t == "FixedLength":
            return f"length={node.get('length')}"
        if t == "CharDelimiterSplit":
            return f"delimiter={node.get('delimiter')!r}"
    if cat == "model":
        flags = []
        if t == "BPE":
            for k in ("byte_fallback", "fuse_unk", "ignore_merges"):
                if node.get(k):
                    flags.append(k)
            for k in ("continuing_subword_prefix", "end_of_word_suffix"):
                if node.get(k):
                    flags.append(f"{k}={node[k]!r}")
            merges = node.get("merges") or []
            flags.append("merges as pairs" if merges and isinstance(merges[0], list) else "merges as strings")
        if t == "WordPiece":
            flags.append(f"max_input_chars_per_word={node.get('max_input_chars_per_word')}")
            if node.get("_implicit"):
                flags.append("no type field")
        if t == "Unigram" and node.get("byte_fallback"):
            flags.append("byte_fallback")
        return " ".join(flags)
    if cat == "post_processor":
        if t == "TemplateProcessing":
            type_ids = {p[k]["type_id"] for p in node.get("pair", []) + node.get("single", []) for k in p}
            multi = any(len(v.get("ids", [])) > 1 for v in node.get("special_tokens", {}).values())
            return (f"type ids {sorted(type_ids)}" + (", multi-id special token" if multi else ""))
        if t in ("RobertaProcessing", "ByteLevel"):
            return f"trim_offsets={node.get('trim_offsets')} add_prefix_space={node.get('add_prefix_space')}"
    if cat == "decoder":
        if t in ("WordPiece", "CTC"):
            return f"cleanup={node.get('cleanup')}"
        if t == "Metaspace":
            if "prepend_scheme" in node:
                return f"prepend_scheme={node['prepend_scheme']} split={node.get('split', True)}"
            return f"legacy add_prefix_space={node.get('add_prefix_space')}"
        if t == "Strip":
            return f"start={node.get('start')} stop={node.get('stop')}"
    return ""


def _model_type(model):
    if "type" in model:
        return model["type"]
    # Older serializations leave the type out; the keys tell it apart.
    if "merges" in model:
        return "BPE"
    if isinstance(model.get("vocab"), list):
        return "Unigram"
    if "max_input_chars_per_word" in model:
        return "WordPiece"
    return "WordLevel"


def _walk(cat, node, out):
    if node is None:
        out.append((cat, "(none)", ""))
        return
    if cat == "model":
        t = _model_type(node)
        node = dict(node, type=t, _implicit="type" not in node)
        out.append((cat, t, _variant(cat, node)))
        return
    t = node["type"]
    out.append((cat, t, _variant(cat, node)))
    if t == "Sequence":
        key = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers",
               "post_processor": "processors", "decoder": "decoders"}[cat]
        for child in node[key]:
            _walk(cat, child, out)


def fixture_components(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for cat, _, _ in CATEGORIES:
        _walk(cat, data.get(cat), out)
    for tok in data.get("added_tokens", []):
        flags = [k for k in ("special", "single_word", "lstrip", "rstrip") if tok.get(k)]
        flags.append("normalized" if tok.get("normalized") else "not normalized")
        out.append(("added_token", "AddedToken", " ".join(flags)))
    return out


def write_coverage(out_dir, names):
    """Writes COVERAGE.md; returns the library components no fixture uses."""
    lib = library_components()
    used = defaultdict(lambda: defaultdict(set))
    for name in names:
        for cat, t, variant in fixture_components(os.path.join(out_dir, name, "tokenizer.json")):
            used[(cat, t)][variant].add(name)
    missing = [f"{cat} {t}" for cat, types in lib.items() for t in types if (cat, t) not in used]
    lines = [
        "# Tokenizer component coverage",
        "",
        "Generated by tools/gen_tokenizer_vectors.py from the fixture tokenizer.json files.",
        "Each row: a component (and the options that change its behaviour) and the fixtures that use it.",
        "",
    ]
    for cat, _, _ in CATEGORIES + [("added_token", None, None)]:
        lines += [f"## {cat}", "", "| component | options | fixtures |", "|---|---|---|"]
        for (c, t), variants in sorted(used.items()):
            if c != cat:
                continue
            for variant, fixtures in sorted(variants.items()):
                lines.append(f"| {t} | {variant} | {', '.join(sorted(fixtures))} |")
        lines.append("")
    lines += ["## Library components without a fixture", ""]
    lines += [f"- {m}" for m in missing] if missing else ["None: every normalizer, pre-tokenizer, model, "
                                                          "post-processor and decoder class is covered."]
    lines.append("")
    with open(os.path.join(out_dir, "COVERAGE.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))
    return missing
