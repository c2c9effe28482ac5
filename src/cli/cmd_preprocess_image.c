/* `infinity_v3 preprocess-image`: a debugging view of the image path. Each
 * FILE (image bytes, or a text file holding a data URL or base64) is
 * decoded as requests' images are and run through the checkpoint's image
 * processor: the Qwen2-VL/Qwen3-VL one, or the Pixtral one when
 * preprocessor_config.json names PixtralImageProcessor (Mistral3); one JSON
 * line per file gives the format, size, resized size, the patch grid and
 * the image token count (Pixtral: also the rows and columns of [IMG] tokens
 * and the length of the run with its [IMG_BREAK] / [IMG_END] tokens).
 * --dump PATH writes pixel_values as little-endian float32 and --dump-rgb
 * PATH the decoded RGB bytes (the last file's), for comparing with
 * transformers and PIL (tools/gen_image_fixtures.py --compare). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/strbuf.h"
#include "cli/commands.h"
#include "image/image.h"
#include "image/pixtral.h"
#include "image/qwen_vl.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: infinity_v3 preprocess-image --model-id DIR [--dump PATH] [--dump-rgb PATH] [--max-pixels N] FILE...\n"
               "  Decodes each image and runs DIR's preprocessor_config.json (the Qwen2-VL /\n"
               "  Qwen3-VL image processor, or Pixtral's) on it; prints the grid and the image token count.\n");
}

/* The checkpoint's processor: Qwen2-VL / Qwen3-VL, or Pixtral. */
typedef struct processor {
    int pixtral;
    iv_qwen_vl_config qwen;
    iv_pixtral_config px;
} processor;

/* Pixtral: the JSON fields and the [3, H, W] pixel values (out, to free). */
static int run_pixtral(const iv_pixtral_config *cfg, const iv_image *img, iv_strbuf *s, float **pv, size_t *n,
                       iv_err *err)
{
    iv_pixtral_pixels px;
    if (iv_pixtral_preprocess(cfg, img, &px, err)) return -1;
    iv_sb_printf(s, ",\"resized\":[%d,%d],\"grid\":[%d,%d],\"tokens\":%lld,\"token_rows\":%d,\"token_cols\":%d,"
                    "\"run\":%lld,\"pixel_values\":[3,%d,%d]}\n",
                 px.height, px.width, px.grid_h, px.grid_w, (long long)px.rows * px.cols, px.rows, px.cols,
                 (long long)px.rows * (px.cols + 1), px.height, px.width);
    *pv = px.pixel_values;
    *n = (size_t)3 * px.height * px.width;
    return 0;
}

static int one(const processor *proc, const iv_image_limits *lim, const char *path, const char *dump,
               const char *dump_rgb)
{
    const iv_qwen_vl_config *cfg = &proc->qwen;
    float *px_values = NULL;
    size_t px_n = 0;
    iv_err err = {0};
    char *data = NULL;
    size_t n = 0;
    iv_image img;
    iv_qwen_vl_patches p = {0};
    int rc = iv_file_read_all(path, lim->max_bytes * 2, &data, &n, &err);
    if (!rc) {
        const uint8_t *b = (const uint8_t *)data;
        rc = iv_image_sniff(b, n) == IV_IMAGE_UNKNOWN && n >= 5 && !strncmp(data, "data:", 5)
                 ? iv_image_decode_source(data, n, lim, &img, &err)
                 : iv_image_decode(b, n, lim, &img, &err);
    }
    if (!rc && dump_rgb) {
        FILE *f = fopen(dump_rgb, "wb");
        size_t nb = (size_t)img.width * (size_t)img.height * 3;
        if (!f || fwrite(img.rgb, 1, nb, f) != nb) rc = iv_errf(&err, IV_E_IO, "cannot write %s", dump_rgb);
        if (f) fclose(f);
        if (rc) iv_image_free(&img);
    }
    if (!rc) {
        iv_strbuf s;
        iv_sb_init(&s);
        iv_sb_puts(&s, "{\"file\":");
        iv_sb_json_string(&s, path, strlen(path));
        iv_sb_printf(&s, ",\"format\":\"%s\",\"width\":%d,\"height\":%d,\"transparency\":%s",
                     iv_image_format_name(img.format), img.width, img.height, img.alpha ? "true" : "false");
        rc = proc->pixtral ? run_pixtral(&proc->px, &img, &s, &px_values, &px_n, &err)
                           : iv_qwen_vl_preprocess(cfg, &img, &p, &err);
        if (!rc && !proc->pixtral)
            iv_sb_printf(&s, ",\"resized\":[%lld,%lld],\"grid_thw\":[%lld,%lld,%lld],\"tokens\":%lld,\"pixel_values\":[%lld,%lld]}\n",
                         (long long)(p.grid_thw[1] * cfg->patch_size), (long long)(p.grid_thw[2] * cfg->patch_size),
                         (long long)p.grid_thw[0], (long long)p.grid_thw[1], (long long)p.grid_thw[2],
                         (long long)p.n_tokens, (long long)p.rows, (long long)p.cols);
        else if (rc)
            iv_sb_puts(&s, "}\n");
        if (!rc) fwrite(s.data, 1, s.len, stdout);
        iv_sb_free(&s);
        iv_image_free(&img);
    }
    if (!rc && dump) {
        const float *values = proc->pixtral ? px_values : p.pixel_values;
        const size_t count = proc->pixtral ? px_n : (size_t)(p.rows * p.cols);
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(values, sizeof(float), count, f) != count) rc = iv_errf(&err, IV_E_IO, "cannot write %s", dump);
        if (f) fclose(f);
    }
    iv_qwen_vl_patches_free(&p);
    free(px_values);
    free(data);
    if (rc) {
        iv_strbuf s;
        iv_sb_init(&s);
        iv_sb_puts(&s, "{\"file\":");
        iv_sb_json_string(&s, path, strlen(path));
        iv_sb_puts(&s, ",\"error\":");
        iv_sb_json_string(&s, err.msg, strlen(err.msg));
        iv_sb_puts(&s, "}\n");
        fwrite(s.data, 1, s.len, stdout);
        iv_sb_free(&s);
    }
    return rc;
}

int iv_cmd_preprocess_image(int argc, char **argv)
{
    const char *dir = NULL, *dump = NULL, *dump_rgb = NULL;
    iv_image_limits lim = {IV_IMAGE_DEFAULT_MAX_PIXELS, IV_IMAGE_DEFAULT_MAX_BYTES};
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model-id") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else if (!strcmp(argv[i], "--dump-rgb") && i + 1 < argc) dump_rgb = argv[++i];
        else if (!strcmp(argv[i], "--max-pixels") && i + 1 < argc) lim.max_pixels = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            usage(stderr);
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (!dir || first >= argc) {
        usage(stderr);
        return 2;
    }
    processor proc = {.pixtral = iv_pixtral_processor_named(dir)};
    iv_err err = {0};
    if (proc.pixtral ? iv_pixtral_config_load(&proc.px, dir, &err) : iv_qwen_vl_config_load(&proc.qwen, dir, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    for (int i = first; i < argc; i++)
        if (one(&proc, &lim, argv[i], dump, dump_rgb)) rc = 1;
    return rc;
}
