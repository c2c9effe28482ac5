/* A small OTLP/HTTP collector on 127.0.0.1 (random port), run by
 * libmicrohttpd in the test process: keeps the body of every POST to
 * /v1/traces (parsed as JSON) and answers 200 {}, or `fail_status` when set. */
#ifndef IV_TESTS_FAKE_COLLECTOR_H
#define IV_TESTS_FAKE_COLLECTOR_H

#include <cJSON.h>
#include <pthread.h>

#define FAKE_COLLECTOR_MAX 64

typedef struct fake_collector {
    struct MHD_Daemon *daemon;
    int port;
    char endpoint[64]; /* http://127.0.0.1:PORT */
    int fail_status;   /* 0: answer 200 */
    pthread_mutex_t mu;
    int n_posts;
    cJSON *posts[FAKE_COLLECTOR_MAX]; /* NULL where the body was not JSON */
    char paths[FAKE_COLLECTOR_MAX][64];
} fake_collector;

fake_collector *fake_collector_start(void); /* NULL on failure */
void fake_collector_free(fake_collector *c);
/* Every span of every export received, in order, as a new array (free with cJSON_Delete). */
cJSON *fake_collector_spans(fake_collector *c);

#endif
