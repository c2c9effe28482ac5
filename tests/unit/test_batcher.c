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
#include "engine/batcher_internal.h"
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

/* A job's inputs are queued together once the last is tokenized, so on an
 * idle server every input of one request shares the first batch (rerank
 * documents then fold their shared prefix). With one tokenizer worker the
 * first input used to reach the idle replica alone. */
TEST(batcher_job_items_share_a_batch)
{
    iv_engine *e = load_fixture();
    if (!e) return;
    memset(&T, 0, sizeof T);
    pthread_mutex_init(&T.lock, NULL);
    pthread_cond_init(&T.cond, NULL);
    T.budget = 4096;
    iv_batcher_opts o = {.max_batch_tokens = 4096, .max_concurrent = 1000, .tokenization_workers = 1,
                         .on_batch = on_batch};
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, &e, 1, &o, &err) == 0);
    enum { N = 12 };
    int32_t *ids[N];
    int lens[N];
    iv_job job = {.task = IV_TASK_CLASSIFY, .opts = iv_input_opts_default(), .n_items = N, .client_fd = -1,
                  .done = on_done};
    job.items = calloc(N, sizeof *job.items);
    for (int k = 0; k < N; k++) {
        ids[k] = make_ids(k + 20, &lens[k]);
        job.items[k].in = (iv_input){.ids = ids[k], .n_ids = lens[k]};
    }
    REQUIRE(iv_batcher_submit(b, &job, &err) == 0);
    wait_done(1);
    CHECK_EQ_INT(job.stage, IV_JOB_OK);
    CHECK_MSG(T.max_seqs == N, "the job's %d inputs ran in batches of at most %d", N, T.max_seqs);
    iv_batcher_stop(b);
    iv_job_release(&job);
    free(job.items);
    for (int k = 0; k < N; k++) free(ids[k]);
    iv_engine_free(e);
}

static int queued_done;
static void count_done(iv_job *job) { queued_done++; }

/* The queueing rule alone (no threads, no timing): items of a job reach the
 * ready list only when the last one is tokenized, all at once, in the
 * job's order; a failed item is accounted for and not queued. */
TEST(batcher_queues_a_job_once_tokenized)
{
    iv_batcher *b = calloc(1, sizeof *b);
    REQUIRE(b);
    pthread_mutex_init(&b->ready_lock, NULL);
    pthread_cond_init(&b->ready_cond, NULL);
    iv_job_item items[3] = {0};
    iv_job job = {.n_items = 3, .items = items, .client_fd = -1, .done = count_done, .owner = b};
    atomic_store(&job.pending, 3);
    atomic_store(&job.untokenized, 3);
    atomic_store(&b->permits_used, 3);
    for (int i = 0; i < 3; i++) items[i].job = &job;
    queued_done = 0;
    iv_item_tokenized(b, &items[2], 1);
    CHECK_EQ_INT(iv_batcher_queue_size(b), 0);
    iv_item_tokenized(b, &items[1], 0); /* failed: accounted for, never queued */
    CHECK_EQ_INT(iv_batcher_queue_size(b), 0);
    CHECK_EQ_INT(atomic_load(&job.pending), 2);
    iv_item_tokenized(b, &items[0], 1);
    CHECK_EQ_INT(iv_batcher_queue_size(b), 2);
    CHECK(b->ready_list.head == &items[0] && b->ready_list.tail == &items[2] && items[0].next == &items[2]);
    CHECK_EQ_INT(queued_done, 0);
    pthread_mutex_destroy(&b->ready_lock);
    pthread_cond_destroy(&b->ready_cond);
    free(b);
}

/* The dispatcher's batch rule on a hand-built ready list (no threads, no
 * timing): a job's items go into one batch when they fit one, waiting for
 * the next batch rather than being split; a job larger than a batch is
 * split where the budget runs out; the request cap counts the same way;
 * other tasks and abandoned jobs are handled as before. */
TEST(batcher_take_batch_keeps_jobs_together)
{
    iv_batcher *b = calloc(1, sizeof *b);
    REQUIRE(b);
    b->o.max_batch_tokens = 60;
    b->cap = 8;
    enum { JOBS = 6 };
    /* job: task, items, tokens per item */
    static const struct {
        iv_task task;
        int items, tokens;
    } spec[JOBS] = {
        {IV_TASK_EMBED, 1, 30},    /* A */
        {IV_TASK_EMBED, 4, 10},    /* B: 40, does not fit beside A, fits alone */
        {IV_TASK_CLASSIFY, 2, 5},  /* X: another task, skipped by embed batches */
        {IV_TASK_EMBED, 1, 20},    /* C: joins B (60) */
        {IV_TASK_EMBED, 1, 5},     /* D */
        {IV_TASK_EMBED, 8, 10},    /* E: 80 tokens, more than a batch: split */
    };
    iv_job jobs[JOBS] = {0};
    iv_job_item items[32] = {0};
    int used = 0;
    for (int j = 0; j < JOBS; j++) {
        jobs[j] = (iv_job){.task = spec[j].task, .n_items = spec[j].items, .items = &items[used], .client_fd = -1};
        for (int i = 0; i < spec[j].items; i++, used++) {
            items[used].job = &jobs[j];
            items[used].n_tokens = spec[j].tokens;
            iv_item_list_push(&b->ready_list, &items[used]);
        }
    }
    atomic_store(&b->ready_count, used);
    iv_job_item *batch[8], *dropped[32];
    int n_dropped;
    int64_t tokens;
    /* Expected batches: job of each item in order. */
    static const char *const want[] = {"A", "BBBBC", "XX", "DEEEEE", "EEE"};
    for (int k = 0; k < 5; k++) {
        const int n = iv_take_batch(b, batch, dropped, &n_dropped, &tokens);
        char got[16] = {0};
        for (int i = 0; i < n && i < 15; i++) {
            const int j = (int)(batch[i]->job - jobs);
            got[i] = j == 2 ? 'X' : (char)('A' + (j > 2 ? j - 1 : j));
        }
        CHECK_MSG(!strcmp(got, want[k]), "batch %d: %s, want %s", k, got, want[k]);
        CHECK(tokens <= 60);
        CHECK_EQ_INT(n_dropped, 0);
    }
    CHECK_EQ_INT(iv_batcher_queue_size(b), 0);

    /* The request cap: 3 items of one job beside 6 others of cap 8 wait. */
    iv_job p = {.task = IV_TASK_EMBED, .n_items = 6, .items = items, .client_fd = -1};
    iv_job q = {.task = IV_TASK_EMBED, .n_items = 3, .items = items + 6, .client_fd = -1};
    for (int i = 0; i < 9; i++) {
        items[i] = (iv_job_item){.job = i < 6 ? &p : &q, .n_tokens = 1};
        iv_item_list_push(&b->ready_list, &items[i]);
    }
    atomic_store(&b->ready_count, 9);
    CHECK_EQ_INT(iv_take_batch(b, batch, dropped, &n_dropped, &tokens), 6);
    CHECK_EQ_INT(iv_take_batch(b, batch, dropped, &n_dropped, &tokens), 3);
    free(b);
}
