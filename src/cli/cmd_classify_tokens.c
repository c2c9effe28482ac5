/* `infinity_v3 classify-tokens`: token classification (NER) like
 * transformers' pipeline("token-classification") and POST /token_classify:
 * per input line, the list of entities
 *   --aggregation-strategy none: [{"entity","score","index","word","start","end"}]
 *   simple|first|average|max:    [{"entity_group","score","word","start","end"}]
 * with softmax scores unless --raw-scores, and the labels of
 * --ignore-labels (default O) left out. Offsets are characters of the line's text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_input.h"
#include "cli/commands.h"
#include "engine/token_entities.h"

static int emit_entities(void *ctx, const iv_engine *e, const iv_input *in, const iv_prepared *prep,
                         const float *rows, int n_rows, int cols, iv_strbuf *out)
{
    const iv_tokcls_opts *o = ctx;
    iv_err err = {0};
    iv_token_entities ents;
    if (!in->text || in->pair)
        iv_errf(&err, IV_E_INVALID, "token classification takes one text per line (not token ids or pairs)");
    else if (!iv_token_entities_build(e, in->text, in->text_len, &prep->enc, rows, o, &ents, &err)) {
        iv_token_entities_json(out, &ents);
        iv_token_entities_free(&ents);
        return 0;
    }
    iv_sb_puts(out, "{\"error\":");
    iv_sb_json_string(out, err.msg, strlen(err.msg));
    iv_sb_putc(out, '}');
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: infinity_v3 classify-tokens --model-id DIR [--aggregation-strategy S] [--raw-scores]\n"
               "                                   [--ignore-labels L1,L2,...] [--no-truncate] < inputs\n"
               "Token classification (NER) of a *ForTokenClassification checkpoint, as transformers'\n"
               "pipeline(\"token-classification\"): one JSON list of entities per input line (text or a\n"
               "JSON string).\n"
               "  --aggregation-strategy none|simple|first|average|max   (default none: one entry per\n"
               "        token with \"entity\" and \"index\"; else \"entity_group\" per word group)\n"
               "  --raw-scores       logits instead of softmax probabilities\n"
               "  --ignore-labels    labels to leave out, comma-separated (default O; \"\" keeps all)\n"
               "start/end are character offsets into the line's text.\n");
}

int iv_cmd_classify_tokens(int argc, char **argv)
{
    iv_cli_common c;
    iv_cli_common_init(&c);
    iv_tokcls_opts o = {.aggregation = IV_AGG_NONE};
    char *labels = NULL;
    const char *ignore[64];
    for (int i = 1; i < argc;) {
        int r = iv_cli_common_arg(&c, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) continue;
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--raw-scores")) {
            o.raw_scores = 1;
            i++;
        } else if (!strcmp(argv[i], "--aggregation-strategy") && next) {
            if (iv_aggregation_parse(next, &o.aggregation)) {
                fprintf(stderr, "infinity_v3 classify-tokens: unknown aggregation strategy \"%s\" (%s)\n", next,
                        IV_AGGREGATION_NAMES);
                return 2;
            }
            i += 2;
        } else if (!strcmp(argv[i], "--ignore-labels") && next) {
            free(labels);
            labels = strdup(next);
            o.ignore_labels = ignore;
            o.n_ignore = 0;
            for (char *save = NULL, *t = strtok_r(labels, ",", &save); t && o.n_ignore < 64;
                 t = strtok_r(NULL, ",", &save))
                ignore[o.n_ignore++] = t;
            i += 2;
        } else {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            if (!help) fprintf(stderr, "infinity_v3 classify-tokens: unknown option or missing value: %s\n", argv[i]);
            usage(help ? stdout : stderr);
            free(labels);
            return help ? 0 : 2;
        }
    }
    iv_engine *e;
    iv_cli_run run = {.task = IV_TASK_TOKEN_CLASSIFY, .batch_tokens = c.batch_tokens, .emit_item = emit_entities,
                      .emit_ctx = &o};
    if (iv_cli_open(&c, &e, &run.input_opts)) {
        free(labels);
        return 1;
    }
    if (!(iv_engine_capabilities(e) & IV_CAN(IV_TASK_TOKEN_CLASSIFY))) {
        fprintf(stderr, "infinity_v3 classify-tokens: %s (%s) is not a token classification model\n", c.model_id,
                iv_engine_architecture(e));
        iv_engine_free(e);
        free(labels);
        return 1;
    }
    run.input_opts.prompt = NULL; /* offsets are into the line's own text */
    run.engine = e;
    int failed = iv_cli_process(&run, stdin);
    iv_engine_free(e);
    free(labels);
    return failed ? 1 : 0;
}
