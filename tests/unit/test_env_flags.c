/* Flags from environment variables (src/cli/env_flags.c), as TEI's router
 * reads them: names, the command line winning, switches, repeatable flags. */
#include <stdlib.h>
#include <string.h>

#include "cli/env_flags.h"
#include "test.h"

static const char *fake_env(const char *name)
{
    static const char *const env[][2] = {
        {"MODEL_ID", "/models/minilm"}, {"MAX_BATCH_TOKENS", "8192"}, {"PORT", "80"},
        {"JSON_OUTPUT", "true"},        {"API_KEY", ""},              {"AUTO_TRUNCATE", "false"},
    };
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        if (!strcmp(env[i][0], name)) return env[i][1];
    return NULL;
}

static const char *const k_flags[] = {"--model-id", "--max-batch-tokens", "--port", "--api-key",
                                      "--auto-truncate", "--dtype", NULL};
static const char *const k_switches[] = {"--json-output", NULL};

TEST(env_flag_names)
{
    char out[32];
    CHECK(iv_env_flag_name("--max-client-batch-size-openai", out, sizeof out) == 0);
    CHECK(!strcmp(out, "MAX_CLIENT_BATCH_SIZE_OPENAI"));
    CHECK(iv_env_flag_name("--port", out, sizeof out) == 0 && !strcmp(out, "PORT"));
    CHECK(iv_env_flag_name("--max-client-batch-size-openai", out, 8) == -1);
}

TEST(env_flags_fill_what_argv_lacks)
{
    char *argv[] = {"serve", "--model-id", "/models/other", "--port=9000", NULL};
    int n;
    char **m;
    REQUIRE(iv_env_flags_merge(4, argv, k_flags, k_switches, fake_env, &n, &m) == 0);
    /* MODEL_ID is not added (argv names a model: --model-id repeats, so the
     * variable would serve a second one); PORT is skipped as given; API_KEY is
     * empty; DTYPE unset. */
    CHECK_EQ_INT(n, 7);
    CHECK(!strcmp(m[0], "serve"));
    CHECK(!strcmp(m[1], "--max-batch-tokens=8192"));
    CHECK(!strcmp(m[2], "--auto-truncate=false"));
    CHECK(!strcmp(m[3], "--json-output"));
    CHECK(m[4] == argv[1] && m[5] == argv[2] && m[6] == argv[3] && m[7] == NULL);
    iv_env_flags_free(4, argv, m);
}

TEST(env_flags_alone)
{
    char *argv[] = {"infinity_v3", NULL};
    int n;
    char **m;
    REQUIRE(iv_env_flags_merge(1, argv, k_flags, k_switches, fake_env, &n, &m) == 0);
    CHECK_EQ_INT(n, 6);
    CHECK(!strcmp(m[1], "--model-id=/models/minilm"));
    CHECK(!strcmp(m[3], "--port=80"));
    CHECK(m[6] == NULL);
    iv_env_flags_free(1, argv, m);
}
