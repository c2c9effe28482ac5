/* Logging to stderr: plain text, or one JSON object per line (--json-output). */
#ifndef IV_BASE_LOG_H
#define IV_BASE_LOG_H

enum iv_log_level { IV_LOG_DEBUG, IV_LOG_INFO, IV_LOG_WARN, IV_LOG_ERROR };

void iv_log_set_level(int level);
void iv_log_set_json(int on);
void iv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define IV_INFO(...) iv_log(IV_LOG_INFO, __VA_ARGS__)
#define IV_WARN(...) iv_log(IV_LOG_WARN, __VA_ARGS__)
#define IV_ERROR(...) iv_log(IV_LOG_ERROR, __VA_ARGS__)
#define IV_DEBUG(...) iv_log(IV_LOG_DEBUG, __VA_ARGS__)

#endif
