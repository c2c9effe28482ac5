/* The route table: method + path -> handler, API flavour (which decides
 * the error bodies), whether the route is public (no API key: /health,
 * /metrics, as TEI and Infinity keep them) and whether it reads a JSON body. */
#ifndef IV_SERVER_ROUTER_H
#define IV_SERVER_ROUTER_H

#include "server/request.h"

struct iv_route {
    const char *method;
    const char *path;
    void (*handler)(iv_req *r);
    iv_flavour flavour;
    int is_public;
    int json_body;
};

/* NULL with *status 404 (no such path) or 405 (path exists, other method). */
const iv_route *iv_route_find(const char *method, const char *path, int *status);
/* Every route, for tests that hold the OpenAPI document to the table. */
const iv_route *iv_route_table(size_t *n);

/* Handlers, by flavour file. */
void iv_route_health(iv_req *r);   /* routes_common.c */
void iv_route_metrics(iv_req *r);
void iv_route_embed(iv_req *r);    /* routes_tei.c */
void iv_route_embed_all(iv_req *r);
void iv_route_embed_sparse(iv_req *r);
void iv_route_predict(iv_req *r);
void iv_route_rerank(iv_req *r);   /* TEI shape, or Infinity's when the body has "documents" */
void iv_route_similarity(iv_req *r);
void iv_route_tokenize(iv_req *r);
void iv_route_decode(iv_req *r);
void iv_route_info(iv_req *r);
void iv_route_default_post(iv_req *r); /* POST / and /invocations: by model type */
void iv_route_openai_embeddings(iv_req *r);   /* routes_openai.c */
void iv_route_infinity_embeddings(iv_req *r); /* routes_infinity.c */
void iv_route_infinity_rerank(iv_req *r);
void iv_route_classify(iv_req *r);
void iv_route_models(iv_req *r);     /* also GET /v1/models/{id} */
void iv_route_cohere_embed(iv_req *r);  /* routes_cohere.c: /v1/embed, /v2/embed */
void iv_route_cohere_rerank(iv_req *r); /* /v1/rerank, /v2/rerank (Cohere, Jina, vLLM bodies) */
void iv_route_vllm_score(iv_req *r);    /* routes_vllm.c: /score, /v1/score */
void iv_route_token_classify(iv_req *r); /* routes_token_classify.c */
int iv_route_predict_tokens(iv_req *r);  /* /predict on a token classifier: 1 when it took the request */
void iv_route_decisions(iv_req *r);     /* routes_decisions.c: /v1/systemone, /v1/decisions */
void iv_route_openapi(iv_req *r);        /* routes_openapi.c: GET /openapi.json, GET /docs */
void iv_route_docs(iv_req *r);

#endif
