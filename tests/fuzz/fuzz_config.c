/* libFuzzer target for config.json parsing (`make fuzz`):
 *   build/fuzz/fuzz_config -max_total_time=60 tests/fuzz/seeds/config
 * Any input must parse or fail with an error, never crash or leak. */
#include <stdint.h>
#include <stdlib.h>

#include "models/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    iv_hf_config cfg;
    iv_err err;
    iv_hf_config_parse(&cfg, (const char *)data, size, &err);
    iv_hf_config_free(&cfg);
    return 0;
}
