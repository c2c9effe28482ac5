/* The embedded OpenAPI document and /docs page (routes_openapi.c). */
#ifndef IV_SERVER_ROUTES_OPENAPI_H
#define IV_SERVER_ROUTES_OPENAPI_H

#include <stddef.h>

/* The document as committed (servers: "/"), NUL-terminated; *len without the NUL. */
const char *iv_openapi_document(size_t *len);
/* The /docs page, NUL-terminated. */
const char *iv_docs_page(size_t *len);

#endif
