#!/usr/bin/env python3
"""Writes src/server/openapi.json, the OpenAPI 3.1 document GET /openapi.json
serves (embedded into the binary by src/server/routes_openapi.c).

The document is data, kept in the repository; this script is the one place
it is edited, so that the shared pieces (inputs, error bodies per API
flavour, the x-request-id header) are written once. After changing a route
in src/server/router.c or its request/response shape in docs/server.md,
edit the tables below and run

    python3 tools/gen_openapi.py            # rewrite the document
    python3 tools/gen_openapi.py --check    # exit 1 when it is stale

`tests/unit/test_openapi.c` (in `make test`) fails when router.c has a
route the document lacks (or the reverse); `make test-openapi` validates it
with openapi-spec-validator and runs schemathesis against a live server.
Standard library only.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "server", "openapi.json")
VERSION = "0.1.0"  # IV_SERVER_VERSION (src/server/server.h)


def ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def arr(items, **kw):
    return {"type": "array", "items": items, **kw}


def obj(props, required=(), **kw):
    o = {"type": "object", "properties": props}
    if required:
        o["required"] = list(required)
    o.update(kw)
    return o


NUM = {"type": "number"}
INT = {"type": "integer"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
NULLSTR = {"type": ["string", "null"]}
ANY = {}

SCHEMAS = {
    # ---- inputs ----
    "Input": {
        "description": "A text, a list of texts, token ids, or a list of token-id lists; a conversation "
                       "(rendered by the model's chat template) alone or in the list.",
        "anyOf": [STR, arr(STR, minItems=1), arr(ref("TokenId"), minItems=1),
                  arr(arr(ref("TokenId"), minItems=1), minItems=1), ref("Conversation"),
                  arr({"anyOf": [STR, arr(ref("TokenId"), minItems=1), ref("Conversation")]}, minItems=1)],
    },
    "Message": obj({"role": STR, "content": {"anyOf": [STR, {"type": "null"}, arr(ref("ContentPart"))]}},
                   ["role"], description="An OpenAI chat message; other keys (tool_calls, name, ...) reach the "
                   "template unchanged."),
    "ContentPart": obj({"type": STR, "text": STR}, ["type"],
                       description="`text` parts; image/audio parts answer 422 on text-only models."),
    "Conversation": arr(ref("Message"), minItems=1),
    "TokenId": {"type": "integer", "minimum": 0, "description": "below the vocabulary size (else 422)"},
    "TruncationDirection": {"type": "string", "enum": ["right", "left", "Right", "Left"]},
    "EncodingFormat": {"type": "string", "enum": ["float", "base64", "tensor"],
                       "description": "`tensor`: multi-vector models only (422 otherwise)."},
    # ---- error bodies, one per API flavour (src/server/errors.h) ----
    "TeiError": obj({"error": STR, "error_type": STR}, ["error", "error_type"],
                    description="TEI: {\"error\": msg, \"error_type\": \"Validation\"}. "
                    "JSON syntax (400), JSON types (422), body too large (413) and content type (415) "
                    "are plain text, as axum sends them."),
    "OpenAIError": {
        "description": "TEI's /v1/embeddings: {\"message\", \"code\", \"type\"}; OpenAI's model_not_found "
                       "shape {\"error\": {...}} on GET /v1/models/{id}.",
        "anyOf": [obj({"message": STR, "code": INT, "type": STR}, ["message"]),
                  obj({"error": obj({"message": STR, "type": NULLSTR, "param": NULLSTR,
                                     "code": {"type": ["string", "integer", "null"]}}, ["message"])}, ["error"]),
                  ref("TeiError")],
    },
    "InfinityError": {
        "description": "Infinity: {\"error\": {message, type, param, code}}, FastAPI's 422 "
                       "{\"detail\": [{type, loc, msg}]} for request-shape errors, "
                       "{\"detail\": \"Unauthorized\"} for 401.",
        "anyOf": [obj({"error": obj({"message": STR, "type": NULLSTR, "param": NULLSTR,
                                     "code": {"type": ["integer", "string", "null"]}}, ["message"])}, ["error"]),
                  obj({"detail": {"anyOf": [STR, arr(obj({"type": STR, "loc": arr({"type": ["string", "integer"]}),
                                                          "msg": STR}))]}}, ["detail"]),
                  ref("TeiError")],
    },
    "RerankError": {"description": "POST /rerank answers in TEI's shapes, or Infinity's when the body has "
                                   "`documents`.", "anyOf": [ref("TeiError"), ref("InfinityError")]},
    "CohereError": {"anyOf": [obj({"message": STR}, ["message"]), ref("TeiError")]},
    "VllmError": {"anyOf": [obj({"object": STR, "message": STR, "type": STR, "param": {"type": "null"},
                                 "code": INT}, ["message"]), ref("TeiError")]},
    # ---- shared response pieces ----
    "Usage": obj({"prompt_tokens": INT, "total_tokens": INT}, ["prompt_tokens", "total_tokens"]),
    "Embedding": {
        "description": "A vector (float), a base64 string of little-endian float32, or for multi-vector "
                       "models a matrix (rows), base64 rows, or a tensor object.",
        "anyOf": [arr(NUM), STR, arr(arr(NUM)), arr(STR),
                  obj({"shape": arr(INT), "dtype": STR, "data": STR}, ["shape", "dtype", "data"])],
    },
    "EmbeddingList": obj({
        "object": {"const": "list"},
        "data": arr(obj({"object": {"const": "embedding"}, "embedding": ref("Embedding"), "index": INT},
                        ["object", "embedding", "index"])),
        "model": STR, "usage": ref("Usage"), "id": STR, "created": INT,
    }, ["object", "data", "model", "usage"]),
    "ScoreLabel": obj({"score": NUM, "label": STR}, ["score", "label"]),
    "Entity": obj({"entity": STR, "entity_group": STR, "score": NUM, "index": INT, "word": STR,
                   "start": {"type": ["integer", "null"]}, "end": {"type": ["integer", "null"]}}, ["score", "word"]),
    "ModelCard": obj({"id": STR, "object": {"const": "model"}, "owned_by": STR, "created": INT,
                      "backend": STR, "capabilities": arr(STR), "stats": {"type": "object"}},
                     ["id", "object"]),
    "ModelList": obj({"object": {"const": "list"}, "data": arr(ref("ModelCard")),
                      "models": {"description": "System One's list, present when a decision model is served",
                                 **arr(obj({"name": STR, "description": STR, "release_date": STR},
                                           ["name", "description", "release_date"]))}}, ["object", "data"]),
    # ---- typed decisions (docs/decisions.md) ----
    "DecisionError": obj({"detail": arr(obj({"type": STR, "loc": arr({"anyOf": [STR, INT]}), "msg": STR},
                                            ["type", "loc", "msg"]))}, ["detail"]),
    "DecisionQuestion": obj({"type": {"enum": ["noul", "choice", "score"]},
                             "instructions": {"description": "a string; any other JSON value is read as its JSON text"},
                             "criteria": {"description": "choice: {label: description|null} or [label, ...]; "
                                                        "score: [level description, ...] (index 0 lowest); "
                                                        "noul: {\"true\"?: v, \"false\"?: v}",
                                          "anyOf": [{"type": "object"}, arr(ANY), {"type": "null"}]}},
                            ["type"], additionalProperties=False),
    "DecisionAnswer": obj({"noul": NUM, "choice": STR, "score": NUM,
                           "probabilities": {"type": "object", "additionalProperties": NUM},
                           "confidence": NUM, "legend": {"type": "object"},
                           "type": STR, "answer_confidence": NUM, "entropy_confidence": NUM, "temperature": NUM,
                           "tokens": INT, "logits": arr(NUM), "act_probability": NUM}),

    "TeiRerankResult": arr(obj({"index": INT, "text": STR, "score": NUM}, ["index", "score"])),
    "InfinityRerankResult": obj({
        "object": {"const": "rerank"},
        "results": arr(obj({"relevance_score": NUM, "index": INT, "document": {"type": ["string", "null"]}},
                           ["relevance_score", "index"])),
        "model": STR, "usage": ref("Usage"), "id": STR, "created": INT,
    }, ["object", "results"]),
    "Token": obj({"id": INT, "text": STR, "special": BOOL, "start": {"type": ["integer", "null"]},
                  "stop": {"type": ["integer", "null"]}}, ["id", "text", "special"]),
    "Health": obj({"unix": NUM}, ["unix"]),
    "Labels": obj({"id2label": {"type": "object", "additionalProperties": STR},
                   "label2id": {"type": "object", "additionalProperties": INT}}, ["id2label", "label2id"]),
}

TRUNC = {"truncate": BOOL, "truncation_direction": ref("TruncationDirection")}
MODEL = {"model": STR}
CHAT = {"chat_template_kwargs": {"type": "object", "description": "template variables over the checkpoint's"},
        "add_generation_prompt": BOOL}
TEI_OPTS = {**TRUNC, "prompt_name": {"type": ["string", "null"]}, **MODEL, **CHAT}

REQUESTS = {
    "DecisionRequest": obj({"model": STR,
                            "state": {"anyOf": [STR, {"type": "object"}, arr(ANY)]},
                            "questions": {"type": "object", "minProperties": 1,
                                          "additionalProperties": ref("DecisionQuestion")},
                            "extended": BOOL},
                           ["model", "state", "questions"], additionalProperties=False),
    "OpenAIEmbeddingsRequest": obj({"input": ref("Input"), **MODEL, "encoding_format": ref("EncodingFormat"),
                                    "dimensions": {"type": ["integer", "null"]}, "user": {"type": ["string", "null"]},
                                    "messages": ref("Conversation"), **CHAT},
                                   description="`input`, or vLLM's `messages` (one conversation)."),
    "InfinityEmbeddingsRequest": obj({"input": ref("Input"), **MODEL, "encoding_format": ref("EncodingFormat"),
                                      "dimensions": {"type": ["integer", "null"]}, "user": {"type": ["string", "null"]},
                                      "modality": {"type": "string", "enum": ["text", "image", "audio"],
                                                   "description": "image/audio answer 400"}},
                                     ["input"]),
    "EmbedRequest": obj({"inputs": ref("Input"), "normalize": BOOL, "dimensions": {"type": ["integer", "null"]},
                         **TEI_OPTS}, ["inputs"]),
    "EmbedAllRequest": obj({"inputs": ref("Input"), **TEI_OPTS}, ["inputs"]),
    "PredictRequest": obj({"inputs": {"anyOf": [STR, arr(STR), ref("Conversation"),
                                                arr({"anyOf": [arr(STR), ref("Conversation")]})],
                                      "description": "a text, one pair [a, b], a conversation, or a batch "
                                                     "[[a], [a, b], [{message}, ...], ...]"},
                           "raw_scores": BOOL, **TRUNC, **MODEL, **CHAT}, ["inputs"]),
    "TokenClassifyRequest": obj({"inputs": {"anyOf": [STR, arr(STR)]},
                                 "aggregation_strategy": {"type": "string",
                                                          "enum": ["none", "simple", "first", "average", "max"]},
                                 "ignore_labels": arr(STR), "raw_scores": BOOL, **TRUNC, **MODEL,
                                 "parameters": {"type": "object", "description": "the same options, nested"}},
                                ["inputs"]),
    "RerankRequest": {
        "description": "TEI's body (texts), or Infinity's when it has `documents`.",
        "anyOf": [obj({"query": STR, "texts": arr(STR), "raw_scores": BOOL, "return_text": BOOL, **TRUNC, **MODEL},
                      ["query", "texts"]),
                  obj({"query": STR, "documents": arr(STR), "top_n": {"type": ["integer", "null"]},
                       "return_documents": BOOL, "raw_scores": BOOL, **MODEL}, ["query", "documents"])],
    },
    "SimilarityRequest": obj({"inputs": obj({"source_sentence": STR, "sentences": arr(STR)},
                                            ["source_sentence", "sentences"]),
                              "parameters": obj(TEI_OPTS), **MODEL}, ["inputs"]),
    "TokenizeRequest": obj({"inputs": {"anyOf": [STR, arr(STR)]}, "add_special_tokens": BOOL,
                            "prompt_name": {"type": ["string", "null"]}, **MODEL}, ["inputs"]),
    "DecodeRequest": obj({"ids": {"anyOf": [arr(INT), arr(arr(INT))]}, "skip_special_tokens": BOOL, **MODEL},
                         ["ids"]),
    "DefaultPostRequest": {"type": "object", "description": "POST / and /invocations: the body of /predict, "
                           "/rerank, /embed_sparse or /embed by the first model's type; an embedding model also "
                           "takes /similarity's body.", "properties": {"inputs": ANY}},
    "ClassifyRequest": obj({"input": arr(STR), "raw_scores": BOOL, **MODEL}, ["input"]),
    "CohereEmbedRequest": obj({
        "texts": arr(STR), "model": STR,
        "input_type": {"type": "string", "enum": ["search_document", "search_query", "classification", "clustering"]},
        "embedding_types": arr({"type": "string", "enum": ["float", "int8", "uint8", "binary", "ubinary", "base64"]}),
        "truncate": {"type": "string", "enum": ["NONE", "START", "END"]},
        "max_tokens": {"type": ["integer", "null"]}, "output_dimension": {"type": ["integer", "null"]},
    }, ["texts"]),
    "CohereRerankRequest": obj({
        "query": STR,
        "documents": arr({"anyOf": [STR, obj({"text": STR}, ["text"])]}),
        "top_n": {"type": ["integer", "null"]}, "return_documents": BOOL,
        "max_tokens_per_doc": {"type": ["integer", "null"]}, "model": STR,
    }, ["query", "documents"]),
    "ScoreRequest": obj({"text_1": {"anyOf": [STR, arr(STR)]}, "text_2": {"anyOf": [STR, arr(STR)]},
                         "truncate_prompt_tokens": {"type": ["integer", "null"]}, "model": STR},
                        ["text_1", "text_2"]),
}
SCHEMAS.update(REQUESTS)

RESPONSES = {
    "Decision": obj({"model": STR, "answers": {"type": "object", "additionalProperties": ref("DecisionAnswer")},
                     "usage": obj({"input_tokens": INT, "output_tokens": INT})}, ["model", "answers", "usage"]),
    "Embed": arr({"anyOf": [arr(NUM), arr(arr(NUM))]}),
    "EmbedAll": arr(arr(arr(NUM))),
    "EmbedSparse": arr(arr(obj({"index": INT, "value": NUM}, ["index", "value"]))),
    "Predict": {"anyOf": [arr(ref("ScoreLabel")), arr(arr(ref("ScoreLabel"))),
                          arr(ref("Entity")), arr(arr(ref("Entity")))]},
    "TokenClassify": {"anyOf": [arr(ref("Entity")), arr(arr(ref("Entity")))]},
    "Rerank": {"anyOf": [ref("TeiRerankResult"), ref("InfinityRerankResult")]},
    "Similarity": arr(NUM),
    "Tokenize": arr(arr(ref("Token"))),
    "Decode": arr(STR),
    "Info": obj({"model_id": STR, "model_sha": NULLSTR, "model_dtype": STR, "served_model_name": STR,
                 "model_type": {"oneOf": [
                     obj({"embedding": obj({"pooling": STR, "multi_vector": obj({"dim": INT}, ["dim"])},
                                           ["pooling"])}, ["embedding"], additionalProperties=False),
                     obj({"classifier": ref("Labels")}, ["classifier"], additionalProperties=False),
                     obj({"reranker": ref("Labels")}, ["reranker"], additionalProperties=False),
                     obj({"token_classifier": ref("Labels")}, ["token_classifier"], additionalProperties=False)]},
                 "tasks": arr(STR), "chat_template": BOOL, "inputs_as_messages": BOOL,
                 "max_concurrent_requests": INT, "max_input_length": INT, "max_input_length_source": STR,
                 "max_batch_tokens": INT, "max_batch_requests": {"type": ["integer", "null"]},
                 "replicas": arr(obj({"index": INT, "device": STR, "in_service": BOOL, "busy": BOOL,
                                      "batches": INT, "tokens": INT, "failures": INT, "busy_seconds": NUM},
                                     ["index", "device", "in_service"])),
                 "max_client_batch_size": INT, "auto_truncate": BOOL, "tokenization_workers": INT,
                 "version": STR, "sha": NULLSTR, "docker_label": NULLSTR},
                ["model_id", "model_dtype", "model_type", "max_input_length", "max_client_batch_size",
                 "auto_truncate", "version"]),
    "Classify": obj({"object": {"const": "classify"}, "data": arr(arr(ref("ScoreLabel"))), "model": STR,
                     "usage": ref("Usage"), "id": STR, "created": INT}, ["object", "data"]),
    "CohereEmbed": obj({"id": STR, "embeddings": {"anyOf": [arr(arr(NUM)), {"type": "object"}]},
                        "texts": arr(STR), "meta": {"type": "object"}, "response_type": STR},
                       ["id", "embeddings", "response_type"]),
    "CohereRerank": obj({"id": STR, "results": arr(obj({"index": INT, "relevance_score": NUM,
                                                         "document": obj({"text": STR})},
                                                        ["index", "relevance_score"])),
                         "meta": {"type": "object"}, "model": STR, "usage": ref("Usage")}, ["results"]),
    "Score": obj({"id": STR, "object": {"const": "list"}, "created": INT, "model": STR,
                  "data": arr(obj({"index": INT, "object": {"const": "score"}, "score": NUM},
                                  ["index", "object", "score"])),
                  "usage": {"type": "object"}}, ["object", "data"]),
}
SCHEMAS.update({k + "Response": v for k, v in RESPONSES.items()})
# POST / (and /invocations) answers as the route the first model's type picks.
SCHEMAS["DefaultPostResponse"] = {"anyOf": [ref(k + "Response") for k in
                                            ("Predict", "Rerank", "EmbedSparse", "Embed", "Similarity")]}

# Status codes each flavour can answer (docs/server.md, Errors), beyond 200.
ERR_SCHEMA = {"decision": "DecisionError", "rerank": "RerankError", "tei": "TeiError", "openai": "OpenAIError", "infinity": "InfinityError",
              "cohere": "CohereError", "vllm": "VllmError"}
POST_CODES = {
    "decision": [400, 401, 404, 413, 415, 422, 429, 500, 503],
    "rerank": [400, 401, 413, 415, 422, 424, 429, 500, 503],
    "tei": [400, 401, 413, 415, 422, 424, 429, 500, 503],
    "openai": [400, 401, 413, 415, 422, 424, 429, 500, 503],
    "infinity": [400, 401, 413, 422, 429, 500, 503],
    "cohere": [400, 401, 413, 415, 422, 429, 500, 503],
    "vllm": [400, 401, 413, 415, 422, 429, 500, 503],
}
REASONS = {400: "Bad request (JSON syntax, empty input, model cannot serve the route on Infinity/Cohere/vLLM routes)",
           401: "Missing or wrong API key (--api-key)", 404: "No such model",
           413: "Body over --payload-limit", 415: "Not a JSON content type",
           422: "Validation error (types, limits, unknown model or prompt)",
           424: "The model cannot serve the route, or inference failed (TEI)",
           429: "--max-concurrent-requests exhausted", 500: "Internal or inference error",
           503: "Unhealthy or shutting down"}

REQUEST_ID = {"name": "x-request-id", "in": "header", "required": False,
              "description": "Request id echoed on the response and logged; 1-128 visible ASCII characters "
                             "(0x21-0x7e). A missing or invalid one is replaced by a generated 32-hex-digit id.",
              "schema": {"type": "string", "pattern": "^[!-~]{1,128}$"}}
RESP_HEADERS = {"x-request-id": {"$ref": "#/components/headers/XRequestId"}}

# method, path (router.c spelling, {id} for a '*' tail), flavour, tag, summary, request schema, response schema
ROUTES = [
    ("get", "/health", "tei", "health", "Health: 200 {unix} or 503", None, "Health"),
    ("get", "/", "tei", "health", "Health (as /health)", None, "Health"),
    ("get", "/ping", "tei", "health", "Health (as /health)", None, "Health"),
    ("get", "/metrics", "tei", "health", "Prometheus metrics", None, "text"),
    ("get", "/openapi.json", "tei", "health", "This document", None, "json"),
    ("get", "/docs", "tei", "health", "An HTML page that renders this document and tries routes", None, "html"),
    ("get", "/info", "tei", "TEI", "Model and router information (?model=NAME)", None, "InfoResponse"),
    ("post", "/embed", "tei", "TEI", "Embeddings", "EmbedRequest", "EmbedResponse"),
    ("post", "/embed_all", "tei", "TEI", "Per-token embeddings", "EmbedAllRequest", "EmbedAllResponse"),
    ("post", "/embed_sparse", "tei", "TEI", "SPLADE sparse embeddings", "EmbedAllRequest", "EmbedSparseResponse"),
    ("post", "/predict", "tei", "TEI", "Sequence (or token) classification", "PredictRequest", "PredictResponse"),
    ("post", "/rerank", "rerank", "TEI", "Rerank (TEI's body, or Infinity's with documents)", "RerankRequest",
     "RerankResponse"),
    ("post", "/similarity", "tei", "TEI", "Cosine similarities to a source sentence", "SimilarityRequest",
     "SimilarityResponse"),
    ("post", "/tokenize", "tei", "TEI", "Tokenize", "TokenizeRequest", "TokenizeResponse"),
    ("post", "/decode", "tei", "TEI", "Decode token ids", "DecodeRequest", "DecodeResponse"),
    ("post", "/", "tei", "TEI", "By the first model's type (predict, rerank, embed_sparse, embed, similarity)",
     "DefaultPostRequest", "DefaultPostResponse"),
    ("post", "/invocations", "tei", "TEI", "As POST /", "DefaultPostRequest", "DefaultPostResponse"),
    ("post", "/token_classify", "tei", "TEI", "Token classification (transformers pipeline shape)",
     "TokenClassifyRequest", "TokenClassifyResponse"),
    ("post", "/v1/embeddings", "openai", "OpenAI", "OpenAI embeddings", "OpenAIEmbeddingsRequest", "EmbeddingList"),
    ("get", "/v1/models", "openai", "OpenAI", "Models", None, "ModelList"),
    ("get", "/v1/models/{id}", "openai", "OpenAI", "One model (the id may contain /)", None, "ModelCard"),
    ("post", "/embeddings", "infinity", "Infinity", "Infinity embeddings", "InfinityEmbeddingsRequest",
     "EmbeddingList"),
    ("post", "/classify", "infinity", "Infinity", "Classification", "ClassifyRequest", "ClassifyResponse"),
    ("get", "/models", "infinity", "Infinity", "Models", None, "ModelList"),
    ("post", "/v1/embed", "cohere", "Cohere", "Cohere v1 embed", "CohereEmbedRequest", "CohereEmbedResponse"),
    ("post", "/v2/embed", "cohere", "Cohere", "Cohere v2 embed", "CohereEmbedRequest", "CohereEmbedResponse"),
    ("post", "/v1/rerank", "cohere", "Cohere", "Cohere v1 / Jina / vLLM rerank", "CohereRerankRequest",
     "CohereRerankResponse"),
    ("post", "/v2/rerank", "cohere", "Cohere", "Cohere v2 rerank", "CohereRerankRequest", "CohereRerankResponse"),
    ("post", "/score", "vllm", "vLLM", "vLLM score", "ScoreRequest", "ScoreResponse"),
    ("post", "/v1/systemone", "decision", "Decisions", "Typed decisions (TypeSafe System One; docs/decisions.md)",
     "DecisionRequest", "DecisionResponse"),
    ("post", "/v1/decisions", "decision", "Decisions", "Typed decisions (as /v1/systemone; Perplexity's path)",
     "DecisionRequest", "DecisionResponse"),
    ("post", "/v1/score", "vllm", "vLLM", "vLLM score", "ScoreRequest", "ScoreResponse"),
]


def error_response(flavour, code):
    content = {"application/json": {"schema": ref(ERR_SCHEMA[flavour])}}
    if flavour not in ("infinity", "decision") and code in (400, 413, 415, 422):
        content["text/plain"] = {"schema": STR}  # axum's framework-level rejections
    r = {"description": REASONS[code], "headers": RESP_HEADERS}
    if code == 401:  # TEI: empty body; Infinity: {"detail": "Unauthorized"}
        if flavour in ("infinity", "rerank"):
            r["content"] = {"application/json": {"schema": ref(ERR_SCHEMA[flavour])}}
    else:
        r["content"] = content
    return r


def operation(method, path, flavour, tag, summary, req, resp):
    op = {"tags": [tag], "summary": summary,
          "operationId": (method + path.replace("/", "_").replace("{", "").replace("}", "")).rstrip("_") or "root",
          "parameters": [{"$ref": "#/components/parameters/XRequestId"}]}
    if op["operationId"] == method:
        op["operationId"] = method + "_root"
    if path == "/info":
        op["parameters"].append({"name": "model", "in": "query", "required": False, "schema": STR})
    if "{id}" in path:
        op["parameters"].append({"name": "id", "in": "path", "required": True, "schema": STR,
                                 "description": "served name or model id"})
    if req:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(req)}}}
    if resp == "text":
        ok = {"text/plain": {"schema": STR}}
    elif resp == "html":
        ok = {"text/html": {"schema": STR}}
    elif resp == "json":
        ok = {"application/json": {"schema": {"type": "object"}}}
    elif resp == "any":
        ok = {"application/json": {"schema": ANY}}
    else:
        ok = {"application/json": {"schema": ref(resp)}}
    responses = {"200": {"description": "OK", "headers": RESP_HEADERS, "content": ok}}
    public = path in ("/health", "/", "/ping", "/metrics", "/openapi.json", "/docs") and method == "get"
    if req:
        codes = POST_CODES[flavour]
    else:
        codes = ([] if public else [401]) + [500]
        if path in ("/health", "/", "/ping"):
            codes.append(503)
        if path == "/info":
            codes.append(422)
        if "{id}" in path:
            codes.append(404)
    for c in sorted(codes):
        responses[str(c)] = error_response(flavour, c)
    op["responses"] = responses
    if not public:
        op["security"] = [{}, {"bearer": []}]
    return op


def build():
    paths = {}
    for method, path, flavour, tag, summary, req, resp in ROUTES:
        paths.setdefault(path, {})[method] = operation(method, path, flavour, tag, summary, req, resp)
    return {
        "openapi": "3.1.0",
        "info": {"title": "infinity_v3", "version": VERSION,
                 "description": "Embedding, rerank and classification server with OpenAI, TEI, Infinity, "
                                "Cohere and vLLM routes (docs/server.md). Every response carries x-request-id."},
        "servers": [{"url": "/"}],
        "tags": [{"name": t} for t in ["health", "TEI", "OpenAI", "Infinity", "Cohere", "vLLM", "Decisions"]],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "parameters": {"XRequestId": REQUEST_ID},
            "headers": {"XRequestId": {"description": "The request's id (the client's when valid, else generated)",
                                       "schema": {"type": "string", "pattern": "^[!-~]{1,128}$"}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "Only when the server runs with --api-key"}},
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when src/server/openapi.json is stale")
    a = ap.parse_args()
    text = json.dumps(build(), indent=1) + "\n"
    if a.check:
        cur = open(OUT).read() if os.path.exists(OUT) else ""
        if cur != text:
            print(f"{OUT} is stale: run python3 tools/gen_openapi.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT} ({len(text)} bytes, {len(ROUTES)} operations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
