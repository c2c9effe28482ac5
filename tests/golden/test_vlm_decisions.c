/* The option-token decision recipes with images in the state (issue 19)
 * against transformers, below the server: tools/fixtures/synthetic_vlm_letters.py's
 * qwen3_vl_letters (Qwen3VLForConditionalGeneration, lm_head.weight at the
 * top), qwen35_letters (Qwen3_5ForConditionalGeneration: DeltaNet and
 * gated-attention layers, the tower without DeepStack, Qwen3.5's own
 * template), mistral3_letters (Mistral3ForConditionalGeneration + Pixtral,
 * language_model.lm_head.weight) and gemma4_letters
 * (Gemma4ForConditionalGeneration with its tower: tied embeddings,
 * final_logit_softcapping 0.5, the gemma-4-it template's <|image|> expanded
 * to <|image>, soft tokens, <image|>) and gemma4u_letters
 * (Gemma4UnifiedForConditionalGeneration: the image embedder, the "vision"
 * attention mask over image runs). Each question's conversation
 * (decisions/state_images.h: the state cut at its images) goes through the
 * engine's conversation path with the state's images decoded once
 * (iv_input.decoded_images), as the route submits it; the expanded prompt
 * ids must equal what the chat template and the checkpoint's processor give
 * in transformers, token for token, and the letters' logits (at the last
 * token) and probabilities must match the model's own forward (1e-4 /
 * 1e-5, the same argmax). The continuation prompts are checked the same way
 * (ids exact); their scores are checked over HTTP
 * (srv_decision_images_match_transformers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "decisions/answer.h"
#include "decisions/continuation.h"
#include "decisions/contract.h"
#include "decisions/letters.h"
#include "engine/engine.h"
#include "engine/inputs.h"
#include "test.h"

static const cJSON *obj(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int same_ids(const iv_seq_input *s, const cJSON *want)
{
    if (s->len != cJSON_GetArraySize(want)) return 0;
    for (int t = 0; t < s->len; t++)
        if (s->ids[t] != cJSON_GetArrayItem(want, t)->valueint) return 0;
    return 1;
}

typedef struct vlm_result {
    int questions, ids_ok, argmax_ok, images;
    double max_logit, max_p;
} vlm_result;

static void run_fixture(const char *name, vlm_result *res)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/models/%s", iv_test_fixtures_dir(), name);
    snprintf(path, sizeof path, "%s/expected.json", dir);
    iv_err err = {0};
    cJSON *exp = NULL;
    REQUIRE(iv_json_load_file(path, 1 << 24, &exp, &err) == 0);
    iv_engine *e = NULL;
    iv_engine_opts opts = {0};
    opts.decision_letters = 1;
    if (iv_engine_load(&e, dir, &opts, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s: %s", name, err.msg);
        cJSON_Delete(exp);
        return;
    }
    REQUIRE(iv_engine_image_proc(e) != NULL);
    iv_dq_limits lim;
    iv_dq_limits_default(&lim);
    cJSON *kw = cJSON_CreateObject();
    cJSON_AddFalseToObject(kw, "enable_thinking");
    iv_input_opts o = iv_input_opts_default();
    o.truncate = 0;
    o.generation_prompt = IV_GEN_PROMPT_ON;
    o.chat_kwargs = kw;
    o.no_fold = 1;
    const cJSON *c;
    cJSON_ArrayForEach(c, obj(exp, "cases"))
    {
        iv_dq_request req;
        iv_dq_errors de;
        iv_dq_errors_init(&de);
        REQUIRE(iv_dq_parse(obj(c, "request"), &lim, &req, &de) == 0);
        iv_dq_errors_free(&de);
        REQUIRE(req.n_images > 0);
        iv_image_set images = {0};
        for (int k = 0; k < req.n_images; k++)
            REQUIRE(iv_image_set_add(iv_engine_image_proc(e), &images, req.image_src[k], strlen(req.image_src[k]),
                                     &err) == 0);
        res->images += images.n;
        for (int i = 0; i < req.n_questions; i++) {
            const iv_dq_question *q = &req.questions[i];
            const cJSON *wl = obj(obj(obj(c, "answers"), "letters"), q->id);
            const cJSON *wc = obj(obj(obj(c, "answers"), "continuation"), q->id);
            cJSON *lm = iv_letters_messages(&req, q), *cm = iv_cont_messages(&req, q);
            REQUIRE(lm && cm && wl && wc);
            iv_prepared pl, pc;
            const iv_input il = {.messages = lm, .decoded_images = &images};
            const iv_input ic = {.messages = cm, .decoded_images = &images};
            REQUIRE(iv_prepare_input(e, &il, &o, &pl, &err) == 0);
            REQUIRE(iv_prepare_input(e, &ic, &o, &pc, &err) == 0);
            const int ok = same_ids(&pl.seq, obj(wl, "ids")) && same_ids(&pc.seq, obj(wc, "prefix_ids")) &&
                           pl.seq.n_images == req.n_images && pl.seq.no_fold;
            CHECK_MSG(ok, "%s %s: prompt ids differ from transformers' (%d / %d tokens)", name, q->id, pl.seq.len,
                      cJSON_GetArraySize(obj(wl, "ids")));
            res->ids_ok &= ok;
            iv_outputs out = {0};
            REQUIRE(iv_engine_run(e, IV_TASK_CLASSIFY, &pl.seq, 1, &out, &err) == 0);
            REQUIRE(out.cols == IV_LETTERS_MAX);
            double p[IV_LETTERS_MAX];
            iv_letters_probabilities(q, out.data, p);
            const cJSON *wz = obj(wl, "letter_logits"), *wp = obj(wl, "probabilities");
            int best = 0;
            for (int j = 0; j < q->n_options; j++) {
                const double dz = fabs(out.data[j] - cJSON_GetArrayItem(wz, j)->valuedouble);
                const double dp = fabs(p[j] - cJSON_GetArrayItem(wp, j)->valuedouble);
                res->max_logit = dz > res->max_logit ? dz : res->max_logit;
                res->max_p = dp > res->max_p ? dp : res->max_p;
                if (cJSON_GetArrayItem(wp, j)->valuedouble > cJSON_GetArrayItem(wp, best)->valuedouble) best = j;
            }
            res->argmax_ok &= iv_dq_argmax(p, q->n_options) == best;
            res->questions++;
            iv_outputs_free(&out);
            iv_prepared_free(&pl);
            iv_prepared_free(&pc);
            cJSON_Delete(lm);
            cJSON_Delete(cm);
        }
        iv_image_set_free(&images);
        iv_dq_request_free(&req);
    }
    cJSON_Delete(kw);
    iv_engine_free(e);
    cJSON_Delete(exp);
}

TEST(golden_vlm_decisions_match_transformers)
{
    static const char *const names[] = {"qwen3_vl_letters", "qwen35_letters", "mistral3_letters", "gemma4_letters",
                                        "gemma4u_letters"};
    for (int k = 0; k < 5; k++) {
        vlm_result r = {.ids_ok = 1, .argmax_ok = 1};
        run_fixture(names[k], &r);
        printf("    %s: %d questions over %d images, prompt ids exact: %s, letters max |logit - transformers| %.3g, "
               "max |p - transformers| %.3g\n",
               names[k], r.questions, r.images, r.ids_ok ? "yes" : "no", r.max_logit, r.max_p);
        CHECK(r.questions == 5 && r.images == 3 && r.ids_ok && r.argmax_ok);
        CHECK_MSG(r.max_logit <= 1e-4 && r.max_p <= 1e-5, "logits %g, p %g", r.max_logit, r.max_p);
    }
}
