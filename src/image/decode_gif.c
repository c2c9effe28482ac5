/* GIF's first frame through giflib, placed as PIL places it: a canvas the
 * size of the logical screen (grown when the frame reaches past it),
 * filled with the frame's transparent index when it has one and index 0
 * otherwise, the frame's indices written over it (interlaced rows put in
 * order), then looked up in the local colour table, else the global one,
 * else taken as gray levels. The transparent index (from the graphic
 * control extension before the frame) becomes alpha 0. */
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

#include "image/image.h"

typedef struct gif_src {
    const uint8_t *p;
    size_t n, pos;
} gif_src;

static int on_read(GifFileType *g, GifByteType *buf, int len)
{
    gif_src *s = g->UserData;
    size_t k = (size_t)len;
    if (k > s->n - s->pos) k = s->n - s->pos;
    memcpy(buf, s->p + s->pos, k);
    s->pos += k;
    return (int)k;
}

static int fail(GifFileType *g, iv_image *out, iv_err *err, int code, const char *what)
{
    int e = 0;
    if (g) DGifCloseFile(g, &e);
    iv_image_free(out);
    return iv_errf(err, code, "invalid GIF image: %s", what);
}

int iv_image_decode_gif(const iv_image_dec *d, iv_image *out, iv_err *err)
{
    gif_src src = {d->p, d->n, 0};
    int e = 0;
    GifFileType *g = DGifOpen(&src, on_read, &e);
    if (!g) return iv_errf(err, IV_E_INVALID, "invalid GIF image: %s", GifErrorString(e) ? GifErrorString(e) : "bad header");
    int transparency = -1;
    for (;;) {
        GifRecordType rt;
        if (DGifGetRecordType(g, &rt) == GIF_ERROR) return fail(g, out, err, IV_E_INVALID, "the data ends early (truncated file)");
        if (rt == TERMINATE_RECORD_TYPE) return fail(g, out, err, IV_E_INVALID, "no image in the file");
        if (rt == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) return fail(g, out, err, IV_E_INVALID, "bad extension block");
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4)
                transparency = (ext[1] & 1) ? ext[4] : -1;
            while (ext) {
                if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) return fail(g, out, err, IV_E_INVALID, "bad extension block");
            }
            continue;
        }
        if (rt != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(g) == GIF_ERROR) return fail(g, out, err, IV_E_INVALID, "bad image descriptor");
        break;
    }
    GifImageDesc *im = &g->Image;
    int64_t fx = im->Left, fy = im->Top, fw = im->Width, fh = im->Height;
    int64_t cw = g->SWidth > fx + fw ? g->SWidth : fx + fw;
    int64_t ch = g->SHeight > fy + fh ? g->SHeight : fy + fh;
    if (fw <= 0 || fh <= 0) return fail(g, out, err, IV_E_INVALID, "the first frame has a zero size");
    if (iv_image_alloc(out, cw, ch, transparency >= 0, d->max_pixels, "GIF", err)) {
        DGifCloseFile(g, &e);
        return -1;
    }
    size_t ncanvas = (size_t)(cw * ch);
    uint8_t *idx = malloc(ncanvas);
    if (!idx) return fail(g, out, err, IV_E_NOMEM, "out of memory");
    memset(idx, transparency >= 0 ? transparency : 0, ncanvas);
    /* Interlaced frames store rows 0,8,16.. then 4,12.. then 2,6.. then 1,3.. */
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = im->Interlace ? 4 : 1;
    for (int pass = 0; pass < passes; pass++) {
        int y0 = im->Interlace ? start[pass] : 0, dy = im->Interlace ? step[pass] : 1;
        for (int64_t y = y0; y < fh; y += dy) {
            if (DGifGetLine(g, idx + (size_t)((fy + y) * cw + fx), (int)fw) == GIF_ERROR) {
                free(idx);
                return fail(g, out, err, IV_E_INVALID, "the data ends early (truncated file)");
            }
        }
    }
    const ColorMapObject *map = im->ColorMap ? im->ColorMap : g->SColorMap;
    for (size_t i = 0; i < ncanvas; i++) {
        int v = idx[i];
        uint8_t *o = out->rgb + i * 3;
        if (map && v < map->ColorCount) o[0] = map->Colors[v].Red, o[1] = map->Colors[v].Green, o[2] = map->Colors[v].Blue;
        else if (map) o[0] = o[1] = o[2] = 0; /* past the table: black, as PIL */
        else o[0] = o[1] = o[2] = (uint8_t)v;
        if (out->alpha) out->alpha[i] = v == transparency ? 0 : 255;
    }
    free(idx);
    DGifCloseFile(g, &e);
    return 0;
}
