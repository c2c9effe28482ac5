#!/usr/bin/env python3
"""Expected outputs of transformers' token-classification pipeline for the
tiny *ForTokenClassification fixtures (tests/golden/test_token_entities.c,
src/engine/token_entities.c).

    python3 tools/gen_token_pipeline.py    # run from the repository root

For each fixture below, writes tests/fixtures/models/<name>/token_pipeline.json:
the texts, and for every case (aggregation_strategy none|simple|first|
average|max, ignore_labels default ["O"] or [], raw_scores) the pipeline's
output per text, with numpy scores turned into floats.

raw_scores is this server's extension (the pipeline always applies a
softmax): its expected values come from the pipeline's own
gather_pre_entities / aggregate / filter steps fed the logits instead of the
softmax, so the aggregation (average, max, group means) runs on logits.

Fixtures left out: gte_new_tokcls (NewForTokenClassification needs the
hub's remote code, which the pipeline cannot load offline).
"""
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import pipeline  # noqa: E402
from transformers.pipelines.token_classification import AggregationStrategy  # noqa: E402

FIXTURES = ["bert_tokcls", "deberta_v2_tokcls", "gte_native_tokcls", "llama_tokcls", "modernbert_tokcls",
            "ultrabert_tokcls"]

TEXTS = [
    "Hello world, this is Jack from Zürich!",
    "abc defg hij-klm 42 x.y",
    "  leading and   multiple spaces\tand tabs ",
    "Ünïcödé café naïve façade, résumé",
    "the of and to in is that for it with",
    "Emoji 🙂 and 中文字符 mixed",
    "a",
    "",
    "Barack Obama visited Paris and the Eiffel tower in 2009.",
]

STRATEGIES = ["none", "simple", "first", "average", "max"]


def plain(entities):
    out = []
    for e in entities:
        d = {}
        for k, v in e.items():
            if isinstance(v, (np.floating, float)):
                v = float(v)
            elif isinstance(v, (np.integer,)):
                v = int(v)
            d[k] = v
        out.append(d)
    return out


def run_raw(p, text, strategy, ignore_labels):
    """postprocess() of the pipeline with the logits in place of the softmax (one chunk)."""
    strategy = AggregationStrategy[strategy.upper()]
    ignore = ["O"] if ignore_labels is None else ignore_labels
    enc = p.tokenizer(text, return_tensors="pt", truncation=True, return_special_tokens_mask=True,
                      return_offsets_mapping=True)
    with torch.no_grad():
        logits = p.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[0].float().numpy()
    pre = p.gather_pre_entities(text, enc["input_ids"][0], logits, enc["offset_mapping"][0],
                                enc["special_tokens_mask"][0].numpy(), strategy)
    grouped = p.aggregate(pre, strategy)
    return [e for e in grouped if e.get("entity", None) not in ignore and e.get("entity_group", None) not in ignore]


def write_compact(doc, f):
    """One line per text's entity list; scores with float32's 9 significant digits."""
    def dumps(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    def entity(e):
        return "{" + ",".join(f"{dumps(k)}:{format(v, '.9g') if k == 'score' else dumps(v)}" for k, v in e.items()) + "}"

    f.write("{\n" + f'"description":{dumps(doc["description"])},\n"texts":{dumps(doc["texts"])},\n"cases":[\n')
    for ci, c in enumerate(doc["cases"]):
        head = {k: v for k, v in c.items() if k != "outputs"}
        f.write(dumps(head)[:-1] + ',"outputs":[\n')
        f.write(",\n".join("[" + ",".join(entity(e) for e in out) + "]" for out in c["outputs"]))
        f.write("\n]}" + ("," if ci + 1 < len(doc["cases"]) else "") + "\n")
    f.write("]}\n")


def cases_for(p):
    cases = []
    for raw in (False, True):
        for strategy in STRATEGIES:
            for ignore in (None, []):
                outs = []
                for t in TEXTS:
                    if raw:
                        outs.append(plain(run_raw(p, t, strategy, ignore)))
                    else:
                        kw = {"aggregation_strategy": strategy}
                        if ignore is not None:
                            kw["ignore_labels"] = ignore
                        outs.append(plain(p(t, **kw)))
                cases.append({"aggregation_strategy": strategy, "ignore_labels": ignore, "raw_scores": raw,
                              "outputs": outs})
    return cases


def main():
    root = os.path.join("tests", "fixtures", "models")
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="Tokenizer does not support real words")
    for name in FIXTURES:
        d = os.path.join(root, name)
        p = pipeline("token-classification", model=d, device="cpu")
        model = p.tokenizer._tokenizer.model
        doc = {
            "description": (f"transformers {transformers.__version__} pipeline('token-classification', model=DIR) "
                            f"on {type(p.model).__name__} (FP32, CPU), tokenizer {type(p.tokenizer).__name__} "
                            f"(is_fast={p.tokenizer.is_fast}, continuing_subword_prefix="
                            f"{getattr(model, 'continuing_subword_prefix', None)!r}); "
                            "raw_scores: the same steps on logits (tools/gen_token_pipeline.py)"),
            "texts": TEXTS,
            "cases": cases_for(p),
        }
        with open(os.path.join(d, "token_pipeline.json"), "w", encoding="utf-8") as f:
            write_compact(doc, f)
        print(name, len(doc["cases"]), "cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
