/* The CLI's JSON-lines inputs (src/cli/cli_input.c) read as the server
 * reads a body: "\u0000" keeps the rest of its string (cJSON alone cut
 * "hello\u0000world" to "hello"), raw control bytes inside strings and
 * invalid UTF-8 are errors (cJSON alone accepted them). */
#include <string.h>

#include "cli/cli_input.h"
#include "test.h"

static void parse(const char *line, iv_cli_item *it) { iv_cli_parse_line(line, strlen(line), it); }

TEST(cli_input_keeps_text_after_nul)
{
    iv_cli_item it;
    parse("\"hello\\u0000world\"", &it);
    CHECK(it.error == NULL);
    CHECK_EQ_INT((int)it.in.text_len, 11);
    CHECK(it.in.text && !memcmp(it.in.text, "hello\0world", 11));
    iv_cli_item_free(&it);

    parse("[\"q\", \"d\\u0000x\"]", &it);
    CHECK(it.error == NULL);
    CHECK_EQ_INT((int)it.in.pair_len, 3);
    CHECK(it.in.pair && !memcmp(it.in.pair, "d\0x", 3));
    iv_cli_item_free(&it);

    parse("{\"text\": \"a\\u0000b\", \"pair\": \"c\"}", &it);
    CHECK(it.error == NULL);
    CHECK_EQ_INT((int)it.in.text_len, 3);
    CHECK_EQ_INT((int)it.in.pair_len, 1);
    iv_cli_item_free(&it);
}

TEST(cli_input_rejects_what_json_forbids)
{
    iv_cli_item it;
    parse("\"a\tb\"", &it); /* a raw tab inside a string */
    REQUIRE(it.error != NULL);
    CHECK_CONTAINS(it.error, "control character");
    iv_cli_item_free(&it);

    parse("\"caf\xc3\"", &it); /* a cut UTF-8 sequence */
    REQUIRE(it.error != NULL);
    CHECK_CONTAINS(it.error, "UTF-8");
    iv_cli_item_free(&it);

    parse("{\"text\": 3}", &it);
    CHECK(it.error != NULL);
    iv_cli_item_free(&it);

    parse("plain text\twith a tab", &it); /* not JSON: the line is the text */
    CHECK(it.error == NULL);
    CHECK_EQ_INT((int)it.in.text_len, 21);
    iv_cli_item_free(&it);
}
