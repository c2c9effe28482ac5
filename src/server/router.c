#include "server/router.h"

#include <string.h>

static const iv_route routes[] = {
    /* Public: health checks and metrics. */
    {"GET", "/health", iv_route_health, IV_FLAVOUR_TEI, 1, 0},
    {"GET", "/", iv_route_health, IV_FLAVOUR_TEI, 1, 0},
    {"GET", "/ping", iv_route_health, IV_FLAVOUR_TEI, 1, 0},
    {"GET", "/metrics", iv_route_metrics, IV_FLAVOUR_TEI, 1, 0},
    {"GET", "/openapi.json", iv_route_openapi, IV_FLAVOUR_TEI, 1, 0}, /* routes_openapi.c */
    {"GET", "/docs", iv_route_docs, IV_FLAVOUR_TEI, 1, 0},
    /* TEI */
    {"GET", "/info", iv_route_info, IV_FLAVOUR_TEI, 0, 0},
    {"POST", "/embed", iv_route_embed, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/embed_all", iv_route_embed_all, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/embed_sparse", iv_route_embed_sparse, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/predict", iv_route_predict, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/rerank", iv_route_rerank, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/similarity", iv_route_similarity, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/tokenize", iv_route_tokenize, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/decode", iv_route_decode, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/", iv_route_default_post, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/invocations", iv_route_default_post, IV_FLAVOUR_TEI, 0, 1},
    {"POST", "/token_classify", iv_route_token_classify, IV_FLAVOUR_TEI, 0, 1},
    /* OpenAI (TEI's implementation and error bodies) */
    {"POST", "/v1/embeddings", iv_route_openai_embeddings, IV_FLAVOUR_OPENAI, 0, 1},
    {"GET", "/v1/models", iv_route_models, IV_FLAVOUR_OPENAI, 0, 0},
    /* Infinity */
    {"POST", "/embeddings", iv_route_infinity_embeddings, IV_FLAVOUR_INFINITY, 0, 1},
    {"POST", "/classify", iv_route_classify, IV_FLAVOUR_INFINITY, 0, 1},
    {"GET", "/models", iv_route_models, IV_FLAVOUR_INFINITY, 0, 0},
    /* Cohere (routes_cohere.c); /v1/rerank also takes Jina's and vLLM's bodies */
    {"POST", "/v1/embed", iv_route_cohere_embed, IV_FLAVOUR_COHERE, 0, 1},
    {"POST", "/v2/embed", iv_route_cohere_embed, IV_FLAVOUR_COHERE, 0, 1},
    {"POST", "/v1/rerank", iv_route_cohere_rerank, IV_FLAVOUR_COHERE, 0, 1},
    {"POST", "/v2/rerank", iv_route_cohere_rerank, IV_FLAVOUR_COHERE, 0, 1},
    /* vLLM (routes_vllm.c) */
    {"POST", "/score", iv_route_vllm_score, IV_FLAVOUR_VLLM, 0, 1},
    {"POST", "/v1/score", iv_route_vllm_score, IV_FLAVOUR_VLLM, 0, 1},
    /* Typed decisions (routes_decisions.c; TypeSafe System One, Perplexity's alias) */
    {"POST", "/v1/systemone", iv_route_decisions, IV_FLAVOUR_OPENAI, 0, 1},
    {"POST", "/v1/decisions", iv_route_decisions, IV_FLAVOUR_OPENAI, 0, 1},
    /* OpenAI's GET /v1/models/{id}: a path ending in '*' matches by prefix */
    {"GET", "/v1/models/*", iv_route_models, IV_FLAVOUR_OPENAI, 0, 0},
};

const iv_route *iv_route_table(size_t *n)
{
    *n = sizeof routes / sizeof routes[0];
    return routes;
}

static int path_matches(const char *pattern, const char *path)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*') return !strncmp(pattern, path, n - 1) && path[n - 1];
    return !strcmp(pattern, path);
}

const iv_route *iv_route_find(const char *method, const char *path, int *status)
{
    int path_known = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!path_matches(routes[i].path, path)) continue;
        path_known = 1;
        if (!strcmp(routes[i].method, method)) return &routes[i];
        /* HEAD is GET without a body (MHD drops it). */
        if (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")) return &routes[i];
    }
    *status = path_known ? 405 : 404;
    return 0;
}
