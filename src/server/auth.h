/* API key check of `Authorization: Bearer KEY`. */
#ifndef IV_SERVER_AUTH_H
#define IV_SERVER_AUTH_H

/* Longest --api-key accepted at start (a key is a secret, not a document;
 * HTTP servers commonly cap a header line near 8 KB). */
#define IV_API_KEY_MAX 4096

/* 1 when header is exactly "Bearer " followed by key. The comparison takes
 * the same time whatever the header holds (both sides are hashed with
 * SHA-256 and the digests compared byte by byte), and uses no buffer whose
 * size depends on the key. */
int iv_auth_bearer_ok(const char *key, const char *header);

#endif
