/* `infinity_v3 serve` (also the default subcommand): flags -> server.
 * Flag names and defaults follow TEI's text-embeddings-router, except the
 * port (7997, Infinity's); `--flag value` and `--flag=value` both work. On
 * SIGTERM or SIGINT the server stops accepting, answers the requests it
 * accepted (for --drain-timeout seconds at most, then closes what is left)
 * and exits 0; a second SIGTERM or SIGINT during that exits at once with
 * 128 + the signal's number, as a shell reports a process a signal ended. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/env_flags.h"
#include "server/auth.h"
#include "server/server.h"

#define MAX_MODELS 16

static void usage(FILE *f)
{
    fprintf(f,
            "usage: infinity_v3 serve --model-id ID [--model-id ID2 ...] [options]\n"
            "  --model-id ID                local directory, Hugging Face cache entry or hub id (repeatable)\n"
            "  --revision REV               hub branch, tag or commit (main)\n"
            "  --huggingface-hub-cache DIR  hub cache root (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)\n"
            "  --served-model-name NAME     name the `model` field selects (once per --model-id, in order)\n"
            "  --port N                     TCP port (7997; 0 picks a free one)\n"
            "  --hostname ADDR              address to listen on (0.0.0.0); --host is a synonym\n"
            "  --uds-path PATH              listen on a Unix socket instead of TCP\n"
            "  --api-key KEY                require `Authorization: Bearer KEY` (not on /health, /metrics)\n"
            "  --payload-limit BYTES        largest request body (2000000)\n"
            "  --max-concurrent-requests N  inputs admitted at once; more get 429 (422 for a request larger than N)\n"
            "                               (512, raised to --max-client-batch-size-openai when unset)\n"
            "  --max-batch-tokens N         token budget of one forward pass (16384; on a GPU, what its\n"
            "                               free memory after the weights holds)\n"
            "  --max-batch-requests N       sequences per forward pass (no limit)\n"
            "  --max-client-batch-size N    inputs per request on TEI's routes (32)\n"
            "  --max-client-batch-size-openai N   inputs per request on the OpenAI, Infinity,\n"
            "                               Cohere and vLLM routes (2048)\n"
            "  --url-prefix PREFIX          serve every route under PREFIX (e.g. /v1/infinity)\n"
            "  --auto-truncate [true|false] truncate inputs over the model's limit (true)\n"
            "  --default-prompt-name NAME   prompt from config_sentence_transformers.json for every request\n"
            "  --default-prompt TEXT        prompt text for every request\n"
            "  --tokenization-workers N     tokenizer threads per model (cores - 1)\n"
            "  --pooling cls|mean|max|last-token|splade   override the model's pooling\n"
            "  --causal-lm-rerank YES,NO    score a *ForCausalLM checkpoint by logit(YES) - logit(NO) at\n"
            "                               the last token (Qwen3-Reranker without sentence-transformers files)\n"
            "  --max-image-pixels N         images in requests: the most pixels one may have, checked in\n"
            "                               its header before decoding (89478485, PIL's limit); over: 413\n"
            "  --max-audio-bytes N          audio in requests: the most encoded bytes a clip may have (64 MiB)\n"
            "  --max-audio-seconds S        audio in requests: the longest clip, in seconds (600)\n"
            "  --chat-template FILE         a Jinja chat template instead of the checkpoint's; rerank and\n"
            "                               predict pairs are rendered through it as query/document messages\n"
            "  --device cpu|cuda|cuda:N|emulated   where the model runs (cpu); a comma list runs one\n"
            "                               replica per entry: cuda:0,1 (two GPUs), cuda:0,0 (two on one),\n"
            "                               cpu,cpu (the cores split between them)\n"
            "  --dtype float32|int8 (cpu) | bfloat16|float16 (cuda, emulated; bfloat16 by default)\n"
            "  --backend native             the C engine (libtorch is accepted as a synonym)\n"
            "  --decision-extended          typed decisions (/v1/systemone): every reply in the extended\n"
            "                               shape (temperatures, tokens, Laya's confidences); else per request\n"
            "  --decision-letters           answer typed decisions with a chat LM (*ForCausalLM + chat\n"
            "                               template): the LM logits of option letters A.. (docs/decisions.md);\n"
            "                               a Qwen3-VL / Mistral3 / Gemma4 checkpoint also reads images in the state\n"
            "  --decision-continuation sum|mean  answer typed decisions with a chat LM (*ForCausalLM + chat\n"
            "                               template): each option's continuation log-prob after the rendered\n"
            "                               prompt, summed or averaged over its tokens (docs/decisions.md)\n"
            "  --decision-lenient           accept unknown request fields (strict: 422)\n"
            "  --decision-max-questions N   questions per request (64; more is 413)\n"
            "  --decision-max-options N     options of a choice question (255)\n"
            "  --decision-max-levels N      levels of a score question (10)\n"
            "  --decision-max-state-tokens N  tokens of a state, its images' tokens included (65536)\n"
            "  --decision-max-images N      images in a state (8; more is 413)\n"
            "  --prefix-fold true|false     compute a prefix shared by several inputs of a batch once, on\n"
            "                               causal text models (true; docs/prefix-folding.md)\n"
            "  --prefix-cache-mb N          device memory per replica for the prefix cache: shared prefixes'\n"
            "                               states kept across requests (0: off)\n"
            "  --drain-timeout SECONDS      on SIGTERM/SIGINT, longest wait for accepted requests before\n"
            "                               closing their connections (30); a second signal exits at once\n"
            "  --otlp-endpoint URL          send a trace span per request to this OTLP/HTTP collector\n"
            "                               (http://host:4318; JSON encoding; joins a W3C traceparent)\n"
            "  --otlp-service-name NAME     the spans' service.name (infinity_v3)\n"
            "  --read-timeout SECONDS       longest a client may take to send a request, headers and body,\n"
            "                               counted from its accept or previous response (120; 0: none)\n"
            "  --json-output                logs as JSON lines\n"
            "  --log-level debug|info|warn|error (or LOG_LEVEL)\n"
            "Each flag but --hostname can also be set by its environment variable, as TEI's router\n"
            "reads them: MODEL_ID, PORT, MAX_BATCH_TOKENS, JSON_OUTPUT=true, ... (the flag wins).\n");
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "infinity_v3 serve: %s expects an integer in [%ld, %ld], got \"%s\"\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_bool(const char *flag, const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1")) *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "0")) *out = 0;
    else {
        fprintf(stderr, "infinity_v3 serve: %s expects true or false, got \"%s\"\n", flag, v);
        return -1;
    }
    return 0;
}

static int parse_pooling(const char *v, int *mode, int *splade)
{
    static const struct {
        const char *name;
        iv_pool_mode mode;
    } names[] = {{"cls", IV_POOL_CLS}, {"mean", IV_POOL_MEAN}, {"max", IV_POOL_MAX},
                 {"last-token", IV_POOL_LAST}, {"last_token", IV_POOL_LAST}, {"lasttoken", IV_POOL_LAST}};
    if (!strcmp(v, "splade")) {
        *splade = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(v, names[i].name)) {
            *mode = names[i].mode;
            return 0;
        }
    fprintf(stderr, "infinity_v3 serve: unknown --pooling \"%s\" (cls, mean, max, last-token, splade)\n", v);
    return -1;
}

static void set_log_level(const char *v)
{
    if (!v) return;
    if (!strcasecmp(v, "debug") || !strcasecmp(v, "trace")) iv_log_set_level(IV_LOG_DEBUG);
    else if (!strcasecmp(v, "info")) iv_log_set_level(IV_LOG_INFO);
    else if (!strcasecmp(v, "warn") || !strcasecmp(v, "warning")) iv_log_set_level(IV_LOG_WARN);
    else if (!strcasecmp(v, "error")) iv_log_set_level(IV_LOG_ERROR);
}

/* Many waiting clients need many descriptors. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The operator's second SIGTERM or SIGINT during the drain: exit now. The
 * stop signals stay blocked in every thread, so this sigwait takes it. */
static void *exit_on_second_signal(void *arg)
{
    (void)arg;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    int sig = 0;
    sigwait(&stop, &sig);
    IV_WARN("signal %d received again: exiting without finishing the drain", sig);
    _exit(128 + sig);
}

static int serve(int argc, char **argv)
{
    /* Block the stop signals before any thread exists (engine, batchers,
     * HTTP), so only sigwait below sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    iv_server_opts o;
    iv_server_opts_default(&o);
    iv_model_spec models[MAX_MODELS] = {{0}};
    const char *served[MAX_MODELS] = {0};
    int n_models = 0, n_served = 0, splade = 0;
    set_log_level(getenv("LOG_LEVEL"));

    int concurrency_set = 0;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *val = NULL;
        const char *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = 0;
            a = flag;
            val = eq + 1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        /* Flags without a value. */
        if (!strcmp(a, "--json-output")) {
            iv_log_set_json(1);
            continue;
        }
        if (!strcmp(a, "--decision-extended") && !val) {
            o.decision_extended = 1;
            continue;
        }
        if (!strcmp(a, "--decision-letters") && !val) {
            o.engine.decision_letters = 1;
            continue;
        }
        if (!strcmp(a, "--decision-lenient") && !val) {
            o.decision_limits.lenient = 1;
            continue;
        }
        if (!strcmp(a, "--auto-truncate") && !val) {
            if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false"))) val = argv[++i];
            else {
                o.auto_truncate = 1;
                continue;
            }
        }
        if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "infinity_v3 serve: %s needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        }
        long x;
        int rc = 0;
        if (!strcmp(a, "--model-id")) {
            if (n_models == MAX_MODELS) {
                fprintf(stderr, "infinity_v3 serve: at most %d models\n", MAX_MODELS);
                return 2;
            }
            models[n_models++].model_id = val;
        } else if (!strcmp(a, "--served-model-name")) {
            if (n_served == MAX_MODELS) {
                fprintf(stderr, "infinity_v3 serve: at most %d served names\n", MAX_MODELS);
                return 2;
            }
            served[n_served++] = val;
        } else if (!strcmp(a, "--port") || !strcmp(a, "-p")) {
            if (!(rc = parse_int(a, val, 0, 65535, &x))) o.port = (int)x;
        } else if (!strcmp(a, "--hostname") || !strcmp(a, "--host")) {
            o.hostname = val;
        } else if (!strcmp(a, "--uds-path")) {
            o.uds_path = val;
        } else if (!strcmp(a, "--api-key")) {
            if (strlen(val) > IV_API_KEY_MAX) {
                fprintf(stderr, "infinity_v3 serve: --api-key is %zu bytes, longer than the %d bytes accepted\n",
                        strlen(val), IV_API_KEY_MAX);
                return 2;
            }
            o.api_key = val;
        } else if (!strcmp(a, "--payload-limit")) {
            if (!(rc = parse_int(a, val, 1, LONG_MAX, &x))) o.payload_limit = (size_t)x;
        } else if (!strcmp(a, "--max-concurrent-requests")) {
            if (!(rc = parse_int(a, val, 1, 1 << 24, &x))) o.max_concurrent_requests = (int)x;
            concurrency_set = 1;
        } else if (!strcmp(a, "--max-batch-tokens")) {
            if (!(rc = parse_int(a, val, 1, 1 << 28, &x))) {
                o.max_batch_tokens = (int)x;
                o.max_batch_tokens_set = 1;
            }
        } else if (!strcmp(a, "--max-batch-requests")) {
            if (!(rc = parse_int(a, val, 1, 1 << 24, &x))) o.max_batch_requests = (int)x;
        } else if (!strcmp(a, "--max-client-batch-size")) {
            if (!(rc = parse_int(a, val, 1, 1 << 24, &x))) o.max_client_batch_size = (int)x;
        } else if (!strcmp(a, "--max-client-batch-size-openai")) {
            if (!(rc = parse_int(a, val, 1, 1 << 24, &x))) o.max_client_batch_size_openai = (int)x;
        } else if (!strcmp(a, "--url-prefix")) {
            o.url_prefix = val;
        } else if (!strcmp(a, "--tokenization-workers")) {
            if (!(rc = parse_int(a, val, 1, 64, &x))) o.tokenization_workers = (int)x;
        } else if (!strcmp(a, "--decision-max-questions")) {
            if (!(rc = parse_int(a, val, 1, 4096, &x))) o.decision_limits.max_questions = (int)x;
        } else if (!strcmp(a, "--decision-max-options")) {
            if (!(rc = parse_int(a, val, 1, 4096, &x))) o.decision_limits.max_options = (int)x;
        } else if (!strcmp(a, "--decision-max-levels")) {
            if (!(rc = parse_int(a, val, 1, 4096, &x))) o.decision_limits.max_levels = (int)x;
        } else if (!strcmp(a, "--decision-max-images")) {
            if (!(rc = parse_int(a, val, 1, 4096, &x))) o.decision_limits.max_images = (int)x;
        } else if (!strcmp(a, "--decision-max-state-tokens")) {
            if (!(rc = parse_int(a, val, 1, 1 << 24, &x))) o.decision_max_state_tokens = (int)x;
        } else if (!strcmp(a, "--decision-continuation")) {
            if (!strcmp(val, "sum")) o.engine.decision_continuation = 1;
            else if (!strcmp(val, "mean")) o.engine.decision_continuation = 2;
            else {
                fprintf(stderr, "infinity_v3 serve: --decision-continuation takes sum or mean, not \"%s\"\n", val);
                rc = 2;
            }
        } else if (!strcmp(a, "--decision-extended") || !strcmp(a, "--decision-lenient")) {
            rc = parse_bool(a, val, !strcmp(a, "--decision-extended") ? &o.decision_extended : &o.decision_limits.lenient);
        } else if (!strcmp(a, "--drain-timeout")) {
            if (!(rc = parse_int(a, val, 0, 1 << 24, &x))) o.drain_timeout_s = (int)x;
        } else if (!strcmp(a, "--read-timeout")) {
            if (!(rc = parse_int(a, val, 0, 86400, &x))) o.read_timeout_s = (int)x;
        } else if (!strcmp(a, "--http-threads")) {
            if (!(rc = parse_int(a, val, 1, 256, &x))) o.http_threads = (int)x;
        } else if (!strcmp(a, "--auto-truncate")) {
            rc = parse_bool(a, val, &o.auto_truncate);
        } else if (!strcmp(a, "--prefix-fold")) {
            int on = 1;
            if (!(rc = parse_bool(a, val, &on))) o.engine.no_prefix_fold = !on;
        } else if (!strcmp(a, "--prefix-cache-mb")) {
            if (!(rc = parse_int(a, val, 0, 1 << 20, &x))) o.engine.prefix_cache_bytes = (size_t)x << 20;
        } else if (!strcmp(a, "--default-prompt-name")) {
            o.default_prompt_name = val;
        } else if (!strcmp(a, "--default-prompt")) {
            o.default_prompt = val;
        } else if (!strcmp(a, "--pooling")) {
            rc = parse_pooling(val, &o.engine.pooling_override, &splade);
        } else if (!strcmp(a, "--chat-template")) {
            o.engine.chat_template = val;
        } else if (!strcmp(a, "--max-image-pixels")) {
            if (!(rc = parse_int(a, val, 1, (long)1 << 40, &x))) o.engine.max_image_pixels = x;
        } else if (!strcmp(a, "--max-audio-bytes")) {
            if (!(rc = parse_int(a, val, 1, (long)1 << 40, &x))) o.engine.max_audio_bytes = (size_t)x;
        } else if (!strcmp(a, "--max-audio-seconds")) {
            char *end;
            const double sec = strtod(val, &end);
            if (end == val || *end || !(sec > 0) || sec > 1e6) {
                fprintf(stderr, "infinity_v3: %s must be a positive number of seconds\n", a);
                rc = -1;
            } else {
                o.engine.max_audio_seconds = sec;
            }
        } else if (!strcmp(a, "--causal-lm-rerank")) {
            o.engine.rerank_tokens = val;
        } else if (!strcmp(a, "--device")) {
            o.engine.device = val;
        } else if (!strcmp(a, "--dtype")) {
            o.engine.dtype = val;
        } else if (!strcmp(a, "--backend")) {
            if (strcmp(val, "native") && strcmp(val, "libtorch")) {
                fprintf(stderr, "infinity_v3 serve: unknown backend \"%s\" (native)\n", val);
                rc = -1;
            }
        } else if (!strcmp(a, "--revision")) {
            o.revision = val;
        } else if (!strcmp(a, "--huggingface-hub-cache")) {
            o.hub_cache = val;
        } else if (!strcmp(a, "--otlp-endpoint")) {
            o.otlp_endpoint = val;
        } else if (!strcmp(a, "--otlp-service-name")) {
            o.otlp_service_name = val;
        } else if (!strcmp(a, "--log-level")) {
            set_log_level(val);
        } else {
            fprintf(stderr, "infinity_v3 serve: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (rc) return 2;
    }
    if (n_served > n_models) {
        fprintf(stderr, "infinity_v3 serve: %d --served-model-name for %d --model-id\n", n_served, n_models);
        return 2;
    }
    for (int i = 0; i < n_served; i++) models[i].served_name = served[i];
    /* Permits are per input: unless told otherwise, the largest request an
     * API accepts must fit, or it would get 429 forever. */
    if (!concurrency_set && o.max_concurrent_requests < o.max_client_batch_size_openai)
        o.max_concurrent_requests = o.max_client_batch_size_openai;
    if (o.url_prefix && o.url_prefix[0] && (o.url_prefix[0] != '/' || o.url_prefix[strlen(o.url_prefix) - 1] == '/')) {
        fprintf(stderr, "infinity_v3 serve: --url-prefix must start with / and not end with one, got \"%s\"\n",
                o.url_prefix);
        return 2;
    }
    raise_fd_limit();

    iv_server *s;
    iv_err err = {0};
    if (iv_server_start(&s, &o, models, n_models, &err)) {
        IV_ERROR("%s", err.msg);
        return 1;
    }
    for (int i = 0; splade && i < s->n_models; i++)
        if (!(s->models[i].caps & IV_CAN(IV_TASK_SPARSE))) {
            const char *why = iv_engine_missing_head(s->models[i].engine);
            IV_ERROR("--pooling splade needs a *ForMaskedLM checkpoint; %s (%s) has no masked-LM head%s%s",
                     s->models[i].model_id, iv_engine_architecture(s->models[i].engine), why[0] ? ": " : "", why);
            iv_server_stop(s);
            return 1;
        }
    int sig = 0;
    sigwait(&stop, &sig);
    IV_INFO("signal %d received, starting graceful shutdown (a second one exits at once)", sig);
    pthread_t second;
    if (pthread_create(&second, NULL, exit_on_second_signal, NULL) == 0) pthread_detach(second);
    iv_server_stop(s);
    IV_INFO("stopped");
    return 0;
}

/* TEI's router reads each flag from its environment variable too; so do we,
 * but for --hostname: every container sets HOSTNAME to its own name, and
 * binding to that address alone would shut out the pod's other addresses. */
static const char *const k_env_flags[] = {
    "--model-id", "--revision", "--huggingface-hub-cache", "--served-model-name", "--port", "--uds-path",
    "--api-key", "--payload-limit", "--max-concurrent-requests", "--max-batch-tokens", "--max-batch-requests",
    "--max-client-batch-size", "--max-client-batch-size-openai", "--url-prefix", "--auto-truncate",
    "--default-prompt-name", "--default-prompt", "--tokenization-workers", "--pooling", "--chat-template",
    "--max-image-pixels", "--max-audio-bytes", "--max-audio-seconds",
    "--causal-lm-rerank", "--device", "--dtype", "--backend", "--drain-timeout", "--http-threads",
    "--otlp-endpoint", "--otlp-service-name", "--read-timeout", "--decision-max-questions",
    "--decision-max-options", "--decision-max-levels", "--decision-max-state-tokens", "--decision-max-images", "--prefix-fold",
    "--prefix-cache-mb", "--decision-continuation", NULL};
static const char *const k_env_switches[] = {"--json-output", "--decision-extended", "--decision-letters",
                                             "--decision-lenient", NULL};

static const char *env_lookup(const char *name) { return getenv(name); }

int iv_cmd_serve(int argc, char **argv)
{
    int n;
    char **merged;
    if (iv_env_flags_merge(argc, argv, k_env_flags, k_env_switches, env_lookup, &n, &merged)) {
        fprintf(stderr, "infinity_v3 serve: out of memory\n");
        return 1;
    }
    const int rc = serve(n, merged);
    iv_env_flags_free(argc, argv, merged);
    return rc;
}
