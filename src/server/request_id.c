/* Request ids (see request_id.h). */
#include "server/request_id.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int iv_request_id_valid(const char *s)
{
    if (!s || !*s) return 0;
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= IV_REQUEST_ID_MAX || (unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e) return 0;
    return 1;
}

/* splitmix64: only when getrandom fails (it does not block once the pool
 * is initialised, which it is long before a server answers requests). */
static uint64_t fallback_bits(void)
{
    static _Atomic uint64_t state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = atomic_fetch_add(&state, 0x9e3779b97f4a7c15ull) + (uint64_t)ts.tv_nsec * 0x100000001b3ull +
                 (uint64_t)ts.tv_sec;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void iv_random_hex(char *out, int n_bytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[32];
    if (n_bytes > (int)sizeof raw) n_bytes = (int)sizeof raw;
    if (getrandom(raw, (size_t)n_bytes, GRND_NONBLOCK) != (ssize_t)n_bytes)
        for (int i = 0; i < n_bytes; i += 8) {
            const uint64_t z = fallback_bits();
            memcpy(raw + i, &z, (size_t)(n_bytes - i < 8 ? n_bytes - i : 8));
        }
    for (int i = 0; i < n_bytes; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * n_bytes] = 0;
}

void iv_request_id(const char *given, char out[IV_REQUEST_ID_MAX + 1])
{
    if (iv_request_id_valid(given)) strcpy(out, given);
    else iv_random_hex(out, 16);
}

void iv_log_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!cap) return;
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        const int plain = c >= 0x20 && c <= 0x7e && c != '\\';
        if (o + (plain ? 1 : 4) >= cap) break;
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
}
