/* Minimal test framework. A test is `TEST(name) { ... }` in any .c file under
 * tests/unit, tests/golden or tests/integration; it registers itself and the
 * runner (tests/runner.c) runs all of them, or those whose name contains
 * argv[1]. The runner's last line is "N passed, N failed". */
#ifndef IV_TESTS_TEST_H
#define IV_TESTS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* IV_TEST_SANITIZED: 1 in an AddressSanitizer build, where tests that run a
 * large real model take fewer inputs (it runs ~15x slower there). */
#if defined(__SANITIZE_ADDRESS__)
#define IV_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IV_TEST_SANITIZED 1
#endif
#endif
#ifndef IV_TEST_SANITIZED
#define IV_TEST_SANITIZED 0
#endif

typedef void (*iv_test_fn)(void);
void iv_test_register(const char *name, const char *file, iv_test_fn fn);
/* Records a failure of the running test (with a message) and returns 0. */
int iv_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Marks the running test skipped (e.g. an optional model is absent). */
void iv_test_skip(const char *why);
int iv_test_failed(void);
/* Called (from a signal handler: async-signal-safe calls only) when the
 * running test exceeds its time limit, just before the runner exits. */
void iv_test_on_timeout(void (*fn)(void));

#define TEST(name)                                                              \
    static void test_##name(void);                                              \
    __attribute__((constructor)) static void register_##name(void)             \
    {                                                                           \
        iv_test_register(#name, __FILE__, test_##name);                         \
    }                                                                           \
    static void test_##name(void)

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) iv_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);      \
    } while (0)
/* Stops the test when the condition fails. */
#define REQUIRE(cond)                                                           \
    do {                                                                        \
        if (!(cond)) {                                                          \
            iv_test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);             \
            return;                                                             \
        }                                                                       \
    } while (0)
#define CHECK_MSG(cond, ...)                                                    \
    do {                                                                        \
        if (!(cond)) iv_test_fail(__FILE__, __LINE__, __VA_ARGS__);             \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                      \
    do {                                                                        \
        long long _a = (long long)(a), _b = (long long)(b);                     \
        if (_a != _b) iv_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b); \
    } while (0)
#define CHECK_STR(a, b)                                                         \
    do {                                                                        \
        const char *_a = (a), *_b = (b);                                        \
        if (!_a || !_b || strcmp(_a, _b))                                       \
            iv_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); \
    } while (0)
#define CHECK_CONTAINS(hay, needle)                                             \
    do {                                                                        \
        const char *_h = (hay), *_n = (needle);                                 \
        if (!_h || !strstr(_h, _n))                                             \
            iv_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", _h ? _h : "(null)", _n); \
    } while (0)

/* Numeric comparison helpers. */
double iv_test_cosine(const float *a, const float *b, int64_t n);
double iv_test_max_abs_diff(const float *a, const float *b, int64_t n);

/* Root of the committed fixtures (tests/fixtures) and of fetched models
 * (.cache/models); both overridable by IV_FIXTURES / IV_MODELS. */
const char *iv_test_fixtures_dir(void);
const char *iv_test_models_dir(void);
/* Path of the infinity_v3 binary under test (IV_BIN), for integration tests. */
const char *iv_test_binary(void);

#endif
