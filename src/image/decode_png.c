/* PNG through libpng, turned into the pixels PIL's own PNG reader gives
 * after convert("RGB"):
 *   gray 1/2/4 bit  scaled to 8 bits (v*255, v*85, v*17), replicated;
 *   gray 16 bit     PIL's mode I;16, whose conversion to RGB clips: v > 255 -> 255;
 *   RGB(A)/GA 16    the high byte of each sample (PIL's "RGB;16B" rawmodes);
 *   palette         looked up; an index past the palette is black, as in PIL;
 *   alpha           dropped from RGB, kept in img->alpha.
 * Transparency entries (tRNS) become img->alpha as PIL's convert("RGBA")
 * reads them, quirks included: PIL compares a 2/4-bit gray key with the
 * scaled sample and a 16-bit RGB key with the 8-bit one. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

typedef struct png_src {
    const uint8_t *p;
    size_t n, pos;
    char msg[256];
} png_src;

static void on_read(png_structp png, png_bytep data, size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) png_error(png, "the data ends early (truncated file)");
    memcpy(data, s->p + s->pos, len);
    s->pos += len;
}

static void on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static inline unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

int iv_image_decode_png(const iv_image_dec *d, iv_image *out, iv_err *err)
{
    png_src src = {d->p, d->n, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    if (!png) return iv_errf(err, IV_E_NOMEM, "out of memory starting a PNG decoder");
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile raw = NULL;
    png_bytep *volatile rows = NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        free(raw);
        free(rows);
        iv_image_free(out);
        return iv_errf(err, IV_E_INVALID, "invalid PNG image: %s", src.msg[0] ? src.msg : "cannot decode");
    }
    png_set_read_fn(png, &src, on_read);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff); /* our pixel limit below */
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);

    png_bytep trns = NULL;
    int n_trns = 0;
    png_color_16p trns_color = NULL;
    int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) &&
                   png_get_tRNS(png, info, &trns, &n_trns, &trns_color) != 0;
    png_colorp plte = NULL;
    int n_plte = 0;
    if (ctype == PNG_COLOR_TYPE_PALETTE && !png_get_PLTE(png, info, &plte, &n_plte)) n_plte = 0;
    int with_alpha = (ctype & PNG_COLOR_MASK_ALPHA) || has_trns;
    if (iv_image_alloc(out, w, h, with_alpha, d->max_pixels, "PNG", err)) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    if (depth < 8) {
        png_set_packing(png); /* one byte per sample, palette indices unscaled */
        if (ctype == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    raw = malloc(rowbytes * h);
    rows = malloc(sizeof(png_bytep) * h);
    if (!raw || !rows) {
        snprintf(src.msg, sizeof src.msg, "out of memory");
        png_longjmp(png, 1);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = raw + y * rowbytes;
    png_read_image(png, rows);

    int b = depth == 16 ? 2 : 1; /* bytes per sample after the transforms */
    /* The key PIL compares samples with (see the header comment). */
    unsigned key_g = 0, key_r = 0, key_gr = 0, key_b = 0;
    if (has_trns && trns_color) {
        key_g = trns_color->gray;
        if (ctype == PNG_COLOR_TYPE_GRAY && depth == 1) key_g = key_g ? 255 : 0;
        key_r = trns_color->red, key_gr = trns_color->green, key_b = trns_color->blue;
    }
    size_t npx = (size_t)w;
    for (png_uint_32 y = 0; y < h; y++) {
        const uint8_t *s = rows[y];
        uint8_t *o = out->rgb + (size_t)y * npx * 3;
        uint8_t *a = out->alpha ? out->alpha + (size_t)y * npx : NULL;
        for (size_t x = 0; x < npx; x++, o += 3) {
            switch (ctype) {
            case PNG_COLOR_TYPE_GRAY: {
                unsigned v = b == 2 ? be16(s) : s[0];
                s += b;
                o[0] = o[1] = o[2] = (uint8_t)(v > 255 ? 255 : v);
                if (a) a[x] = v == key_g ? 0 : 255;
                break;
            }
            case PNG_COLOR_TYPE_RGB:
                o[0] = s[0], o[1] = s[b], o[2] = s[2 * b];
                if (a) a[x] = (o[0] == key_r && o[1] == key_gr && o[2] == key_b) ? 0 : 255;
                s += 3 * b;
                break;
            case PNG_COLOR_TYPE_PALETTE: {
                int i = s[0];
                s++;
                if (i < n_plte) o[0] = plte[i].red, o[1] = plte[i].green, o[2] = plte[i].blue;
                else o[0] = o[1] = o[2] = 0;
                if (a) a[x] = i < n_trns ? trns[i] : 255;
                break;
            }
            case PNG_COLOR_TYPE_GRAY_ALPHA:
                o[0] = o[1] = o[2] = s[0];
                a[x] = s[b];
                s += 2 * b;
                break;
            default: /* RGBA */
                o[0] = s[0], o[1] = s[b], o[2] = s[2 * b];
                a[x] = s[3 * b];
                s += 4 * b;
                break;
            }
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(raw);
    free(rows);
    return 0;
}
