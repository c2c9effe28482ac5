#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int g_level = IV_LOG_INFO;
static int g_json = 0;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void iv_log_set_level(int level) { g_level = level; }
void iv_log_set_json(int on) { g_json = on; }

static void json_escape_to(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

void iv_log(int level, const char *fmt, ...)
{
    if (level < g_level) return;
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&g_lock);
    if (g_json) {
        fprintf(stderr, "{\"timestamp\":\"%s.%06ldZ\",\"level\":\"%s\",\"message\":\"", when,
                ts.tv_nsec / 1000, names[level]);
        json_escape_to(stderr, msg);
        fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s.%06ldZ %5s %s\n", when, ts.tv_nsec / 1000, names[level], msg);
    }
    pthread_mutex_unlock(&g_lock);
}
