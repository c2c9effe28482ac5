#include "cli/cli_input.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "base/file.h"
#include "base/json.h"
#include "audio/audio.h"
#include "image/image.h"
#include "engine/resolve.h"
#include "server/codec.h"

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static void set_error(iv_cli_item *it, const char *msg)
{
    free(it->error);
    it->error = strdup(msg);
}

static int take_ids(iv_cli_item *it, const cJSON *arr)
{
    int n = cJSON_GetArraySize(arr);
    it->ids = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!it->ids) return -1;
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) {
        if (!iv_json_is_integer(v) || v->valuedouble < 0 || v->valuedouble > 2147483647.0) {
            set_error(it, "token ids must be non-negative integers");
            return -1;
        }
        it->ids[i++] = (int32_t)v->valuedouble;
    }
    it->in.ids = it->ids;
    it->in.n_ids = n;
    return 0;
}

/* A JSON string's whole text: iv_codec_str_len counts past a "\u0000",
 * where cJSON's valuestring would stop (the server reads requests so). */
static void take_text(iv_cli_item *it, const cJSON *s, int pair)
{
    const size_t n = iv_codec_str_len(s);
    char *d = dup_n(s->valuestring, n);
    if (pair) {
        it->pair = d;
        it->in.pair = d;
        it->in.pair_len = d ? n : 0;
    } else {
        it->text = d;
        it->in.text = d;
        it->in.text_len = d ? n : 0;
    }
}

/* A conversation: a non-empty list of message objects (checked where it
 * is rendered, engine/conversation.c). */
static int is_conversation(const cJSON *j)
{
    const cJSON *m;
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) == 0) return 0;
    cJSON_ArrayForEach(m, j) if (!cJSON_IsObject(m)) return 0;
    return 1;
}

/* An image or audio clip as the CLI takes it: a data URL as is, else a
 * file path ("file://" optional) read here and sent on as base64: the
 * server never reads files, the offline commands do. NULL (error set) on
 * failure. what: "image" / "audio". */
static char *media_source(iv_cli_item *it, const char *s, const char *what)
{
    if (!strncasecmp(s, "data:", 5)) return dup_n(s, strlen(s));
    if (!strncasecmp(s, "file://", 7)) s += 7;
    char *bytes;
    size_t n;
    iv_err err = {0};
    const size_t max = !strcmp(what, "audio") ? IV_AUDIO_DEFAULT_MAX_BYTES : IV_IMAGE_DEFAULT_MAX_BYTES;
    if (iv_file_read_all(s, max, &bytes, &n, &err)) {
        char msg[sizeof err.msg + 32];
        snprintf(msg, sizeof msg, "%s: %s", what, err.msg);
        set_error(it, msg);
        return NULL;
    }
    iv_strbuf b;
    iv_sb_init(&b);
    iv_codec_base64(&b, (const unsigned char *)bytes, n);
    free(bytes);
    if (b.oom || !b.data) {
        iv_sb_free(&b);
        set_error(it, "out of memory");
        return NULL;
    }
    return b.data;
}

/* Image and audio parts of a conversation that name files get the files'
 * bytes (input_audio carries base64 data, never a path). */
static void load_media_parts(iv_cli_item *it, cJSON *conv)
{
    cJSON *m;
    cJSON_ArrayForEach(m, conv)
    {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *part;
        if (!cJSON_IsArray(content)) continue;
        cJSON_ArrayForEach(part, content)
        {
            const char *type = iv_json_str(part, "type", "");
            const int audio = !strcmp(type, "audio_url") || !strcmp(type, "audio");
            if (strcmp(type, "image_url") && strcmp(type, "image") && !audio) continue;
            cJSON *holder = part, *v = cJSON_GetObjectItemCaseSensitive(part, type);
            const char *key = type;
            if (cJSON_IsObject(v)) holder = v, key = "url", v = cJSON_GetObjectItemCaseSensitive(v, "url");
            if (!cJSON_IsString(v) || !strncasecmp(v->valuestring, "data:", 5)) continue;
            char *src = media_source(it, v->valuestring, audio ? "audio" : "image");
            if (!src) return;
            cJSON *repl = cJSON_CreateString(src);
            free(src);
            if (!repl || !cJSON_ReplaceItemInObjectCaseSensitive(holder, key, repl)) {
                cJSON_Delete(repl);
                set_error(it, "out of memory");
                return;
            }
        }
    }
}

static void take_messages(iv_cli_item *it, const cJSON *j)
{
    it->messages = cJSON_Duplicate(j, 1);
    if (!it->messages) set_error(it, "out of memory");
    else load_media_parts(it, it->messages);
    it->in.messages = it->messages;
}

/* {"image": PATH} or {"audio": PATH}, with an optional "text" after it. */
static void take_media(iv_cli_item *it, const cJSON *src, const cJSON *text, const char *what)
{
    if (!cJSON_IsString(src)) {
        char msg[64];
        snprintf(msg, sizeof msg, "\"%s\" must be a file path or a data URL", what);
        set_error(it, msg);
        return;
    }
    it->image = media_source(it, src->valuestring, what);
    if (!it->image) return;
    if (!strcmp(what, "audio")) it->in.audio = it->image, it->in.audio_len = strlen(it->image);
    else it->in.image = it->image, it->in.image_len = strlen(it->image);
    if (cJSON_IsString(text)) take_text(it, text, 0);
}

static void parse_json(const cJSON *j, iv_cli_item *it)
{
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(j, "messages");
    if (is_conversation(j) || (cJSON_IsObject(j) && messages)) {
        if (cJSON_IsObject(j) && !is_conversation(messages)) set_error(it, "\"messages\" must be a non-empty list of messages");
        else take_messages(it, cJSON_IsObject(j) ? messages : j);
    } else if (cJSON_IsString(j)) {
        take_text(it, j, 0);
    } else if (cJSON_IsArray(j)) {
        const cJSON *a = cJSON_GetArrayItem(j, 0), *b = cJSON_GetArrayItem(j, 1);
        int n = cJSON_GetArraySize(j);
        if (n == 2 && cJSON_IsString(a) && cJSON_IsString(b)) {
            take_text(it, a, 0);
            take_text(it, b, 1);
        } else if (n == 1 && cJSON_IsString(a)) {
            take_text(it, a, 0);
        } else if (n > 0 && cJSON_IsNumber(a)) {
            take_ids(it, j);
        } else {
            set_error(it, "expected a string, [text, pair], an array of token ids or a list of messages");
        }
    } else if (cJSON_IsObject(j)) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(j, "ids");
        const cJSON *text = iv_json_get(j, "text"), *pair = iv_json_get(j, "pair");
        const cJSON *image = cJSON_GetObjectItemCaseSensitive(j, "image");
        const cJSON *audio = cJSON_GetObjectItemCaseSensitive(j, "audio");
        if (image) take_media(it, image, text, "image");
        else if (audio) take_media(it, audio, text, "audio");
        else if (cJSON_IsArray(ids)) take_ids(it, ids);
        else if (cJSON_IsString(text)) {
            take_text(it, text, 0);
            if (cJSON_IsString(pair)) take_text(it, pair, 1);
        } else set_error(it, "object inputs need \"text\", \"ids\", \"image\", \"audio\" or \"messages\"");
    } else {
        set_error(it, "expected a string, [text, pair], an array of token ids or a list of messages");
    }
}

void iv_cli_parse_line(const char *line, size_t n, iv_cli_item *it)
{
    memset(it, 0, sizeof *it);
    if (n && line[n - 1] == '\r') n--;
    /* JSON when the line looks like it; anything else is the text itself. */
    if (n && (line[0] == '"' || line[0] == '[' || line[0] == '{')) {
        /* As the server parses a body: invalid UTF-8 and raw control bytes
         * inside strings are errors, "\u0000" keeps the rest of its string. */
        cJSON *j;
        iv_api_error e;
        if (iv_codec_parse_json(line, n, &j, &e)) {
            char msg[sizeof e.msg + 32];
            snprintf(msg, sizeof msg, "malformed JSON input line: %s", e.msg);
            set_error(it, msg);
            return;
        }
        parse_json(j, it);
        cJSON_Delete(j);
        return;
    }
    it->text = dup_n(line, n);
    it->in.text = it->text;
    it->in.text_len = n;
}

void iv_cli_item_free(iv_cli_item *it)
{
    free(it->text);
    free(it->pair);
    free(it->ids);
    free(it->image);
    free(it->error);
    cJSON_Delete(it->messages);
    memset(it, 0, sizeof *it);
}

/* Runs items [lo, hi) whose inputs are prepared, printing results in order. */
static int flush(const iv_cli_run *run, iv_cli_item *items, iv_prepared *prep, int lo, int hi, iv_strbuf *out)
{
    int failed = 0, n = 0;
    iv_seq_input *seqs = malloc((size_t)(hi - lo) * sizeof *seqs);
    int *map = malloc((size_t)(hi - lo) * sizeof *map);
    if (!seqs || !map) abort();
    for (int i = lo; i < hi; i++)
        if (!items[i].error) {
            map[n] = i;
            seqs[n++] = prep[i].seq;
        }
    iv_outputs res = {0};
    iv_err err = {0};
    int rc = n ? iv_engine_run(run->engine, run->task, seqs, n, &res, &err) : 0;
    for (int i = lo, k = 0; i < hi; i++) {
        iv_sb_reset(out);
        if (items[i].error || rc) {
            iv_sb_puts(out, "{\"error\":");
            const char *msg = items[i].error ? items[i].error : err.msg;
            iv_sb_json_string(out, msg, strlen(msg));
            iv_sb_putc(out, '}');
            failed++;
        } else if (run->emit_item) {
            failed += run->emit_item(run->emit_ctx, run->engine, &items[i].in, &prep[i], res.data + res.offsets[k],
                                     res.rows[k], res.cols, out) != 0;
        } else {
            run->emit(run->emit_ctx, run->engine, res.data + res.offsets[k], res.rows[k], res.cols, out);
        }
        if (!items[i].error) k++;
        fwrite(out->data, 1, out->len, stdout);
        fputc('\n', stdout);
    }
    iv_outputs_free(&res);
    free(seqs);
    free(map);
    return failed;
}

int iv_cli_process(const iv_cli_run *run, FILE *f)
{
    int cap = 64, n = 0, failed = 0;
    iv_cli_item *items = malloc((size_t)cap * sizeof *items);
    iv_prepared *prep = malloc((size_t)cap * sizeof *prep);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    iv_strbuf out;
    iv_sb_init(&out);
    int64_t tokens = 0;
    while (items && prep && (len = getline(&line, &lcap, f)) >= 0) {
        if (len && line[len - 1] == '\n') len--;
        iv_cli_item *it = &items[n];
        iv_cli_parse_line(line, (size_t)len, it);
        memset(&prep[n], 0, sizeof prep[n]);
        if (!it->error) {
            iv_err err = {0};
            if (iv_prepare_input(run->engine, &it->in, &run->input_opts, &prep[n], &err)) set_error(it, err.msg);
            else tokens += prep[n].seq.len;
        }
        n++;
        if (tokens >= run->batch_tokens || n == cap) {
            failed += flush(run, items, prep, 0, n, &out);
            for (int i = 0; i < n; i++) {
                iv_prepared_free(&prep[i]);
                iv_cli_item_free(&items[i]);
            }
            n = 0;
            tokens = 0;
        }
    }
    if (n) failed += flush(run, items, prep, 0, n, &out);
    for (int i = 0; i < n; i++) {
        iv_prepared_free(&prep[i]);
        iv_cli_item_free(&items[i]);
    }
    free(line);
    free(items);
    free(prep);
    iv_sb_free(&out);
    fflush(stdout);
    return failed;
}

void iv_cli_common_init(iv_cli_common *c)
{
    memset(c, 0, sizeof *c);
    c->batch_tokens = 16384;
    c->truncate = 1;
}

int iv_cli_common_arg(iv_cli_common *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
#define TAKE(field)                                                          \
    do {                                                                     \
        if (!next) {                                                         \
            fprintf(stderr, "infinity_v3: %s needs a value\n", a);          \
            return -1;                                                       \
        }                                                                    \
        field = next;                                                        \
        *i += 2;                                                             \
        return 0;                                                            \
    } while (0)
    if (!strcmp(a, "--model-id")) TAKE(c->model_id);
    if (!strcmp(a, "--device")) TAKE(c->engine.device);
    if (!strcmp(a, "--dtype")) TAKE(c->engine.dtype);
    if (!strcmp(a, "--prompt-name")) TAKE(c->prompt_name);
    if (!strcmp(a, "--revision")) TAKE(c->revision);
    if (!strcmp(a, "--chat-template")) TAKE(c->engine.chat_template);
#undef TAKE
    if (!strcmp(a, "--max-image-pixels") && next) {
        c->engine.max_image_pixels = atoll(next);
        if (c->engine.max_image_pixels <= 0) {
            fprintf(stderr, "infinity_v3: --max-image-pixels must be positive\n");
            return -1;
        }
        *i += 2;
        return 0;
    }
    if (!strcmp(a, "--batch-tokens") && next) {
        c->batch_tokens = atoi(next);
        if (c->batch_tokens <= 0) {
            fprintf(stderr, "infinity_v3: --batch-tokens must be positive\n");
            return -1;
        }
        *i += 2;
        return 0;
    }
    if (!strcmp(a, "--no-truncate")) { c->truncate = 0; (*i)++; return 0; }
    if (!strcmp(a, "--truncate-left")) { c->truncate_left = 1; (*i)++; return 0; }
    if (!strcmp(a, "--backend") && next) {
        if (strcmp(next, "native") && strcmp(next, "libtorch")) {
            fprintf(stderr, "infinity_v3: unknown backend \"%s\" (native)\n", next);
            return -1;
        }
        *i += 2;
        return 0;
    }
    return 1;
}

int iv_cli_open(const iv_cli_common *c, iv_engine **e, iv_input_opts *io)
{
    if (!c->model_id) {
        fprintf(stderr, "infinity_v3: --model-id is required\n");
        return -1;
    }
    iv_err err = {0};
    char dir[4096];
    iv_resolve_opts ro = {.revision = c->revision};
    if (iv_resolve_model(c->model_id, &ro, dir, sizeof dir, &err)) {
        fprintf(stderr, "infinity_v3: cannot find %s: %s\n", c->model_id, err.msg);
        return -1;
    }
    if (iv_engine_load(e, dir, &c->engine, &err)) {
        fprintf(stderr, "infinity_v3: cannot load %s: %s\n", c->model_id, err.msg);
        return -1;
    }
    *io = iv_input_opts_default();
    io->truncate = c->truncate;
    io->truncate_left = c->truncate_left;
    const iv_st_meta *meta = iv_engine_st_meta(*e);
    const char *pname = c->prompt_name ? c->prompt_name : meta->default_prompt_name;
    if (pname) {
        io->prompt = iv_st_meta_prompt(meta, pname);
        if (!io->prompt) {
            fprintf(stderr, "infinity_v3: unknown prompt name \"%s\"\n", pname);
            iv_engine_free(*e);
            *e = NULL;
            return -1;
        }
    }
    return 0;
}
