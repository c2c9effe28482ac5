/* Thin helpers over cJSON for reading configuration files with clear errors. */
#ifndef IV_BASE_JSON_H
#define IV_BASE_JSON_H

#include <cJSON.h>
#include <stdint.h>
#include "base/err.h"

/* Parses a JSON file (bounded size); the caller frees with cJSON_Delete. */
int iv_json_load_file(const char *path, size_t max_size, cJSON **out, iv_err *err);
/* Parses a buffer of known length. */
int iv_json_parse(const char *buf, size_t len, const char *what, cJSON **out, iv_err *err);

/* A key of an object (cJSON_GetObjectItemCaseSensitive; NULL when obj is
 * NULL or has no such key). Every checkpoint-file key is read through this
 * (or the getters below), so the recorder sees it. */
cJSON *iv_json_get(const cJSON *obj, const char *key);

/* Test hook (tests/unit/test_checkpoint_fields.c, docs/checkpoint-fields.md):
 * when set, on_parse sees every document iv_json_parse / iv_json_load_file
 * returns (with its name or path) and on_get every iv_json_get lookup.
 * Process-wide and unsynchronised: set it only while one thread loads. */
typedef struct iv_json_recorder {
    void (*on_parse)(void *ctx, const cJSON *root, const char *what);
    void (*on_get)(void *ctx, const cJSON *obj, const char *key);
    void *ctx;
} iv_json_recorder;
void iv_json_set_recorder(const iv_json_recorder *r); /* NULL: off */

/* Typed getters: return def when the key is absent or JSON null. A present
 * key of the wrong type is an error only in the *_req / *_chk forms. */
int64_t iv_json_int(const cJSON *obj, const char *key, int64_t def);
double iv_json_num(const cJSON *obj, const char *key, double def);
int iv_json_bool(const cJSON *obj, const char *key, int def);
const char *iv_json_str(const cJSON *obj, const char *key, const char *def);

/* Checked forms: -1 with a message naming `what` and key on a type error. */
int iv_json_int_chk(const cJSON *obj, const char *key, int64_t def, int64_t *out, const char *what,
                    iv_err *err);
int iv_json_num_chk(const cJSON *obj, const char *key, double def, double *out, const char *what,
                    iv_err *err);
int iv_json_bool_chk(const cJSON *obj, const char *key, int def, int *out, const char *what,
                     iv_err *err);

/* Decodes the JSON string literal at p (after optional whitespace) into a
 * malloc'd NUL-terminated buffer, keeping embedded U+0000 that cJSON's
 * valuestring would cut short. *consumed: bytes of p used. Lone surrogate
 * escapes become U+FFFD. */
int iv_json_decode_string(const char *p, size_t len, char **out, size_t *out_len, size_t *consumed,
                          iv_err *err);

/* Python's json.loads tells 1.0 from 1; cJSON does not. iv_json_mark_floats
 * walks the text a document was parsed from and sets IV_JSON_FLOAT (a type
 * bit above cJSON's own, kept by cJSON_Duplicate) on every number written
 * with a fraction or an exponent, so the chat-template renderer prints 1.0
 * where Python would. iv_json_parse marks every document it returns. */
#define IV_JSON_FLOAT (1 << 12)
void iv_json_mark_floats(cJSON *root, const char *buf, size_t len);
int iv_json_is_float(const cJSON *v);

/* True when v is a JSON number holding an integer that fits int64. */
int iv_json_is_integer(const cJSON *v);

#endif
