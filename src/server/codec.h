/* Request parsing and response encoding shared by every API flavour.
 *
 * Parsing follows the peers' schemas: typed fields with defaults (a wrong
 * type is a request-shape error naming the field, as serde/pydantic report
 * it), inputs in all their forms, and UTF-8 validation of the body (cJSON
 * does not validate UTF-8). Strings returned point into the cJSON tree. */
#ifndef IV_SERVER_CODEC_H
#define IV_SERVER_CODEC_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include "base/strbuf.h"
#include "engine/inputs.h"
#include "server/errors.h"

/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or code points
 * above U+10FFFF); else 0 with *bad = offset of the first invalid byte. */
int iv_utf8_valid(const char *s, size_t n, size_t *bad);
size_t iv_utf8_count(const char *s, size_t n);

/* Parses a request body that must be a JSON object. A raw control byte
 * inside a string is a syntax error (RFC 8259); a string holding U+0000
 * keeps its full length, read with iv_codec_str_len. */
int iv_codec_parse_body(const char *body, size_t len, cJSON **out, iv_api_error *err);
/* The same for any JSON value (the CLI's input lines): no object required. */
int iv_codec_parse_json(const char *body, size_t len, cJSON **out, iv_api_error *err);
/* Byte length of a parsed string (0 for a non-string): its decoded length,
 * not strlen, so text after a U+0000 is kept. */
size_t iv_codec_str_len(const cJSON *v);

/* Field getters on a request object. "Absent" and, for optional fields,
 * JSON null give the default; any other type is a JSON_DATA error. */
int iv_codec_bool(const cJSON *obj, const char *key, int def, int *out, iv_api_error *err);
/* Option<bool>: -1 when absent or null. */
int iv_codec_opt_bool(const cJSON *obj, const char *key, int *out, iv_api_error *err);
/* Option<usize>: -1 when absent or null; integers in [0, max]. */
int iv_codec_opt_uint(const cJSON *obj, const char *key, int64_t max, int64_t *out, iv_api_error *err);
/* Plain int (Infinity's `dimensions: int = 0`, `top_n`). */
int iv_codec_opt_int(const cJSON *obj, const char *key, int64_t *out, int *present, iv_api_error *err);
int iv_codec_opt_string(const cJSON *obj, const char *key, const char **out, iv_api_error *err);
int iv_codec_required_string(const cJSON *obj, const char *key, const char **out, iv_api_error *err);
/* truncation_direction: "right"/"Right" (default) or "left"/"Left". */
int iv_codec_truncation_left(const cJSON *obj, int *left, iv_api_error *err);
/* encoding_format: "float" (default), "base64", or "tensor" (a whole
 * multi-vector matrix at once; routes refuse it for single-vector models). */
enum { IV_ENCODING_FLOAT, IV_ENCODING_BASE64, IV_ENCODING_TENSOR };
int iv_codec_encoding_format(const cJSON *obj, int *format, iv_api_error *err);

/* Request inputs, one iv_input per sequence. */
typedef struct iv_inputs {
    int n;
    iv_input *items; /* text/pair point into the cJSON tree; ids are owned */
    int single;      /* the request gave one input rather than a list */
    size_t n_chars;  /* code points over all texts, ids count 1 each (x-compute-characters) */
} iv_inputs;
void iv_inputs_free(iv_inputs *in);

/* TEI/OpenAI `Input`: "text" | [id, ...] | ["text" | [id, ...], ...]; a
 * conversation (a list of message objects) stands for one input, alone or
 * in the list. */
int iv_codec_inputs(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err);
/* vLLM's chat form: `messages`, one conversation (a non-empty list of message objects). */
int iv_codec_messages(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err);
/* TEI `PredictInput`: "text" | ["a", "b"] (one pair) | [["a"], ["a", "b"], ...], and
 * conversations where a sequence may stand. */
int iv_codec_predict_inputs(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err);
/* A required list of strings ("texts", "documents", Infinity's classify "input"). */
int iv_codec_string_list(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err);

/* Appends one embedding: a JSON float array, or a base64 string of its
 * little-endian float32 bytes (OpenAI encoding_format=base64). */
void iv_codec_embedding(iv_strbuf *b, const float *v, int n, int base64);
/* Appends one multi-vector matrix (rows x cols, row-major): float gives
 * [[f32 x cols], ...], base64 one string per row, tensor
 * {"shape":[rows,cols],"dtype":"float32","data":"<base64 of the row-major
 * little-endian float32 matrix>"}. Zero rows give [] (or an empty tensor). */
void iv_codec_matrix(iv_strbuf *b, const float *v, int rows, int cols, int format);
void iv_codec_base64(iv_strbuf *b, const unsigned char *p, size_t n);
/* Appends a SPLADE vector as TEI's [{"index":i,"value":v}, ...] over its
 * non-zero entries. */
void iv_codec_sparse(iv_strbuf *b, const float *v, int n);

#endif
