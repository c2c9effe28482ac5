/* Integration tests of `infinity_v3 serve`: start the real binary
 * (iv_test_binary()) on a free loopback port, talk HTTP to it with libcurl
 * or raw sockets, stop it with SIGTERM and check it exits cleanly. */
#ifndef IV_TESTS_SERVER_HARNESS_H
#define IV_TESTS_SERVER_HARNESS_H

#include <cJSON.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct srv {
    pid_t pid;
    int port;               /* 0 with a Unix socket */
    char uds[256];          /* --uds-path, or "" */
    char log_path[256];
} srv;

/* Starts the server with the given arguments (NULL-terminated; --port 0
 * --hostname 127.0.0.1 are added unless args carry --uds-path) and waits
 * until /health answers 200. Returns 0, or -1 after printing its log. */
int srv_start(srv *s, const char *const *args);
/* The same without printing the log when the server fails to start. */
int srv_start_quiet(srv *s, const char *const *args);
/* SIGTERM, then waits (30 s at most, SIGKILL after), and removes the log.
 * A test that sent the server a stop signal itself calls srv_wait first:
 * a second signal would end the drain at once. With the server gone this
 * only removes the log (and returns -1).
 * Returns the exit status, or -1 when it had to be killed, died from a
 * signal, or was not running (the log is printed when it did not exit 0). */
int srv_stop(srv *s);
/* Waits for the server to exit by itself (no signal sent), at most
 * timeout_s seconds, then SIGKILLs it. Returns the exit status, 128+N when
 * signal N ended it, or -1 when it had to be killed. */
int srv_wait(srv *s, int timeout_s);
/* The server's log so far (malloc'd). */
char *srv_log(const srv *s);
/* Waits (60 s at most) until the server's log contains `what`: 1, else 0. */
int srv_log_shows(const srv *s, const char *what);

/* Paths of test models; NULL (after iv_test_skip) when absent. */
const char *srv_fixture(const char *name);
const char *srv_minilm(void);

typedef struct http_resp {
    long status;
    char *body;
    size_t len;
    char *headers;          /* raw header block */
    cJSON *json;            /* body parsed as JSON, or NULL */
} http_resp;

/* One request on a fresh connection. headers: NULL-terminated "Name: value"
 * lines, or NULL (then a JSON content type is sent with a body). */
int http_do(const srv *s, const char *method, const char *path, const char *body, size_t len,
            const char *const *headers, http_resp *out);
int http_post(const srv *s, const char *path, const char *json, http_resp *out);
int http_get(const srv *s, const char *path, http_resp *out);
/* The sum of a Prometheus series' values over its labels in a /metrics
 * body (name followed by '{'), 0 when absent. */
double srv_metric(const char *text, const char *name);
void http_resp_free(http_resp *r);
/* A header's value (case-insensitive name) copied into buf, or NULL. */
const char *http_header(const http_resp *r, const char *name, char *buf, size_t cap);

/* Keep-alive client for one thread. */
typedef struct http_client http_client;
http_client *http_client_new(const srv *s);
void http_client_free(http_client *c);
int http_client_post(http_client *c, const char *path, const char *json, http_resp *out);
int http_client_get(http_client *c, const char *path, http_resp *out);

/* NULL-safe field access for checks: a missing field reads as "(missing)" / NaN. */
const char *jstr(const cJSON *obj, const char *key);
double jnum(const cJSON *obj, const char *key);
int jint(const cJSON *obj, const char *key); /* -1 when missing */

/* POSTs body to path and checks the reply: its status, and where given its
 * first detail item's loc joined by '.' (then also that it has a msg
 * string), its type, and a msg holding msg_has (FastAPI-shaped errors). */
void srv_expect_detail(const srv *s, const char *path, const char *body, long status, const char *loc,
                       const char *type, const char *msg_has);

/* Floats of a JSON array (malloc'd), count in *n. */
float *json_floats(const cJSON *arr, int *n);
/* Decodes standard base64 into malloc'd bytes. */
unsigned char *b64_decode(const char *s, size_t *n);

/* Raw socket: connects to the server (TCP or Unix), -1 on failure. */
int raw_connect(const srv *s);
/* Sends all bytes; reads the reply until the peer closes or timeout_ms passes (malloc'd, NUL-terminated). */
char *raw_exchange(const srv *s, const char *req, size_t len, int timeout_ms);

/* Reads from fd until `want` appears in what arrived, the peer closes or
 * timeout_ms pass; 1 when it appeared. */
int raw_read_until(int fd, const char *want, int timeout_ms);
/* Writes all of s to fd: 0, or -1. */
int raw_send_str(int fd, const char *s);

/* A value of a Prometheus series in /metrics text, or -1. */
double metric_value(const char *metrics, const char *series);

#endif
