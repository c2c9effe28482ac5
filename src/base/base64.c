#include "base/base64.h"

#include <stdlib.h>

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int iv_base64_decode(const char *s, size_t n, size_t max_bytes, const char *what, uint8_t **out, size_t *out_n,
                     iv_err *err)
{
    *out = NULL;
    *out_n = 0;
    /* Four characters carry three bytes: refuse what cannot fit early. */
    if (n / 4 * 3 > max_bytes + 3)
        return iv_errf(err, IV_E_TOO_LARGE, "%s data is %zu characters, over the limit of %zu bytes", what, n,
                       max_bytes);
    uint8_t *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return iv_errf(err, IV_E_NOMEM, "out of memory decoding base64");
    size_t o = 0, pad = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_space(c)) continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad) {
            free(buf);
            if (pad) return iv_errf(err, IV_E_INVALID, "invalid base64 %s data: characters after the '=' padding", what);
            return iv_errf(err, IV_E_INVALID, "invalid base64 %s data: unexpected character 0x%02x at offset %zu",
                           what, c, i);
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* 6 leftover bits is a lone character, which no encoder writes. */
    if (bits == 6 || pad > 2) {
        free(buf);
        return iv_errf(err, IV_E_INVALID, "invalid base64 %s data: its length is not a valid base64 length", what);
    }
    if (o > max_bytes) {
        free(buf);
        return iv_errf(err, IV_E_TOO_LARGE, "%s is %zu bytes, over the limit of %zu bytes", what, o, max_bytes);
    }
    *out = buf;
    *out_n = o;
    return 0;
}
