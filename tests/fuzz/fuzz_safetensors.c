/* libFuzzer target for the safetensors header parser (`make fuzz`). Any input
 * must either open cleanly or fail with an error; once open, every tensor is
 * read in full through iv_weights_f32, so an offset check that let a range
 * past the buffer slip through shows up as an ASan report.
 *
 *   make fuzz && build/fuzz/fuzz_safetensors -max_total_time=60 \
 *       -dict=tests/fuzz/safetensors.dict build/fuzz/corpus_safetensors tests/fuzz/seeds/safetensors
 *
 * The seeds were written by safetensors.torch.save_file (F32+F16 with
 * metadata; BF16, I64, an F64 scalar and an empty tensor; a 5-dim tensor). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size heap copy, so ASan sees the image's true end. */
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    iv_weights *w;
    iv_err err;
    if (iv_weights_open_memory(&w, buf, size, "fuzz", &err) == 0) {
        int n = iv_weights_count(w);
        for (int i = 0; i < n; i++) {
            const char *name = iv_weights_name(w, i);
            const iv_tensor *raw = iv_weights_find(w, name);
            if (raw) {
                volatile unsigned char sink = 0;
                const unsigned char *p = raw->data;
                size_t nb = iv_tensor_nbytes(raw);
                for (size_t k = 0; k < nb; k++) sink ^= p[k];
                (void)sink;
            }
            const iv_tensor *t;
            if (iv_weights_f32(w, name, 0, NULL, &t, &err) == 0) {
                const iv_tensor *again;
                if (iv_weights_f32(w, name, 0, NULL, &again, &err) != 0 || again != t) abort();
            }
            (void)iv_weights_has_prefix(w, name);
        }
        (void)iv_weights_metadata(w, "format");
        iv_weights_close(w);
    }
    free(buf);
    return 0;
}
