/* One region for a load-time pass's weight copies (see weight_region.h). */
#include "models/weight_region.h"

#include <stdint.h>
#include <sys/mman.h>

#include "models/loader.h"

#define HUGE_PAGE ((size_t)2 << 20)
/* Regions and pieces of at least this many bytes ask for huge pages. */
#define HUGE_PAGE_MIN ((size_t)4 << 20)

/* Asks the kernel to back the 2 MiB-aligned part of [p, p + n) with
 * transparent huge pages (where THP is "madvise", a common default, it
 * otherwise uses 4 KiB pages), before the copies are written, so that the
 * first touch faults huge pages in. BERT-base, one 8-token request, 2
 * threads, Ice Lake-SP, three alternating pairs of 200 runs, p50 ms with
 * 4 KiB pages / huge pages: 18.73 / 18.19, 17.43 / 16.71, 18.11 / 17.62,
 * when each packed weight of 4 MiB or more had its own allocation (219 of
 * 340 MB on huge pages). With one region for all of them (all but the
 * last partial 2 MiB), MiniLM-L6 (none of whose 24 weights reached 4 MiB)
 * and BERT-base 8-token requests, two engines in one process taking turns
 * run by run: p50 11.04 / 10.86, 3.90 / 3.86 and 18.42 / 18.15 ms, p10
 * 2-5% lower. `--dtype int8`, whose blobs had no huge pages at all, the
 * same way: MiniLM-L6 1.218 / 1.185 and 1.204 / 1.117 ms, BERT-base
 * 7.64 / 7.33 and 7.40 / 7.15 ms. */
static void prefer_huge_pages(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1),
                    hi = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (n >= HUGE_PAGE_MIN && hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

size_t iv_weight_region_piece(size_t n) { return (n + 63) & ~(size_t)63; }

void iv_weight_region_reserve(iv_weight_region *r, iv_model *m, size_t bytes)
{
    r->next = r->end = NULL;
    /* One huge page more, to start on a 2 MiB boundary: address space only,
     * the pages past the copies are never touched. */
    char *raw = bytes ? iv_model_alloc(m, bytes + HUGE_PAGE) : NULL;
    if (!raw) return;
    r->next = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    r->end = r->next + bytes;
    prefer_huge_pages(r->next, (size_t)(raw + bytes + HUGE_PAGE - r->next));
}

void *iv_weight_region_take(iv_weight_region *r, iv_model *m, size_t n)
{
    const size_t piece = iv_weight_region_piece(n);
    if (r->next && (size_t)(r->end - r->next) >= piece) {
        void *p = r->next;
        r->next += piece;
        return p;
    }
    char *raw = iv_model_alloc(m, n + 63);
    if (!raw) return NULL;
    prefer_huge_pages(raw, n + 63);
    return raw + ((64 - (uintptr_t)raw % 64) % 64);
}
