/* iv_image_truncate (engine/image_inputs.c): image runs are never cut;
 * text goes from the end (or the start), run offsets follow; the runs
 * alone over the limit, or truncation off, are refused. */
#include <string.h>

#include "engine/image_inputs.h"
#include "test.h"

/* ids: 2 text, run of 3 (image 0), 2 text, run of 2 (image 1), 3 text = 12 tokens. */
static void setup(iv_image_set *s, iv_image_input *in, int64_t *rs, int64_t *rl, int32_t *ids)
{
    static const int32_t k_ids[12] = {1, 2, 9, 9, 9, 3, 4, 9, 9, 5, 6, 7};
    memcpy(ids, k_ids, sizeof k_ids);
    memset(in, 0, 2 * sizeof *in);
    rs[0] = 2, rl[0] = 3, in[0].token_offset = 2;
    rs[1] = 7, rl[1] = 2, in[1].token_offset = 7;
    *s = (iv_image_set){.n = 2, .cap = 2, .in = in, .run_start = rs, .run_len = rl};
}

TEST(image_truncate_keeps_runs)
{
    iv_image_set s;
    iv_image_input in[2];
    int64_t rs[2], rl[2];
    int32_t ids[12];
    iv_err err = {0};
    int len = 12;
    /* Right: drop 4 text tokens from the end: 7, 6, 5, then 4. */
    setup(&s, in, rs, rl, ids);
    CHECK_EQ_INT(iv_image_truncate(&s, ids, &len, 8, 1, 0, &err), 0);
    CHECK_EQ_INT(len, 8);
    const int32_t want_r[8] = {1, 2, 9, 9, 9, 3, 9, 9};
    CHECK(!memcmp(ids, want_r, sizeof want_r));
    CHECK_EQ_INT((int)rs[1], 6);
    CHECK_EQ_INT(in[1].token_offset, 6);
    CHECK_EQ_INT(in[0].token_offset, 2);
    /* Left: drop 1, 2, 3 from the start. */
    setup(&s, in, rs, rl, ids);
    len = 12;
    CHECK_EQ_INT(iv_image_truncate(&s, ids, &len, 9, 1, 1, &err), 0);
    const int32_t want_l[9] = {9, 9, 9, 4, 9, 9, 5, 6, 7};
    CHECK_EQ_INT(len, 9);
    CHECK(!memcmp(ids, want_l, sizeof want_l));
    CHECK_EQ_INT(in[0].token_offset, 0);
    CHECK_EQ_INT(in[1].token_offset, 4);
    /* The runs alone (5 tokens) over a limit of 4. */
    setup(&s, in, rs, rl, ids);
    len = 12;
    CHECK(iv_image_truncate(&s, ids, &len, 4, 1, 0, &err) != 0);
    CHECK_CONTAINS(err.msg, "alone take 5 tokens");
    /* Truncation off. */
    setup(&s, in, rs, rl, ids);
    CHECK(iv_image_truncate(&s, ids, &len, 8, 0, 0, &err) != 0);
    CHECK_CONTAINS(err.msg, "5 of them for 2 image(s)");
    /* Exactly the runs. */
    setup(&s, in, rs, rl, ids);
    len = 12;
    CHECK_EQ_INT(iv_image_truncate(&s, ids, &len, 5, 1, 0, &err), 0);
    const int32_t want_5[5] = {9, 9, 9, 9, 9};
    CHECK_EQ_INT(len, 5);
    CHECK(!memcmp(ids, want_5, sizeof want_5));
    CHECK_EQ_INT(in[1].token_offset, 3);
}
