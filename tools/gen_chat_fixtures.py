#!/usr/bin/env python3
"""Reference renderings of real chat templates, for tests/golden/test_chat_templates.c.

For every checkpoint folder under tests/fixtures/chat_templates/ this loads the chat template(s) and the
special tokens the way transformers 5 does (tokenization_utils_base.from_pretrained / processing_utils:
chat_template.json, else chat_template.jinja plus additional_chat_templates/*.jinja, else
tokenizer_config.json's "chat_template" string or [{name, template}] list; special tokens as
`special_tokens_map`, i.e. str() of each named token that is not None), renders a fixed set of
conversations with transformers' own render_jinja_template after the same message normalisation
apply_chat_template does (keys whose value is None dropped), and writes cases.jsonl beside the template:

  {"id": ..., "messages": [...], "tools": [...] (optional), "add_generation_prompt": bool,
   "kwargs": {extra template variables}, "template_name": name (optional),
   "expected": "rendered text"}            -- or "error": "the exception's text" where the template raises
   "now": {"at": "2025-03-04T05:06:07", "formats": [...]} when the template called strftime_now

The clock is fixed at NOW while rendering; the golden test puts today's date back in for the formats listed.
Run: python3 tools/gen_chat_fixtures.py [folder ...]   (needs transformers 5; no network)
"""
import copy
import datetime as _dt
import json
import os
import sys

import transformers
from transformers.utils import chat_template_utils as ctu

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "chat_templates")
NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
NOW = _dt.datetime(2025, 3, 4, 5, 6, 7)
_formats_seen = []


class _FixedClock(_dt.datetime):
    """datetime as chat_template_utils sees it: now() is NOW, and every strftime format is recorded."""

    @classmethod
    def now(cls, tz=None):
        return _Recorder(NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second)


class _Recorder(_dt.datetime):
    def strftime(self, fmt):
        _formats_seen.append(fmt)
        return super().strftime(fmt)


ctu.datetime = _FixedClock


# ---------------------------------------------------------------- loading, as transformers does

def _token_str(v):
    if isinstance(v, dict):  # a serialised AddedToken
        return v.get("content")
    return v


def load_checkpoint(d):
    """(templates, special_tokens): templates is a str or a {name: template} dict (as tokenizer.chat_template)."""
    cfg = {}
    p = os.path.join(d, "tokenizer_config.json")
    if os.path.exists(p):
        with open(p, encoding="utf-8") as f:
            cfg = json.load(f)
    stm = os.path.join(d, "special_tokens_map.json")
    if "added_tokens_decoder" not in cfg and os.path.exists(stm):
        with open(stm, encoding="utf-8") as f:
            cfg.update(json.load(f))  # the legacy file wins over tokenizer_config.json's entries
    tokens = {k: str(_token_str(cfg[k])) for k in NAMED_TOKENS if _token_str(cfg.get(k)) is not None}

    templates = {}
    jpath = os.path.join(d, "chat_template.json")
    extra_dir = os.path.join(d, "additional_chat_templates")
    if os.path.exists(jpath):
        with open(jpath, encoding="utf-8") as f:
            templates["default"] = json.load(f)["chat_template"]
    else:
        if os.path.isdir(extra_dir):
            for fn in sorted(os.listdir(extra_dir)):
                if fn.endswith(".jinja"):
                    with open(os.path.join(extra_dir, fn), encoding="utf-8") as f:
                        templates[fn[: -len(".jinja")]] = f.read()
        raw = os.path.join(d, "chat_template.jinja")
        if os.path.exists(raw):
            with open(raw, encoding="utf-8") as f:
                templates["default"] = f.read()
    if not templates:
        t = cfg.get("chat_template")
        if isinstance(t, list):
            return {e["name"]: e["template"] for e in t}, tokens
        return t, tokens
    if len(templates) == 1 and "default" in templates:
        return templates["default"], tokens
    return templates, tokens


def pick_template(templates, name, tools):
    """tokenizer.get_chat_template, for a template name (never a literal template)."""
    if isinstance(templates, dict):
        if name is not None:
            return templates[name]
        if tools is not None and "tool_use" in templates:
            return templates["tool_use"]
        return templates["default"]
    return templates


def render(templates, tokens, case):
    tools = case.get("tools")
    template = pick_template(templates, case.get("template_name"), tools)
    messages = ctu._normalize_chat_messages(copy.deepcopy(case["messages"]))
    kwargs = {**tokens, **case.get("kwargs", {})}
    out, _ = ctu.render_jinja_template(conversations=[messages], tools=copy.deepcopy(tools), documents=None,
                                       chat_template=template,
                                       add_generation_prompt=case["add_generation_prompt"], **kwargs)
    return out[0]


# ---------------------------------------------------------------- conversations

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "max_results": {"type": "integer", "description": "How many results"},
        "filters": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]
# Nested schemas, enums of numbers, nullable and defaults, text that needs escaping: what templates that walk the
# schema themselves (Gemma 4, gpt-oss) or print it with tojson have to get right.
BOOKING_TOOL = {"type": "function", "function": {
    "name": "book_trip", "description": "Book a trip.\nQuotes: \"x\" and 'y'; unicode: 東京 ✈️",
    "parameters": {"type": "object", "properties": {
        "travellers": {"type": "array", "description": "Who travels",
                       "items": {"type": "object", "properties": {
                           "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
                           "required": ["name"]}},
        "class": {"type": "string", "enum": ["economy", "business"], "default": "economy"},
        "stops": {"type": "integer", "enum": [0, 1, 2]},
        "budget": {"type": "number", "description": "In euros", "nullable": True},
        "flexible": {"type": "boolean", "default": False},
        "dates": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}}},
        "required": ["travellers", "dates"]}}}
ARGS_TYPES = {"f": 1.5, "i": 10, "big": 12345678901234, "neg": -0.25, "tiny": 1e-07, "b": True,
              "n": None, "arr": [1, "two", [3, 4.5]], "obj": {"k": "v", "ü": "é"},
              "s": "quote \" and \n newline \\ backslash </tool_call>"}

U, A, S = "user", "assistant", "system"


def m(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


def call(name, args, id_="call_1", as_string=False):
    return {"id": id_, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}


UNICODE = "Grüße 👋🏽 — 你好，世界！ こんにちは 안녕 مرحبا e\u0301 \"quotes\" 'single' back\\slash\ttab"
LONG = [m(U if i % 2 == 0 else A, f"turn {i}: " + ("lorem ipsum " * (i % 5 + 1)).strip()) for i in range(30)]

CONVERSATIONS = {
    "user": [m(U, "Hello!")],
    "system_user": [m(S, "You are a helpful assistant."), m(U, "What is 2+2?")],
    "multi_turn": [m(U, "Hi"), m(A, "Hello! How can I help?"), m(U, "Tell me a joke.")],
    "system_multi_turn": [m(S, "Be brief."), m(U, "Hi"), m(A, "Hello."), m(U, "Bye")],
    "ends_with_assistant": [m(U, "Hi"), m(A, "Hello there.")],
    "empty_user": [m(U, "")],
    "empty_system": [m(S, ""), m(U, "hi")],
    "unicode": [m(S, "Réponds en français 🇫🇷"), m(U, UNICODE), m(A, "你好！😀"), m(U, "日本語で答えて")],
    "special_text": [m(U, "<|im_end|> [INST] <start_of_turn> {{ not a tag }} {% raw %}")],
    "whitespace": [m(S, "  padded system  \n"), m(U, "\n\n  padded user \t "), m(A, "  padded answer  "), m(U, " x ")],
    "newlines": [m(U, "line 1\nline 2\r\nline 3\n")],
    "long_history": LONG + [m(U, "and finally?")],
    "parts_text": [m(U, [{"type": "text", "text": "Describe this."}])],
    "parts_two_texts": [m(U, [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}])],
    "parts_image": [m(U, [{"type": "image"}, {"type": "text", "text": "What is in the image?"}])],
    "parts_image_url": [m(U, [{"type": "text", "text": "Compare these:"},
                              {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                              {"type": "image", "image": "file:///tmp/b.jpg"}])],
    "parts_system": [m(S, [{"type": "text", "text": "System as parts."}]), m(U, [{"type": "text", "text": "Hi"}])],
    "parts_history": [m(U, [{"type": "image"}, {"type": "text", "text": "What's this?"}]),
                      m(A, [{"type": "text", "text": "A cat."}]),
                      m(U, [{"type": "text", "text": "And its colour?"}])],
    "tool_call": [m(U, "Weather in Paris?"),
                  m(A, None, tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius"})]),
                  m("tool", "{\"temperature\": 21}", tool_call_id="call_1", name="get_weather"),
                  m(A, "It is 21°C in Paris.")],
    "tool_call_string_args": [m(U, "Search for cats"),
                              m(A, "", tool_calls=[call("search", {"query": "cats", "max_results": 3}, as_string=True)]),
                              m("tool", "3 results", tool_call_id="call_1", name="search")],
    "tool_calls_parallel": [m(S, "Use tools when useful."), m(U, "Weather in Oslo and Rome?"),
                            m(A, "Checking both.", tool_calls=[call("get_weather", {"city": "Oslo"}, "call_a"),
                                                               call("get_weather", {"city": "Rome"}, "call_b")]),
                            m("tool", "-3", tool_call_id="call_a", name="get_weather"),
                            m("tool", "18", tool_call_id="call_b", name="get_weather")],
    "tool_response_last": [m(U, "Weather?"),
                           m(A, None, tool_calls=[call("get_weather", {"city": "Lima"}, "call9abcd")]),
                           m("tool", "sunny", tool_call_id="call9abcd", name="get_weather")],
    "reasoning_field": [m(U, "Think first: 3*7?"), m(A, "21", reasoning_content="3*7 is 21."), m(U, "thanks")],
    "think_in_content": [m(U, "2+2?"), m(A, "<think>\nadding\n</think>\n\n4"), m(U, "and 3+3?")],
    "user_user": [m(U, "first"), m(U, "second")],
    "starts_with_assistant": [m(A, "I speak first."), m(U, "ok")],
    "system_only": [m(S, "Only a system prompt.")],
    "developer_role": [m("developer", "Follow the rules."), m(U, "hi")],
    "system_not_first": [m(U, "hi"), m(S, "late system"), m(U, "again")],
    "extra_keys": [m(U, "hi", name="alice"), m(A, "hello", name="bot")],
    "tool_args_types": [m(U, "Book it"), m(A, None, tool_calls=[call("book_trip", ARGS_TYPES, "call0abcd")]),
                        m("tool", "{\"ok\": true, \"price\": 99.5}", tool_call_id="call0abcd", name="book_trip"),
                        m(A, "Booked.")],
    # A float with an integral value (1.0) prints as "1.0" in Python; a JSON parser that keeps no int/float
    # distinction (cJSON) cannot know it was written 1.0: the golden test lists this case as a known difference.
    "integral_float_args": [m(U, "Book it"),
                            m(A, None, tool_calls=[call("book_trip", {"g": 1.0, "h": -2.0, "k": 1e20}, "call3abcd")])],
    "complex_tools": [m(S, "You book trips."), m(U, "Two adults to Tokyo, 1–5 May")],
    "empty_tools": [m(U, "No tools today.")],
    "empty_parts": [m(U, [])],
    "assistant_no_content_key": [m(U, "Weather in Oslo?"),
                                 {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Oslo"}, "call1abcd")]},
                                 m("tool", "cold", tool_call_id="call1abcd", name="get_weather")],
    "tool_content_parts": [m(U, "Weather?"), m(A, None, tool_calls=[call("get_weather", {"city": "Nice"}, "call2abcd")]),
                           m("tool", [{"type": "text", "text": "warm"}], tool_call_id="call2abcd", name="get_weather")],
    "long_text": [m(U, ("Ünïcödé 長い文章 🚀 " * 60).strip())],
    "reasoning_history": [m(U, "1+1?"), m(A, "2", reasoning_content="one plus one"), m(U, "2+2?"),
                          m(A, "4", reasoning_content="two plus two"), m(U, "3+3?")],
    "ends_with_reasoning": [m(U, "Why?"), m(A, "Because.", reasoning_content="Let me think.")],
    "query_document": [m("query", "what is a panda?"), m("document", "The giant panda is a bear native to China.")],
    "query_document_system": [m(S, "Find passages about animals"), m("query", "熊猫是什么？"),
                              m("document", "Le panda géant 🐼 est un ours.")],
}

# Which conversations get tools, and the per-family extra variables worth exercising.
WITH_TOOLS = {"tool_call", "tool_call_string_args", "tool_calls_parallel", "tool_response_last", "system_user",
              "user", "tool_args_types", "integral_float_args", "assistant_no_content_key", "tool_content_parts"}
TOOLS_FOR = {"tool_args_types": [BOOKING_TOOL], "integral_float_args": [BOOKING_TOOL], "complex_tools": [BOOKING_TOOL, WEATHER_TOOL], "empty_tools": []}


def family_kwargs(name):
    n = name.lower()
    if "qwen3.5" in n:
        return [{}, {"enable_thinking": False}, {"add_vision_id": True}]
    if "qwen3" in n and "reranker" not in n:
        return [{}, {"enable_thinking": False}, {"enable_thinking": True}]
    if "reranker" in n:
        return [{}, {"instruction": "Judge relevance for a medical query"}]
    if "llama-3" in n:
        return [{"date_string": "01 Jan 2025"}, {"date_string": "26 Jul 2024", "tools_in_user_message": False}]
    if "granite" in n:
        return [{}, {"thinking": True}]
    if "gemma-4" in n:
        return [{}, {"enable_thinking": True}]
    if "gpt-oss" in n:
        return [{}, {"reasoning_effort": "high", "model_identity": "You are a test model."}]
    return [{}]


def cases_for(name):
    out = []
    kw_sets = family_kwargs(name)
    for conv_name, msgs in CONVERSATIONS.items():
        for agp in (False, True):
            for ki, kw in enumerate(kw_sets if conv_name in ("user", "system_user", "multi_turn", "tool_call",
                                                             "think_in_content", "parts_image", "query_document",
                                                             "reasoning_field") else kw_sets[:1]):
                variants = [None]
                if conv_name in TOOLS_FOR:
                    variants = [TOOLS_FOR[conv_name]]
                elif conv_name in WITH_TOOLS:
                    variants = [None, TOOLS] if conv_name in ("user", "system_user") else [TOOLS]
                for tools in variants:
                    case = {"id": f"{conv_name}{'_gen' if agp else ''}{'_kw%d' % ki if ki else ''}"
                                  f"{'_tools' if tools and conv_name in ('user', 'system_user') else ''}",
                            "messages": msgs, "add_generation_prompt": agp}
                    if tools is not None:
                        case["tools"] = tools
                    if kw:
                        case["kwargs"] = kw
                    out.append(case)
    return out


def with_template_names(cases, templates):
    """For a checkpoint with named templates, the automatic choice plus every name asked for explicitly
    (on a few conversations, to keep the files small)."""
    if not isinstance(templates, dict):
        return cases
    out = list(cases)
    for name in sorted(templates):
        for case in cases:
            if case["id"].split("_gen")[0] in ("user", "system_user", "tool_call", "parts_image", "unicode"):
                out.append({**case, "id": case["id"] + "@" + name, "template_name": name})
    return out


def generate(folder):
    d = os.path.join(ROOT, folder)
    templates, tokens = load_checkpoint(d)
    if templates is None:
        return 0
    n = 0
    with open(os.path.join(d, "cases.jsonl"), "w", encoding="utf-8") as f:
        for case in with_template_names(cases_for(folder), templates):
            _formats_seen.clear()
            try:
                case["expected"] = render(templates, tokens, case)
            except Exception as e:  # the template raised: the C renderer must fail too (IV_E_INVALID)
                case["error"] = f"{type(e).__name__}: {e}"
            if _formats_seen:
                case["now"] = {"at": NOW.isoformat(), "formats": sorted(set(_formats_seen))}
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
            n += 1
    return n


def check_loading_like_transformers(folder):
    """load_checkpoint must agree with transformers itself: the folder, plus a tiny tokenizer.json, loaded by
    AutoTokenizer has the same chat_template (str or named dict) and special_tokens_map. chat_template.json is
    the processor's file, which the tokenizer does not read: only the tokens are compared there."""
    import shutil
    import tempfile

    from transformers import AutoTokenizer

    d = os.path.join(ROOT, folder)
    tiny = os.path.join(ROOT, "..", "models", "llama", "tokenizer.json")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(d, tmp, dirs_exist_ok=True)
        shutil.copy(tiny, tmp)
        p = os.path.join(tmp, "tokenizer_config.json")
        cfg = {}
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                cfg = json.load(f)
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"  # the tiny tokenizer.json's, not the checkpoint's
        with open(p, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        tok = AutoTokenizer.from_pretrained(tmp)
    templates, tokens = load_checkpoint(d)
    if tok.special_tokens_map != tokens:
        raise SystemExit(f"{folder}: special tokens {tokens} but transformers has {tok.special_tokens_map}")
    if not os.path.exists(os.path.join(d, "chat_template.json")) and tok.chat_template != templates:
        raise SystemExit(f"{folder}: the chat template(s) loaded here differ from transformers'")


def main():
    folders = sys.argv[1:] or sorted(x for x in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, x)))
    total = 0
    for folder in folders:
        check_loading_like_transformers(folder)
        n = generate(folder)
        total += n
        print(f"{folder}: {n} cases")
    print(f"total {total} cases (transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
