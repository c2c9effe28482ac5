/* Offline CLI plumbing shared by `embed` and `predict`: reading inputs
 * (one per line: plain text, a JSON string, a JSON [text, pair] array, a
 * JSON array of token ids, {"text","pair","ids"} objects, {"image": PATH}
 * or {"audio": PATH} (with an optional "text"), or a conversation: a list
 * of messages or {"messages": [...]}, whose image and audio parts may name
 * files), packing them
 * into batches by a token budget, and writing one JSON line per input. */
#ifndef IV_CLI_CLI_INPUT_H
#define IV_CLI_CLI_INPUT_H

#include <stdio.h>
#include "base/strbuf.h"
#include "engine/inputs.h"

typedef struct iv_cli_item {
    iv_input in;      /* points into the buffers below */
    char *text, *pair;
    int32_t *ids;
    struct cJSON *messages; /* a conversation, rendered by the chat template */
    char *image;      /* {"image": ...} / {"audio": ...}: the media as base64 (read from its file) or a data URL */
    char *error;      /* parse error for this line, or NULL */
} iv_cli_item;

/* Parses one input line (without its newline). */
void iv_cli_parse_line(const char *line, size_t n, iv_cli_item *out);
void iv_cli_item_free(iv_cli_item *it);

/* Writes the result of one item into out (no newline). */
typedef void (*iv_cli_emit_fn)(void *ctx, const iv_engine *e, const float *rows, int n_rows, int cols,
                               iv_strbuf *out);

/* The same with the item's input and its tokenization (offsets); returns
 * nonzero when it wrote an error for the item. */
typedef int (*iv_cli_emit_item_fn)(void *ctx, const iv_engine *e, const iv_input *in, const iv_prepared *prep,
                                   const float *rows, int n_rows, int cols, iv_strbuf *out);

typedef struct iv_cli_run {
    iv_engine *engine;
    iv_task task;
    iv_input_opts input_opts;
    int batch_tokens;  /* token budget per forward */
    iv_cli_emit_fn emit;
    void *emit_ctx;
    iv_cli_emit_item_fn emit_item; /* used instead of emit when set */
} iv_cli_run;

/* Reads every line of f, runs them in batches and prints one JSON line per
 * input to stdout, {"error": "..."} for failed ones. Returns the number of
 * failed inputs. */
int iv_cli_process(const iv_cli_run *run, FILE *f);

/* Parses --model-id and the engine flags common to every offline command;
 * returns 0 when argv[*i] was consumed (advancing *i), 1 when not ours, -1 on error. */
typedef struct iv_cli_common {
    const char *model_id;   /* local dir, HF cache entry or hub id (engine/resolve.h) */
    const char *revision;
    iv_engine_opts engine;
    int batch_tokens;
    int truncate;
    int truncate_left;
    const char *prompt_name;
} iv_cli_common;
void iv_cli_common_init(iv_cli_common *c);
int iv_cli_common_arg(iv_cli_common *c, int argc, char **argv, int *i);
/* Loads the engine and resolves the prompt; prints errors. */
int iv_cli_open(const iv_cli_common *c, iv_engine **e, iv_input_opts *io);

#endif
