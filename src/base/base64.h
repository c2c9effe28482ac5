/* Base64 decoding for media sent inline (images, audio). */
#ifndef IV_BASE_BASE64_H
#define IV_BASE_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Standard or URL-safe alphabet, padding optional, ASCII whitespace
 * skipped. Errors (IV_E_INVALID, IV_E_TOO_LARGE past max_bytes decoded
 * bytes) name `what` ("audio", ...). *out is malloc'd. */
int iv_base64_decode(const char *s, size_t n, size_t max_bytes, const char *what, uint8_t **out, size_t *out_n,
                     iv_err *err);

#endif
