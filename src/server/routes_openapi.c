/* GET /openapi.json and GET /docs.
 *
 * Both are data files kept in the repository and assembled into the binary
 * with .incbin, so the server needs no files at run time:
 *   src/server/openapi.json  the OpenAPI 3.1 document (written by
 *                            tools/gen_openapi.py; tests/unit/test_openapi.c
 *                            fails when router.c has a route it lacks)
 *   src/server/docs.html     a small page of our own (no third-party
 *                            bundle) that renders the document and posts
 *                            JSON to a route
 * The paths are relative to the repository root, where make runs the
 * compiler; the Makefile lists both files as prerequisites of this object. */
#include <cJSON.h>
#include <string.h>
#include "server/router.h"
#include "server/routes_openapi.h"

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global iv_openapi_json_data\n"
        "iv_openapi_json_data:\n"
        ".incbin \"src/server/openapi.json\"\n"
        ".global iv_openapi_json_end\n"
        "iv_openapi_json_end:\n"
        ".byte 0\n"
        ".balign 16\n"
        ".global iv_docs_html_data\n"
        "iv_docs_html_data:\n"
        ".incbin \"src/server/docs.html\"\n"
        ".global iv_docs_html_end\n"
        "iv_docs_html_end:\n"
        ".byte 0\n"
        ".previous\n");

extern const char iv_openapi_json_data[], iv_openapi_json_end[];
extern const char iv_docs_html_data[], iv_docs_html_end[];

const char *iv_openapi_document(size_t *len)
{
    if (len) *len = (size_t)(iv_openapi_json_end - iv_openapi_json_data);
    return iv_openapi_json_data;
}

const char *iv_docs_page(size_t *len)
{
    if (len) *len = (size_t)(iv_docs_html_end - iv_docs_html_data);
    return iv_docs_html_data;
}

/* With --url-prefix the document's servers field names the prefix, so that
 * clients generated from it (and the /docs page) call the prefixed routes. */
void iv_route_openapi(iv_req *r)
{
    size_t n;
    const char *doc = iv_openapi_document(&n);
    iv_strbuf b;
    iv_sb_init(&b);
    const char *prefix = r->srv->o.url_prefix;
    cJSON *j = prefix && *prefix ? cJSON_ParseWithLength(doc, n) : NULL;
    if (j) {
        cJSON *servers = cJSON_CreateArray(), *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "url", prefix);
        cJSON_AddItemToArray(servers, s);
        cJSON_ReplaceItemInObjectCaseSensitive(j, "servers", servers);
        char *text = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (text) iv_sb_puts(&b, text);
        else b.oom = 1;
        cJSON_free(text);
    } else {
        iv_sb_append(&b, doc, n);
    }
    iv_req_reply(r, 200, "application/json", &b);
}

void iv_route_docs(iv_req *r)
{
    size_t n;
    const char *page = iv_docs_page(&n);
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_append(&b, page, n);
    iv_req_reply(r, 200, "text/html; charset=utf-8", &b);
}
