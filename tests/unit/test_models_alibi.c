/* ALiBi slopes (models/alibi.c) against torch.Tensor(_get_alibi_head_slopes(n))
 * of jinaai/jina-bert-v2-qk-post-norm's modeling_bert.py (the same scheme as
 * jina-bert-implementation and BLOOM), printed by torch 2.x: power-of-two and
 * interleaved non-power-of-two head counts. */
#include <math.h>

#include "models/alibi.h"
#include "test.h"

static void check_slopes(int n, const double *want)
{
    float got[16];
    iv_alibi_slopes(n, got);
    for (int h = 0; h < n; h++)
        CHECK_MSG(fabs(got[h] - want[h]) <= 1e-9 * want[h], "%d heads, slope %d: %.9e, torch %.9e", n, h, got[h],
                  want[h]);
}

TEST(models_alibi_slopes_match_jina)
{
    static const double four[] = {2.5e-01, 6.25e-02, 1.5625e-02, 3.90625e-03};
    static const double six[] = {2.5e-01, 6.25e-02, 1.5625e-02, 3.90625e-03, 5.0e-01, 1.25e-01};
    static const double twelve[] = {5.0e-01,         2.5e-01,         1.25e-01,        6.25e-02,
                                    3.125e-02,       1.5625e-02,      7.8125e-03,      3.90625e-03,
                                    7.071067691e-01, 3.535533845e-01, 1.767766923e-01, 8.838834614e-02};
    check_slopes(4, four);
    check_slopes(6, six);
    check_slopes(12, twelve);
    float one;
    iv_alibi_slopes(1, &one);
    CHECK(one == 0.00390625f); /* 2^-8 */
}
