/* The chat-template renderer against jinja2 as transformers configures it:
 * tests/fixtures/jinja/cases.json holds templates, contexts and the output
 * (or the failure) of transformers' own environment, made by
 * tools/gen_jinja_cases.py; every case must match byte for byte. Below,
 * each compile-time rejection and each limit has its own test. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"
#include "chat/jinja.h"
#include "test.h"

#define CASES_PATH "tests/fixtures/jinja/cases.json"

/* Renders t with ctx_json; returns 0 and the output in out, or -1 with err. */
static int render(const char *t, const char *ctx_json, iv_strbuf *out, iv_err *err)
{
    iv_jinja *j;
    if (iv_jinja_compile(&j, t, strlen(t), err)) return -1;
    cJSON *ctx = ctx_json ? cJSON_Parse(ctx_json) : NULL;
    int rc = iv_jinja_render(j, ctx, out, err);
    cJSON_Delete(ctx);
    iv_jinja_free(j);
    return rc;
}

TEST(jinja_cases_match_transformers)
{
    char *text;
    size_t len;
    iv_err err;
    REQUIRE(iv_file_read_all(CASES_PATH, 64u << 20, &text, &len, &err) == 0);
    cJSON *cases = cJSON_ParseWithLength(text, len);
    iv_json_mark_floats(cases, text, len);
    free(text);
    REQUIRE(cases && cJSON_IsArray(cases));
    int n = 0, failed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        n++;
        const char *t = cJSON_GetObjectItem(c, "t")->valuestring;
        const cJSON *ctx = cJSON_GetObjectItem(c, "ctx");
        const cJSON *want = cJSON_GetObjectItem(c, "out");
        const cJSON *want_err = cJSON_GetObjectItem(c, "err");
        iv_jinja *j;
        int crc = iv_jinja_compile(&j, t, strlen(t), &err);
        if (want_err && !strcmp(want_err->valuestring, "compile")) {
            if (crc == 0) {
                iv_jinja_free(j);
                failed++;
                iv_test_fail(__FILE__, __LINE__, "case %d compiled but jinja2 rejects it: %s", n, t);
            } else if (err.code != IV_E_UNSUPPORTED && err.code != IV_E_FORMAT) {
                failed++;
                iv_test_fail(__FILE__, __LINE__, "case %d: compile error code %d: %s", n, err.code, t);
            }
            continue;
        }
        /* Stricter than jinja2 on purpose: an include or a call of an
         * unknown function fails at compile here, at render there. */
        if (crc && want_err && err.code == IV_E_UNSUPPORTED) continue;
        if (crc) {
            failed++;
            iv_test_fail(__FILE__, __LINE__, "case %d does not compile (%s): %s", n, err.msg, t);
            continue;
        }
        iv_strbuf out;
        iv_sb_init(&out);
        int rrc = iv_jinja_render(j, ctx, &out, &err);
        iv_jinja_free(j);
        if (want_err) {
            if (rrc == 0) {
                failed++;
                iv_test_fail(__FILE__, __LINE__, "case %d rendered \"%.*s\" but jinja2 fails (%s): %s", n,
                             (int)out.len, out.data ? out.data : "", cJSON_GetObjectItem(c, "msg")->valuestring, t);
            } else if (err.code != IV_E_INVALID) {
                failed++;
                iv_test_fail(__FILE__, __LINE__, "case %d: render error code %d: %s", n, err.code, t);
            }
        } else if (rrc) {
            failed++;
            iv_test_fail(__FILE__, __LINE__, "case %d fails (%s): %s", n, err.msg, t);
        } else if (out.len != strlen(want->valuestring) || memcmp(out.data ? out.data : "", want->valuestring, out.len)) {
            failed++;
            iv_test_fail(__FILE__, __LINE__, "case %d: %s\n   got: [%.*s]\n  want: [%s]", n, t, (int)out.len,
                         out.data ? out.data : "", want->valuestring);
        }
        iv_sb_free(&out);
    }
    cJSON_Delete(cases);
    if (failed) fprintf(stderr, "jinja cases: %d of %d failed\n", failed, n);
    CHECK(n > 500);
}

static void expect_compile_error(const char *t, int code, const char *needle)
{
    iv_jinja *j = NULL;
    iv_err err;
    int rc = iv_jinja_compile(&j, t, strlen(t), &err);
    CHECK_MSG(rc == -1, "compiled: %s", t);
    if (rc == 0) {
        iv_jinja_free(j);
        return;
    }
    CHECK_MSG(err.code == code, "%s: code %d, want %d (%s)", t, err.code, code, err.msg);
    CHECK_CONTAINS(err.msg, needle);
}

TEST(jinja_rejects_unsupported_statements)
{
    expect_compile_error("{% include 'x.j2' %}", IV_E_UNSUPPORTED, "\"include\" is not supported");
    expect_compile_error("a\n{% extends 'base' %}", IV_E_UNSUPPORTED, "line 2: statement \"extends\"");
    expect_compile_error("{% import 'm' as m %}", IV_E_UNSUPPORTED, "\"import\"");
    expect_compile_error("{% from 'm' import x %}", IV_E_UNSUPPORTED, "\"from\"");
    expect_compile_error("{% block body %}{% endblock %}", IV_E_UNSUPPORTED, "\"block\"");
    expect_compile_error("{% frobnicate %}", IV_E_UNSUPPORTED, "statement \"frobnicate\" is not supported");
    expect_compile_error("{% for x in l recursive %}{% endfor %}", IV_E_UNSUPPORTED, "recursive");
}

TEST(jinja_rejects_unknown_filters_tests_functions)
{
    expect_compile_error("x\n\n{{ a|foo }}", IV_E_UNSUPPORTED, "chat template line 3: filter \"foo\" is not supported");
    expect_compile_error("{{ a is prime }}", IV_E_UNSUPPORTED, "test \"prime\" is not supported");
    expect_compile_error("{{ lipsum() }}", IV_E_UNSUPPORTED, "function \"lipsum\" is not supported");
    expect_compile_error("{{ xs|map('upper')|foo.bar }}", IV_E_UNSUPPORTED, "filter \"foo.bar\"");
}

TEST(jinja_rejects_syntax_errors)
{
    expect_compile_error("{% if x %}", IV_E_FORMAT, "expected 'elif'");
    expect_compile_error("{% for x in y %}{% endif %}", IV_E_FORMAT, "unexpected 'endif'");
    expect_compile_error("{{ x ", IV_E_FORMAT, "unclosed");
    expect_compile_error("{% if x ", IV_E_FORMAT, "unclosed");
    expect_compile_error("{# never closed", IV_E_FORMAT, "comment");
    expect_compile_error("{% raw %}never closed", IV_E_FORMAT, "raw");
    expect_compile_error("{{ 'open }}", IV_E_FORMAT, "string");
    expect_compile_error("{{ (1 }}", IV_E_FORMAT, "line 1");
    expect_compile_error("{{ 1 + }}", IV_E_FORMAT, "expected an expression");
    expect_compile_error("{% break %}", IV_E_FORMAT, "outside of a loop");
    expect_compile_error("{{ \"\\xZZ\" }}", IV_E_FORMAT, "escape");
    expect_compile_error("\xff{{ x }}", IV_E_FORMAT, "UTF-8");
}

TEST(jinja_runtime_errors_are_invalid)
{
    iv_strbuf out;
    iv_sb_init(&out);
    iv_err err;
    CHECK(render("{{ raise_exception('Only user and assistant roles') }}", NULL, &out, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_CONTAINS(err.msg, "Only user and assistant roles");
    CHECK(render("{{ x.y }}", "{}", &out, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_CONTAINS(err.msg, "'x' is undefined");
    CHECK(render("{{ messages.append(1) }}", "{\"messages\": []}", &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "unsafe");
    CHECK(render("{{ '{}'.format() }}", NULL, &out, &err) == -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_EQ_INT(out.len, 0); /* nothing appended on failure */
    iv_sb_free(&out);
}

TEST(jinja_limits)
{
    iv_strbuf out;
    iv_sb_init(&out);
    iv_err err;
    /* Output: 'x' * 2^20 printed 100 times exceeds 64 MiB. */
    CHECK(render("{% set s = 'x' * 1048576 %}{% for i in range(100) %}{{ s }}{% endfor %}", NULL, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "output exceeds");
    /* Steps: nested loops of 100000 x 100000 iterations. */
    CHECK(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &out,
                 &err) == -1);
    CHECK_CONTAINS(err.msg, "steps");
    /* Depth: unbounded macro recursion. */
    CHECK(render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", NULL, &out, &err) == -1);
    CHECK_CONTAINS(err.msg, "nested deeper");
    /* Parser nesting. */
    char deep[2100];
    memset(deep, '(', 1000);
    memcpy(deep + 1000, "1", 1);
    memset(deep + 1001, ')', 1000);
    deep[2001] = 0;
    char t[2200];
    snprintf(t, sizeof t, "{{ %s }}", deep);
    expect_compile_error(t, IV_E_UNSUPPORTED, "nested too deeply");
    CHECK_EQ_INT(out.len, 0);
    iv_sb_free(&out);
}

TEST(jinja_renders_concurrently_shared_template)
{
    /* Rendering never writes to the template: two renders of one compiled
     * template with different contexts give each its own answer. */
    iv_jinja *j;
    iv_err err;
    const char *t = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
    REQUIRE(iv_jinja_compile(&j, t, strlen(t), &err) == 0);
    cJSON *a = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    cJSON *b = cJSON_Parse("{\"messages\":[{\"role\":\"assistant\",\"content\":1.5}]}");
    iv_strbuf oa, ob;
    iv_sb_init(&oa);
    iv_sb_init(&ob);
    CHECK(iv_jinja_render(j, a, &oa, &err) == 0);
    CHECK(iv_jinja_render(j, b, &ob, &err) == 0);
    iv_sb_putc(&oa, 0);
    iv_sb_putc(&ob, 0);
    CHECK_STR(oa.data, "user:hi;");
    CHECK_STR(ob.data, "assistant:1.5;");
    iv_sb_free(&oa);
    iv_sb_free(&ob);
    cJSON_Delete(a);
    cJSON_Delete(b);
    iv_jinja_free(j);
}

TEST(jinja_json_numbers_keep_float_form)
{
    /* json.loads makes 1.0 a float and 1 an int; iv_json_parse marks the
     * numbers written with a fraction or an exponent so the renderer prints
     * them as Python does (the integral_float_args golden cases). Numbers
     * inside strings and keys are not numbers. */
    const char *doc = "{\"1.5\":[1,1.0,-2.0,1e2,\"3.0\",{\"k\":3E0,\"j\":-0}],\"c\":2.50,\"n\":7}";
    cJSON *j;
    iv_err err;
    REQUIRE(iv_json_parse(doc, strlen(doc), "doc", &j, &err) == 0);
    const cJSON *a = cJSON_GetObjectItem(j, "1.5");
    CHECK(!iv_json_is_float(cJSON_GetArrayItem(a, 0)));
    CHECK(iv_json_is_float(cJSON_GetArrayItem(a, 1)));
    CHECK(iv_json_is_float(cJSON_GetArrayItem(a, 2)));
    CHECK(iv_json_is_float(cJSON_GetArrayItem(a, 3)));
    CHECK(iv_json_is_float(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 5), "k")));
    CHECK(!iv_json_is_float(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 5), "j")));
    CHECK(iv_json_is_float(cJSON_GetObjectItem(j, "c")));
    CHECK(!iv_json_is_float(cJSON_GetObjectItem(j, "n")));
    iv_jinja *t;
    const char *src = "{{ v }} {{ v|tojson }} {{ w }} {{ x }}";
    REQUIRE(iv_jinja_compile(&t, src, strlen(src), &err) == 0);
    cJSON *ctx = NULL;
    const char *ctx_text = "{\"v\":[1.0,-2.0,1e2,3],\"w\":4.0,\"x\":5}";
    REQUIRE(iv_json_parse(ctx_text, strlen(ctx_text), "ctx", &ctx, &err) == 0);
    iv_strbuf out;
    iv_sb_init(&out);
    CHECK(iv_jinja_render(t, ctx, &out, &err) == 0);
    iv_sb_putc(&out, 0);
    /* str([1.0, -2.0, 100.0, 3]), json.dumps of it, 4.0, 5 */
    CHECK_STR(out.data, "[1.0, -2.0, 100.0, 3] [1.0, -2.0, 100.0, 3] 4.0 5");
    iv_sb_free(&out);
    cJSON_Delete(ctx);
    cJSON_Delete(j);
    iv_jinja_free(t);
}
