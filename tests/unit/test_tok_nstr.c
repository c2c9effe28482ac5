/* NormalizedString alignment bookkeeping, the base of every offset the
 * tokenizer reports. Expected (char, original byte span) lists were read
 * from tokenizers 0.23.3 (PreTokenizedString.get_splits on per-char splits
 * of a NormalizedString after the same operation). */
#include <string.h>

#include "test.h"
#include "tokenizer/tok_internal.h"

typedef struct want_char {
    const char *ch;
    int32_t s, e;
} want_char;

static void check_alignment(const tok_nstr *ns, const want_char *w, int n, const char *what)
{
    int32_t i = 0;
    int k = 0;
    for (; i < ns->len && k < n; k++) {
        int l = tok_utf8_len((unsigned char)ns->s[i]);
        CHECK_MSG((int)strlen(w[k].ch) == l && !memcmp(ns->s + i, w[k].ch, (size_t)l), "%s: char %d differs", what,
                  k);
        CHECK_MSG(ns->al[i].s == w[k].s && ns->al[i].e == w[k].e, "%s: char %d aligned to (%d,%d), want (%d,%d)",
                  what, k, ns->al[i].s, ns->al[i].e, w[k].s, w[k].e);
        i += l;
    }
    CHECK_MSG(i == ns->len && k == n, "%s: length differs", what);
}

typedef void (*op_fn)(tok_ctx *c, tok_nstr *ns);

static void op_nfd(tok_ctx *c, tok_nstr *ns)
{
    tok_unicode_normalize(c, ns->s, ns->len, TOK_NFD, &c->ed);
    tok_ns_transform(c, ns, &c->ed, 0);
}
static void op_nfc(tok_ctx *c, tok_nstr *ns)
{
    tok_unicode_normalize(c, ns->s, ns->len, TOK_NFC, &c->ed);
    tok_ns_transform(c, ns, &c->ed, 0);
}
static void op_nfkc(tok_ctx *c, tok_nstr *ns)
{
    tok_unicode_normalize(c, ns->s, ns->len, TOK_NFKC, &c->ed);
    tok_ns_transform(c, ns, &c->ed, 0);
}
static void op_lower(tok_ctx *c, tok_nstr *ns)
{
    tok_ns_lowercase(c, ns);
}
static void op_prepend(tok_ctx *c, tok_nstr *ns)
{
    tok_ns_prepend(c, ns, "\xE2\x96\x81", 3);
}
static void op_replace(tok_ctx *c, tok_nstr *ns)
{
    tok_regex re;
    iv_err err;
    if (tok_regex_compile(&re, " ", 1, 0, "test", &err)) return;
    tok_matches m = {0};
    tok_regex_find_matches(c, &re, ns->s, ns->len, &m);
    tok_ns_replace(c, ns, &m, "\xE2\x96\x81\xE2\x96\x81", 6);
    tok_regex_free(&re);
}
static void op_strip(tok_ctx *c, tok_nstr *ns)
{
    tok_ns_strip(c, ns, 1, 1);
}

static void run_case(const char *text, op_fn op, const want_char *w, int n, const char *what)
{
    tok_ctx c;
    iv_err err;
    if (tok_ctx_init(&c, NULL, &err)) {
        iv_test_fail(__FILE__, __LINE__, "ctx: %s", err.msg);
        return;
    }
    if (setjmp(c.oom) == 0) {
        tok_nstr ns;
        tok_ns_from(&c, &ns, text, (int32_t)strlen(text));
        op(&c, &ns);
        check_alignment(&ns, w, n, what);
    } else {
        iv_test_fail(__FILE__, __LINE__, "out of memory");
    }
    tok_ctx_free(&c);
}

TEST(tok_nstr_unicode_forms)
{
    const want_char nfd[] = {{"C", 0, 1}, {"a", 1, 2}, {"f", 2, 3}, {"e", 3, 5}, {"\xCC\x81", 3, 5}};
    run_case("Caf\xC3\xA9", op_nfd, nfd, 5, "NFD");
    /* Composition folds the mark into the char: the next char keeps its own span. */
    const want_char nfc[] = {{"\xC3\xA9", 0, 1}, {"a", 3, 4}};
    run_case("e\xCC\x81" "a", op_nfc, nfc, 2, "NFC");
    const want_char nfkc[] = {{"f", 0, 3}, {"i", 0, 3}, {"n", 3, 4}};
    run_case("\xEF\xAC\x81n", op_nfkc, nfkc, 3, "NFKC");
    /* ASCII is left as is by every form. */
    const want_char ascii[] = {{"a", 0, 1}, {"b", 1, 2}};
    run_case("ab", op_nfkc, ascii, 2, "NFKC ASCII");
}

TEST(tok_nstr_edits)
{
    const want_char lower[] = {{"i", 0, 2}, {"\xCC\x87", 0, 2}, {"x", 2, 3}};
    run_case("\xC4\xB0x", op_lower, lower, 3, "lowercase");
    const want_char pre[] = {{"\xE2\x96\x81", 0, 1}, {"a", 0, 1}, {"b", 1, 2}};
    run_case("ab", op_prepend, pre, 3, "prepend");
    const want_char rep[] = {{"a", 0, 1}, {"\xE2\x96\x81", 1, 2}, {"\xE2\x96\x81", 1, 2}, {"b", 2, 3}};
    run_case("a b", op_replace, rep, 4, "replace");
    const want_char strip[] = {{"a", 2, 3}, {"b", 3, 4}};
    run_case("  ab  ", op_strip, strip, 2, "strip");
}

/* Splits text on '-' with one behavior; returns the number of pieces
 * checked against want (NULL-terminated). */
static void check_split(const char *text, int behavior, const char *const *want)
{
    tok_ctx c;
    iv_err err;
    if (tok_ctx_init(&c, NULL, &err)) return;
    tok_regex re;
    if (tok_regex_compile(&re, "-", 1, 0, "test", &err)) {
        tok_ctx_free(&c);
        return;
    }
    if (setjmp(c.oom) == 0) {
        tok_nstr ns;
        tok_ns_from(&c, &ns, text, (int32_t)strlen(text));
        tok_matches m = {0};
        tok_regex_find_matches(&c, &re, ns.s, ns.len, &m);
        tok_splits out = {0};
        tok_split_by_matches(&c, &ns, &m, behavior, &out);
        int k = 0;
        for (; want[k]; k++) {
            if (k >= out.n) {
                iv_test_fail(__FILE__, __LINE__, "behavior %d: missing piece %d", behavior, k);
                break;
            }
            CHECK_MSG((size_t)out.v[k].ns.len == strlen(want[k]) && !memcmp(out.v[k].ns.s, want[k], strlen(want[k])),
                      "behavior %d piece %d: \"%.*s\" want \"%s\"", behavior, k, out.v[k].ns.len, out.v[k].ns.s,
                      want[k]);
        }
        CHECK_EQ_INT(out.n, k);
    }
    tok_regex_free(&re);
    tok_ctx_free(&c);
}

TEST(tok_nstr_split_behaviors)
{
    /* the-final--countdown split on '-' (NormalizedString::split docs). */
    static const char *const removed[] = {"the", "final", "countdown", NULL};
    static const char *const isolated[] = {"the", "-", "final", "-", "-", "countdown", NULL};
    static const char *const previous[] = {"the-", "final-", "-", "countdown", NULL};
    static const char *const next[] = {"the", "-final", "-", "-countdown", NULL};
    static const char *const contiguous[] = {"the", "-", "final", "--", "countdown", NULL};
    const char *text = "the-final--countdown";
    check_split(text, TOK_REMOVED, removed);
    check_split(text, TOK_ISOLATED, isolated);
    check_split(text, TOK_MERGED_WITH_PREVIOUS, previous);
    check_split(text, TOK_MERGED_WITH_NEXT, next);
    check_split(text, TOK_CONTIGUOUS, contiguous);
}

/* Matches of an Oniguruma-syntax pattern as (start, end) pairs. */
static int regex_spans(const char *pattern, const char *text, int32_t *spans, int max)
{
    tok_ctx c;
    iv_err err;
    tok_regex re;
    if (tok_ctx_init(&c, NULL, &err)) return -1;
    if (tok_regex_compile(&re, pattern, strlen(pattern), 1, "test", &err)) {
        tok_ctx_free(&c);
        return -1;
    }
    int n = 0;
    if (setjmp(c.oom) == 0) {
        tok_matches m = {0};
        if (tok_regex_find_matches(&c, &re, text, (int32_t)strlen(text), &m) == 0)
            for (int i = 0; i < m.n; i++)
                if (m.v[i].m && n < max) {
                    spans[2 * n] = m.v[i].s;
                    spans[2 * n + 1] = m.v[i].e;
                    n++;
                }
    }
    tok_regex_free(&re);
    tok_ctx_free(&c);
    return n;
}

TEST(tok_regex_oniguruma_syntax)
{
    int32_t sp[16];
    /* \s is Unicode White_Space: U+3000 is, U+180E (Mongolian vowel
     * separator) is not, though PCRE2's own \s includes it. */
    int n = regex_spans("\\s+", "a\xE1\xA0\x8E" "b\xE3\x80\x80" "c", sp, 8);
    REQUIRE(n == 1);
    CHECK_EQ_INT(sp[0], 5);
    CHECK_EQ_INT(sp[1], 8);
    /* \uHHHH escapes, inside a class too. */
    n = regex_spans("[\\u4e00-\\u9fa5]+", "ab\xE4\xB8\xAD\xE6\x96\x87" "cd", sp, 8);
    REQUIRE(n == 1);
    CHECK_EQ_INT(sp[0], 2);
    CHECK_EQ_INT(sp[1], 8);
    /* GPT-2's pattern: contractions, letters, digits, the \s+(?!\S) rule. */
    n = regex_spans("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
                    "it's  42!", sp, 8);
    REQUIRE(n == 5);
    const int32_t want[] = {0, 2, 2, 4, 4, 5, 5, 8, 8, 9};
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(sp[i], want[i]);
    /* Empty matches next to a previous match are skipped (onig find_iter). */
    n = regex_spans("x*", "axa", sp, 8);
    REQUIRE(n == 3);
    CHECK_EQ_INT(sp[0], 0);
    CHECK_EQ_INT(sp[1], 0);
    CHECK_EQ_INT(sp[2], 1);
    CHECK_EQ_INT(sp[3], 2);
    CHECK_EQ_INT(sp[4], 3);
    CHECK_EQ_INT(sp[5], 3);
}
