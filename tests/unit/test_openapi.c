/* The embedded OpenAPI document (src/server/openapi.json) against the route
 * table: it parses, and every route router.c serves is in it with its
 * method (and nothing else is), so adding a route without documenting it
 * fails here. Regenerate with tools/gen_openapi.py. */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "server/router.h"
#include "server/routes_openapi.h"
#include "test.h"

/* router.c spells OpenAI's /v1/models/{id} as a '*' prefix match. */
static void doc_path(const char *route, char *out, size_t cap)
{
    size_t n = strlen(route);
    if (n && route[n - 1] == '*') snprintf(out, cap, "%.*s{id}", (int)(n - 1), route);
    else snprintf(out, cap, "%s", route);
}

static void lower(const char *s, char *out, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) out[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    out[i] = 0;
}

TEST(openapi_document_parses)
{
    size_t n;
    const char *text = iv_openapi_document(&n);
    REQUIRE(n > 1000);
    CHECK_EQ_INT(text[n], 0);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    REQUIRE(doc);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "openapi")), "3.1.0");
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(doc, "paths")));
    const cJSON *servers = cJSON_GetObjectItem(doc, "servers");
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(servers, 0), "url")), "/");
    cJSON_Delete(doc);
    size_t hn;
    const char *html = iv_docs_page(&hn);
    CHECK(hn > 500);
    CHECK(strstr(html, "openapi.json") != NULL);
}

TEST(openapi_every_route_documented)
{
    size_t n, nroutes;
    const char *text = iv_openapi_document(&n);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    REQUIRE(doc);
    const cJSON *paths = cJSON_GetObjectItem(doc, "paths");
    const iv_route *routes = iv_route_table(&nroutes);
    REQUIRE(nroutes > 20);
    for (size_t i = 0; i < nroutes; i++) {
        char path[256], method[16];
        doc_path(routes[i].path, path, sizeof path);
        lower(routes[i].method, method, sizeof method);
        const cJSON *op = cJSON_GetObjectItem(cJSON_GetObjectItemCaseSensitive(paths, path), method);
        CHECK_MSG(op != NULL, "router.c serves %s %s, src/server/openapi.json lacks it (tools/gen_openapi.py)",
                  routes[i].method, routes[i].path);
        if (!op) continue;
        CHECK_MSG(cJSON_GetObjectItem(cJSON_GetObjectItem(op, "responses"), "200") != NULL, "%s %s: no 200",
                  routes[i].method, path);
        /* A route that reads a JSON body documents one. */
        CHECK_MSG(!routes[i].json_body == !cJSON_GetObjectItem(op, "requestBody"), "%s %s: requestBody",
                  routes[i].method, path);
    }
    /* And the reverse: no operation the server does not have. */
    const cJSON *item;
    cJSON_ArrayForEach(item, paths) {
        const cJSON *op;
        cJSON_ArrayForEach(op, item) {
            int found = 0;
            for (size_t i = 0; i < nroutes && !found; i++) {
                char path[256], method[16];
                doc_path(routes[i].path, path, sizeof path);
                lower(routes[i].method, method, sizeof method);
                found = !strcmp(path, item->string) && !strcmp(method, op->string);
            }
            CHECK_MSG(found, "openapi.json documents %s %s, router.c has no such route", op->string, item->string);
        }
    }
    cJSON_Delete(doc);
}
