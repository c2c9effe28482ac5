/* JPEG through libjpeg-turbo, set up as PIL's JpegDecode sets it up: the
 * library's defaults (JDCT_ISLOW, fancy upsampling, its own guess of the
 * colour space from the JFIF/Adobe markers), grayscale out for one
 * component, RGB for three, CMYK for four (YCCK converted by the library).
 * PIL reads every CMYK JPEG as Adobe-inverted ("CMYK;I") and converts
 * CMYK to RGB with its integer formula; both are reproduced here.
 * A premature end of data is an error (PIL raises "image file is
 * truncated"); other recoverable warnings are ignored, as PIL ignores them.
 * A progressive file may hold at most IV_JPEG_MAX_SCANS scans: a few kilobytes
 * of tiny scans otherwise cost minutes of decoding (libjpeg-turbo's own
 * tools cap them the same way). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image/image.h"

#define IV_JPEG_MAX_SCANS 500

typedef struct jpeg_ctx {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_ctx;

static void on_error(j_common_ptr cinfo)
{
    jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
    cinfo->err->format_message(cinfo, c->msg);
    longjmp(c->jump, 1);
}

static void on_message(j_common_ptr cinfo, int level)
{
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
        snprintf(c->msg, sizeof c->msg, "the data ends early (truncated file)");
        longjmp(c->jump, 1);
    }
}

static void on_progress(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > IV_JPEG_MAX_SCANS) {
        jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
        snprintf(c->msg, sizeof c->msg, "more than %d progressive scans", IV_JPEG_MAX_SCANS);
        longjmp(c->jump, 1);
    }
}

/* PIL's MULDIV255: a*b/255 rounded, in integers. */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static inline uint8_t clip8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

int iv_image_decode_jpeg(const iv_image_dec *d, iv_image *out, iv_err *err)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_ctx ctx;
    uint8_t *volatile row = NULL;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&ctx.pub);
    ctx.pub.error_exit = on_error;
    ctx.pub.emit_message = on_message;
    ctx.msg[0] = 0;
    if (setjmp(ctx.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(row);
        iv_image_free(out);
        return iv_errf(err, IV_E_INVALID, "invalid JPEG image: %s", ctx.msg);
    }
    jpeg_create_decompress(&cinfo);
    struct jpeg_progress_mgr progress = {.progress_monitor = on_progress};
    cinfo.progress = &progress;
    jpeg_mem_src(&cinfo, d->p, (unsigned long)d->n);
    jpeg_read_header(&cinfo, TRUE);
    int nc = cinfo.num_components;
    if (nc == 1) cinfo.out_color_space = JCS_GRAYSCALE;
    else if (nc == 3) cinfo.out_color_space = JCS_RGB;
    else if (nc == 4) cinfo.out_color_space = JCS_CMYK;
    else {
        jpeg_destroy_decompress(&cinfo);
        return iv_errf(err, IV_E_UNSUPPORTED, "JPEG images with %d colour components are not supported", nc);
    }
    if (iv_image_alloc(out, cinfo.image_width, cinfo.image_height, 0, d->max_pixels, "JPEG", err)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_start_decompress(&cinfo);
    int w = (int)cinfo.output_width, oc = cinfo.output_components;
    if ((int)cinfo.output_width != out->width || (int)cinfo.output_height != out->height || oc != nc) {
        jpeg_destroy_decompress(&cinfo);
        iv_image_free(out);
        return iv_errf(err, IV_E_INTERNAL, "JPEG output shape differs from the header");
    }
    row = malloc((size_t)w * (size_t)oc);
    if (!row) {
        jpeg_destroy_decompress(&cinfo);
        iv_image_free(out);
        return iv_errf(err, IV_E_NOMEM, "out of memory decoding a JPEG");
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        int y = (int)cinfo.output_scanline;
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&cinfo, &rp, 1) != 1) {
            snprintf(ctx.msg, sizeof ctx.msg, "the data ends early (truncated file)");
            longjmp(ctx.jump, 1);
        }
        uint8_t *o = out->rgb + (size_t)y * (size_t)w * 3;
        const uint8_t *s = row;
        if (oc == 1) {
            for (int x = 0; x < w; x++, o += 3) o[0] = o[1] = o[2] = s[x];
        } else if (oc == 3) {
            memcpy(o, s, (size_t)w * 3);
        } else {
            for (int x = 0; x < w; x++, o += 3, s += 4) {
                /* "CMYK;I": Adobe stores inverted samples. */
                int c = 255 - s[0], m = 255 - s[1], ye = 255 - s[2], k = 255 - s[3];
                int nk = 255 - k;
                o[0] = clip8(nk - muldiv255(c, nk));
                o[1] = clip8(nk - muldiv255(m, nk));
                o[2] = clip8(nk - muldiv255(ye, nk));
            }
        }
    }
    /* Every row is in: what follows the last scan (EOI) is not read. */
    jpeg_destroy_decompress(&cinfo);
    free(row);
    return 0;
}
