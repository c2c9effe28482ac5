/* `infinity_v3 preprocess-image`: a debugging view of the image path. Each
 * FILE (image bytes, or a text file holding a data URL or base64) is
 * decoded as requests' images are and run through the checkpoint's
 * Qwen2-VL/Qwen3-VL image processor; one JSON line per file gives the
 * format, size, resized size, image_grid_thw and image token count.
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
#include "image/qwen_vl.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: infinity_v3 preprocess-image --model-id DIR [--dump PATH] [--dump-rgb PATH] [--max-pixels N] FILE...\n"
               "  Decodes each image and runs DIR's preprocessor_config.json (the Qwen2-VL /\n"
               "  Qwen3-VL image processor) on it; prints grid_thw and the image token count.\n");
}

static int one(const iv_qwen_vl_config *cfg, const iv_image_limits *lim, const char *path, const char *dump,
               const char *dump_rgb)
{
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
        rc = iv_qwen_vl_preprocess(cfg, &img, &p, &err);
        iv_strbuf s;
        iv_sb_init(&s);
        iv_sb_puts(&s, "{\"file\":");
        iv_sb_json_string(&s, path, strlen(path));
        iv_sb_printf(&s, ",\"format\":\"%s\",\"width\":%d,\"height\":%d,\"transparency\":%s",
                     iv_image_format_name(img.format), img.width, img.height, img.alpha ? "true" : "false");
        if (!rc)
            iv_sb_printf(&s, ",\"resized\":[%lld,%lld],\"grid_thw\":[%lld,%lld,%lld],\"tokens\":%lld,\"pixel_values\":[%lld,%lld]}\n",
                         (long long)(p.grid_thw[1] * cfg->patch_size), (long long)(p.grid_thw[2] * cfg->patch_size),
                         (long long)p.grid_thw[0], (long long)p.grid_thw[1], (long long)p.grid_thw[2],
                         (long long)p.n_tokens, (long long)p.rows, (long long)p.cols);
        else
            iv_sb_puts(&s, "}\n");
        if (!rc) fwrite(s.data, 1, s.len, stdout);
        iv_sb_free(&s);
        iv_image_free(&img);
    }
    if (!rc && dump) {
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(p.pixel_values, sizeof(float), (size_t)(p.rows * p.cols), f) != (size_t)(p.rows * p.cols))
            rc = iv_errf(&err, IV_E_IO, "cannot write %s", dump);
        if (f) fclose(f);
    }
    iv_qwen_vl_patches_free(&p);
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
    iv_qwen_vl_config cfg;
    iv_err err = {0};
    if (iv_qwen_vl_config_load(&cfg, dir, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    for (int i = first; i < argc; i++)
        if (one(&cfg, &lim, argv[i], dump, dump_rgb)) rc = 1;
    return rc;
}
