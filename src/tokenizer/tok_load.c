/* Loading: tokenizer.json (each section by its own loader) and, from a
 * directory, tokenizer_config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/utf8.h"
#include "tokenizer/tok_internal.h"

#define TOK_MAX_JSON (1024u << 20)

/* model_max_length values at or above this are "no limit" sentinels
 * (transformers writes int(1e30)). */
#define TOK_MAX_SANE_LENGTH 100000000.0

void iv_tokenizer_free(iv_tokenizer *tok)
{
    if (!tok) return;
    if (tok->normalizer) tok_free_normalizer(tok->normalizer);
    if (tok->pretok) tok_free_pretokenizer(tok->pretok);
    if (tok->post) tok_free_postproc(tok->post);
    if (tok->decoder) tok_free_decoder(tok->decoder);
    free(tok->normalizer);
    free(tok->pretok);
    free(tok->post);
    free(tok->decoder);
    tok_free_model(&tok->model);
    tok_free_added(&tok->added);
    free(tok);
}

/* Loads an optional section: NULL/absent/null leaves *out NULL. */
#define LOAD_SECTION(json, key, type, loader, out, path)                                   \
    do {                                                                                   \
        const cJSON *sec_ = iv_json_get(json, key);                   \
        if (sec_ && !cJSON_IsNull(sec_)) {                                                 \
            if (!cJSON_IsObject(sec_))                                                     \
                return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be an object or null",   \
                               path, key);                                                 \
            out = calloc(1, sizeof(type));                                                 \
            if (!out) return iv_errf(err, IV_E_NOMEM, "out of memory");                    \
            if (loader(sec_, out, key, err)) return iv_err_prefix(err, "%s: ", path);      \
        }                                                                                  \
    } while (0)

static int load_json(iv_tokenizer *tok, const cJSON *j, uint32_t nul_ph, const char *path, iv_err *err)
{
    if (!cJSON_IsObject(j)) return iv_errf(err, IV_E_FORMAT, "%s: top level must be an object", path);
    const char *version = iv_json_str(j, "version", NULL);
    if (version && strcmp(version, "1.0"))
        return iv_errf(err, IV_E_UNSUPPORTED, "%s: unknown tokenizer version \"%s\"", path, version);
    const cJSON *model = iv_json_get(j, "model");
    if (!model) return iv_errf(err, IV_E_FORMAT, "%s: missing \"model\"", path);
    if (tok_load_model(model, &tok->model, nul_ph, err)) return iv_err_prefix(err, "%s: ", path);
    LOAD_SECTION(j, "normalizer", tok_normalizer, tok_load_normalizer, tok->normalizer, path);
    LOAD_SECTION(j, "pre_tokenizer", tok_pretokenizer, tok_load_pretokenizer, tok->pretok, path);
    LOAD_SECTION(j, "post_processor", tok_postproc, tok_load_postproc, tok->post, path);
    LOAD_SECTION(j, "decoder", tok_decoder, tok_load_decoder, tok->decoder, path);
    /* "truncation" and "padding" are deliberately not applied: the caller
     * chooses truncation per request (iv_encode_opts). */
    if (tok_load_added_tokens(iv_json_get(j, "added_tokens"), tok, err))
        return iv_err_prefix(err, "%s: ", path);
    return 0;
}

/* bos_token / eos_token: a string or an AddedToken object. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = iv_json_get(cfg, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return iv_json_str(v, "content", NULL);
    return NULL;
}

/* Tokenizer classes whose transformers implementation rebuilds the
 * template from add_bos_token / add_eos_token (update_post_processor). */
static int rebuilds_template(const char *cls)
{
    static const char *names[] = {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                  "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"};
    if (!cls) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(cls, names[i])) return 1;
    return 0;
}

/* Tokenizer classes transformers (5.x) builds from tokenizer_config.json
 * around a BertNormalizer: their normalizer takes do_lower_case (default
 * true), strip_accents (default None) and tokenize_chinese_chars (default
 * true) from the config, whatever tokenizer.json's normalizer says. */
static int bert_normalizer_class(const char *cls)
{
    static const char *names[] = {"BertTokenizer",       "DistilBertTokenizer", "ElectraTokenizer",
                                  "ConvBertTokenizer",   "MobileBertTokenizer", "SqueezeBertTokenizer",
                                  "LayoutLMTokenizer",   "MPNetTokenizer",      "FunnelTokenizer",
                                  "DPRContextEncoderTokenizer", "DPRQuestionEncoderTokenizer"};
    if (!cls) return 0;
    const size_t n = strlen(cls);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const size_t k = strlen(names[i]);
        if (!strncmp(cls, names[i], k) && (n == k || !strcmp(cls + k, "Fast"))) return 1;
    }
    return 0;
}

static int apply_bert_flags(iv_tokenizer *tok, const cJSON *cfg, const char *path, iv_err *err)
{
    if (!tok->normalizer || tok->normalizer->kind != TOK_N_BERT) return 0;
    int lower, chinese;
    if (iv_json_bool_chk(cfg, "do_lower_case", 1, &lower, path, err) ||
        iv_json_bool_chk(cfg, "tokenize_chinese_chars", 1, &chinese, path, err))
        return -1;
    const cJSON *sa = iv_json_get(cfg, "strip_accents");
    if (sa && !cJSON_IsNull(sa) && !cJSON_IsBool(sa))
        return iv_errf(err, IV_E_FORMAT, "%s: strip_accents must be true, false or null", path);
    tok->normalizer->lowercase = lower;
    tok->normalizer->handle_chinese = chinese;
    tok->normalizer->strip_accents = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : -1;
    return 0;
}

static int apply_config(iv_tokenizer *tok, const cJSON *cfg, const char *path, iv_err *err)
{
    if (!cJSON_IsObject(cfg)) return iv_errf(err, IV_E_FORMAT, "%s: top level must be an object", path);
    const cJSON *mml = iv_json_get(cfg, "model_max_length");
    if (cJSON_IsNumber(mml) && mml->valuedouble >= 1 && mml->valuedouble < TOK_MAX_SANE_LENGTH)
        tok->model_max_length = (int)mml->valuedouble;
    const char *unk = config_token(cfg, "unk_token");
    if (unk) tok->config_unk_id = iv_tokenizer_token_to_id(tok, unk);
    /* transformers' split_special_tokens: special tokens written in the text
     * tokenized as plain text. Only the default (false) is what this
     * tokenizer does. */
    int split_special;
    if (iv_json_bool_chk(cfg, "split_special_tokens", 0, &split_special, path, err)) return -1;
    if (split_special)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s: split_special_tokens true (special tokens in the text read as plain text) is not "
                       "supported",
                       path);

    if (bert_normalizer_class(iv_json_str(cfg, "tokenizer_class", NULL)) && apply_bert_flags(tok, cfg, path, err))
        return -1;

    /* Llama-style tokenizers build their template from the flags:
     *   single = [bos:0] $A:0 [eos:0], pair = single [bos:1] $B:1 [eos:1]
     * (defaults add_bos_token=true, add_eos_token=false). */
    if (!rebuilds_template(iv_json_str(cfg, "tokenizer_class", NULL))) return 0;
    const cJSON *ab = iv_json_get(cfg, "add_bos_token");
    const cJSON *ae = iv_json_get(cfg, "add_eos_token");
    if ((ab && !cJSON_IsBool(ab) && !cJSON_IsNull(ab)) || (ae && !cJSON_IsBool(ae) && !cJSON_IsNull(ae)))
        return iv_errf(err, IV_E_FORMAT, "%s: add_bos_token / add_eos_token must be true or false", path);
    int add_bos = ab && cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : 1;
    int add_eos = ae && cJSON_IsBool(ae) ? cJSON_IsTrue(ae) : 0;
    const char *bos = config_token(cfg, "bos_token"), *eos = config_token(cfg, "eos_token");
    int32_t bos_id = -1, eos_id = -1;
    if (add_bos && bos && (bos_id = iv_tokenizer_token_to_id(tok, bos)) < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: bos_token \"%s\" is not in the vocabulary", path, bos);
    if (add_eos && eos && (eos_id = iv_tokenizer_token_to_id(tok, eos)) < 0)
        return iv_errf(err, IV_E_FORMAT, "%s: eos_token \"%s\" is not in the vocabulary", path, eos);
    tok_postproc *pp = calloc(1, sizeof *pp);
    if (!pp) return iv_errf(err, IV_E_NOMEM, "out of memory");
    if (tok_template_from_flags(pp, bos, bos_id, eos, eos_id, add_bos, add_eos, err)) {
        tok_free_postproc(pp);
        free(pp);
        return -1;
    }
    if (tok->post) {
        tok_free_postproc(tok->post);
        free(tok->post);
    }
    tok->post = pp;
    return 0;
}

static int load_text(iv_tokenizer **out, const char *json, size_t len, const char *json_name, const char *cfg,
                     size_t cfg_len, const char *cfg_name, iv_err *err)
{
    *out = NULL;
    /* The reference reads both files into Rust / Python strings, which
     * refuse ill-formed UTF-8; the tokenizer's code assumes it is well
     * formed (a stray byte in an added token read past its end). */
    long bad = iv_utf8_invalid_at(json, len);
    if (bad >= 0) return iv_errf(err, IV_E_FORMAT, "%s is not valid UTF-8 (byte %ld)", json_name, bad);
    if (cfg && (bad = iv_utf8_invalid_at(cfg, cfg_len)) >= 0)
        return iv_errf(err, IV_E_FORMAT, "%s is not valid UTF-8 (byte %ld)", cfg_name, bad);
    /* cJSON ends strings at U+0000: stand it in with an unused code point. */
    uint32_t nul_ph = 0;
    size_t prot_len = 0;
    char *prot = tok_json_protect_nul(json, len, &prot_len, &nul_ph);
    cJSON *j = NULL;
    int prc = iv_json_parse(prot ? prot : json, prot ? prot_len : len, json_name, &j, err);
    free(prot);
    if (prc) return -1;
    iv_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        cJSON_Delete(j);
        return iv_errf(err, IV_E_NOMEM, "out of memory loading %s", json_name);
    }
    tok->config_unk_id = -1;
    int rc = load_json(tok, j, nul_ph, json_name, err);
    cJSON_Delete(j);
    if (!rc && cfg) {
        cJSON *c = NULL;
        rc = iv_json_parse(cfg, cfg_len, cfg_name, &c, err);
        if (!rc) rc = apply_config(tok, c, cfg_name, err);
        cJSON_Delete(c);
    }
    if (rc) {
        iv_tokenizer_free(tok);
        return -1;
    }
    *out = tok;
    return 0;
}

int iv_tokenizer_load_json(iv_tokenizer **out, const char *json, size_t len, const char *config_json,
                           size_t config_len, iv_err *err)
{
    return load_text(out, json, len, "tokenizer.json", config_json, config_len, "tokenizer_config.json", err);
}

int iv_tokenizer_load(iv_tokenizer **out, const char *path, iv_err *err)
{
    *out = NULL;
    char json_path[4096], cfg_path[4096];
    if (iv_dir_exists(path)) {
        iv_path_join(json_path, sizeof json_path, path, "tokenizer.json");
        iv_path_join(cfg_path, sizeof cfg_path, path, "tokenizer_config.json");
    } else {
        snprintf(json_path, sizeof json_path, "%s", path);
        cfg_path[0] = 0;
    }
    char *raw = NULL, *cfg = NULL;
    size_t raw_len = 0, cfg_len = 0;
    if (iv_file_read_all(json_path, TOK_MAX_JSON, &raw, &raw_len, err)) return -1;
    if (cfg_path[0] && iv_file_exists(cfg_path) && iv_file_read_all(cfg_path, 64u << 20, &cfg, &cfg_len, err)) {
        free(raw);
        return -1;
    }
    int rc = load_text(out, raw, raw_len, json_path, cfg, cfg_len, cfg_path, err);
    free(raw);
    free(cfg);
    return rc;
}
