/* SHA-256 (FIPS 180-4), streaming. Used to verify files downloaded from the
 * Hugging Face hub, whose LFS etags are the sha256 of the content. */
#ifndef IV_BASE_SHA256_H
#define IV_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct iv_sha256 {
    uint32_t h[8];
    uint64_t total;        /* bytes hashed so far */
    unsigned char buf[64]; /* pending partial block */
    size_t buf_len;
} iv_sha256;

void iv_sha256_init(iv_sha256 *s);
void iv_sha256_update(iv_sha256 *s, const void *data, size_t len);
/* Finishes the hash; s must be re-initialised before reuse. */
void iv_sha256_final(iv_sha256 *s, unsigned char digest[32]);
/* Finishes the hash as 64 lowercase hex digits plus NUL. */
void iv_sha256_final_hex(iv_sha256 *s, char hex[65]);
/* One-shot convenience. */
void iv_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
