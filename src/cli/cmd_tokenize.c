/* `infinity_v3 tokenize`: lines in (plain text as `embed` reads it, a JSON
 * string, or a JSON [text, pair] array), one
 * JSON line out per input with ids, type_ids, tokens and char offsets as the
 * Python tokenizers library reports them. A bad line yields
 * {"error": "..."} and processing continues; the exit code is 1 when any
 * line failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: infinity_v3 tokenize --tokenizer DIR_OR_FILE [options] < inputs.txt\n"
            "  Each input line is plain text (as `embed` reads it), a JSON string, or a\n"
            "  [text, pair] array. Lines starting with \" or [ are read as JSON.\n"
            "  (--model-id DIR is accepted as a synonym of --tokenizer)\n"
            "  --no-special-tokens       do not add the post-processor's special tokens\n"
            "  --pair                    require every line to be a [text, pair] array\n"
            "  --max-length N            truncate to N tokens (special tokens included)\n"
            "  --truncation STRATEGY     longest_first (default), only_first or only_second\n"
            "  --truncation-side SIDE    right (default) or left\n"
            "  --decode                  add \"decoded\" (skip_special_tokens=True)\n");
}

static void put_error(const char *msg)
{
    iv_strbuf b;
    iv_sb_init(&b);
    iv_sb_puts(&b, "{\"error\":");
    iv_sb_json_string(&b, msg, strlen(msg));
    iv_sb_puts(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    iv_sb_free(&b);
}

static void put_ints(iv_strbuf *b, const int32_t *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (i) iv_sb_putc(b, ',');
        iv_sb_int(b, v[i]);
    }
}

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p;
}

/* Parses `"text"` or `["text", "pair"]` (strings keep embedded NULs), or
 * takes a line that does not start like JSON as the text itself. */
static int parse_line(const char *line, size_t len, char **text, size_t *tlen, char **pair, size_t *plen,
                      iv_err *err)
{
    const char *p = skip_ws(line, line + len), *e = line + len;
    size_t used = 0;
    *text = *pair = NULL;
    if (p < e && *p == '"') {
        if (iv_json_decode_string(p, (size_t)(e - p), text, tlen, &used, err)) return -1;
        p = skip_ws(p + used, e);
    } else if (p < e && *p == '[') {
        p = skip_ws(p + 1, e);
        if (iv_json_decode_string(p, (size_t)(e - p), text, tlen, &used, err)) return -1;
        p = skip_ws(p + used, e);
        if (p >= e || *p != ',') {
            free(*text);
            return iv_errf(err, IV_E_INVALID, "a pair must be a 2-element array of strings [text, pair]");
        }
        p = skip_ws(p + 1, e);
        if (iv_json_decode_string(p, (size_t)(e - p), pair, plen, &used, err)) {
            free(*text);
            return -1;
        }
        p = skip_ws(p + used, e);
        if (p >= e || *p != ']') {
            free(*text);
            free(*pair);
            return iv_errf(err, IV_E_INVALID, "a pair must be a 2-element array of strings [text, pair]");
        }
        p = skip_ws(p + 1, e);
    } else if (p < e && *p == '{') {
        return iv_errf(err, IV_E_INVALID, "each line must be plain text, a JSON string or a [text, pair] array");
    } else {
        /* Plain text, as `embed` reads it: the whole line is the text. */
        *text = malloc(len + 1);
        if (!*text) return iv_errf(err, IV_E_NOMEM, "out of memory");
        memcpy(*text, line, len);
        (*text)[len] = 0;
        *tlen = len;
        return 0;
    }
    if (p != e) {
        free(*text);
        free(*pair);
        return iv_errf(err, IV_E_INVALID, "trailing characters after the JSON value");
    }
    return 0;
}

static int print_encoding(const iv_tokenizer *tok, const iv_encoding *enc, const char *text, size_t tlen,
                          const char *pair, size_t plen, int decode, iv_err *err)
{
    /* Char offsets, converted per sequence in one pass each. */
    int32_t *offs = malloc(sizeof *offs * 4 * (size_t)(enc->len + 1));
    if (!offs) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int32_t *tmp = offs + 2 * (enc->len + 1);
    memcpy(offs, enc->offsets, sizeof *offs * 2 * (size_t)enc->len);
    for (int seq = 0; seq < 2; seq++) {
        int k = 0;
        for (int i = 0; i < enc->len; i++)
            if (enc->seq_index[i] == seq) {
                tmp[2 * k] = offs[2 * i];
                tmp[2 * k + 1] = offs[2 * i + 1];
                k++;
            }
        if (!k) continue;
        if (iv_tokenizer_char_offsets(seq ? pair : text, seq ? plen : tlen, tmp, k)) {
            free(offs);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        k = 0;
        for (int i = 0; i < enc->len; i++)
            if (enc->seq_index[i] == seq) {
                offs[2 * i] = tmp[2 * k];
                offs[2 * i + 1] = tmp[2 * k + 1];
                k++;
            }
    }
    char *decoded = NULL;
    size_t dlen = 0;
    if (decode && iv_tokenizer_decode_n(tok, enc->ids, enc->len, 1, &decoded, &dlen, err)) {
        free(offs);
        return -1;
    }
    /* One buffer per line, written at once: printf per number dominated the run time. */
    static iv_strbuf b;
    iv_sb_reset(&b);
    iv_sb_puts(&b, "{\"ids\":[");
    put_ints(&b, enc->ids, enc->len);
    iv_sb_puts(&b, "],\"type_ids\":[");
    put_ints(&b, enc->type_ids, enc->len);
    iv_sb_puts(&b, "],\"tokens\":[");
    for (int i = 0; i < enc->len; i++) {
        if (i) iv_sb_putc(&b, ',');
        iv_sb_json_string(&b, enc->tokens[i], (size_t)enc->token_lens[i]);
    }
    iv_sb_puts(&b, "],\"offsets\":[");
    for (int i = 0; i < enc->len; i++) {
        iv_sb_puts(&b, i ? ",[" : "[");
        iv_sb_int(&b, offs[2 * i]);
        iv_sb_putc(&b, ',');
        iv_sb_int(&b, offs[2 * i + 1]);
        iv_sb_putc(&b, ']');
    }
    iv_sb_putc(&b, ']');
    if (decode) {
        iv_sb_puts(&b, ",\"decoded\":");
        iv_sb_json_string(&b, decoded, dlen);
    }
    iv_sb_puts(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    free(decoded);
    free(offs);
    return 0;
}

int iv_cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL;
    int require_pair = 0, decode = 0;
    iv_encode_opts opts = iv_encode_opts_default();
    opts.want_tokens = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "--tokenizer") || !strcmp(a, "--model-id")) && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(a, "--no-special-tokens")) {
            opts.add_special_tokens = 0;
        } else if (!strcmp(a, "--pair")) {
            require_pair = 1;
        } else if (!strcmp(a, "--decode")) {
            decode = 1;
        } else if (!strcmp(a, "--max-length") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > 1 << 30) {
                fprintf(stderr, "tokenize: --max-length must be a non-negative integer\n");
                return 2;
            }
            opts.max_length = (int)v;
        } else if (!strcmp(a, "--truncation") && i + 1 < argc) {
            const char *s = argv[++i];
            if (!strcmp(s, "longest_first")) opts.strategy = IV_TRUNC_LONGEST_FIRST;
            else if (!strcmp(s, "only_first")) opts.strategy = IV_TRUNC_ONLY_FIRST;
            else if (!strcmp(s, "only_second")) opts.strategy = IV_TRUNC_ONLY_SECOND;
            else {
                fprintf(stderr, "tokenize: --truncation must be longest_first, only_first or only_second\n");
                return 2;
            }
        } else if (!strcmp(a, "--truncation-side") && i + 1 < argc) {
            const char *s = argv[++i];
            if (strcmp(s, "left") && strcmp(s, "right")) {
                fprintf(stderr, "tokenize: --truncation-side must be left or right\n");
                return 2;
            }
            opts.truncate_left = !strcmp(s, "left");
        } else {
            fprintf(stderr, "tokenize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "tokenize: --tokenizer is required\n");
        usage(stderr);
        return 2;
    }
    iv_err err;
    iv_tokenizer *tok = NULL;
    if (iv_tokenizer_load(&tok, path, &err)) {
        fprintf(stderr, "tokenize: %s\n", err.msg);
        return 1;
    }
    int failed = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        char *text = NULL, *pair = NULL;
        size_t tlen = 0, plen = 0;
        if (parse_line(line, len, &text, &tlen, &pair, &plen, &err)) {
            put_error(err.msg);
            failed = 1;
            continue;
        }
        if (require_pair && !pair) {
            put_error("--pair: each line must be a [text, pair] array");
            failed = 1;
            free(text);
            continue;
        }
        iv_encoding enc;
        if (iv_tokenizer_encode(tok, text, tlen, pair, plen, &opts, &enc, &err) ||
            print_encoding(tok, &enc, text, tlen, pair, plen, decode, &err)) {
            put_error(err.msg);
            failed = 1;
        }
        iv_encoding_free(&enc);
        free(text);
        free(pair);
    }
    free(line);
    iv_tokenizer_free(tok);
    fflush(stdout);
    return failed ? 1 : 0;
}
