/* `infinity_v3 tokenize` end to end: JSON lines in, JSON lines out with char
 * offsets, an {"error": ...} line for a bad input and exit code 1. Runs the
 * binary named by IV_BIN (skipped when it has not been built). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "tok_test_data.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int run_cli(const char *dir, const char *args, const char *input, char **out)
{
    char in_path[512], out_path[512], cmd[2048];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", dir);
    snprintf(out_path, sizeof out_path, "%s/out.jsonl", dir);
    FILE *f = fopen(in_path, "wb");
    if (!f) return -1;
    fputs(input, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' tokenize --tokenizer '%s/tokenizer.json' %s < '%s' > '%s' 2>/dev/null",
             iv_test_binary(), dir, args, in_path, out_path);
    int st = system(cmd);
    *out = slurp(out_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(tok_cli_tokenize)
{
    if (access(iv_test_binary(), X_OK) != 0) {
        iv_test_skip("infinity_v3 binary not built");
        return;
    }
    char dir[] = "/tmp/iv_tok_cli_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fputs(TOK_MINI_WP, f);
    fclose(f);

    char *out = NULL;
    /* Char offsets as Python reports them (the CAFÉ token ends at char 14). */
    int rc = run_cli(dir, "", "\"Unaffable CAF\\u00c9\"\n[\"hello\", \"the world\"]\n", &out);
    CHECK_EQ_INT(rc, 0);
    REQUIRE(out);
    CHECK_CONTAINS(out, "{\"ids\":[2,8,9,10,13,3],\"type_ids\":[0,0,0,0,0,0],"
                        "\"tokens\":[\"[CLS]\",\"un\",\"##aff\",\"##able\",\"cafe\",\"[SEP]\"],"
                        "\"offsets\":[[0,0],[0,2],[2,5],[5,9],[10,14],[0,0]]}\n");
    CHECK_CONTAINS(out, "{\"ids\":[2,5,3,16,6,3],\"type_ids\":[0,0,0,1,1,1],");
    CHECK_CONTAINS(out, "\"offsets\":[[0,0],[0,5],[0,0],[0,3],[4,9],[0,0]]}\n");

    /* A bad line is reported and processing continues; exit code 1. */
    rc = run_cli(dir, "--no-special-tokens", "\"hello\"\n{\"inputs\": 3}\n\"unterminated\n\"world\"\n", &out);
    CHECK_EQ_INT(rc, 1);
    REQUIRE(out);
    CHECK(!strncmp(out, "{\"ids\":[5],", 11));
    CHECK_CONTAINS(out, "\n{\"error\":\"each line must be plain text, a JSON string or a [text, pair] array\"}\n");
    CHECK_CONTAINS(out, "\n{\"error\":\"unterminated JSON string\"}\n{\"ids\":[6],");

    /* Plain-text lines, as `embed` reads them (also with a CR LF ending). */
    rc = run_cli(dir, "", "unaffable cafe\r\nhello \"the\" world\n", &out);
    CHECK_EQ_INT(rc, 0);
    REQUIRE(out);
    CHECK(!strncmp(out, "{\"ids\":[2,8,9,10,13,3],", 23));
    CHECK_CONTAINS(out, "\"offsets\":[[0,0],[0,2],[2,5],[5,9],[10,14],[0,0]]}\n{\"ids\":[2,5,");

    /* --pair requires arrays; truncation options are honoured. */
    rc = run_cli(dir, "--pair", "\"hello\"\n", &out);
    CHECK_EQ_INT(rc, 1);
    CHECK_CONTAINS(out, "{\"error\":");
    rc = run_cli(dir, "--max-length 4 --decode", "\"hello world hello\"\n", &out);
    CHECK_EQ_INT(rc, 0);
    CHECK_CONTAINS(out, "{\"ids\":[2,5,6,3],");
    CHECK_CONTAINS(out, "\"decoded\":\"hello world\"}");

    rc = run_cli(dir, "--bogus", "", &out);
    CHECK_EQ_INT(rc, 2);

    char cleanup[1024];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", dir);
    CHECK(system(cleanup) == 0);
}
