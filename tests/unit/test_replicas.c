/* The batcher with several replicas of a fixture model (bert_seqcls3) on
 * the CPU, without HTTP: idle replicas take turns, a replica that fails is
 * taken out of service and its batch runs on another with nothing lost,
 * the last replica in service is never taken out, and stop drains every
 * accepted job. Failures come from the batcher's fault hook, so nothing
 * here depends on timing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/batcher.h"
#include "test.h"

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int n_done;

static void on_done(iv_job *job)
{
    pthread_mutex_lock(&done_lock);
    n_done++;
    pthread_cond_broadcast(&done_cond);
    pthread_mutex_unlock(&done_lock);
}

static void wait_done(int n)
{
    pthread_mutex_lock(&done_lock);
    while (n_done < n) pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
}

/* n CPU replicas of the fixture, one OpenMP thread each. */
static int load_replicas(iv_engine **e, int n)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/bert_seqcls3", iv_test_fixtures_dir());
    iv_engine_opts o = {.device = "cpu", .cpu_threads = 1};
    for (int i = 0; i < n; i++) {
        iv_err err = {0};
        if (iv_engine_load(&e[i], dir, &o, &err)) {
            for (int j = 0; j < i; j++) iv_engine_free(e[j]);
            iv_test_skip(err.msg);
            return -1;
        }
    }
    return 0;
}

static const int32_t IDS[][6] = {{101, 110, 120, 130, 140, 102}, {101, 111, 121, 102}, {101, 150, 102},
                                 {101, 112, 113, 114, 115, 102}};
static const int LENS[] = {6, 4, 3, 6};

static void make_job(iv_job *j, iv_job_item *item, int k)
{
    memset(j, 0, sizeof *j);
    memset(item, 0, sizeof *item);
    item->in = (iv_input){.ids = IDS[k % 4], .n_ids = LENS[k % 4]};
    j->task = IV_TASK_CLASSIFY;
    j->opts = iv_input_opts_default();
    j->n_items = 1;
    j->items = item;
    j->client_fd = -1;
    j->done = on_done;
}

/* Runs n jobs one after the other (each waits for the previous answer) and
 * checks each against the input run alone on `ref`. Returns the jobs that failed. */
static int run_sequential(iv_batcher *b, iv_engine *ref, int n, iv_job_stage *stages, char (*msgs)[1024])
{
    int failed = 0;
    for (int k = 0; k < n; k++) {
        iv_job j;
        iv_job_item item;
        make_job(&j, &item, k);
        iv_err err = {0};
        const int before = n_done;
        if (iv_batcher_submit(b, &j, &err)) return iv_test_fail(__FILE__, __LINE__, "submit: %s", err.msg), n;
        wait_done(before + 1);
        stages[k] = j.stage;
        snprintf(msgs[k], sizeof msgs[k], "%s", j.err.msg);
        if (j.stage != IV_JOB_OK) {
            failed++;
        } else {
            iv_seq_input seq = {.ids = IDS[k % 4], .len = LENS[k % 4]};
            iv_outputs alone;
            if (iv_engine_run(ref, IV_TASK_CLASSIFY, &seq, 1, &alone, &err) == 0) {
                CHECK_EQ_INT(item.rows, 1);
                CHECK(iv_test_max_abs_diff(item.out, alone.data, alone.cols) <= 1e-5);
                iv_outputs_free(&alone);
            } else {
                CHECK_MSG(0, "reference run: %s", err.msg);
            }
        }
        iv_job_release(&j);
    }
    return failed;
}

static iv_batcher_opts opts(void)
{
    return (iv_batcher_opts){.max_batch_tokens = 256, .max_concurrent = 256, .tokenization_workers = 1};
}

TEST(replicas_take_turns_and_match_single_runs)
{
    iv_engine *e[2];
    if (load_replicas(e, 2)) return;
    iv_batcher_opts o = opts();
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, e, 2, &o, &err) == 0);
    CHECK_EQ_INT(iv_batcher_replica_count(b), 2);
    iv_job_stage stages[6];
    char msgs[6][1024];
    CHECK_EQ_INT(run_sequential(b, e[0], 6, stages, msgs), 0);
    /* Both replicas are idle at every dispatch: the one that ran fewer batches goes next. */
    for (int i = 0; i < 2; i++) {
        iv_replica_stats st;
        iv_batcher_replica_stats(b, i, &st);
        CHECK_EQ_INT((int)st.batches, 3);
        CHECK_EQ_INT((int)st.failures, 0);
        CHECK_EQ_INT(st.in_service, 1);
        CHECK_STR(st.device, "cpu");
        CHECK(st.tokens > 0);
    }
    iv_batcher_stop(b);
    iv_engine_free(e[0]);
    iv_engine_free(e[1]);
}

TEST(replicas_failed_replica_leaves_service_and_nothing_is_lost)
{
    iv_engine *e[2];
    if (load_replicas(e, 2)) return;
    iv_batcher_opts o = opts();
    o.fault_replica = 1;
    o.fault_batch = 1;
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, e, 2, &o, &err) == 0);
    iv_job_stage stages[8];
    char msgs[8][1024];
    /* Job 0 runs on replica 0; job 1 goes to replica 1, fails there and runs on replica 0. */
    CHECK_EQ_INT(run_sequential(b, e[0], 8, stages, msgs), 0);
    iv_replica_stats r0, r1;
    iv_batcher_replica_stats(b, 0, &r0);
    iv_batcher_replica_stats(b, 1, &r1);
    CHECK_EQ_INT(r1.in_service, 0);
    CHECK_EQ_INT((int)r1.failures, 1);
    CHECK_EQ_INT((int)r1.batches, 0);
    CHECK_EQ_INT(r0.in_service, 1);
    CHECK_EQ_INT((int)r0.batches, 8);
    CHECK_EQ_INT(iv_batcher_unhealthy(b), 0);
    CHECK_EQ_INT(iv_batcher_permits_in_use(b), 0);
    iv_batcher_stop(b);
    iv_engine_free(e[0]);
    iv_engine_free(e[1]);
}

TEST(replicas_last_in_service_fails_its_batch_and_stays)
{
    iv_engine *e[1];
    if (load_replicas(e, 1)) return;
    iv_batcher_opts o = opts();
    o.fault_replica = 0;
    o.fault_batch = 2;
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, e, 1, &o, &err) == 0);
    iv_job_stage stages[3];
    char msgs[3][1024];
    CHECK_EQ_INT(run_sequential(b, e[0], 3, stages, msgs), 1);
    CHECK_EQ_INT(stages[0], IV_JOB_OK);
    CHECK_EQ_INT(stages[1], IV_JOB_FAILED_BACKEND);
    CHECK_CONTAINS(msgs[1], "injected fault");
    CHECK_EQ_INT(stages[2], IV_JOB_OK);
    iv_replica_stats st;
    iv_batcher_replica_stats(b, 0, &st);
    CHECK_EQ_INT(st.in_service, 1);
    CHECK_EQ_INT((int)st.failures, 1);
    CHECK_EQ_INT((int)st.batches, 2);
    /* Healthy again once a batch succeeded. */
    CHECK_EQ_INT(iv_batcher_unhealthy(b), 0);
    iv_batcher_stop(b);
    iv_engine_free(e[0]);
}

TEST(replicas_stop_drains_every_accepted_job)
{
    iv_engine *e[2];
    if (load_replicas(e, 2)) return;
    iv_batcher_opts o = opts();
    o.max_batch_requests = 2;
    o.fault_replica = 0;
    o.fault_batch = 3; /* a failure while draining still loses nothing */
    iv_batcher *b;
    iv_err err = {0};
    REQUIRE(iv_batcher_start(&b, e, 2, &o, &err) == 0);
    enum { N = 40 };
    iv_job jobs[N];
    iv_job_item items[N];
    const int before = n_done;
    for (int k = 0; k < N; k++) {
        make_job(&jobs[k], &items[k], k);
        REQUIRE(iv_batcher_submit(b, &jobs[k], &err) == 0);
    }
    iv_batcher_stop(b);
    CHECK_EQ_INT(n_done - before, N);
    int ok = 0;
    for (int k = 0; k < N; k++) {
        ok += jobs[k].stage == IV_JOB_OK && items[k].rows == 1;
        iv_job_release(&jobs[k]);
    }
    CHECK_EQ_INT(ok, N);
    iv_engine_free(e[0]);
    iv_engine_free(e[1]);
}

/* The probe behind the GPU token budget (server/token_budget.h): activation
 * bytes per token are positive and do not grow with the batch (attention
 * never holds an [L, L] matrix), so one probe sizes any budget. */
TEST(replicas_probe_bytes_per_token_is_flat)
{
    iv_engine *e[1];
    if (load_replicas(e, 1)) return;
    iv_err err = {0};
    double small = 0, large = 0;
    /* Large first: each probe reports its own batch, not the arena's past peak. */
    REQUIRE(iv_engine_probe_bytes_per_token(e[0], 2048, &large, &err) == 0);
    REQUIRE(iv_engine_probe_bytes_per_token(e[0], 256, &small, &err) == 0);
    CHECK(small > 0);
    CHECK(large > 0 && large <= small * 1.05 && small <= large * 1.5);
    size_t f, t;
    CHECK(iv_engine_device_memory(e[0], &f, &t) != 0); /* the CPU sizes nothing from memory */
    iv_engine_free(e[0]);
}
