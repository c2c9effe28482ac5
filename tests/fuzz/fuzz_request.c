/* libFuzzer target for HTTP request bodies (`make fuzz`):
 *   build/fuzz/fuzz_request -max_total_time=60 tests/fuzz/seeds/request
 * Every parser a route applies to a body: UTF-8 validation, the JSON
 * object, typed fields, and inputs in their TEI/OpenAI, predict and list
 * forms. Any input must parse or fail with an error, never crash or leak. */
#include <stdint.h>
#include <stdlib.h>

#include "server/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j;
    iv_api_error e;
    if (iv_codec_parse_body((const char *)data, size, &j, &e)) return 0;
    iv_inputs in;
    int b, left, present;
    int64_t v;
    const char *s;
    iv_codec_inputs(j, "inputs", &in, &e);
    iv_inputs_free(&in);
    iv_codec_predict_inputs(j, "inputs", &in, &e);
    iv_inputs_free(&in);
    iv_codec_string_list(j, "texts", &in, &e);
    iv_inputs_free(&in);
    iv_codec_bool(j, "normalize", 1, &b, &e);
    iv_codec_opt_bool(j, "truncate", &b, &e);
    iv_codec_opt_uint(j, "dimensions", 1 << 30, &v, &e);
    iv_codec_opt_int(j, "top_n", &v, &present, &e);
    iv_codec_opt_string(j, "model", &s, &e);
    iv_codec_required_string(j, "query", &s, &e);
    iv_codec_truncation_left(j, &left, &e);
    iv_codec_encoding_format(j, &b, &e);
    cJSON_Delete(j);
    return 0;
}
