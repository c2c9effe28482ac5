/* Embedding quantization (src/server/quantize_embeddings.c) against the
 * reference sentence-transformers computes (tests/fixtures/quantize/
 * reference.json, written by tools/gen_quantize_reference.py): every code
 * of every case must be equal. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "server/quantize_embeddings.h"
#include "test.h"

static cJSON *load_reference(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/quantize/reference.json", iv_test_fixtures_dir());
    char *text = NULL;
    size_t len = 0;
    iv_err err = {0};
    if (iv_file_read_all(path, 64 << 20, &text, &len, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    return root;
}

TEST(quantize_embeddings_matches_sentence_transformers)
{
    cJSON *root = load_reference();
    REQUIRE(root);
    const cJSON *c;
    int vectors = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const int dim = cJSON_GetObjectItem(c, "dim")->valueint;
        const cJSON *floats = cJSON_GetObjectItem(c, "float");
        float *v = malloc((size_t)dim * sizeof *v);
        unsigned char *q = malloc((size_t)dim * 4);
        for (int row = 0; row < cJSON_GetArraySize(floats); row++) {
            const cJSON *fr = cJSON_GetArrayItem(floats, row);
            for (int k = 0; k < dim; k++) v[k] = (float)cJSON_GetArrayItem(fr, k)->valuedouble;
            static const iv_quant codes[] = {IV_QUANT_INT8, IV_QUANT_UINT8, IV_QUANT_BINARY, IV_QUANT_UBINARY};
            for (size_t t = 0; t < sizeof codes / sizeof codes[0]; t++) {
                const iv_quant qt = codes[t];
                const int is_signed = qt == IV_QUANT_INT8 || qt == IV_QUANT_BINARY;
                const cJSON *want = cJSON_GetArrayItem(cJSON_GetObjectItem(c, iv_quant_name(qt)), row);
                const int n = (int)iv_quant_size(qt, dim);
                CHECK_EQ_INT(cJSON_GetArraySize(want), n);
                iv_quantize(qt, v, dim, q);
                int bad = 0;
                for (int k = 0; k < n && !bad; k++) {
                    const int got = is_signed ? (signed char)q[k] : q[k];
                    const int exp = cJSON_GetArrayItem(want, k)->valueint;
                    if (got != exp) {
                        bad = 1;
                        CHECK_MSG(0, "%s row %d %s[%d]: got %d, want %d (x=%.9g)", name, row, iv_quant_name(qt), k,
                                  got, exp, (double)v[k < dim ? k : 0]);
                    }
                }
            }
            /* JSON forms: base64 is the float32 bytes, the codes print as numbers. */
            iv_strbuf b;
            iv_sb_init(&b);
            iv_quant_json(&b, IV_QUANT_BASE64, v, dim);
            char want[8192];
            snprintf(want, sizeof want, "\"%s\"",
                     cJSON_GetArrayItem(cJSON_GetObjectItem(c, "base64"), row)->valuestring);
            CHECK_STR(b.data, want);
            iv_sb_free(&b);
            vectors++;
        }
        free(v);
        free(q);
    }
    CHECK(vectors >= 20);
    cJSON_Delete(root);
}

TEST(quantize_embeddings_json_and_names)
{
    const float v[10] = {0.5f, -0.25f, 0.0f, 1.0f, -1.0f, 0.1f, 0.2f, -0.3f, 0.9f, -0.9f};
    iv_strbuf b;
    iv_sb_init(&b);
    iv_quant_json(&b, IV_QUANT_UBINARY, v, 10);
    /* bits: 1 0 0 1 0 1 1 0 | 1 0 -> 0x96, 0x80 */
    CHECK_STR(b.data, "[150,128]");
    iv_sb_reset(&b);
    iv_quant_json(&b, IV_QUANT_BINARY, v, 10);
    CHECK_STR(b.data, "[22,0]");
    iv_sb_reset(&b);
    iv_quant_json(&b, IV_QUANT_INT8, v + 3, 2);
    CHECK_STR(b.data, "[127,-128]");
    iv_sb_reset(&b);
    iv_quant_json(&b, IV_QUANT_UINT8, v + 3, 2);
    CHECK_STR(b.data, "[255,0]");
    iv_sb_free(&b);
    CHECK_EQ_INT(iv_quant_parse("ubinary"), IV_QUANT_UBINARY);
    CHECK_EQ_INT(iv_quant_parse("float"), IV_QUANT_FLOAT);
    CHECK_EQ_INT(iv_quant_parse("int4"), -1);
    CHECK_EQ_INT((int)iv_quant_size(IV_QUANT_BINARY, 13), 2);
}
