/* `infinity_v3 preprocess-image` end to end: a PNG, a text file holding a
 * data URL, an image the processor refuses (aspect ratio over 200) and a
 * file that is not an image each give their line, in order; any failure
 * makes the exit status 1; --dump writes the pixel values. Runs IV_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/file.h"
#include "test.h"
#include "unit/tmp_test_util.h"

TEST(cli_preprocess_image)
{
    char tmp[256], cmd[8192], out_path[512], dump[512], url_path[512];
    REQUIRE(tmp_dir(tmp, sizeof tmp, "preprocess_image") == 0);
    const char *fx = iv_test_fixtures_dir();
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    snprintf(dump, sizeof dump, "%s/pv.bin", tmp);
    snprintf(url_path, sizeof url_path, "%s/url.txt", tmp);
    FILE *f = fopen(url_path, "w");
    REQUIRE(f);
    /* a 1x1 RGB PNG */
    fputs("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgZPoFAAEFAP79VGyxAAAAAElFTkSuQmCC",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "'%s' preprocess-image --model-id '%s/images/configs/qwen3vl' --dump '%s' '%s/images/rocket.jpg' '%s' "
             "'%s/images/wide_603x3_ratio201.png' '%s/images/expected.json' > '%s' 2>/dev/null",
             iv_test_binary(), fx, dump, fx, url_path, fx, fx, out_path);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    char *out = NULL;
    size_t len;
    iv_err err;
    REQUIRE(iv_file_read_all(out_path, 1 << 20, &out, &len, &err) == 0);
    CHECK_CONTAINS(out, "\"format\":\"jpeg\",\"width\":640,\"height\":427,\"transparency\":false,\"resized\":[416,640],"
                        "\"grid_thw\":[1,26,40],\"tokens\":260,\"pixel_values\":[1040,1536]}");
    CHECK_CONTAINS(out, "\"format\":\"png\",\"width\":1,\"height\":1,\"transparency\":false,\"resized\":[256,256],"
                        "\"grid_thw\":[1,16,16],\"tokens\":64");
    CHECK_CONTAINS(out, "wide_603x3_ratio201.png\",\"error\":\"image is 603x3: its aspect ratio 201.0 is over 200");
    CHECK_CONTAINS(out, "expected.json\",\"error\":\"unknown image format");
    /* The order of the lines is the order of the files. */
    CHECK(strstr(out, "rocket.jpg") < strstr(out, "url.txt") && strstr(out, "url.txt") < strstr(out, "wide_603"));
    struct stat sb;
    CHECK(stat(dump, &sb) == 0 && sb.st_size == 256 * 1536 * 4); /* the last image decoded: the 1x1 PNG */
    free(out);
    /* A folder without a preprocessor config fails before reading. */
    snprintf(cmd, sizeof cmd, "'%s' preprocess-image --model-id '%s' '%s/images/rocket.jpg' > /dev/null 2>&1",
             iv_test_binary(), tmp, fx);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    tmp_rmtree(tmp);
}

/* A Mistral3 checkpoint's processor files pick the Pixtral processor: the
 * resized size, patch grid, [IMG] rows and columns and the run length, the
 * processor's refusal of an image that resizes to an empty side, and
 * --dump writing pixel_values [3, H, W]. */
TEST(cli_preprocess_image_pixtral)
{
    char tmp[256], cmd[8192], out_path[512], dump[512];
    REQUIRE(tmp_dir(tmp, sizeof tmp, "preprocess_pixtral") == 0);
    const char *fx = iv_test_fixtures_dir();
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", tmp);
    snprintf(dump, sizeof dump, "%s/pv.bin", tmp);
    snprintf(cmd, sizeof cmd,
             "'%s' preprocess-image --model-id '%s/images/configs/pixtral_small' --dump '%s' "
             "'%s/images/tall_5x900.jpg' '%s/images/rocket.jpg' > '%s' 2>/dev/null",
             iv_test_binary(), fx, dump, fx, fx, out_path);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    char *out = NULL;
    size_t len;
    iv_err err;
    REQUIRE(iv_file_read_all(out_path, 1 << 20, &out, &len, &err) == 0);
    /* transformers: image_sizes [112, 168] for rocket.jpg at longest_edge 150, patch 14, merge 2. */
    CHECK_CONTAINS(out, "\"width\":640,\"height\":427,\"transparency\":false,\"resized\":[112,168],\"grid\":[8,12],"
                        "\"tokens\":24,\"token_rows\":4,\"token_cols\":6,\"run\":28,\"pixel_values\":[3,112,168]}");
    CHECK_CONTAINS(out, "tall_5x900.jpg\",\"error\":\"image is 5x900: it resizes to 0x150");
    struct stat sb;
    CHECK(stat(dump, &sb) == 0 && sb.st_size == 3 * 112 * 168 * 4);
    free(out);
    tmp_rmtree(tmp);
}
