/* The fast float formatter must write exactly what snprintf + strtof
 * (iv_format_float_reference) write, and that text must read back as the
 * same float. Checked on the hard cases of exact decimal arithmetic
 * (neighbours of powers of ten and of two, where rounding ties and the
 * narrower gap below a power of two live), on embedding-like values and on
 * random bit patterns over the whole float range. */
#include <stdlib.h>

#include "base/float_fmt.h"
#include "base/strbuf.h"
#include "test.h"

static int g_mismatches;

static void check_one(float f)
{
    if (!isfinite(f)) return;
    char fast[32], ref[32];
    const int n = iv_format_float(fast, f);
    iv_format_float_reference(ref, f);
    if ((strcmp(fast, ref) || n != (int)strlen(fast) || strtof(fast, NULL) != f) && g_mismatches++ < 10) {
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        CHECK_MSG(0, "0x%08x: fast \"%s\" (length %d), reference \"%s\"", bits, fast, n, ref);
    }
}

static float from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* f and its k neighbours on each side, both signs. */
static void check_around(float f, int k)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    for (int d = -k; d <= k; d++) {
        const uint32_t b = bits + (uint32_t)d;
        check_one(from_bits(b));
        check_one(from_bits(b ^ 0x80000000u));
    }
}

TEST(float_fmt_matches_printf)
{
    g_mismatches = 0;
    check_one(0.0f);
    check_one(-0.0f);
    check_one(1.0f);
    check_one(0.1f);
    check_one(1e-5f);
    check_one(123456.0f);
    check_one(1234567.0f);
    check_one(16777216.0f);
    check_one(3.4028235e38f);
    check_one(1.4e-45f);
    /* Powers of ten from below the fast range to above it, and the
     * boundaries of that range. */
    for (int k = -45; k <= 38; k++) {
        char ten[16];
        snprintf(ten, sizeof ten, "1e%d", k);
        check_around(strtof(ten, NULL), 40);
    }
    check_around(1e-20f, 40);
    check_around(1e9f, 40);
    check_around(1e8f, 40);
    /* Powers of two: the gap below is half the gap above. */
    for (int e = -149; e <= 127; e++) check_around(ldexpf(1.0f, e), 3);
    /* Every float in [0.5, 0.5 + 2^-13): the values embeddings are made of. */
    for (uint32_t b = 0x3f000000u; b < 0x3f000000u + (1u << 10) * 8; b++) check_one(from_bits(b));
    /* Random bit patterns. */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        check_one(from_bits((uint32_t)(s >> 32)));
    }
    /* Embedding-like values: normal-ish, mostly below 1 in magnitude. */
    for (int i = 0; i < 100000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        check_one(((float)(s >> 40) / 16777216.0f - 0.5f) * 0.3f);
    }
    CHECK_EQ_INT(g_mismatches, 0);
}

TEST(float_fmt_json_array)
{
    const float v[] = {0.5f, -0.25f, 1e-7f, 0.0f, 3.0f, NAN};
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_float_array(&b, v, sizeof v / sizeof v[0]);
    CHECK_STR(b.data, "[0.5,-0.25,1e-07,0,3,null]");
    iv_sb_free(&b);
}
