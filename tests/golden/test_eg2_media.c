/* Audio and images through iv_prepare_input on the embedding_gemma2_media
 * fixture (tools/fixtures/synthetic_eg2_media.py): each case's conversation,
 * with its files as data URLs, is rendered, its media decoded and its
 * placeholders expanded to exactly the input_ids transformers' processor
 * gave (EmbeddingGemma2Processor.replace_image_token / replace_audio_token,
 * tokenized), the runs at their offsets. The embeddings themselves are
 * checked through the server (tests/integration/test_server_audio.c). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "engine/inputs.h"
#include "server/codec.h"
#include "test.h"

static char *data_url(const char *sub, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", iv_test_fixtures_dir(), sub, name);
    char *bytes;
    size_t n;
    iv_err err = {0};
    if (iv_file_read_all(path, 1 << 24, &bytes, &n, &err)) return NULL;
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_printf(&b, "data:%s/x;base64,", sub[0] == 'i' ? "image" : "audio");
    iv_codec_base64(&b, (const unsigned char *)bytes, n);
    free(bytes);
    return b.data;
}

TEST(eg2_media_expansion_matches_processor)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/embedding_gemma2_media", iv_test_fixtures_dir());
    snprintf(path, sizeof path, "%s/media_cases.json", dir);
    cJSON *doc = NULL;
    iv_err err = {0};
    REQUIRE(iv_json_load_file(path, 1 << 20, &doc, &err) == 0);
    iv_engine *e = NULL;
    const int loaded = iv_engine_load(&e, dir, NULL, &err) == 0;
    CHECK_MSG(loaded, "%s", err.msg);
    REQUIRE(loaded);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, iv_json_get(doc, "cases"))
    {
        cJSON *msgs = cJSON_Duplicate(iv_json_get(c, "messages"), 1), *m, *part;
        cJSON_ArrayForEach(m, msgs)
        {
            cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            cJSON_ArrayForEach(part, content)
            {
                const char *type = iv_json_str(part, "type", "");
                if (strcmp(type, "image") && strcmp(type, "audio")) continue;
                char *url = data_url(!strcmp(type, "image") ? "images" : "audio", iv_json_str(part, type, ""));
                REQUIRE(url);
                cJSON_ReplaceItemInObjectCaseSensitive(part, type, cJSON_CreateString(url));
                free(url);
            }
        }
        iv_input in = {.messages = msgs};
        iv_prepared p;
        const int rc = iv_prepare_input(e, &in, NULL, &p, &err);
        CHECK_MSG(rc == 0, "%s: %s", iv_json_str(c, "name", ""), err.msg);
        if (!rc) {
            const cJSON *want = iv_json_get(c, "input_ids");
            CHECK_EQ_INT(p.seq.len, cJSON_GetArraySize(want));
            int same = p.seq.len == cJSON_GetArraySize(want), t = 0;
            const cJSON *id;
            cJSON_ArrayForEach(id, want) same &= t < p.seq.len && p.seq.ids[t++] == (int32_t)id->valuedouble;
            CHECK_MSG(same, "%s: the expanded ids differ from the processor's", iv_json_str(c, "name", ""));
            /* Each clip's soft tokens start right after its <boa>. */
            for (int k = 0; k < p.seq.n_audios; k++) CHECK_EQ_INT(p.seq.ids[p.seq.audios[k].token_offset - 1], 293);
            for (int k = 0; k < p.seq.n_images; k++) CHECK_EQ_INT(p.seq.ids[p.seq.images[k].token_offset - 1], 295);
            iv_prepared_free(&p);
        }
        cJSON_Delete(msgs);
        n_cases++;
    }
    CHECK_EQ_INT(n_cases, 5);
    iv_engine_free(e);
    cJSON_Delete(doc);
}
