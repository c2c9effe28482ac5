/* The C tokenizer against the Python `tokenizers` library: every
 * tests/fixtures/tokenizers/NAME/expected.jsonl (corpus and pairs, with and
 * without special tokens), expected_trunc.jsonl (truncation strategies and
 * sides) and published.jsonl (vectors published by other projects). Ids,
 * type ids, tokens, char offsets and the decoded text must be identical. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "test.h"
#include "tok_jsonl.h"
#include "tokenizer/tokenizer.h"

#define MAX_REPORTED 8

typedef struct counts {
    int total, passed, reported;
} counts;

static int check_int_array(const cJSON *arr, const int32_t *got, int n)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return 0;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if ((int32_t)it->valuedouble != got[i++]) return 0;
    }
    return 1;
}

/* Python reports char offsets, relative to the text of each sequence. */
static int check_offsets(const cJSON *arr, const iv_encoding *enc, const char *text, size_t tlen, const char *pair,
                         size_t plen)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != enc->len) return 0;
    int32_t *o = malloc(sizeof *o * 2 * (size_t)(enc->len + 1));
    if (!o) return 0;
    memcpy(o, enc->offsets, sizeof *o * 2 * (size_t)enc->len);
    for (int seq = 0; seq < 2; seq++) {
        for (int i = 0; i < enc->len; i++) {
            if (enc->seq_index[i] != seq) continue;
            iv_tokenizer_char_offsets(seq ? pair : text, seq ? plen : tlen, o + 2 * i, 1);
        }
    }
    int ok = 1, i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (cJSON_GetArraySize(it) != 2 || (int32_t)it->child->valuedouble != o[2 * i] ||
            (int32_t)it->child->next->valuedouble != o[2 * i + 1])
            ok = 0;
        i++;
    }
    free(o);
    return ok;
}

static void report(counts *c, const char *name, const char *what, const char *text, const char *line)
{
    if (c->reported++ < MAX_REPORTED)
        iv_test_fail(__FILE__, __LINE__, "%s: %s mismatch for text \"%.120s\" (record %.300s)", name, what, text,
                     line);
}

/* One record of expected.jsonl / expected_trunc.jsonl / published.jsonl. */
static void check_record(const iv_tokenizer *tok, const char *name, const char *line, size_t len, counts *c)
{
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j) {
        iv_test_fail(__FILE__, __LINE__, "%s: unparsable record %.200s", name, line);
        return;
    }
    char *text = NULL, *pair = NULL, *decoded = NULL;
    size_t tlen = 0, plen = 0, dlen = 0;
    int has_text, has_pair, has_dec;
    char **toks = NULL;
    size_t *tok_lens = NULL;
    int ntoks = 0;
    iv_encoding enc;
    memset(&enc, 0, sizeof enc);
    c->total++;
    if (tokt_string(line, len, "text", &text, &tlen, &has_text) || !has_text ||
        tokt_string(line, len, "pair", &pair, &plen, &has_pair) ||
        tokt_string(line, len, "decoded", &decoded, &dlen, &has_dec)) {
        iv_test_fail(__FILE__, __LINE__, "%s: bad record %.200s", name, line);
        goto out;
    }
    iv_encode_opts o = iv_encode_opts_default();
    o.add_special_tokens = cJSON_IsTrue(cJSON_GetObjectItem(j, "add_special_tokens"));
    o.want_tokens = 1;
    const cJSON *ml = cJSON_GetObjectItem(j, "max_length");
    if (ml) {
        o.max_length = (int)ml->valuedouble;
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(j, "strategy"));
        const char *dir = cJSON_GetStringValue(cJSON_GetObjectItem(j, "direction"));
        o.strategy = !strcmp(st, "only_first") ? IV_TRUNC_ONLY_FIRST
                     : !strcmp(st, "only_second") ? IV_TRUNC_ONLY_SECOND
                                                  : IV_TRUNC_LONGEST_FIRST;
        o.truncate_left = dir && !strcmp(dir, "left");
    }
    iv_err err;
    int rc = iv_tokenizer_encode(tok, text, tlen, has_pair ? pair : NULL, plen, &o, &enc, &err);
    const cJSON *want_err = cJSON_GetObjectItem(j, "error");
    if (want_err) {
        if (rc == 0) report(c, name, "expected error", text, line);
        else c->passed++;
        goto out;
    }
    if (rc) {
        if (c->reported++ < MAX_REPORTED)
            iv_test_fail(__FILE__, __LINE__, "%s: encode failed (%s) for \"%.120s\"", name, err.msg, text);
        goto out;
    }
    if (!check_int_array(cJSON_GetObjectItem(j, "ids"), enc.ids, enc.len)) {
        report(c, name, "ids", text, line);
        goto out;
    }
    const cJSON *tids = cJSON_GetObjectItem(j, "type_ids");
    if (tids && !check_int_array(tids, enc.type_ids, enc.len)) {
        report(c, name, "type_ids", text, line);
        goto out;
    }
    if (tokt_member(line, len, "tokens")) {
        if (tokt_string_array(line, len, "tokens", &toks, &tok_lens, &ntoks) || ntoks != enc.len) {
            report(c, name, "tokens", text, line);
            goto out;
        }
        for (int i = 0; i < ntoks; i++)
            if (tok_lens[i] != (size_t)enc.token_lens[i] || memcmp(toks[i], enc.tokens[i], tok_lens[i])) {
                report(c, name, "tokens", text, line);
                goto out;
            }
    }
    const cJSON *offs = cJSON_GetObjectItem(j, "offsets");
    if (offs && !check_offsets(offs, &enc, text, tlen, pair, plen)) {
        report(c, name, "offsets", text, line);
        goto out;
    }
    if (has_dec) {
        char *got = NULL;
        size_t glen = 0;
        if (iv_tokenizer_decode_n(tok, enc.ids, enc.len, 1, &got, &glen, &err) || glen != dlen ||
            memcmp(got, decoded, dlen)) {
            if (c->reported++ < MAX_REPORTED)
                iv_test_fail(__FILE__, __LINE__, "%s: decoded mismatch for \"%.120s\": got \"%.200s\" want \"%.200s\"",
                             name, text, got ? got : err.msg, decoded);
            free(got);
            goto out;
        }
        free(got);
    }
    c->passed++;
out:
    iv_encoding_free(&enc);
    tokt_free_strings(toks, tok_lens, ntoks);
    free(text);
    free(pair);
    free(decoded);
    cJSON_Delete(j);
}

/* Runs every record of fixtures/tokenizers/NAME/<file> for each NAME that
 * has one; returns the number of files found. */
static int run_fixture_files(const char *file)
{
    char root[2048];
    snprintf(root, sizeof root, "%s/tokenizers", iv_test_fixtures_dir());
    int n = 0, files = 0;
    char **names = tokt_list_dirs(root, &n);
    for (int k = 0; k < n; k++) {
        char path[8192], tpath[8192];
        snprintf(path, sizeof path, "%s/%s/%s", root, names[k], file);
        snprintf(tpath, sizeof tpath, "%s/%s/tokenizer.json", root, names[k]);
        size_t len;
        char *data = tokt_read_file(path, &len);
        if (!data) continue;
        files++;
        iv_tokenizer *tok = NULL;
        iv_err err;
        /* tokenizer.json alone, as Tokenizer.from_file loads it. */
        if (iv_tokenizer_load(&tok, tpath, &err)) {
            iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", names[k], err.msg);
            free(data);
            continue;
        }
        counts c = {0, 0, 0};
        for (char *p = data, *end = data + len; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (l) check_record(tok, names[k], p, l, &c);
            p += l + 1;
        }
        printf("    %-30s %-22s %5d/%d\n", names[k], file, c.passed, c.total);
        CHECK_MSG(c.total > 0, "%s/%s has no records", names[k], file);
        iv_tokenizer_free(tok);
        free(data);
    }
    tokt_free_list(names, n);
    return files;
}

static int fixtures_present(void)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/tokenizers/corpus.jsonl", iv_test_fixtures_dir());
    FILE *f = fopen(root, "rb");
    if (f) fclose(f);
    return f != NULL;
}

TEST(tok_golden_expected)
{
    if (!fixtures_present()) {
        iv_test_skip("tests/fixtures/tokenizers not present");
        return;
    }
    CHECK(run_fixture_files("expected.jsonl") >= 13);
}

TEST(tok_golden_truncation)
{
    if (!fixtures_present()) {
        iv_test_skip("tests/fixtures/tokenizers not present");
        return;
    }
    CHECK(run_fixture_files("expected_trunc.jsonl") >= 3);
}

TEST(tok_golden_published)
{
    if (!fixtures_present()) {
        iv_test_skip("tests/fixtures/tokenizers not present");
        return;
    }
    CHECK(run_fixture_files("published.jsonl") >= 13);
}
