/* safetensors loader: files are written here from C (header JSON + data),
 * both well-formed ones and one per hostile case; each hostile file must be
 * refused with -1, the right code and a message naming the problem. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "tensor/safetensors.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* ---------- file builders ---------- */

static int write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t wr = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && wr == n ? 0 : -1;
}

/* Builds a safetensors image: u64 LE header length, header, data. With pad,
 * the header is padded with spaces to a multiple of 8 like real writers do.
 * Returns a malloc'd buffer and its size. */
static unsigned char *build_image(const char *header, const void *data, size_t n, int pad, size_t *size)
{
    size_t hl = strlen(header);
    size_t hp = pad ? (hl + 7) / 8 * 8 : hl;
    *size = 8 + hp + n;
    unsigned char *buf = malloc(*size);
    if (!buf) return NULL;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hp >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, ' ', hp - hl);
    if (n) memcpy(buf + 8 + hp, data, n);
    return buf;
}

static int write_st(const char *path, const char *header, const void *data, size_t n, int pad)
{
    size_t size;
    unsigned char *buf = build_image(header, data, n, pad, &size);
    if (!buf) return -1;
    int rc = write_bytes(path, buf, size);
    free(buf);
    return rc;
}

static int write_text(const char *path, const char *text) { return write_bytes(path, text, strlen(text)); }

/* Writes the image to a file and opens it; also opens it from memory and
 * requires both routes to agree on success and error code. */
static int open_both(const char *dir, const unsigned char *img, size_t size, iv_weights **out, iv_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (write_bytes(path, img, size)) return iv_test_fail(__FILE__, __LINE__, "cannot write %s", path), -2;
    iv_weights *mw = NULL;
    iv_err merr;
    int mrc = iv_weights_open_memory(&mw, img, size, "mem", &merr);
    iv_weights_close(mw);
    int rc = iv_weights_open_file(out, path, err);
    /* An empty file cannot be mapped, so only that case differs in code. */
    if (mrc != rc) iv_test_fail(__FILE__, __LINE__, "file and memory routes disagree: %d vs %d", rc, mrc);
    else if (rc && size > 0 && merr.code != err->code)
        iv_test_fail(__FILE__, __LINE__, "codes differ: file %d (%s) memory %d (%s)", err->code, err->msg,
                     merr.code, merr.msg);
    return rc;
}

/* One hostile header: opening must fail with code and a message holding needle. */
static void expect_bad(int line, const char *header, const void *data, size_t n, int code, const char *needle)
{
    char dir[64];
    if (tmp_dir(dir, sizeof dir, "safetensors")) {
        iv_test_fail(__FILE__, line, "mkdtemp failed");
        return;
    }
    size_t size;
    unsigned char *img = build_image(header, data, n, 1, &size);
    iv_weights *w = NULL;
    iv_err err = {0};
    int rc = open_both(dir, img, size, &w, &err);
    if (rc != -1) iv_test_fail(__FILE__, line, "expected failure for header %s", header);
    else {
        if (err.code != code) iv_test_fail(__FILE__, line, "code %d, want %d (%s)", err.code, code, err.msg);
        if (!strstr(err.msg, needle)) iv_test_fail(__FILE__, line, "\"%s\" lacks \"%s\"", err.msg, needle);
        if (!strstr(err.msg, "model.safetensors"))
            iv_test_fail(__FILE__, line, "\"%s\" does not name the file", err.msg);
    }
    iv_weights_close(w);
    free(img);
    tmp_rmtree(dir);
}

#define EXPECT_BAD(header, data, n, code, needle) expect_bad(__LINE__, header, data, n, code, needle)

/* ---------- well-formed files ---------- */

/* a: F32 [2,3] = 0..5; b: F16 [2] = {1.5, -2}; c: BF16 [2] = {1.5, -2};
 * ids: I64 [2] = {7, 9}. */
static unsigned char *mixed_image(int pad, size_t *size)
{
    unsigned char data[24 + 4 + 4 + 16];
    float a[6] = {0, 1, 2, 3, 4, 5};
    uint16_t b[2] = {0x3E00, 0xC000}, c[2] = {0x3FC0, 0xC000};
    int64_t ids[2] = {7, 9};
    memcpy(data, a, 24);
    memcpy(data + 24, b, 4);
    memcpy(data + 28, c, 4);
    memcpy(data + 32, ids, 16);
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                    "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[28,32]},"
                    "\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[32,48]}}";
    return build_image(h, data, sizeof data, pad, size);
}

TEST(safetensors_valid_single_file)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "safetensors") == 0);
    size_t size;
    unsigned char *img = mixed_image(1, &size);
    iv_weights *w = NULL;
    iv_err err = {0};
    int rc = open_both(dir, img, size, &w, &err);
    free(img);
    CHECK_MSG(rc == 0, "open: %s", err.msg);
    if (rc == 0) {
        CHECK_EQ_INT(iv_weights_count(w), 4);
        CHECK_STR(iv_weights_name(w, 0), "a");
        CHECK_STR(iv_weights_name(w, 3), "ids");
        CHECK(iv_weights_name(w, 4) == NULL);
        CHECK_STR(iv_weights_metadata(w, "format"), "pt");
        CHECK_STR(iv_weights_metadata(w, "note"), "x");
        CHECK(iv_weights_metadata(w, "absent") == NULL);
        CHECK(iv_weights_has_prefix(w, "i"));
        CHECK(iv_weights_has_prefix(w, "ids"));
        CHECK(!iv_weights_has_prefix(w, "idsx"));
        CHECK(!iv_weights_has_prefix(w, "z"));

        const iv_tensor *raw = iv_weights_find(w, "a");
        REQUIRE(raw);
        CHECK_EQ_INT(raw->dtype, IV_F32);
        CHECK_EQ_INT(raw->ndim, 2);
        CHECK_EQ_INT(raw->shape[0], 2);
        CHECK_EQ_INT(raw->shape[1], 3);
        CHECK(iv_weights_find(w, "nope") == NULL);

        const iv_tensor *t, *t2;
        const int64_t shp[2] = {2, 3};
        REQUIRE(iv_weights_f32(w, "a", 2, shp, &t, &err) == 0);
        for (int i = 0; i < 6; i++) CHECK(iv_f32(t)[i] == (float)i);
        CHECK_MSG(t->data == raw->data, "aligned F32 must point into the mapping");
        REQUIRE(iv_weights_f32(w, "a", 0, NULL, &t2, &err) == 0);
        CHECK(t2 == t);

        const int64_t two[1] = {2};
        REQUIRE(iv_weights_f32(w, "b", 1, two, &t, &err) == 0);
        CHECK_EQ_INT(t->dtype, IV_F32);
        CHECK(iv_f32(t)[0] == 1.5f && iv_f32(t)[1] == -2.0f);
        CHECK((uintptr_t)t->data % 64 == 0);
        REQUIRE(iv_weights_f32(w, "b", 1, two, &t2, &err) == 0);
        CHECK_MSG(t2 == t && t2->data == t->data, "conversion must be cached");

        REQUIRE(iv_weights_f32(w, "c", 1, two, &t, &err) == 0);
        CHECK(iv_f32(t)[0] == 1.5f && iv_f32(t)[1] == -2.0f);
        /* Released, a converted copy is freed (ASan would flag a leak or a
         * double free here); asked for again, it is converted anew. */
        iv_weights_release(w, t);
        REQUIRE(iv_weights_f32(w, "c", 1, two, &t, &err) == 0);
        CHECK(iv_f32(t)[0] == 1.5f && iv_f32(t)[1] == -2.0f);
        /* Released, a tensor in the file mapping reads the same again. */
        REQUIRE(iv_weights_f32(w, "a", 2, shp, &t, &err) == 0);
        iv_weights_release(w, t);
        for (int i = 0; i < 6; i++) CHECK(iv_f32(t)[i] == (float)i);

        const iv_tensor *ids = iv_weights_find(w, "ids");
        REQUIRE(ids);
        CHECK_EQ_INT(ids->dtype, IV_I64);
        int64_t v;
        memcpy(&v, (const char *)ids->data + 8, 8);
        CHECK_EQ_INT(v, 9);
        CHECK(iv_weights_f32(w, "ids", 0, NULL, &t, &err) == -1);
        CHECK_CONTAINS(err.msg, "has dtype I64");

        const int64_t wrong[2] = {3, 2};
        CHECK(iv_weights_f32(w, "a", 2, wrong, &t, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_FORMAT);
        CHECK_CONTAINS(err.msg, "tensor a has shape [2, 3], expected [3, 2]");
        CHECK(iv_weights_f32(w, "a", 1, two, &t, &err) == -1);
        CHECK_CONTAINS(err.msg, "expected [2]");

        CHECK(iv_weights_f32(w, "missing.weight", 0, NULL, &t, &err) == -1);
        CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
        CHECK_CONTAINS(err.msg, "missing.weight");
    }
    iv_weights_close(w);
    tmp_rmtree(dir);
}

TEST(safetensors_unaligned_f32_is_copied)
{
    /* Unpadded header of odd length: the data section starts at an odd
     * address, so F32 must be copied into an aligned buffer. */
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
    REQUIRE(strlen(h) % 2 == 1);
    float vals[3] = {0.25f, -1.0f, 3.5f};
    size_t size;
    unsigned char *img = build_image(h, vals, sizeof vals, 0, &size);
    REQUIRE(img);
    iv_weights *w;
    iv_err err;
    REQUIRE(iv_weights_open_memory(&w, img, size, "mem", &err) == 0);
    const iv_tensor *raw = iv_weights_find(w, "w"), *t, *t2;
    REQUIRE(raw && (uintptr_t)raw->data % 4 != 0);
    REQUIRE(iv_weights_f32(w, "w", 0, NULL, &t, &err) == 0);
    CHECK(t->data != raw->data);
    CHECK((uintptr_t)t->data % 64 == 0);
    CHECK(iv_f32(t)[0] == 0.25f && iv_f32(t)[1] == -1.0f && iv_f32(t)[2] == 3.5f);
    REQUIRE(iv_weights_f32(w, "w", 0, NULL, &t2, &err) == 0);
    CHECK(t2 == t);
    iv_weights_close(w);
    free(img);
}

TEST(safetensors_f64_scalar_and_empty_tensors)
{
    /* A scalar (shape []) holds one element; a zero-sized dim holds none and
     * may sit at the same offset as its neighbour. */
    double d = -0.5;
    const char *h = "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[8,8]}}";
    size_t size;
    unsigned char *img = build_image(h, &d, 8, 1, &size);
    iv_weights *w;
    iv_err err;
    REQUIRE(iv_weights_open_memory(&w, img, size, "mem", &err) == 0);
    const iv_tensor *t;
    REQUIRE(iv_weights_f32(w, "s", 0, NULL, &t, &err) == 0);
    CHECK_EQ_INT(t->ndim, 0);
    CHECK(iv_f32(t)[0] == -0.5f);
    const int64_t es[2] = {0, 4};
    REQUIRE(iv_weights_f32(w, "e", 2, es, &t, &err) == 0);
    CHECK_EQ_INT(iv_tensor_numel(t), 0);
    iv_weights_close(w);
    free(img);
}

TEST(safetensors_five_dims_indexed_not_loadable)
{
    /* Vision towers store Conv3d kernels [out, in, t, h, w]: the file must
     * still open for a text-only load, but the tensor cannot be loaded. */
    float z[2] = {0, 0};
    const char *h = "{\"visual.patch\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}";
    size_t size;
    unsigned char *img = build_image(h, z, sizeof z, 1, &size);
    iv_weights *w;
    iv_err err;
    REQUIRE(iv_weights_open_memory(&w, img, size, "mem", &err) == 0);
    CHECK_EQ_INT(iv_weights_count(w), 1);
    CHECK(iv_weights_has_prefix(w, "visual."));
    CHECK(iv_weights_find(w, "visual.patch") == NULL);
    const iv_tensor *t;
    CHECK(iv_weights_f32(w, "visual.patch", 0, NULL, &t, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "[1, 1, 1, 1, 2]: 5 dims");
    iv_weights_close(w);
    free(img);
}

TEST(safetensors_five_dims_as_matrix)
{
    /* A Conv3d kernel [out 2, in 1, t 1, h 1, w 3] read as the [2, 3] weight
     * of the linear it equals when kernel = stride (patch embeddings). */
    float v[6] = {1, 2, 3, 4, 5, 6};
    const char *h = "{\"visual.patch\":{\"dtype\":\"F32\",\"shape\":[2,1,1,1,3],\"data_offsets\":[0,24]}}";
    size_t size;
    unsigned char *img = build_image(h, v, sizeof v, 1, &size);
    iv_weights *w;
    iv_err err;
    REQUIRE(iv_weights_open_memory(&w, img, size, "mem", &err) == 0);
    const iv_tensor *t;
    CHECK(iv_weights_f32_matrix(w, "visual.patch", 3, 2, &t, &err) == -1);
    CHECK_CONTAINS(err.msg, "expected [3, ...] with 2 values per row");
    REQUIRE(iv_weights_f32_matrix(w, "visual.patch", 2, 3, &t, &err) == 0);
    CHECK_EQ_INT(t->ndim, 2);
    CHECK_EQ_INT(t->shape[0], 2);
    CHECK_EQ_INT(t->shape[1], 3);
    CHECK(iv_f32(t)[5] == 6.0f);
    const iv_tensor *again;
    REQUIRE(iv_weights_f32_matrix(w, "visual.patch", 2, 3, &again, &err) == 0);
    CHECK(again == t);
    iv_weights_close(w);
    free(img);
}

/* ---------- hostile files ---------- */

TEST(safetensors_truncated_files)
{
    char dir[64], path[4096];
    REQUIRE(tmp_dir(dir, sizeof dir, "safetensors") == 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    iv_weights *w = NULL;
    iv_err err;

    REQUIRE(write_bytes(path, "\x10\0\0\0\0", 5) == 0);
    CHECK(iv_weights_open_file(&w, path, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "5 bytes is too short");
    CHECK(iv_weights_open_memory(&w, "\x10\0\0", 3, "mem", &err) == -1);
    CHECK_CONTAINS(err.msg, "mem: 3 bytes is too short");
    CHECK(iv_weights_open_memory(&w, "", 0, "mem", &err) == -1);

    REQUIRE(write_bytes(path, "", 0) == 0);
    CHECK(iv_weights_open_file(&w, path, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "empty");

    /* The header claims 100 bytes; 10 follow. */
    unsigned char buf[18] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    REQUIRE(write_bytes(path, buf, sizeof buf) == 0);
    CHECK(iv_weights_open_file(&w, path, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "header length 100 runs past the end of the file (18 bytes)");

    /* A real header whose data was cut short. */
    float v[4] = {1, 2, 3, 4};
    REQUIRE(write_st(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", v, 12, 1) == 0);
    CHECK(iv_weights_open_file(&w, path, &err) == -1);
    CHECK_CONTAINS(err.msg, "end 16 is past the data section (12 bytes)");
    CHECK(w == NULL);
    tmp_rmtree(dir);
}

TEST(safetensors_huge_header_length)
{
    unsigned char buf[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    iv_weights *w;
    iv_err err;
    CHECK(iv_weights_open_memory(&w, buf, sizeof buf, "big.safetensors", &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "big.safetensors: header length 9223372036854775808 exceeds");
    /* Just over the limit, though a file that large could hold it. */
    uint64_t over = (uint64_t)IV_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(over >> (8 * i));
    CHECK(iv_weights_open_memory(&w, buf, sizeof buf, "big.safetensors", &err) == -1);
    CHECK_CONTAINS(err.msg, "exceeds the 104857600 byte limit");
}

TEST(safetensors_bad_json)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",", NULL, 0, IV_E_FORMAT, "header is not valid JSON");
    EXPECT_BAD("{} trailing", NULL, 0, IV_E_FORMAT, "trailing bytes");
    EXPECT_BAD("[1,2,3]", NULL, 0, IV_E_FORMAT, "header is not a JSON object");
    EXPECT_BAD("\"str\"", NULL, 0, IV_E_FORMAT, "header is not a JSON object");
    EXPECT_BAD("{\"a\":[1,2]}", NULL, 0, IV_E_FORMAT, "tensor \"a\": entry must be an object");
    /* A NUL inside the header must not end it early. */
    size_t size;
    unsigned char *img = build_image("{\"a\":X}", NULL, 0, 0, &size);
    img[8 + 5] = 0;
    iv_weights *w;
    iv_err err;
    CHECK(iv_weights_open_memory(&w, img, size, "nul", &err) == -1);
    CHECK_CONTAINS(err.msg, "not valid JSON");
    free(img);
}

TEST(safetensors_bad_dtype)
{
    float v = 0;
    EXPECT_BAD("{\"layer.w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}}", &v, 4, IV_E_FORMAT,
               "tensor \"layer.w\" has unknown dtype \"F128\"");
    EXPECT_BAD("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", &v, 4, IV_E_FORMAT,
               "\"dtype\" is missing or not a string");
    EXPECT_BAD("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", &v, 4, IV_E_FORMAT, "\"dtype\" is missing");
    /* Real safetensors dtypes we do not compute with are "unsupported", not corrupt. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", &v, 4, IV_E_UNSUPPORTED,
               "tensor \"w\" has dtype F8_E4M3");
}

TEST(safetensors_bad_shape)
{
    float v[2] = {0, 0};
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", v, 4, IV_E_FORMAT,
               "tensor \"w\": shape dim 0 is not a non-negative integer");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,4]}}", v, 4, IV_E_FORMAT,
               "shape dim 1 is not a non-negative integer");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", v, 8, IV_E_FORMAT,
               "shape dim 0 is not");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", v, 8, IV_E_FORMAT,
               "\"shape\" is missing or not an array");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", v, 4, IV_E_FORMAT,
               "shape has 9 dims, more than the 8 allowed");
    /* 2^40 * 2^40 elements overflow 64 bits; the data range is irrelevant. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,4]}}", v, 4,
               IV_E_FORMAT, "has too many elements");
    /* 2^62 elements fit, 2^62 * 4 bytes do not. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[4194304,1099511627776],\"data_offsets\":[0,4]}}", v, 4,
               IV_E_FORMAT, "has too many elements");
    /* A zero dim after the overflow still means an overflowing intermediate was seen. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776,0],\"data_offsets\":[0,0]}}", v, 0,
               IV_E_FORMAT, "has too many elements");
}

TEST(safetensors_bad_offsets)
{
    float v[4] = {0, 0, 0, 0};
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,400]}}", v, 16, IV_E_FORMAT,
               "tensor \"w\": data_offsets end 400 is past the data section (16 bytes)");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", v, 16, IV_E_FORMAT,
               "data_offsets begin 8 is after end 4");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", v, 16, IV_E_FORMAT,
               "data_offsets span 4 bytes but F32 shape [2] needs 8");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", v, 16, IV_E_FORMAT,
               "\"data_offsets\" must be [begin, end]");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", v, 16, IV_E_FORMAT,
               "\"data_offsets\" must be [begin, end]");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", v, 16, IV_E_FORMAT,
               "\"data_offsets\" must be [begin, end]");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", v, 16, IV_E_FORMAT, "\"data_offsets\" must be");
    /* 2^64 - 4 would wrap end - begin; it must be refused as out of range. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551612]}}", v, 16,
               IV_E_FORMAT, "\"data_offsets\" must be [begin, end]");
}

TEST(safetensors_overlapping_tensors)
{
    float v[4] = {0, 0, 0, 0};
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               v, 16, IV_E_FORMAT, "tensors \"a\" [0, 8) and \"b\" [4, 12) overlap");
    /* Listed in the opposite order of their offsets. */
    EXPECT_BAD("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
               v, 16, IV_E_FORMAT, "overlap");
    /* Same range twice. */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
               v, 16, IV_E_FORMAT, "overlap");
    /* The same name twice in one header. */
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               v, 16, IV_E_FORMAT, "tensor \"a\" is listed twice");
}

TEST(safetensors_bad_metadata)
{
    EXPECT_BAD("{\"__metadata__\":{\"format\":1}}", NULL, 0, IV_E_FORMAT,
               "\"__metadata__\" value \"format\" is not a string");
    EXPECT_BAD("{\"__metadata__\":[\"pt\"]}", NULL, 0, IV_E_FORMAT, "\"__metadata__\" must be an object of strings");
    EXPECT_BAD("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", NULL, 0, IV_E_FORMAT, "is not a string");
}

/* ---------- directories and shards ---------- */

static void write_shard_dir(const char *dir, const char *index)
{
    char path[4096];
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"},\"enc.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             a, sizeof a, 1);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_st(path, "{\"enc.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", b, sizeof b, 1);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_text(path, index);
}

static const char *k_good_index = "{\"metadata\":{\"total_size\":20},\"weight_map\":{"
                                  "\"enc.a\":\"model-00001-of-00002.safetensors\","
                                  "\"enc.b\":\"model-00002-of-00002.safetensors\"}}";

TEST(safetensors_sharded_index)
{
    char dir[64];
    REQUIRE(tmp_dir(dir, sizeof dir, "safetensors") == 0);
    write_shard_dir(dir, k_good_index);
    iv_weights *w = NULL;
    iv_err err;
    int rc = iv_weights_open_dir(&w, dir, &err);
    CHECK_MSG(rc == 0, "open: %s", err.msg);
    if (rc == 0) {
        CHECK_EQ_INT(iv_weights_count(w), 2);
        const iv_tensor *t;
        REQUIRE(iv_weights_f32(w, "enc.a", 0, NULL, &t, &err) == 0);
        CHECK(iv_f32(t)[0] == 1 && iv_f32(t)[1] == 2);
        REQUIRE(iv_weights_f32(w, "enc.b", 0, NULL, &t, &err) == 0);
        CHECK(iv_f32(t)[0] == 3 && iv_f32(t)[2] == 5);
        CHECK_STR(iv_weights_metadata(w, "format"), "pt");
        CHECK(iv_weights_f32(w, "enc.c", 0, NULL, &t, &err) == -1);
        CHECK_CONTAINS(err.msg, dir);
    }
    iv_weights_close(w);
    tmp_rmtree(dir);
}

TEST(safetensors_sharded_errors)
{
    char dir[64], path[4096];
    REQUIRE(tmp_dir(dir, sizeof dir, "safetensors") == 0);
    iv_weights *w = NULL;
    iv_err err;

    /* The index names a shard that is not there. */
    write_shard_dir(dir, "{\"weight_map\":{\"enc.a\":\"model-00001-of-00002.safetensors\","
                         "\"enc.z\":\"model-00009-of-00009.safetensors\"}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "tensor \"enc.z\" to shard model-00009-of-00009.safetensors, which does not exist");

    /* The same tensor stored in two shards. */
    float v[2] = {0, 0};
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_st(path, "{\"enc.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, sizeof v, 1);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_text(path, k_good_index);
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_FORMAT);
    CHECK_CONTAINS(err.msg, "tensor \"enc.a\" is stored in two shards");
    CHECK_CONTAINS(err.msg, "model-00002-of-00002.safetensors");

    /* A tensor the index places in a shard that does not hold it. */
    write_shard_dir(dir, "{\"weight_map\":{\"enc.a\":\"model-00002-of-00002.safetensors\","
                         "\"enc.b\":\"model-00002-of-00002.safetensors\"}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "tensor \"enc.a\" in shard model-00002-of-00002.safetensors, but that shard does not contain it");

    /* A shard name escaping the directory, a non-string, and a bad index. */
    write_shard_dir(dir, "{\"weight_map\":{\"enc.a\":\"../x.safetensors\"}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "must map to a shard file name inside the directory");
    write_shard_dir(dir, "{\"weight_map\":{\"enc.a\":3}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "tensor \"enc.a\" must map to a shard");
    write_shard_dir(dir, "{\"weight_map\":{}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "lists no tensors");
    write_shard_dir(dir, "{\"metadata\":{}}");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "\"weight_map\" is missing");
    write_shard_dir(dir, "{\"weight_map\":");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "malformed JSON");

    /* A hostile shard behind a good index fails with the shard's name. */
    write_shard_dir(dir, k_good_index);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_st(path, "{\"enc.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,99]}}", v, sizeof v, 1);
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_CONTAINS(err.msg, "model-00002-of-00002.safetensors: tensor \"enc.b\": data_offsets end 99");
    CHECK(w == NULL);
    tmp_rmtree(dir);
}

TEST(safetensors_directory_without_safetensors)
{
    char dir[64], path[4096];
    REQUIRE(tmp_dir(dir, sizeof dir, "safetensors") == 0);
    iv_weights *w = NULL;
    iv_err err;

    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "has no model.safetensors");

    snprintf(path, sizeof path, "%s/weights.pth", dir);
    write_text(path, "pickle");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "only weights.pth; safetensors is required");

    snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
    write_text(path, "pickle");
    CHECK(iv_weights_open_dir(&w, dir, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "only pytorch_model.bin; safetensors is required (convert with");

    snprintf(path, sizeof path, "%s/does-not-exist", dir);
    CHECK(iv_weights_open_dir(&w, path, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK(w == NULL);
    tmp_rmtree(dir);
}

TEST(safetensors_real_minilm)
{
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/all-MiniLM-L6-v2", iv_test_models_dir());
    if (!iv_file_exists(iv_path_join(path, sizeof path, dir, "model.safetensors"))) {
        iv_test_skip("all-MiniLM-L6-v2 not fetched (scripts/fetch-models.sh)");
        return;
    }
    iv_weights *w;
    iv_err err;
    REQUIRE(iv_weights_open_dir(&w, dir, &err) == 0);
    CHECK_EQ_INT(iv_weights_count(w), 104);
    CHECK_STR(iv_weights_metadata(w, "format"), "pt");
    CHECK(iv_weights_has_prefix(w, "encoder.layer.5."));
    CHECK(!iv_weights_has_prefix(w, "encoder.layer.6."));
    const int64_t shp[2] = {30522, 384};
    const iv_tensor *t;
    REQUIRE(iv_weights_f32(w, "embeddings.word_embeddings.weight", 2, shp, &t, &err) == 0);
    CHECK((uintptr_t)t->data % 4 == 0);
    /* Every tensor name resolves, and its bytes lie within the file. */
    for (int i = 0; i < iv_weights_count(w); i++) {
        const iv_tensor *r = iv_weights_find(w, iv_weights_name(w, i));
        CHECK(r != NULL);
    }
    iv_weights_close(w);
}
