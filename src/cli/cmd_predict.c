/* `infinity_v3 predict`: sequence classification like TEI /predict: per
 * input line, [{"score","label"}] for every label sorted by score, with
 * softmax (several labels) or sigmoid (one label) unless --raw-scores.
 * --causal-lm-rerank turns a causal LM into a 1-label reranker
 * (iv_engine_opts.rerank_tokens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_input.h"
#include "cli/commands.h"
#include "heads/scores.h"

static void emit_scores(void *ctx, const iv_engine *e, const float *rows, int n_rows, int cols, iv_strbuf *out)
{
    const int raw = *(const int *)ctx;
    float *s = malloc((size_t)cols * sizeof(float));
    int *order = malloc((size_t)cols * sizeof(int));
    if (!s || !order) {
        free(s);
        free(order);
        return;
    }
    memcpy(s, rows, (size_t)cols * sizeof(float));
    if (!raw) iv_scores_activate(s, cols);
    iv_scores_order(s, cols, order);
    iv_sb_putc(out, '[');
    for (int i = 0; i < cols; i++) {
        const char *label = iv_engine_label(e, order[i]);
        iv_sb_puts(out, i ? ",{\"score\":" : "{\"score\":");
        iv_sb_float(out, s[order[i]]);
        iv_sb_puts(out, ",\"label\":");
        iv_sb_json_string(out, label, strlen(label));
        iv_sb_putc(out, '}');
    }
    iv_sb_putc(out, ']');
    free(s);
    free(order);
}

int iv_cmd_predict(int argc, char **argv)
{
    iv_cli_common c;
    iv_cli_common_init(&c);
    int raw = 0;
    for (int i = 1; i < argc;) {
        int r = iv_cli_common_arg(&c, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) continue;
        if (!strcmp(argv[i], "--raw-scores")) {
            raw = 1;
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--causal-lm-rerank")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "infinity_v3 predict: --causal-lm-rerank needs a value, e.g. yes,no\n");
                return 2;
            }
            c.engine.rerank_tokens = argv[i + 1];
            i += 2;
            continue;
        }
        int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        if (!help) fprintf(stderr, "infinity_v3 predict: unknown option %s\n", argv[i]);
        fprintf(stderr, "usage: infinity_v3 predict --model-id DIR [--raw-scores] [--no-truncate]\n"
                        "                           [--causal-lm-rerank YES,NO] < inputs\n"
                        "Each input line is text, a JSON string, a JSON [text, pair] array or token ids.\n"
                        "--causal-lm-rerank scores a *ForCausalLM checkpoint (Qwen3-Reranker style) by\n"
                        "logit(YES) - logit(NO) at the last token (sigmoid: P(YES)); YES and NO are\n"
                        "vocabulary tokens as tokenizer.json spells them. Inputs must already be in the\n"
                        "model's prompt format.\n");
        return help ? 0 : 2;
    }
    iv_engine *e;
    iv_cli_run run = {.task = IV_TASK_CLASSIFY, .batch_tokens = c.batch_tokens, .emit = emit_scores,
                      .emit_ctx = &raw};
    if (iv_cli_open(&c, &e, &run.input_opts)) return 1;
    run.engine = e;
    int failed = iv_cli_process(&run, stdin);
    iv_engine_free(e);
    return failed ? 1 : 0;
}
