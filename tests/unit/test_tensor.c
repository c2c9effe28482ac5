#include "tensor/tensor.h"
#include "test.h"

TEST(f16_roundtrip)
{
    const float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        CHECK_MSG(iv_f16_to_f32(iv_f32_to_f16(vals[i])) == vals[i], "f16 roundtrip of %g", vals[i]);
    CHECK(iv_f32_to_f16(1e6f) == 0x7c00);
    CHECK(iv_f32_to_f16(-0.0f) == 0x8000);
    /* 1 + 2^-11 is halfway between 1 and the next f16: ties to even -> 1. */
    CHECK(iv_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00);
}

TEST(bf16_roundtrip)
{
    CHECK(iv_bf16_to_f32(iv_f32_to_bf16(1.5f)) == 1.5f);
    CHECK(iv_bf16_to_f32(iv_f32_to_bf16(-3.0f)) == -3.0f);
    CHECK(iv_f32_to_bf16(1.0f) == 0x3f80);
}

TEST(dtype_names)
{
    CHECK_EQ_INT(iv_dtype_from_safetensors("BF16"), IV_BF16);
    CHECK_EQ_INT(iv_dtype_from_safetensors("F32"), IV_F32);
    CHECK_EQ_INT(iv_dtype_from_safetensors("F128"), -1);
}
