/* Server start and graceful stop: models in, HTTP out. */
#include "server/server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "engine/device_list.h"
#include "engine/resolve.h"
#include "base/log.h"
#include "server/http.h"
#include "server/otlp.h"
#include "server/request.h"
#include "server/token_budget.h"
#include "ops/cpu/omp_policy.h"

void iv_server_opts_default(iv_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->hostname = "0.0.0.0";
    o->port = 7997;
    o->payload_limit = 2000000;
    o->max_client_batch_size = 32;
    o->max_client_batch_size_openai = 2048;
    o->max_concurrent_requests = 512;
    o->max_batch_tokens = 16384;
    o->auto_truncate = 1;
    o->drain_timeout_s = 30;
    o->read_timeout_s = 120;
    iv_dq_limits_default(&o->decision_limits);
    o->decision_max_state_tokens = 65536;
}

/* The CPUs this process may keep busy (affinity, cgroup quota). */
static int cores(void) { return iv_cpu_usable_cores(); }

/* --model-id to a checkpoint directory: a local directory, a Hugging Face
 * cache entry, or a hub id downloaded into the cache. */
static int model_directory(const iv_server_opts *o, const char *model_id, char *out, size_t cap, iv_err *err)
{
    iv_resolve_opts ro = {.revision = o->revision, .cache_dir = o->hub_cache};
    if (iv_resolve_model(model_id, &ro, out, cap, err)) return iv_err_prefix(err, "cannot find %s: ", model_id);
    return 0;
}

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }

/* The prompt applied when a request names none: --default-prompt,
 * --default-prompt-name, else the checkpoint's default_prompt_name
 * (sentence-transformers applies it too, and so does `infinity_v3 embed`). */
static int default_prompt(iv_model_slot *m, const iv_server_opts *o, iv_err *err)
{
    const iv_st_meta *meta = iv_engine_st_meta(m->engine);
    if (o->default_prompt) {
        m->default_prompt = o->default_prompt;
        return 0;
    }
    const char *name = o->default_prompt_name ? o->default_prompt_name : meta->default_prompt_name;
    if (!name) return 0;
    m->default_prompt = iv_st_meta_prompt(meta, name);
    if (m->default_prompt) return 0;
    if (meta->n_prompts == 0)
        return iv_errf(err, IV_E_INVALID,
                       "`default-prompt-name` is set to `%s` but no prompts were found in the Sentence Transformers "
                       "configuration",
                       name);
    char names[512];
    size_t off = 0;
    for (int i = 0; i < meta->n_prompts && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s\"%s\"", i ? ", " : "", meta->prompts[i].name);
    return iv_errf(err, IV_E_INVALID,
                   "`default-prompt-name` is set to `%s` but it was not found in the Sentence Transformers prompts. "
                   "Available prompts: [%s]",
                   name, names);
}

static void on_batch(void *ctx, int n_seqs, int64_t n_tokens, int64_t inference_ns)
{
    iv_metrics *m = ctx;
    iv_metrics_observe(m, "te_batch_next_size", n_seqs);
    iv_metrics_observe(m, "te_batch_next_tokens", (double)n_tokens);
    iv_metrics_observe(m, "te_batch_inference_duration", (double)inference_ns * 1e-9);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* One complete model per --device entry. Replicas on the CPU split its
 * cores between them. A replica that cannot load stops the start: the
 * operator asked for it. */
static int load_replicas(iv_server *s, iv_model_slot *m, const char *dir, iv_err *err)
{
    iv_device_list devices;
    if (iv_device_list_parse(s->o.engine.device, &devices, err)) return -1;
    m->replicas = calloc((size_t)devices.n, sizeof *m->replicas);
    if (!m->replicas) return iv_errf(err, IV_E_NOMEM, "out of memory");
    const int n_cpu = iv_device_list_cpu_count(&devices);
    for (int i = 0; i < devices.n; i++) {
        iv_engine_opts eo = s->o.engine;
        eo.device = devices.names[i];
        if (n_cpu > 1 && !strcmp(devices.names[i], "cpu")) {
            const int share = iv_omp_team_size() / n_cpu;
            eo.cpu_threads = share > 0 ? share : 1;
        }
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (iv_engine_load(&m->replicas[i], dir, &eo, err))
            return devices.n > 1 ? iv_err_prefix(err, "replica %d on %s: ", i, devices.names[i]) : -1;
        m->n_replicas = i + 1;
        if (devices.n > 1)
            IV_INFO("replica %d/%d on %s loaded in %.2f s%s", i + 1, devices.n, devices.names[i],
                    seconds_since(&t0), eo.cpu_threads ? " (its share of the CPU cores)" : "");
    }
    m->engine = m->replicas[0];
    return 0;
}

/* IV_INJECT_REPLICA_FAULT=R:N (tests): replica R's Nth batch fails as a
 * device error would. */
static void fault_hook(iv_batcher_opts *bo)
{
    const char *v = getenv("IV_INJECT_REPLICA_FAULT");
    int r, n;
    if (v && sscanf(v, "%d:%d", &r, &n) == 2 && r >= 0 && n > 0) {
        bo->fault_replica = r;
        bo->fault_batch = n;
        IV_WARN("IV_INJECT_REPLICA_FAULT: batch %d of replica %d will fail", n, r);
    }
}

/* Loads the checkpoint's replicas; start_model (once every model is
 * loaded and the token budgets are sized) does the rest. */
static int load_model(iv_server *s, iv_model_slot *m, const iv_model_spec *spec, iv_err *err)
{
    char dir[4096];
    if (model_directory(&s->o, spec->model_id, dir, sizeof dir, err)) return -1;
    m->model_id = dup_str(spec->model_id);
    m->model_dir = dup_str(dir);
    m->served_name = dup_str(spec->served_name ? spec->served_name : spec->model_id);
    IV_INFO("loading %s", spec->model_id);
    if (load_replicas(s, m, dir, err)) return iv_err_prefix(err, "loading %s: ", spec->model_id);
    m->caps = iv_engine_capabilities(m->engine);
    m->num_labels = iv_engine_num_labels(m->engine);
    m->max_batch_tokens = s->o.max_batch_tokens;
    return 0;
}

/* Models served with a replica on all of this host's cores: with more than
 * one, each of their replica threads would keep an OpenMP pool as wide as
 * the machine, so they share one thread instead (engine/cpu_thread.h).
 * The replicas of one model (`cpu,cpu` splits the cores) keep their own. */
static int all_core_models(const iv_server *s)
{
    int n = 0;
    for (int i = 0; i < s->n_models; i++) {
        int any = 0;
        for (int r = 0; r < s->models[i].n_replicas; r++) any |= iv_engine_uses_all_cores(s->models[i].replicas[r]);
        n += any;
    }
    return n;
}

static int start_model(iv_server *s, iv_model_slot *m, iv_err *err)
{
    const int base = iv_engine_max_input_length(m->engine);
    const int budget = m->max_batch_tokens;
    m->max_input_length = base;
    m->max_input_length_source = iv_engine_max_input_length_source(m->engine);
    if (base > budget) {
        if (!s->o.auto_truncate)
            return iv_errf(err, IV_E_INVALID,
                           "The maximum input length is `%d` which exceeds `--max-batch-tokens=%d`. Either increase "
                           "`--max-batch-tokens` to at least `%d`, or set `--auto-truncate true` so that regardless "
                           "the maximum input length, those are truncated to `%d` tokens.",
                           base, budget, base, budget);
        IV_WARN("%s: the maximum input length %d exceeds --max-batch-tokens=%d; inputs will be truncated to %d tokens",
                m->model_id, base, budget, budget);
        m->max_input_length = budget;
        m->max_input_length_source = "--max-batch-tokens";
    }
    if (default_prompt(m, &s->o, err)) return iv_err_prefix(err, "%s: ", m->model_id);
    iv_batcher_opts bo = {
        .max_batch_tokens = budget,
        .max_batch_requests = s->o.max_batch_requests,
        .max_concurrent = s->o.max_concurrent_requests,
        .tokenization_workers = s->o.tokenization_workers,
        .max_input_length = m->max_input_length,
        .on_batch = on_batch,
        .on_batch_ctx = s->metrics,
        .shared_cpu_thread = all_core_models(s) > 1,
    };
    fault_hook(&bo);
    if (iv_batcher_start(&m->batcher, m->replicas, m->n_replicas, &bo, err)) return -1;
    char routes[256];
    iv_model_routes(m, routes, sizeof routes);
    IV_INFO("model %s served as \"%s\": %s, max input length %d, serves %s", m->model_id, m->served_name,
            iv_engine_architecture(m->engine), m->max_input_length, routes);
    return 0;
}

static void free_models(iv_server *s)
{
    for (int i = 0; i < s->n_models; i++) {
        iv_model_slot *m = &s->models[i];
        iv_batcher_stop(m->batcher);
        for (int r = 0; r < m->n_replicas; r++) iv_engine_free(m->replicas[r]);
        free(m->replicas);
        free(m->model_id);
        free(m->model_dir);
        free(m->served_name);
    }
    free(s->models);
    s->models = NULL;
    s->n_models = 0;
}

/* The models are loaded on a thread that exits once they are, so that the
 * OpenMP worker pool their weight packing starts goes with it. libgomp
 * keeps one pool per thread that ever ran a parallel region and, once its
 * pooled threads outnumber the CPUs, cuts every idle worker's spin to ~100
 * iterations: a pool left on the main thread beside the replica's made
 * each of a request's ~50 parallel regions a futex sleep and wake. With
 * all-MiniLM-L6-v2, 2 threads, one 3-token request at a time (2-core Zen 4):
 * 54 context switches per request and 1.95 ms in the engine, against 0.75
 * ms for the same engine run in-process (bench_engine), before this. */
typedef struct load_job {
    iv_server *s;
    const iv_model_spec *models;
    int n_models;
    iv_err *err;
    int rc;
} load_job;

static void *load_models_main(void *arg)
{
    load_job *j = arg;
    for (int i = 0; i < j->n_models && !j->rc; i++) {
        j->s->n_models = i + 1;
        j->rc = load_model(j->s, &j->s->models[i], &j->models[i], j->err);
    }
    return NULL;
}

/* Runs fn(arg) on a new thread and waits for it; -1 when no thread could
 * be started (the caller then runs fn itself). */
static int run_on_passing_thread(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr)) return -1;
    /* As much stack as the main thread may have (the loaders were written
     * for it): its limit, at least 8 MiB, at most 1 GiB. */
    size_t stack = (size_t)8 << 20;
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > stack)
        stack = rl.rlim_cur < ((rlim_t)1 << 30) ? (size_t)rl.rlim_cur : (size_t)1 << 30;
    pthread_attr_setstacksize(&attr, stack);
    const int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc) return -1;
    pthread_join(t, NULL);
    return 0;
}

int iv_server_start(iv_server **out, const iv_server_opts *o, const iv_model_spec *models, int n_models, iv_err *err)
{
    *out = NULL;
    if (n_models <= 0) return iv_errf(err, IV_E_INVALID, "--model-id is required");
    if (o->default_prompt && o->default_prompt_name)
        return iv_errf(err, IV_E_INVALID, "--default-prompt and --default-prompt-name cannot be used together");
    for (int i = 0; i < n_models; i++)
        for (int j = 0; j < i; j++) {
            const char *a = models[i].served_name ? models[i].served_name : models[i].model_id;
            const char *b = models[j].served_name ? models[j].served_name : models[j].model_id;
            if (!strcmp(a, b)) return iv_errf(err, IV_E_INVALID, "two models are served as \"%s\"", a);
        }
    iv_server *s = calloc(1, sizeof *s);
    if (!s) return iv_errf(err, IV_E_NOMEM, "out of memory");
    s->o = *o;
    if (s->o.tokenization_workers <= 0) {
        int w = cores() - 1;
        s->o.tokenization_workers = w < 1 ? 1 : w > 64 ? 64 : w;
    }
    if (s->o.http_threads <= 0) {
        int t = cores();
        s->o.http_threads = t < 2 ? 2 : t > 8 ? 8 : t;
    }
    s->models = calloc((size_t)n_models, sizeof *s->models);
    s->metrics = iv_metrics_new(0);
    if (!s->models || !s->metrics) {
        iv_server_stop(s);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    load_job job = {s, models, n_models, err, 0};
    if (run_on_passing_thread(load_models_main, &job)) load_models_main(&job);
    if (job.rc) {
        iv_server_stop(s);
        return -1;
    }
    iv_size_token_budgets(s);
    for (int i = 0; i < n_models; i++)
        if (start_model(s, &s->models[i], err)) {
            iv_server_stop(s);
            return -1;
        }
    /* te_request_input_length buckets reach the largest limit served. */
    int longest = 0;
    for (int i = 0; i < n_models; i++)
        if (s->models[i].max_input_length > longest) longest = s->models[i].max_input_length;
    iv_metrics_set_max_input_length(s->metrics, longest);
    if (s->o.otlp_endpoint && iv_otlp_start(&s->otlp, s->o.otlp_endpoint, s->o.otlp_service_name, err)) {
        iv_server_stop(s);
        return -1;
    }
    if (iv_http_start(s, err)) {
        iv_server_stop(s);
        return -1;
    }
    IV_INFO("Ready: listening on %s", s->listen_desc);
    *out = s;
    return 0;
}

/* Every accepted request gets its response, within --drain-timeout: a
 * request counts from its first byte to the end of its response, so one
 * client trickling a body (or not reading its response) could otherwise
 * hold the exit for ever. Two quiet checks in a row cover a request whose
 * headers were arriving during the first. Past the deadline, requests
 * already running on the model are still answered (that takes the model's
 * time, not a client's) and the other connections are closed. */
static void drain(iv_server *s)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int quiet = 0;
    while (quiet < 2) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
        const int live = atomic_load(&s->live_requests);
        quiet = live == 0 ? quiet + 1 : 0;
        if (live && seconds_since(&t0) >= s->o.drain_timeout_s) {
            IV_WARN("drain deadline (--drain-timeout %d s) passed with %d requests unfinished; those running on "
                    "the model finish, the other connections are closed",
                    s->o.drain_timeout_s, live);
            iv_http_finish_running(s);
            return;
        }
    }
}

void iv_server_stop(iv_server *s)
{
    if (!s) return;
    if (s->http) {
        IV_INFO("shutting down: no new connections, finishing %d accepted requests", atomic_load(&s->live_requests));
        /* Stop listening before /health turns 503: a client that saw the
         * 503 and connects again is then refused, never queued unanswered. */
        iv_http_quiesce(s);
    }
    atomic_store(&s->draining, 1);
    if (s->http) {
        drain(s);
        iv_http_stop(s);
    }
    iv_otlp_stop(s->otlp); /* after the last reply: its span is queued */
    free_models(s);
    iv_metrics_free(s->metrics);
    free(s);
}

iv_model_slot *iv_server_find_model(iv_server *s, const char *name)
{
    if (s->n_models == 1 || !name) return &s->models[0];
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].served_name, name)) return &s->models[i];
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].model_id, name)) return &s->models[i];
    return NULL;
}

int iv_server_healthy(iv_server *s)
{
    if (atomic_load(&s->draining)) return 0;
    for (int i = 0; i < s->n_models; i++)
        if (iv_batcher_unhealthy(s->models[i].batcher)) return 0;
    return 1;
}
