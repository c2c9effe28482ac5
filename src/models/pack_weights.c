/* The FP32 packing pass (see pack_weights.h), on the shared walk over layer
 * weights (linear_weights.h). */
#include "models/pack_weights.h"

#include <stdint.h>
#include <sys/mman.h>

#include "models/linear_weights.h"
#include "models/loader.h"
#include "ops/cpu/gemm_panel.h"

/* Packed weights of at least this many bytes ask for transparent huge
 * pages. */
#define HUGE_PAGE_MIN ((size_t)4 << 20)

/* Asks the kernel to back the 2 MiB-aligned part of [p, p + n) with
 * transparent huge pages (where THP is "madvise", a common default, it
 * otherwise uses 4 KiB pages), before the packing writes, so that the
 * first touch faults huge pages in. A short request streams every weight
 * from memory once, and with 4 KiB pages that is a TLB miss every 4 KiB.
 * BERT-base, one 8-token request, 2 threads, Ice Lake-SP, three
 * alternating pairs of 200 runs, p50 ms with 4 KiB pages / huge pages:
 * 18.73 / 18.19, 17.43 / 16.71, 18.11 / 17.62 (219 of its 340 MB of
 * packed weights in huge pages then, when each weight had its own
 * allocation; all of them now, in one region: pack_region below). */
static void prefer_huge_pages(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (n >= HUGE_PAGE_MIN && hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* Panels packed per slice: 64 panels of 32 source rows (2048 rows, 6 MiB
 * of a 768-wide weight). */
#define PACK_SLICE_PANELS 64

void iv_pack_panels_releasing(float *dst, const iv_tensor *w, iv_weights *weights)
{
    const int64_t out = w->shape[0], in = w->shape[1], slice = PACK_SLICE_PANELS * IV_PANEL_COLS;
    for (int64_t r0 = 0; r0 < out; r0 += slice) {
        const int64_t rows = out - r0 < slice ? out - r0 : slice;
        const float *src = iv_f32(w) + r0 * in;
        iv_cpu_pack_panels(dst + r0 * in, src, rows, in); /* panel r0 / 32 starts r0 * in floats in */
        const iv_tensor done = iv_tensor_2d((float *)src, rows, in);
        iv_weights_release(weights, &done);
    }
}

/* Where packed weights go: one region for all of a model's, so that every
 * weight, the ones under HUGE_PAGE_MIN too, lies on 2 MiB pages (none of
 * all-MiniLM-L6-v2's 24 did before; 40 of its 42 MB now). MiniLM-L6 and
 * BERT-base 8-token requests, two engines in one process (per-weight
 * allocations / one region) taking turns run by run, Ice Lake-SP: p50
 * 11.04 / 10.86, 3.90 / 3.86 and 18.42 / 18.15 ms, p10 2-5% lower. */
typedef struct pack_region {
    char *next, *end; /* the region's unused part (NULL: none) */
    size_t bytes;     /* packed bytes so far */
} pack_region;

static size_t packed_size(const iv_tensor *w)
{
    return (iv_cpu_panel_floats(w->shape[0], w->shape[1]) * sizeof(float) + 63) & ~(size_t)63;
}

static const iv_tensor *count_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    *(size_t *)ctx += packed_size(w);
    return w; /* kept: this walk only counts */
}

static const iv_tensor *pack_one(iv_model *m, const iv_tensor *w, const char *what, void *ctx, iv_err *err)
{
    pack_region *r = ctx;
    const int64_t out = w->shape[0], in = w->shape[1];
    const size_t n = packed_size(w);
    iv_tensor *t = iv_model_alloc(m, sizeof *t);
    if (!t) return iv_errf(err, IV_E_NOMEM, "out of memory packing %s", what), NULL;
    float *packed;
    if (r->next && (size_t)(r->end - r->next) >= n) {
        packed = (float *)r->next;
        r->next += n;
    } else {
        char *raw = iv_model_alloc(m, n + 63);
        if (!raw) return iv_errf(err, IV_E_NOMEM, "out of memory packing %s", what), NULL;
        prefer_huge_pages(raw, n + 63);
        packed = (float *)(raw + ((64 - (uintptr_t)raw % 64) % 64));
    }
    iv_pack_panels_releasing(packed, w, m->weights);
    *t = iv_cpu_panel_tensor(packed, out, in);
    r->bytes += iv_cpu_panel_floats(out, in) * sizeof(float);
    return t;
}

int iv_model_pack_cpu_weights(iv_model *m, size_t *packed_bytes, iv_err *err)
{
    const unsigned kinds = IV_LW_LAYER_MATMULS | IV_LW_AUX | IV_LW_HEADS;
    pack_region r = {0};
    size_t total = 0;
    if (iv_model_replace_linear_weights(m, kinds, count_one, &total, err)) return -1;
    /* 2 MiB more than needed, to start the region on a 2 MiB boundary: only
     * address space, the pages past the weights are never touched. Without
     * the region (out of memory for it in one piece) each weight gets its
     * own allocation. */
    const size_t huge = (size_t)2 << 20;
    char *raw = total ? iv_model_alloc(m, total + huge) : NULL;
    if (raw) {
        r.next = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
        r.end = r.next + total;
        prefer_huge_pages(r.next, (size_t)(raw + total + huge - r.next));
    }
    const int rc = iv_model_replace_linear_weights(m, kinds, pack_one, &r, err);
    if (packed_bytes) *packed_bytes = r.bytes;
    return rc;
}
