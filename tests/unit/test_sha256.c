/* SHA-256 against the FIPS 180-4 / NIST example vectors, and streaming in
 * uneven pieces equal to hashing at once. */
#include "base/sha256.h"
#include "test.h"

TEST(sha256_known_vectors)
{
    char hex[65];
    iv_sha256_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    iv_sha256_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    iv_sha256_hex(m448, strlen(m448), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                       "klmnopqrlmnopqrsmnopqrstnopqrstu";
    iv_sha256_hex(m896, strlen(m896), hex);
    CHECK_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(sha256_million_a_streamed)
{
    /* One million 'a' fed in 1000-byte pieces (the NIST long-message vector). */
    char block[1000];
    memset(block, 'a', sizeof block);
    iv_sha256 s;
    iv_sha256_init(&s);
    for (int i = 0; i < 1000; i++) iv_sha256_update(&s, block, sizeof block);
    char hex[65];
    iv_sha256_final_hex(&s, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256_uneven_chunks_match_one_shot)
{
    /* Lengths around the 55/56/64-byte padding boundaries, split at every offset. */
    unsigned char data[200];
    for (int i = 0; i < 200; i++) data[i] = (unsigned char)(i * 37 + 11);
    int lens[] = {55, 56, 63, 64, 65, 119, 120, 128, 200};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int n = lens[li];
        char whole[65];
        iv_sha256_hex(data, (size_t)n, whole);
        for (int cut = 0; cut <= n; cut++) {
            iv_sha256 s;
            iv_sha256_init(&s);
            iv_sha256_update(&s, data, (size_t)cut);
            iv_sha256_update(&s, data + cut, (size_t)(n - cut));
            char hex[65];
            iv_sha256_final_hex(&s, hex);
            CHECK_MSG(!strcmp(hex, whole), "len %d cut %d: %s != %s", n, cut, hex, whole);
        }
    }
    /* And one value checked against an independent implementation (python hashlib):
     * sha256 of bytes((i*37+11)&255 for i in range(200)). */
    char hex[65];
    iv_sha256_hex(data, 200, hex);
    CHECK_STR(hex, "5e48d64839a8bff5e2471507af6a49f9990817df437857f4a2007df41266e1b5");
}
