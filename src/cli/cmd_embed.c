/* `infinity_v3 embed`: sentence embeddings (like TEI /embed), per-token
 * states (--all, like /embed_all) or SPLADE vectors (--sparse, like
 * /embed_sparse), one JSON line per input line. Multi-vector (ColBERT)
 * models write one matrix per line instead (--multi-vector, implied for
 * them, with or without --all): the kept token vectors, L2-normalised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_input.h"
#include "cli/commands.h"
#include "server/codec.h"

typedef struct embed_opts {
    int normalize;
    int dimensions;
} embed_opts;

static void emit_embedding(void *ctx, const iv_engine *e, const float *rows, int n_rows, int cols, iv_strbuf *out)
{
    const embed_opts *o = ctx;
    float *v = malloc((size_t)cols * sizeof(float));
    if (!v) return;
    memcpy(v, rows, (size_t)cols * sizeof(float));
    int n = iv_embedding_finish(v, cols, o->dimensions, o->normalize);
    iv_sb_float_array(out, v, (size_t)n);
    free(v);
}

/* The same encoders as the HTTP routes (/embed_all, /embed_sparse). */
static void emit_all(void *ctx, const iv_engine *e, const float *rows, int n_rows, int cols, iv_strbuf *out)
{
    iv_codec_matrix(out, rows, n_rows, cols, IV_ENCODING_FLOAT);
}

static void emit_sparse(void *ctx, const iv_engine *e, const float *rows, int n_rows, int cols, iv_strbuf *out)
{
    iv_codec_sparse(out, rows, cols);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: infinity_v3 embed --model-id DIR [--all | --sparse | --multi-vector] [--no-normalize]\n"
            "         [--dimensions N] [--prompt-name NAME] [--no-truncate] [--truncate-left] [--batch-tokens N]\n"
            "         < inputs\n"
            "Each input line is text, a JSON string, a JSON array of token ids, or {\"text\"|\"ids\": ...}.\n"
            "Multi-vector (ColBERT) models write one matrix per line; text is encoded as a document, and\n"
            "queries are sent as final token ids (query marker at position 1, [MASK] expansion).\n");
}

int iv_cmd_embed(int argc, char **argv)
{
    iv_cli_common c;
    iv_cli_common_init(&c);
    embed_opts o = {.normalize = 1, .dimensions = 0};
    iv_task task = IV_TASK_EMBED;
    int multi = 0, normalize_flag = 0;
    for (int i = 1; i < argc;) {
        int r = iv_cli_common_arg(&c, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "--all")) task = IV_TASK_EMBED_ALL;
        else if (!strcmp(a, "--sparse")) task = IV_TASK_SPARSE;
        else if (!strcmp(a, "--multi-vector")) multi = 1;
        else if (!strcmp(a, "--no-normalize")) o.normalize = 0, normalize_flag = 1;
        else if (!strcmp(a, "--dimensions") && i + 1 < argc) {
            o.dimensions = atoi(argv[++i]);
            if (o.dimensions <= 0) {
                fprintf(stderr, "infinity_v3: --dimensions must be positive\n");
                return 2;
            }
        } else {
            if (strcmp(a, "--help") && strcmp(a, "-h")) fprintf(stderr, "infinity_v3 embed: unknown option %s\n", a);
            usage();
            return strcmp(a, "--help") && strcmp(a, "-h") ? 2 : 0;
        }
        i++;
    }
    iv_engine *e;
    iv_cli_run run = {.task = task, .batch_tokens = c.batch_tokens, .emit_ctx = &o};
    if (iv_cli_open(&c, &e, &run.input_opts)) return 1;
    /* Multi-vector models answer embed and embed --all with their token matrices. */
    const int is_multi = iv_engine_multivector(e) != NULL;
    const char *bad = NULL;
    if (multi && !is_multi) bad = "--multi-vector: this model is not a multi-vector (ColBERT) model";
    else if (is_multi && task == IV_TASK_SPARSE) bad = "--sparse: a multi-vector (ColBERT) model has no sparse output";
    else if (is_multi && o.dimensions) bad = "--dimensions: multi-vector (ColBERT) token vectors cannot be truncated";
    else if (is_multi && normalize_flag)
        bad = "--no-normalize: multi-vector (ColBERT) token vectors are always L2-normalised";
    if (bad) {
        fprintf(stderr, "infinity_v3: %s\n", bad);
        iv_engine_free(e);
        return 2;
    }
    if (is_multi) run.task = task = IV_TASK_MULTIVECTOR;
    if (o.dimensions > iv_engine_embedding_dim(e)) {
        fprintf(stderr, "infinity_v3: --dimensions %d exceeds the embedding size %d\n", o.dimensions,
                iv_engine_embedding_dim(e));
        iv_engine_free(e);
        return 2;
    }
    run.engine = e;
    run.emit = task == IV_TASK_EMBED ? emit_embedding : task == IV_TASK_SPARSE ? emit_sparse : emit_all;
    int failed = iv_cli_process(&run, stdin);
    iv_engine_free(e);
    return failed ? 1 : 0;
}
