#include "engine/conversation.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "chat/chat_template.h"
#include "engine/media_runs.h"

int iv_conversation_wanted(const iv_engine *e, const iv_input *in)
{
    return in->messages != NULL || in->image != NULL || in->audio != NULL || in->media_part != NULL || iv_engine_st_meta(e)->messages.enabled ||
           (in->pair != NULL && iv_engine_pairs_as_messages(e));
}

static int structured(const iv_engine *e)
{
    return iv_engine_st_meta(e)->messages.format == IV_ST_MESSAGES_STRUCTURED;
}

/* Text content as the checkpoint's message format writes it: the string
 * itself (flat) or one text part (structured). */
static cJSON *text_content(const iv_engine *e, const char *s, size_t n)
{
    char *dup = malloc(n + 1);
    if (!dup) return NULL;
    memcpy(dup, s, n);
    dup[n] = 0;
    cJSON *str = cJSON_CreateString(dup);
    free(dup);
    if (!str || !structured(e)) return str;
    cJSON *parts = cJSON_CreateArray(), *part = cJSON_CreateObject();
    if (!parts || !part || !cJSON_AddStringToObject(part, "type", "text")) {
        cJSON_Delete(parts);
        cJSON_Delete(part);
        cJSON_Delete(str);
        return NULL;
    }
    cJSON_AddItemToObject(part, "text", str);
    cJSON_AddItemToArray(parts, part);
    return parts;
}

static int add_message(cJSON *conv, const char *role, cJSON *content)
{
    cJSON *msg = cJSON_CreateObject();
    if (!msg || !content || !cJSON_AddStringToObject(msg, "role", role)) {
        cJSON_Delete(msg);
        cJSON_Delete(content);
        return -1;
    }
    cJSON_AddItemToObject(msg, "content", content);
    cJSON_AddItemToArray(conv, msg);
    return 0;
}

/* sentence-transformers' normalize_messages: a flat checkpoint reads a
 * single text part as its text; a structured one reads a string as one
 * text part. Other shapes pass unchanged. */
static int normalize_content(const iv_engine *e, cJSON *msg)
{
    const iv_st_messages *mm = &iv_engine_st_meta(e)->messages;
    cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (!mm->enabled || !content) return 0;
    const int is_parts = cJSON_IsArray(content) && cJSON_IsObject(cJSON_GetArrayItem(content, 0));
    cJSON *repl = NULL;
    if (mm->format == IV_ST_MESSAGES_FLAT && is_parts && cJSON_GetArraySize(content) == 1) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 0), "text");
        if (text) repl = cJSON_Duplicate(text, 1);
        else return 0;
    } else if (mm->format == IV_ST_MESSAGES_STRUCTURED && cJSON_IsString(content)) {
        repl = text_content(e, content->valuestring, strlen(content->valuestring));
    } else {
        return 0;
    }
    return repl && cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", repl) ? 0 : -1;
}

/* OpenAI's {"type": "image_url", "image_url": {"url": ...}} (or the url as
 * a string), and the transformers form {"type": "image", "image": ...}. */
static int is_image_part(const char *type)
{
    return !strcmp(type, "image_url") || !strcmp(type, "image");
}

/* OpenAI's {"type": "input_audio", "input_audio": {"data": BASE64,
 * "format": "wav"}}, {"type": "audio_url", "audio_url": {"url": DATA_URL}}
 * (or the url as a string), and the transformers form {"type": "audio",
 * "audio": ...}. */
static int is_audio_part(const char *type)
{
    return !strcmp(type, "input_audio") || !strcmp(type, "audio_url") || !strcmp(type, "audio");
}

/* A part that is not text and that the model cannot read: what only a
 * vision (or audio) tower can read. */
static const char *media_part(const iv_engine *e, const cJSON *msg)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content"), *part;
    if (!cJSON_IsArray(content)) return NULL;
    cJSON_ArrayForEach(part, content)
    {
        const char *type = iv_json_str(part, "type", "text");
        if (!strcmp(type, "text") || (iv_engine_image_proc(e) && is_image_part(type)) ||
            (iv_engine_audio_proc(e) && is_audio_part(type)))
            continue;
        return type;
    }
    return NULL;
}

/* Messages as the request gave them, checked: an array of objects with a
 * string role; content a string, null, absent or a list of parts. */
static int copy_messages(const iv_engine *e, const cJSON *given, cJSON *conv, iv_err *err)
{
    if (!cJSON_IsArray(given) || cJSON_GetArraySize(given) == 0)
        return iv_errf(err, IV_E_INVALID, "`messages` must be a non-empty list of messages");
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, given)
    {
        if (!cJSON_IsObject(m) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")))
            return iv_errf(err, IV_E_INVALID, "message %d must be an object with a string `role`", i);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (c && !cJSON_IsString(c) && !cJSON_IsNull(c) && !cJSON_IsArray(c))
            return iv_errf(err, IV_E_INVALID, "message %d: `content` must be a string, null or a list of parts", i);
        const cJSON *part;
        if (cJSON_IsArray(c)) cJSON_ArrayForEach(part, c) if (!cJSON_IsObject(part) ||
                                                              !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(part, "type")))
                return iv_errf(err, IV_E_INVALID, "message %d: every content part must be an object with a string `type`",
                               i);
        const char *media = media_part(e, m);
        if (media && is_image_part(media))
            return iv_errf(err, IV_E_INVALID,
                           "message %d has a \"%.32s\" part, but model `%s` reads text only (it has no vision "
                           "tower)",
                           i, media, iv_engine_model_type(e));
        if (media && is_audio_part(media))
            return iv_errf(err, IV_E_INVALID,
                           "message %d has a \"%.32s\" part, but model `%s` cannot read audio (it has no audio "
                           "tower)",
                           i, media, iv_engine_model_type(e));
        if (media)
            return iv_errf(err, IV_E_INVALID,
                           "message %d has a \"%.32s\" part, which model `%s` cannot read (it takes text%s%s)", i,
                           media, iv_engine_model_type(e), iv_engine_image_proc(e) ? ", images" : "",
                           iv_engine_audio_proc(e) ? ", audio" : iv_engine_image_proc(e) ? "" : " only");
        cJSON *copy = cJSON_Duplicate(m, 1);
        if (!copy) return iv_errf(err, IV_E_NOMEM, "out of memory");
        cJSON_AddItemToArray(conv, copy);
        if (normalize_content(e, copy)) return iv_errf(err, IV_E_NOMEM, "out of memory");
        i++;
    }
    return 0;
}

/* A bare image or audio input as one user message: the media part
 * ({"type": "image"|"audio", kind: src}), then the model's image_doc_text
 * (ColQwen3's "Describe the image.", images only) or the input's text when
 * either is set. */
static int add_media_message(const iv_engine *e, cJSON *conv, const iv_input *in, iv_err *err)
{
    const int audio = in->audio != NULL;
    const char *kind = audio ? "audio" : "image";
    const char *src_in = audio ? in->audio : in->image;
    const size_t src_len = audio ? in->audio_len : in->image_len;
    const iv_image_proc *ip = iv_engine_image_proc(e);
    if (!audio && !ip)
        return iv_errf(err, IV_E_INVALID, "model `%s` reads text only (it has no vision tower): it takes no images",
                       iv_engine_model_type(e));
    if (audio && !iv_engine_audio_proc(e))
        return iv_errf(err, IV_E_INVALID, "model `%s` has no audio tower: it takes no audio", iv_engine_model_type(e));
    cJSON *parts = cJSON_CreateArray(), *img = cJSON_CreateObject();
    char *src = malloc(src_len + 1);
    int bad = !parts || !img || !src;
    if (!bad) {
        memcpy(src, src_in, src_len);
        src[src_len] = 0;
        cJSON_AddItemToArray(parts, img);
        bad = !cJSON_AddStringToObject(img, "type", kind) || !cJSON_AddStringToObject(img, kind, src);
    } else {
        cJSON_Delete(img);
    }
    free(src);
    const char *text = in->text && in->text_len ? NULL : audio ? NULL : ip->image_doc_text;
    if (!bad && (text || (in->text && in->text_len))) {
        cJSON *t = cJSON_CreateObject();
        char *dup = text ? NULL : malloc(in->text_len + 1);
        if (dup) memcpy(dup, in->text, in->text_len), dup[in->text_len] = 0;
        if (t) cJSON_AddItemToArray(parts, t);
        bad = !t || (!text && !dup) || !cJSON_AddStringToObject(t, "type", "text") ||
              !cJSON_AddStringToObject(t, "text", text ? text : dup);
        free(dup);
    }
    if (bad) {
        cJSON_Delete(parts);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    if (add_message(conv, "user", parts)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    return 0;
}

/* A bare content part as one user message ({"type": "input_audio"} when
 * the item names no type). */
static int add_part_message(cJSON *conv, const cJSON *part, iv_err *err)
{
    cJSON *parts = cJSON_CreateArray(), *p = cJSON_Duplicate(part, 1);
    if (!parts || !p) {
        cJSON_Delete(parts);
        cJSON_Delete(p);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    cJSON_AddItemToArray(parts, p);
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "type"))) {
        cJSON_DeleteItemFromObjectCaseSensitive(p, "type");
        if (!cJSON_AddStringToObject(p, "type", "input_audio")) {
            cJSON_Delete(parts);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
    }
    if (add_message(conv, "user", parts)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    return 0;
}

/* The source string of an audio part, checking input_audio's format: the
 * bytes are sniffed whatever it says, but a format we refuse is named. */
static const cJSON *audio_source(const cJSON *part, const char *type, int k, iv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(part, type);
    if (!strcmp(type, "input_audio")) {
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(v, "format");
        if (fmt && !cJSON_IsString(fmt)) {
            iv_errf(err, IV_E_INVALID, "audio %d: input_audio.format must be a string (wav, mp3 or flac)", k);
            return NULL;
        }
        const char *f = fmt ? fmt->valuestring : "";
        if (!strcasecmp(f, "ogg") || !strcasecmp(f, "opus") || !strcasecmp(f, "vorbis") || !strcasecmp(f, "oga")) {
            iv_errf(err, IV_E_UNSUPPORTED,
                    "audio %d: format \"%s\" is not supported: Ogg (Vorbis, Opus) audio is refused; send WAV, FLAC "
                    "or MP3",
                    k, f);
            return NULL;
        }
        if (fmt && strcasecmp(f, "wav") && strcasecmp(f, "mp3") && strcasecmp(f, "flac")) {
            iv_errf(err, IV_E_INVALID, "audio %d: input_audio.format \"%.32s\" is not one of wav, mp3, flac", k, f);
            return NULL;
        }
        v = cJSON_GetObjectItemCaseSensitive(v, "data");
    } else if (cJSON_IsObject(v)) {
        v = cJSON_GetObjectItemCaseSensitive(v, "url");
    }
    if (!cJSON_IsString(v)) {
        iv_errf(err, IV_E_INVALID, "audio %d: an \"%s\" part needs its audio as a string%s", k, type,
                !strcmp(type, "input_audio") ? " (base64) in input_audio.data"
                : !strcmp(type, "audio_url") ? " (a data URL) in audio_url.url"
                                             : " (a data URL or base64) in \"audio\"");
        return NULL;
    }
    return v;
}

/* Decodes every audio part of conv in order into out and turns each into
 * {"type": "audio"}, what chat templates render as the placeholder. */
static int take_audio(const iv_engine *e, cJSON *conv, iv_audio_set *out, iv_err *err)
{
    const iv_audio_proc *ap = iv_engine_audio_proc(e);
    cJSON *m;
    cJSON_ArrayForEach(m, conv)
    {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *part;
        if (!cJSON_IsArray(content)) continue;
        cJSON_ArrayForEach(part, content)
        {
            const char *type = iv_json_str(part, "type", "text");
            if (!is_audio_part(type)) continue;
            const cJSON *v = audio_source(part, type, out->n, err);
            if (!v || iv_audio_set_add(ap, out, v->valuestring, strlen(v->valuestring), err)) return -1;
            cJSON *repl = cJSON_CreateObject();
            if (!repl || !cJSON_AddStringToObject(repl, "type", "audio")) {
                cJSON_Delete(repl);
                return iv_errf(err, IV_E_NOMEM, "out of memory");
            }
            cJSON_ReplaceItemViaPointer(content, part, repl);
            part = repl;
        }
    }
    return 0;
}

/* Decodes every image part of conv in order into out and turns each into
 * {"type": "image"}, what chat templates render as the placeholder. */
static int take_images(const iv_engine *e, const iv_input *in, cJSON *conv, iv_image_set *out, iv_err *err)
{
    const iv_image_proc *ip = iv_engine_image_proc(e);
    cJSON *m;
    cJSON_ArrayForEach(m, conv)
    {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content"), *part;
        if (!cJSON_IsArray(content)) continue;
        cJSON_ArrayForEach(part, content)
        {
            const char *type = iv_json_str(part, "type", "text");
            if (!is_image_part(type)) continue;
            if (in->decoded_images) {
                /* Decoded once by the caller: the k-th part is its k-th image. */
                if (iv_image_set_borrow(out, in->decoded_images, out->n, err)) return -1;
                continue;
            }
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(part, type);
            if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "url");
            if (!cJSON_IsString(v))
                return iv_errf(err, IV_E_INVALID,
                               "image %d: an \"%s\" part needs its image as a string (a data URL or base64)%s",
                               out->n, type, !strcmp(type, "image_url") ? " in image_url.url" : " in \"image\"");
            if (iv_image_set_add(ip, out, v->valuestring, strlen(v->valuestring), err)) return -1;
            cJSON *repl = cJSON_CreateObject();
            if (!repl || !cJSON_AddStringToObject(repl, "type", "image")) {
                cJSON_Delete(repl);
                return iv_errf(err, IV_E_NOMEM, "out of memory");
            }
            cJSON_ReplaceItemViaPointer(content, part, repl);
            part = repl;
        }
    }
    return 0;
}

/* The conversation of one input (caller frees): the prompt as a system
 * message first (prepend_prompt_to_messages), then the request's messages,
 * or the pair as "query" and "document" messages (pair_to_messages), or the
 * text as one "user" message (to_message). */
static cJSON *build(const iv_engine *e, const iv_input *in, const char *prompt, iv_err *err)
{
    /* The template sees C strings: a NUL would silently end the text. */
    if ((in->text && memchr(in->text, 0, in->text_len)) || (in->pair && memchr(in->pair, 0, in->pair_len))) {
        iv_errf(err, IV_E_INVALID, "text with U+0000 cannot be rendered by a chat template");
        return NULL;
    }
    cJSON *conv = cJSON_CreateArray();
    if (!conv) {
        iv_errf(err, IV_E_NOMEM, "out of memory");
        return NULL;
    }
    int rc = 0;
    if (prompt && *prompt) rc = add_message(conv, "system", text_content(e, prompt, strlen(prompt)));
    if (rc) iv_errf(err, IV_E_NOMEM, "out of memory");
    else if (in->messages) rc = copy_messages(e, in->messages, conv, err);
    else if (in->pair) {
        rc = add_message(conv, "query", text_content(e, in->text, in->text_len)) ||
             add_message(conv, "document", text_content(e, in->pair, in->pair_len));
        if (rc) iv_errf(err, IV_E_NOMEM, "out of memory");
    } else if (in->image || in->audio) {
        rc = add_media_message(e, conv, in, err);
    } else if (in->media_part) {
        rc = iv_engine_audio_proc(e) ? add_part_message(conv, in->media_part, err)
                                     : iv_errf(err, IV_E_INVALID, "model `%s` has no audio tower: it takes no audio",
                                               iv_engine_model_type(e));
    } else if (add_message(conv, "user", text_content(e, in->text ? in->text : "", in->text_len))) {
        rc = iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    if (rc) {
        cJSON_Delete(conv);
        return NULL;
    }
    return conv;
}

/* The template variables: the checkpoint's (sentence_bert_config.json
 * processing_kwargs.chat_template) with the request's on top (caller frees;
 * NULL and no error when there are none). */
static int template_vars(const iv_engine *e, const iv_input_opts *o, cJSON **out, iv_err *err)
{
    const cJSON *base = iv_engine_st_meta(e)->messages.template_kwargs, *kv;
    *out = NULL;
    if (!base && !o->chat_kwargs) return 0;
    cJSON *vars = base ? cJSON_Duplicate(base, 1) : cJSON_CreateObject();
    if (!vars) return iv_errf(err, IV_E_NOMEM, "out of memory");
    cJSON_ArrayForEach(kv, o->chat_kwargs)
    {
        cJSON *copy = cJSON_Duplicate(kv, 1);
        if (!copy) {
            cJSON_Delete(vars);
            return iv_errf(err, IV_E_NOMEM, "out of memory");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(vars, kv->string);
        cJSON_AddItemToObject(vars, kv->string, copy);
    }
    *out = vars;
    return 0;
}

static int render(const iv_engine *e, const cJSON *conv, const iv_input_opts *o, iv_strbuf *text, iv_err *err)
{
    const iv_chat_template *ct = iv_engine_chat_template(e);
    if (!ct)
        return iv_errf(err, IV_E_INVALID,
                       "model `%s` has no chat template (tokenizer_config.json chat_template, chat_template.jinja or "
                       "chat_template.json), so it cannot take conversations",
                       iv_engine_model_type(e));
    cJSON *vars;
    if (template_vars(e, o, &vars, err)) return -1;
    int agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(vars, "add_generation_prompt"));
    if (o->generation_prompt != IV_GEN_PROMPT_DEFAULT) agp = o->generation_prompt == IV_GEN_PROMPT_ON;
    cJSON_DeleteItemFromObjectCaseSensitive(vars, "add_generation_prompt");
    int rc = iv_chat_template_render(ct, conv, NULL, vars, agp, NULL, text, err);
    cJSON_Delete(vars);
    if (!rc && text->oom) rc = iv_errf(err, IV_E_NOMEM, "out of memory rendering the chat template");
    return rc;
}

/* Tokenizes rendered text as apply_chat_template does: no special tokens
 * added (the template wrote them). max 0: no truncation. */
static int tokenize(const iv_engine *e, const iv_strbuf *text, int max, int left, iv_encoding *enc, iv_err *err)
{
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = 0;
    eo.max_length = max;
    eo.truncate_left = left;
    return iv_tokenizer_encode(iv_engine_tokenizer(e), text->data ? text->data : "", text->len, NULL, 0, &eo, enc,
                               err);
}

/* The conversation with every non-system content replaced by filler
 * (sentence-transformers' _message_skeleton): system messages kept whole so
 * a prompt the template renders in the tail counts as tail. */
static cJSON *skeleton(const cJSON *conv, const char *filler)
{
    cJSON *sk = cJSON_Duplicate(conv, 1), *m;
    if (!sk) return NULL;
    cJSON_ArrayForEach(m, sk)
    {
        const char *role = iv_json_str(m, "role", "");
        if (!strcmp(role, "system")) continue;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        cJSON *repl;
        if (cJSON_IsArray(c)) {
            cJSON *part = cJSON_CreateObject();
            repl = cJSON_CreateArray();
            if (!part || !repl || !cJSON_AddStringToObject(part, "type", "text") ||
                !cJSON_AddStringToObject(part, "text", filler)) {
                cJSON_Delete(part);
                cJSON_Delete(repl);
                cJSON_Delete(sk);
                return NULL;
            }
            cJSON_AddItemToArray(repl, part);
        } else {
            repl = cJSON_CreateString(filler);
        }
        if (!repl || (cJSON_GetObjectItemCaseSensitive(m, "content")
                          ? !cJSON_ReplaceItemInObjectCaseSensitive(m, "content", repl)
                          : !cJSON_AddItemToObject(m, "content", repl))) {
            cJSON_Delete(repl);
            cJSON_Delete(sk);
            return NULL;
        }
    }
    return sk;
}

static int skeleton_ids(const iv_engine *e, const cJSON *conv, const iv_input_opts *o, const char *filler,
                        iv_encoding *enc, iv_err *err)
{
    cJSON *sk = skeleton(conv, filler);
    if (!sk) return iv_errf(err, IV_E_NOMEM, "out of memory");
    iv_strbuf text;
    iv_sb_init(&text);
    int rc = render(e, sk, o, &text, err) || tokenize(e, &text, 0, 0, enc, err);
    iv_sb_free(&text);
    cJSON_Delete(sk);
    return rc ? -1 : 0;
}

/* sentence-transformers 6.3 (_restore_chat_template_suffix): a row cut to
 * the limit gets the template's tail written back over its last tokens.
 * The tail is the longest common token suffix of two renders with
 * different fillers ("0" and "1 2 3 4"), trusted only when the renders
 * diverge somewhere. Conversations with media parts are left alone. */
static int restore_suffix(const iv_engine *e, const cJSON *conv, const iv_input_opts *o, iv_encoding *enc,
                          iv_err *err)
{
    iv_encoding a = {0}, b = {0};
    int rc = skeleton_ids(e, conv, o, "0", &a, err) || skeleton_ids(e, conv, o, "1 2 3 4", &b, err);
    if (!rc) {
        int count = 0;
        while (count < a.len && count < b.len && a.ids[a.len - 1 - count] == b.ids[b.len - 1 - count]) count++;
        const int shorter = a.len < b.len ? a.len : b.len;
        if (count > 0 && count < shorter) {
            const int keep = count < enc->len ? count : enc->len;
            memcpy(enc->ids + enc->len - keep, a.ids + a.len - keep, (size_t)keep * sizeof(int32_t));
        }
    }
    iv_encoding_free(&a);
    iv_encoding_free(&b);
    return rc ? -1 : 0;
}

/* The media placeholders replaced by their runs (the model's
 * image_token_run, the audio run), then the length rule: runs are kept
 * whole. */
static int expand_media(const iv_engine *e, const iv_input_opts *o, int max_tokens, iv_prepared *out, iv_err *err)
{
    int len;
    if (iv_media_expand(iv_engine_image_proc(e), &out->images, iv_engine_audio_proc(e), &out->audios, out->enc.ids,
                        out->enc.len, &out->own_ids, &len, err) ||
        iv_media_truncate(&out->images, &out->audios, out->own_ids, &len, max_tokens, o->truncate, o->truncate_left,
                          err))
        return -1;
    out->seq.ids = out->own_ids;
    out->seq.type_ids = NULL;
    out->seq.len = len;
    out->seq.images = out->images.in;
    out->seq.n_images = out->images.n;
    out->seq.audios = out->audios.in;
    out->seq.n_audios = out->audios.n;
    return 0;
}

int iv_conversation_prepare(const iv_engine *e, const iv_input *in, const iv_input_opts *o, int max_tokens,
                            iv_prepared *out, iv_err *err)
{
    if (!iv_engine_tokenizer(e))
        return iv_errf(err, IV_E_UNSUPPORTED, "this model has no tokenizer.json; conversations need one");
    if (in->ids) return iv_errf(err, IV_E_INVALID, "token ids cannot be rendered as a conversation");
    /* Models relying on the message format do not leave prompt tokens out of
     * pooling (sentence-transformers keeps no prompt length for them). */
    cJSON *conv = build(e, in, o->prompt, err);
    if (!conv) return -1;
    if (take_images(e, in, conv, &out->images, err) || take_audio(e, conv, &out->audios, err)) {
        cJSON_Delete(conv);
        return -1;
    }
    const int images = out->images.n > 0 || out->audios.n > 0;
    iv_strbuf text;
    iv_sb_init(&text);
    /* With images the text is cut after their runs are expanded (never
     * through one), so it is tokenized whole. */
    int rc = render(e, conv, o, &text, err) ||
             tokenize(e, &text, o->truncate && !images ? max_tokens : 0, o->truncate_left, &out->enc, err);
    if (!rc && !images && out->enc.n_truncated > 0 && iv_engine_st_meta(e)->messages.restore_suffix &&
        !o->truncate_left)
        rc = restore_suffix(e, conv, o, &out->enc, err);
    iv_sb_free(&text);
    cJSON_Delete(conv);
    if (rc) return -1;
    if (images) return expand_media(e, o, max_tokens, out, err);
    if (out->enc.len > max_tokens)
        return iv_errf(err, IV_E_INVALID, "input has %d tokens, more than the model's maximum of %d", out->enc.len,
                       max_tokens);
    if (out->enc.len == 0) return iv_errf(err, IV_E_INVALID, "the rendered conversation produced no tokens");
    out->seq.ids = out->enc.ids;
    out->seq.type_ids = NULL;
    out->seq.len = out->enc.len;
    return 0;
}
