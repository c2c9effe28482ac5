/* src/image: every way an image can be refused (empty, truncated,
 * zero-sized, over the pixel or byte limit, unknown format, bad base64,
 * bad data URL) gives a clear error and a zeroed image, never a crash;
 * data URLs and base64 decode to the same pixels as the raw bytes. */
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "image/image.h"
#include "test.h"

static uint8_t *fixture(const char *name, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/images/%s", iv_test_fixtures_dir(), name);
    char *data = NULL;
    iv_err err;
    if (iv_file_read_all(path, 16 << 20, &data, n, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    return (uint8_t *)data;
}

/* Decoding fails with code and a message containing needle; the image is zeroed. */
static void expect_fail(const uint8_t *p, size_t n, const iv_image_limits *lim, int code, const char *needle,
                        const char *what)
{
    iv_image img;
    iv_err err = {0};
    int rc = iv_image_decode(p, n, lim, &img, &err);
    CHECK_MSG(rc == -1, "%s: decoded, expected an error", what);
    if (rc == 0) iv_image_free(&img);
    CHECK_MSG(err.code == code, "%s: code %d, expected %d (%s)", what, err.code, code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, needle);
    CHECK(img.rgb == NULL && img.alpha == NULL && img.width == 0);
}

static const char *const some_files[] = {
    "astronaut_420_q90.jpg", "coffee_progressive.jpg", "camera_gray.jpg", "chelsea_cmyk.jpg",
    "coins_gray.png", "color_interlaced.png", "chelsea_p_trns1.png", "astro_rgba16.png",
    "ihc_lossy.webp", "coffee_lossless.webp", "rgba_gradient_lossy.webp", "animated.webp",
    "chelsea.gif", "partial_frame_interlaced.gif", NULL, /* (an animated GIF cut after its first frame is fine) */
};

TEST(image_truncated_files_are_refused)
{
    for (int i = 0; some_files[i]; i++) {
        size_t n;
        uint8_t *p = fixture(some_files[i], &n);
        REQUIRE(p);
        /* Every cut through the headers and the data: an error, never a crash. */
        size_t cuts[] = {1, 2, 5, 11, 20, 40, n / 4, n / 2, n * 3 / 4};
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            if (cuts[c] >= n) continue;
            uint8_t *q = malloc(cuts[c]); /* exactly the cut: reading past it is a sanitizer report */
            memcpy(q, p, cuts[c]);
            iv_image img;
            iv_err err = {0};
            int rc = iv_image_decode(q, cuts[c], NULL, &img, &err);
            CHECK_MSG(rc == -1 && err.code == IV_E_INVALID, "%s cut at %zu: rc %d code %d (%s)", some_files[i],
                      cuts[c], rc, err.code, err.msg);
            if (!rc) iv_image_free(&img);
            free(q);
        }
        free(p);
    }
    size_t n;
    uint8_t *p = fixture("astronaut_420_q90.jpg", &n);
    REQUIRE(p);
    expect_fail(p, n / 2, NULL, IV_E_INVALID, "truncated", "half a JPEG");
    free(p);
}

TEST(image_empty_and_unknown_formats_are_refused)
{
    expect_fail((const uint8_t *)"", 0, NULL, IV_E_INVALID, "empty", "0 bytes");
    expect_fail(NULL, 0, NULL, IV_E_INVALID, "empty", "NULL");
    expect_fail((const uint8_t *)"hello world", 11, NULL, IV_E_INVALID, "unknown image format", "text");
    expect_fail((const uint8_t *)"BM\x36\x00\x00\x00\x00\x00", 8, NULL, IV_E_INVALID, "unknown image format", "BMP");
    expect_fail((const uint8_t *)"RIFF\x10\x00\x00\x00WAVEfmt ", 16, NULL, IV_E_INVALID, "unknown image format", "WAV");
    expect_fail((const uint8_t *)"\x00\x00\x00\x0c" "ftypavif", 12, NULL, IV_E_INVALID, "unknown image format", "AVIF");
    CHECK_EQ_INT(iv_image_sniff((const uint8_t *)"\xff\xd8\xff", 3), IV_IMAGE_JPEG);
    CHECK_EQ_INT(iv_image_sniff((const uint8_t *)"GIF87a", 6), IV_IMAGE_GIF);
    CHECK_EQ_INT(iv_image_sniff((const uint8_t *)"\x89PNG\r\n\x1a", 7), IV_IMAGE_UNKNOWN);
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
}

static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = (uint8_t)v; }

/* A PNG signature, IHDR for w x h 8-bit RGB, and an empty IDAT (libpng
 * reads up to the first IDAT before it reports the header). */
static size_t png_header(uint8_t *b, uint32_t w, uint32_t h)
{
    memcpy(b, "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", 16);
    put32(b + 16, w);
    put32(b + 20, h);
    memcpy(b + 24, "\x08\x02\x00\x00\x00", 5);
    put32(b + 29, crc32_of(b + 12, 17));
    memcpy(b + 33, "\x00\x00\x00\x00IDAT", 8);
    put32(b + 41, crc32_of(b + 37, 4));
    return 45;
}

TEST(image_decompression_bombs_are_refused_from_the_header)
{
    uint8_t b[64];
    size_t n = png_header(b, 100000, 100000);
    expect_fail(b, n, NULL, IV_E_TOO_LARGE, "over the limit", "PNG 100000x100000");
    n = png_header(b, 0, 10);
    expect_fail(b, n, NULL, IV_E_INVALID, "PNG", "PNG of width 0");

    /* A real JPEG whose frame header says 65000x65000. */
    size_t jn;
    uint8_t *j = fixture("astronaut_420_q90.jpg", &jn);
    REQUIRE(j);
    for (size_t i = 2; i + 9 < jn; i++)
        if (j[i] == 0xFF && j[i + 1] == 0xC0) {
            j[i + 5] = 0xFD, j[i + 6] = 0xE8, j[i + 7] = 0xFD, j[i + 8] = 0xE8;
            break;
        }
    expect_fail(j, jn, NULL, IV_E_TOO_LARGE, "65000x65000", "JPEG 65000x65000");
    free(j);

    /* A GIF whose logical screen is 65535x65535. */
    size_t gn;
    uint8_t *g = fixture("chelsea.gif", &gn);
    REQUIRE(g);
    g[6] = g[7] = g[8] = g[9] = 0xFF;
    expect_fail(g, gn, NULL, IV_E_TOO_LARGE, "over the limit", "GIF 65535x65535");
    free(g);
    static const uint8_t gif0[] = "GIF89a\x00\x00\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02\x44\x01\x00;";
    expect_fail(gif0, sizeof gif0 - 1, NULL, IV_E_INVALID, "zero size", "GIF 0x0");

    /* A lossless WebP whose header says 16384x16384 (the format's maximum). */
    size_t wn;
    uint8_t *w = fixture("coffee_lossless.webp", &wn);
    REQUIRE(w);
    CHECK(!memcmp(w + 12, "VP8L", 4) && w[20] == 0x2f);
    w[21] = w[22] = w[23] = 0xFF;
    w[24] |= 0x0F;
    expect_fail(w, wn, NULL, IV_E_TOO_LARGE, "16384x16384", "WebP 16384x16384");
    free(w);

    /* The limit is the caller's: a 333x333 JPEG over a 100000-pixel limit. */
    j = fixture("astronaut_420_q90.jpg", &jn);
    REQUIRE(j);
    iv_image_limits lim = {100000, 0};
    expect_fail(j, jn, &lim, IV_E_TOO_LARGE, "110889 pixels, over the limit of 100000", "limit");
    lim.max_pixels = 110889;
    iv_image img;
    iv_err err;
    CHECK(iv_image_decode(j, jn, &lim, &img, &err) == 0);
    iv_image_free(&img);
    lim = (iv_image_limits){0, 1000};
    expect_fail(j, jn, &lim, IV_E_TOO_LARGE, "bytes, over the limit of 1000", "byte limit");
    free(j);
}

static char *b64(const uint8_t *p, size_t n, int url_safe, int pad)
{
    const char *a = url_safe ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = a[v >> 18 & 63];
        *q++ = a[v >> 12 & 63];
        if (i + 1 < n) *q++ = a[v >> 6 & 63];
        else if (pad) *q++ = '=';
        if (i + 2 < n) *q++ = a[v & 63];
        else if (pad) *q++ = '=';
    }
    *q = 0;
    return o;
}

TEST(image_data_urls_and_base64)
{
    size_t n;
    uint8_t *p = fixture("chelsea_p_trns1.png", &n);
    REQUIRE(p);
    iv_image ref, img;
    iv_err err = {0};
    REQUIRE(iv_image_decode(p, n, NULL, &ref, &err) == 0);
    for (int url_safe = 0; url_safe < 2; url_safe++)
        for (int pad = 0; pad < 2; pad++) {
            char *s = b64(p, n, url_safe, pad);
            /* Bare base64; a data URL (its media type says JPEG: the bytes decide). */
            size_t len = strlen(s);
            char *url = malloc(len + 64);
            snprintf(url, len + 64, "data:image/jpeg;base64,%s", s);
            const char *forms[] = {s, url};
            for (int f = 0; f < 2; f++) {
                int rc = iv_image_decode_source(forms[f], strlen(forms[f]), NULL, &img, &err);
                CHECK_MSG(rc == 0, "form %d url_safe %d pad %d: %s", f, url_safe, pad, err.msg);
                if (rc) continue;
                CHECK(img.format == IV_IMAGE_PNG && img.width == ref.width && img.height == ref.height);
                CHECK(!memcmp(img.rgb, ref.rgb, (size_t)ref.width * ref.height * 3));
                CHECK(img.alpha && !memcmp(img.alpha, ref.alpha, (size_t)ref.width * ref.height));
                iv_image_free(&img);
            }
            free(url);
            free(s);
        }
    /* Whitespace (line-wrapped base64) is skipped. */
    char *s = b64(p, n, 0, 1);
    size_t len = strlen(s);
    char *wrapped = malloc(len * 2 + 2), *w = wrapped;
    for (size_t i = 0; i < len; i++) {
        *w++ = s[i];
        if (i % 76 == 75) *w++ = '\n';
    }
    *w = 0;
    CHECK(iv_image_decode_source(wrapped, strlen(wrapped), NULL, &img, &err) == 0);
    iv_image_free(&img);
    free(wrapped);
    free(s);
    iv_image_free(&ref);
    free(p);
}

static void expect_source_fail(const char *s, int code, const char *needle)
{
    iv_image img;
    iv_err err = {0};
    int rc = iv_image_decode_source(s, strlen(s), NULL, &img, &err);
    CHECK_MSG(rc == -1, "\"%s\": accepted", s);
    if (!rc) iv_image_free(&img);
    CHECK_MSG(err.code == code, "\"%s\": code %d, expected %d (%s)", s, err.code, code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "\"%s\": \"%s\" lacks \"%s\"", s, err.msg, needle);
}

TEST(image_bad_base64_and_data_urls_are_refused)
{
    expect_source_fail("", IV_E_INVALID, "empty");
    expect_source_fail("   ", IV_E_INVALID, "empty");
    expect_source_fail("iVBOR$w0KGgo=", IV_E_INVALID, "unexpected character 0x24");
    expect_source_fail("iVBORw0KG", IV_E_INVALID, "not a valid base64 length");
    expect_source_fail("iVBO=Rw0", IV_E_INVALID, "after the '=' padding");
    expect_source_fail("aGVsbG8gd29ybGQ=", IV_E_INVALID, "unknown image format"); /* "hello world" */
    expect_source_fail("data:image/png;base64", IV_E_INVALID, "no ','");
    expect_source_fail("data:text/plain;base64,aGVsbG8=", IV_E_INVALID, "media type must be image/");
    expect_source_fail("data:;base64,aGVsbG8=", IV_E_INVALID, "media type must be image/");
    expect_source_fail("data:image/png,%89PNG", IV_E_INVALID, "only ;base64");
    expect_source_fail("data:image/png;base64,", IV_E_INVALID, "empty");
    expect_source_fail("data:image/png;base64,!!!!", IV_E_INVALID, "unexpected character");
    expect_source_fail("https://example.com/cat.png", IV_E_INVALID, "not fetched");
    /* Over the byte limit before decoding the base64. */
    size_t big = 1000;
    char *s = malloc(big + 1);
    memset(s, 'A', big);
    s[big] = 0;
    iv_image img;
    iv_err err = {0};
    iv_image_limits lim = {0, 100};
    CHECK(iv_image_decode_source(s, big, &lim, &img, &err) == -1 && err.code == IV_E_TOO_LARGE);
    free(s);
}

#include <jpeglib.h>

/* A 16x16 gray progressive JPEG with n_ac_bits refinement levels per AC
 * coefficient: 1 + 63 * (n_ac_bits + 1) scans. */
static unsigned char *many_scan_jpeg(int n_ac_bits, unsigned long *size)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    jpeg_mem_dest(&c, &out, size);
    c.image_width = c.image_height = 16;
    c.input_components = 1;
    c.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    int n = 1 + 63 * (n_ac_bits + 1), i = 0;
    jpeg_scan_info *s = calloc((size_t)n, sizeof *s);
    s[i++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
    for (int k = 1; k < 64; k++) {
        s[i++] = (jpeg_scan_info){1, {0}, k, k, 0, n_ac_bits};
        for (int al = n_ac_bits - 1; al >= 0; al--) s[i++] = (jpeg_scan_info){1, {0}, k, k, al + 1, al};
    }
    c.scan_info = s;
    c.num_scans = n;
    jpeg_start_compress(&c, TRUE);
    unsigned char row[16];
    for (int y = 0; y < 16; y++) {
        for (int x = 0; x < 16; x++) row[x] = (unsigned char)(x * 13 + y * 7);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(s);
    return out;
}

TEST(image_jpeg_scan_count_is_bounded)
{
    unsigned long n;
    unsigned char *ok = many_scan_jpeg(2, &n); /* 190 scans */
    iv_image img;
    iv_err err = {0};
    CHECK_MSG(iv_image_decode(ok, n, NULL, &img, &err) == 0, "%s", err.msg);
    iv_image_free(&img);
    free(ok);
    unsigned char *bad = many_scan_jpeg(9, &n); /* 631 scans */
    expect_fail(bad, n, NULL, IV_E_INVALID, "more than 500 progressive scans", "631 scans");
    free(bad);
}
