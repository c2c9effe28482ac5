/* The batcher on a fixture model (bert_seqcls3: classification and
 * per-token states), without HTTP: results equal single runs, batches keep
 * to the token budget and request cap, a task never overtakes an older
 * input of its own task, permits come back, abandoned jobs are dropped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/batcher.h"
#include "test.h"

typedef struct tracker {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    int order[256]; /* job indices in completion order */
    int max_seqs, over_budget;
    int64_t budget;
    int cap;
} tracker;

static tracker T;

static void on_done(iv_job *job)
{
    pthread_mutex_lock(&T.lock);
    T.order[T.done++] = (int)(intptr_t)job->user;
    pthread_cond_broadcast(&T.cond);
    pthread_mutex_unlock(&T.lock);
}

static void on_batch(void *ctx, int n_seqs, int64_t n_tokens, int64_t ns)
{
    pthread_mutex_lock(&T.lock);
    if (n_seqs > T.max_seqs) T.max_seqs = n_seqs;
    if (n_seqs > 1 && n_tokens > T.budget) T.over_budget++;
    pthread_mutex_unlock(&T.lock);
}

static void wait_done(int n)
{
    pthread_mutex_lock(&T.lock);
    while (T.done < n) pthread_cond_wait(&T.cond, &T.lock);
    pthread_mutex_unlock(&T.lock);
}

static iv_engine *load_fixture(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/bert_seqcls3", iv_test_fixtures_dir());
    iv_engine *e = NULL;
    iv_err err = {0};
    if (iv_engine_load(&e, dir, NULL, &err)) {
        iv_test_skip(err.msg);
        return NULL;
    }
    return e;
}

/* Input k: ids [101, 104 + k % 50 ... (len k % 37 + 2)..., 102]. */
static int32_t *make_ids(int k, int *len)
{
    *len = 2 + k % 37;
    int32_t *ids = malloc((size_t)*len * sizeof *ids);
    ids[0] = 101;
    for (int i = 1; i < *len - 1; i++) ids[i] = 104 + (k * 7 + i) % 50;
    ids[*len - 1] = 102;
    return ids;
}

TEST(batcher_results_budget_and_order)
{
    iv_engine *e = load_fixture();
    if (!e) return;
    memset(&T, 0, sizeof T);
    pthread_mutex_init(&T.lock, NULL);
    pthread_cond_init(&T.cond, NULL);
    T.budget = 64;
    iv_batcher_opts o = {.max_batch_tokens = 64, .max_batch_requests = 5, .max_concurrent = 1000,
                         .tokenization_workers = 1, .on_batch = on_batch};
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, &e, 1, &o, &err) == 0);
    enum { N = 120 };
    iv_job *jobs = calloc(N, sizeof *jobs);
    int32_t *ids[N];
    int lens[N];
    for (int k = 0; k < N; k++) {
        ids[k] = make_ids(k, &lens[k]);
        iv_job *j = &jobs[k];
        j->task = k % 3 ? IV_TASK_CLASSIFY : IV_TASK_EMBED_ALL;
        j->opts = iv_input_opts_default();
        j->n_items = 1;
        j->items = calloc(1, sizeof *j->items);
        j->items[0].in = (iv_input){.ids = ids[k], .n_ids = lens[k]};
        j->client_fd = -1;
        j->done = on_done;
        j->user = (void *)(intptr_t)k;
        REQUIRE(iv_batcher_submit(b, j, &err) == 0);
    }
    wait_done(N);
    CHECK_EQ_INT(T.over_budget, 0);
    CHECK(T.max_seqs <= 5);
    CHECK(T.max_seqs > 1); /* inputs of different jobs shared batches */
    CHECK_EQ_INT(iv_batcher_permits_in_use(b), 0);
    /* Within a task, completion follows submission (one tokenizer worker keeps arrival order). */
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            int a = T.order[i], c = T.order[j];
            if (jobs[a].task == jobs[c].task) CHECK_MSG(a < c, "job %d finished before job %d of its task", c, a);
        }
    /* Every result equals the same input run alone. */
    for (int k = 0; k < N; k++) {
        const iv_job *j = &jobs[k];
        CHECK_EQ_INT(j->stage, IV_JOB_OK);
        iv_seq_input seq = {.ids = ids[k], .len = lens[k]};
        iv_outputs alone;
        REQUIRE(iv_engine_run(e, j->task, &seq, 1, &alone, &err) == 0);
        CHECK_EQ_INT(j->cols, alone.cols);
        CHECK_EQ_INT(j->items[0].rows, alone.rows[0]);
        CHECK_EQ_INT(j->items[0].n_tokens, lens[k]);
        CHECK(iv_test_max_abs_diff(j->items[0].out, alone.data, (int64_t)alone.rows[0] * alone.cols) <= 1e-5);
        iv_outputs_free(&alone);
    }
    iv_batcher_stop(b);
    for (int k = 0; k < N; k++) {
        iv_job_release(&jobs[k]);
        free(jobs[k].items);
        free(ids[k]);
    }
    free(jobs);
    iv_engine_free(e);
}

TEST(batcher_overload_drop_and_input_errors)
{
    iv_engine *e = load_fixture();
    if (!e) return;
    memset(&T, 0, sizeof T);
    pthread_mutex_init(&T.lock, NULL);
    pthread_cond_init(&T.cond, NULL);
    T.budget = 1 << 20;
    iv_batcher_opts o = {.max_batch_tokens = 16384, .max_concurrent = 4, .tokenization_workers = 2};
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, &e, 1, &o, &err) == 0);
    int32_t ok_ids[] = {101, 110, 102}, bad_ids[] = {101, 5000, 102};
    iv_job_item items[5];
    memset(items, 0, sizeof items);
    for (int i = 0; i < 5; i++) items[i].in = (iv_input){.ids = ok_ids, .n_ids = 3};
    iv_job big = {.task = IV_TASK_CLASSIFY, .opts = iv_input_opts_default(), .n_items = 5, .items = items,
                  .client_fd = -1, .done = on_done};
    /* Five inputs never fit four permits: the request's fault, not a busy server's. */
    CHECK(iv_batcher_submit(b, &big, &err) != 0);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_CONTAINS(err.msg, "batch size 5 > maximum concurrent inputs 4 (--max-concurrent-requests)");
    CHECK_EQ_INT(iv_batcher_permits_in_use(b), 0);

    /* A client that hung up: dropped, permits back. */
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    iv_job gone = {.task = IV_TASK_CLASSIFY, .opts = iv_input_opts_default(), .n_items = 2, .items = items,
                   .client_fd = sv[0], .done = on_done, .user = (void *)1};
    REQUIRE(iv_batcher_submit(b, &gone, &err) == 0);
    wait_done(1);
    CHECK_EQ_INT(gone.stage, IV_JOB_DROPPED);
    CHECK_EQ_INT(iv_batcher_permits_in_use(b), 0);
    iv_job_release(&gone);
    close(sv[0]);

    /* One bad input fails the job with the tokenizer/validation error. */
    iv_job_item mixed[2];
    memset(mixed, 0, sizeof mixed);
    mixed[0].in = (iv_input){.ids = ok_ids, .n_ids = 3};
    mixed[1].in = (iv_input){.ids = bad_ids, .n_ids = 3};
    iv_job bad = {.task = IV_TASK_CLASSIFY, .opts = iv_input_opts_default(), .n_items = 2, .items = mixed,
                  .client_fd = -1, .done = on_done, .user = (void *)2};
    REQUIRE(iv_batcher_submit(b, &bad, &err) == 0);
    wait_done(2);
    CHECK_EQ_INT(bad.stage, IV_JOB_FAILED_INPUT);
    CHECK_CONTAINS(bad.err.msg, "outside the vocabulary");
    iv_job_release(&bad);

    /* Too long without truncation: TEI's message with the real length. */
    int32_t longer[200];
    longer[0] = 101;
    for (int i = 1; i < 199; i++) longer[i] = 110;
    longer[199] = 102;
    iv_job_item one;
    memset(&one, 0, sizeof one);
    one.in = (iv_input){.ids = longer, .n_ids = 200};
    iv_job strict = {.task = IV_TASK_CLASSIFY, .opts = iv_input_opts_default(), .n_items = 1, .items = &one,
                     .client_fd = -1, .done = on_done, .user = (void *)3};
    strict.opts.truncate = 0;
    REQUIRE(iv_batcher_submit(b, &strict, &err) == 0);
    wait_done(3);
    CHECK_EQ_INT(strict.stage, IV_JOB_FAILED_INPUT);
    CHECK_STR(strict.err.msg, "`inputs` must have less than 128 tokens. Given: 200");
    iv_job_release(&strict);
    /* The same truncated to the limit. */
    strict.opts.truncate = 1;
    REQUIRE(iv_batcher_submit(b, &strict, &err) == 0);
    wait_done(4);
    CHECK_EQ_INT(strict.stage, IV_JOB_OK);
    CHECK_EQ_INT(one.n_tokens, 128);
    iv_job_release(&strict);
    CHECK_EQ_INT(iv_batcher_permits_in_use(b), 0);
    iv_batcher_stop(b);
    iv_engine_free(e);
}
