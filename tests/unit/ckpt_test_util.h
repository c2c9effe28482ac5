/* Shared helpers for the tests that must see a checkpoint rejected by name
 * (test_model_errors.c, test_encoder_errors.c, test_decoder_errors.c,
 * test_deberta.c): a temp directory holding a committed model fixture's
 * config.json, edited by the test, beside a link to the fixture's weights. */
#ifndef IV_TESTS_CKPT_TEST_UTIL_H
#define IV_TESTS_CKPT_TEST_UTIL_H

#include <stddef.h>

#include "base/json.h"
#include "unit/tmp_test_util.h"

/* Edits a fixture's parsed config.json in place. */
typedef void (*ckpt_edit_fn)(cJSON *cfg);

/* Builds /tmp/iv_ckpt_XXXXXX (its path in dir, cap bytes) from
 * tests/fixtures/models/<fixture>: config.json passed through edit (NULL:
 * unchanged) and, with link_weights, model.safetensors linked to the
 * fixture's. 0 on success; -1 after recording a test failure (the partial
 * directory, if any, is removed). Remove it with tmp_rmtree. */
int ckpt_make(char *dir, size_t cap, const char *fixture, ckpt_edit_fn edit, int link_weights);
/* Links tests/fixtures/models/<fixture>/<name> (a file or a folder) into dir; 0 on success. */
int ckpt_link(const char *dir, const char *fixture, const char *name);
/* Writes dir/name with n bytes of data; 0 on success. */
int ckpt_write(const char *dir, const char *name, const void *data, size_t n);

/* Writes dir/model.safetensors from the fixture's, leaving out every tensor
 * whose name starts with one of drop (NULL-terminated; NULL: none) and, when
 * extra_name is set, adding that float32 tensor of zeros with shape
 * extra_shape[0..extra_ndim). Checkpoints holding only the base model, partial
 * heads, heads of the wrong shape. 0 on success, else -1 after recording a
 * test failure. */
int ckpt_write_weights(const char *dir, const char *fixture, const char *const *drop, const char *extra_name,
                       const long long *extra_shape, int extra_ndim);

/* The same with the added tensor filled with extra_fill: a tensor the model
 * must leave unused is seen as used when it changes the outputs. */
int ckpt_write_weights_filled(const char *dir, const char *fixture, const char *const *drop, const char *extra_name,
                              const long long *extra_shape, int extra_ndim, float extra_fill);

/* Sets cfg[key] = v (taking v), replacing a value already there in place. */
void ckpt_set(cJSON *cfg, const char *key, cJSON *v);

/* Loading the checkpoint in dir must fail: no engine, code, and a message
 * holding needle. Failures are reported at file:line and name `what`. */
void ckpt_expect_load_error_at(const char *file, int line, const char *dir, const char *what, const char *needle,
                               int code);
/* ckpt_make (weights linked), ckpt_expect_load_error_at, tmp_rmtree. */
void ckpt_expect_reject_at(const char *file, int line, const char *fixture, ckpt_edit_fn edit, const char *needle,
                           int code);

#define CKPT_LOAD_ERROR(dir, what, needle, code) \
    ckpt_expect_load_error_at(__FILE__, __LINE__, dir, what, needle, code)
#define CKPT_REJECT(fixture, edit, needle, code) \
    ckpt_expect_reject_at(__FILE__, __LINE__, fixture, edit, needle, code)

#endif
