#include "engine/pair_format.h"

#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "base/strbuf.h"

#define PROCESSOR_CLASS "Mistral3BiEncoderProcessor"
/* processor.py's _CONTROL_TOKEN_ESCAPE_POLICY, which its ownership policy
 * writes to tokenizer_config.json once it has put Replace("[\u200c", "[")
 * and Replace("<\u200c", "<") ahead of the tokenizer's normalizer. */
#define ESCAPE_POLICY "mistral_retrieval_zwnj_prefix_v1"
#define ZWNJ "\xE2\x80\x8C" /* U+200C, _CONTROL_TOKEN_ESCAPE */
#define MAX_CONFIG_BYTES (4u << 20)

/* The class a "module.Class" (or "repo--module.Class") reference names. */
static const char *class_part(const char *ref)
{
    const char *dot = strrchr(ref, '.');
    return dot ? dot + 1 : ref;
}

/* A field every cross-encoder version of the processor saves (to_dict
 * writes each __init__ argument): absent means another version. */
static const cJSON *required(const cJSON *cfg, const char *key, iv_err *err)
{
    const cJSON *v = iv_json_get(cfg, key);
    if (!v)
        iv_errf(err, IV_E_UNSUPPORTED,
                "processor_config.json names " PROCESSOR_CLASS " but has no \"%s\": a version of the processor "
                "without the cross-encoder pair format this engine reproduces",
                key);
    return v;
}

static int read_fields(iv_pair_format *pf, const cJSON *cfg, iv_err *err)
{
    const cJSON *upt = required(cfg, "use_prompt_template", err);
    if (!upt) return -1;
    if (!cJSON_IsBool(upt))
        return iv_errf(err, IV_E_FORMAT, "processor_config.json: \"use_prompt_template\" must be true or false");
    pf->use_prompt_template = cJSON_IsTrue(upt);

    const cJSON *rml = required(cfg, "rerank_max_length", err);
    if (!rml) return -1;
    if (!cJSON_IsNull(rml)) {
        if (!iv_json_is_integer(rml) || rml->valuedouble < 1 || rml->valuedouble > 1e9)
            return iv_errf(err, IV_E_FORMAT,
                           "processor_config.json: \"rerank_max_length\" must be a positive integer or null");
        pf->max_length = (int)rml->valuedouble;
    }
    /* A prompt_template field is how NVIDIA's other rerank processors choose
     * between formats ("v1": "question:{q} \n \n passage:{p}"); this class
     * has none, so one here is a variant, not a field to ignore. */
    if (iv_json_get(cfg, "prompt_template"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "processor_config.json names " PROCESSOR_CLASS " but also has \"prompt_template\", which "
                       "that processor does not read: an unknown variant of its pair format");
    return 0;
}

/* The processor marks user text and relies on the tokenizer's normalizer to
 * take the mark out; a tokenizer saved without that policy would read the
 * U+200C as text. */
static int check_escape_policy(const char *model_dir, iv_err *err)
{
    char path[4096];
    iv_path_join(path, sizeof path, model_dir, "tokenizer_config.json");
    cJSON *tc = NULL;
    if (!iv_file_exists(path) || iv_json_load_file(path, MAX_CONFIG_BYTES, &tc, NULL))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "processor_config.json names " PROCESSOR_CLASS ", whose pair format needs the tokenizer's "
                       "escape policy, but tokenizer_config.json is missing or unreadable");
    const char *policy = iv_json_str(tc, "nemo_control_token_escape_policy", NULL);
    const int ok = policy && !strcmp(policy, ESCAPE_POLICY);
    cJSON_Delete(tc);
    if (!ok)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "processor_config.json names " PROCESSOR_CLASS ", but tokenizer_config.json does not record "
                       "its escape policy (nemo_control_token_escape_policy \"" ESCAPE_POLICY "\"): the processor "
                       "would add the normalizer that removes its U+200C marks, which this tokenizer lacks");
    return 0;
}

int iv_pair_format_load(iv_pair_format *pf, const char *model_dir, iv_err *err)
{
    memset(pf, 0, sizeof *pf);
    char path[4096];
    iv_path_join(path, sizeof path, model_dir, "processor_config.json");
    if (!iv_file_exists(path)) return 0;
    cJSON *cfg = NULL;
    if (iv_json_load_file(path, MAX_CONFIG_BYTES, &cfg, err)) return -1;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return iv_errf(err, IV_E_FORMAT, "processor_config.json must be a JSON object");
    }
    const cJSON *cls = iv_json_get(cfg, "processor_class");
    const char *auto_ref = iv_json_str(iv_json_get(cfg, "auto_map"), "AutoProcessor", NULL);
    const int by_class = cJSON_IsString(cls) && !strcmp(cls->valuestring, PROCESSOR_CLASS);
    const int by_auto = auto_ref && !strcmp(class_part(auto_ref), PROCESSOR_CLASS);
    int rc = 0;
    if (by_class != by_auto && (by_class ? auto_ref != NULL : cJSON_IsString(cls))) {
        /* One names the processor, the other another class: which code runs is unclear. */
        rc = iv_errf(err, IV_E_FORMAT,
                     "processor_config.json: processor_class \"%s\" and auto_map.AutoProcessor \"%s\" name "
                     "different processors",
                     cJSON_IsString(cls) ? cls->valuestring : "", auto_ref ? auto_ref : "");
    } else if (by_class || by_auto) {
        rc = read_fields(pf, cfg, err) || check_escape_policy(model_dir, err) ? -1 : 0;
        pf->enabled = rc == 0;
    }
    cJSON_Delete(cfg);
    if (rc) memset(pf, 0, sizeof *pf);
    return rc;
}

/* _mark_user_text_ownership: U+200C after each "[" and "<". */
static void put_marked(iv_strbuf *b, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '[' && s[i] != '<') continue;
        iv_sb_append(b, s + from, i + 1 - from);
        iv_sb_puts(b, ZWNJ);
        from = i + 1;
    }
    iv_sb_append(b, s + from, n - from);
}

int iv_pair_format_render(const iv_pair_format *pf, const char *query, size_t query_len, const char *passage,
                          size_t passage_len, char **out, size_t *out_len, iv_err *err)
{
    iv_strbuf b;
    iv_sb_init(&b);
    /* prompt_template_question_passage, or the bare join. */
    if (pf->use_prompt_template) iv_sb_puts(&b, "query: ");
    put_marked(&b, query, query_len);
    iv_sb_puts(&b, pf->use_prompt_template ? "\n\npassage: " : "\n");
    put_marked(&b, passage, passage_len);
    iv_sb_putc(&b, 0);
    if (b.oom) {
        iv_sb_free(&b);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    *out = b.data;
    *out_len = b.len - 1;
    return 0;
}
