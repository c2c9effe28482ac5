/* Shared by the golden tests: a fixture directory's cases.json inputs and
 * expected.safetensors outputs (format: tests/fixtures/models/README.md). */
#ifndef IV_TESTS_GOLDEN_UTIL_H
#define IV_TESTS_GOLDEN_UTIL_H

#include <cJSON.h>
#include "engine/engine.h"
#include "models/vision.h"
#include "tensor/safetensors.h"

typedef struct golden_case {
    int n;
    int32_t **ids, **types;
    uint8_t **key_masks; /* per input: cases.json "key_mask" (0 = not attended as a key), or NULL */
    int *lens;
    int *prompt_lens;    /* per input: cases.json "prompt_len" (leading prompt tokens), else 0 */
    cJSON *json;         /* whole cases.json */
    iv_weights *expected;
} golden_case;

int golden_load(golden_case *g, const char *dir);
void golden_free(golden_case *g);
/* expected "<name>.<i>" as f32, or NULL. */
const iv_tensor *golden_expected(golden_case *g, const char *name, int i);
int golden_has_output(const golden_case *g, const char *name);
/* Names of the fixture directories under <fixtures>/models (those with a
 * cases.json), sorted; returns the count (<= cap), each name malloc'd. */
int golden_fixture_names(char **names, int cap);

/* 1 where a CUDA build finds a GPU; otherwise marks the test skipped
 * (saying why) and returns 0. */
int golden_cuda_present(void);

/* Compares rows of got against want with cosine >= min_cos per row and max
 * abs error <= max_abs; reports failures naming what. Returns failures. */
int golden_compare(const char *what, const float *got, const float *want, int64_t rows, int64_t cols,
                   double min_cos, double max_abs);
/* golden_compare over rows of got that lie ld floats apart, against want
 * ([rows, cols] FP32; NULL: nothing to do). *worst_cos and *worst_abs
 * take the worst row figures seen (min / max with what they hold). */
void golden_compare_rows(const char *what, const float *got, int64_t ld, const iv_tensor *want, double min_cos,
                         double max_abs, double *worst_cos, double *worst_abs);

/* A media fixture's sequence (an item of its "sequences"): the "ids" as a
 * malloc'd array of *len tokens, and its images, pool["images"[i]] placed
 * at token "image_offsets"[i], written to out (the count returned). */
int32_t *golden_seq_ids(const cJSON *seq, int *len);
int golden_seq_images(const cJSON *seq, const iv_image_input *pool, iv_image_input *out);

#endif
