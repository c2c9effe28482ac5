/* A client's media string to bytes, shared by images and audio: a data URL
 * (data:<type>;base64,<data>) or bare base64. The URL's media type must be
 * one the caller accepts (image/..., audio/...), but it only gates the
 * string: the format is always sniffed from the bytes by the decoder.
 * http(s) URLs are refused (the server fetches nothing for requests). */
#ifndef IV_BASE_MEDIA_SOURCE_H
#define IV_BASE_MEDIA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* what: "image" / "audio", used in every message; types: the accepted media
 * type prefixes ("image/", ...), NULL-terminated. Errors: IV_E_INVALID
 * (empty, no comma, another media type, not ;base64, a URL, bad base64),
 * IV_E_TOO_LARGE (more than max_bytes decoded bytes, refused by the text's
 * length before decoding). *bytes is malloc'd. */
int iv_media_source_bytes(const char *s, size_t n, const char *what, const char *const *types, size_t max_bytes,
                          uint8_t **bytes, size_t *n_bytes, iv_err *err);

#endif
