/* Every real chat template under tests/fixtures/chat_templates/, loaded as a
 * checkpoint (iv_chat_template_load) and applied to every conversation of its
 * cases.jsonl: the text must equal transformers' rendering byte for byte
 * (tools/gen_chat_fixtures.py), and where transformers raised, rendering must
 * fail with IV_E_INVALID. A mismatch prints the first differing offset with
 * the text around it on both sides. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/file.h"
#include "base/json.h"
#include "chat/chat_template.h"
#include "test.h"

/* The instant gen_chat_fixtures.py fixes the clock at (NOW there). */
static struct tm fixture_now(void)
{
    struct tm t = {0};
    t.tm_year = 2025 - 1900;
    t.tm_mon = 2;
    t.tm_mday = 4;
    t.tm_hour = 5;
    t.tm_min = 6;
    t.tm_sec = 7;
    t.tm_isdst = -1;
    mktime(&t); /* fills tm_wday and tm_yday for %a, %A, %j */
    return t;
}

/* Replaces every occurrence of from by to in *s (a malloc'd string). */
static void replace_all(char **s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    if (!fl || !strcmp(from, to)) return;
    iv_strbuf b;
    iv_sb_init(&b);
    const char *p = *s;
    for (const char *q; (q = strstr(p, from)); p = q + fl) {
        iv_sb_append(&b, p, (size_t)(q - p));
        iv_sb_append(&b, to, tl);
    }
    iv_sb_puts(&b, p);
    free(*s);
    *s = b.data ? b.data : strdup("");
}

/* A template that read the clock rendered the fixture's date; ours renders
 * today's: put today's in the expected text for each format it used. */
static void expect_today(char **expected, const cJSON *now)
{
    struct tm then = fixture_now();
    time_t t = time(NULL);
    struct tm today;
    localtime_r(&t, &today);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(now, "formats"))
    {
        char a[128], b[128];
        if (!cJSON_IsString(f) || !strftime(a, sizeof a, f->valuestring, &then) ||
            !strftime(b, sizeof b, f->valuestring, &today))
            continue;
        replace_all(expected, a, b);
    }
}

/* A template's own raise_exception("...") (TemplateError in transformers)
 * must reach the user word for word; other Python errors are worded by
 * Python, so only the failure itself is compared for them. */
static int raised_text_in(const char *py_error, const char *ours)
{
    const char *prefix = "TemplateError: ";
    if (strncmp(py_error, prefix, strlen(prefix))) return 1;
    return strstr(ours, py_error + strlen(prefix)) != NULL;
}

static void show_diff(const char *folder, const char *id, const char *want, const char *got, size_t got_len)
{
    size_t i = 0, wl = strlen(want);
    while (i < wl && i < got_len && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    int wn = (int)((wl - from) < 100 ? wl - from : 100), gn = (int)((got_len - from) < 100 ? got_len - from : 100);
    iv_test_fail(__FILE__, __LINE__, "%s/%s: differs at byte %zu (want %zu bytes, got %zu)\n      want: %.*s\n      got:  %.*s",
                 folder, id, i, wl, got_len, wn, want + from, gn, got + from);
}

/* Runs one template folder's cases; counts into *n_cases, *n_match and *n_fail. */
static void check_folder(const char *folder, int *n_cases, int *n_match, int *n_fail)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/chat_templates/%s", iv_test_fixtures_dir(), folder);
    snprintf(path, sizeof path, "%s/cases.jsonl", dir);
    char *all = NULL;
    size_t len = 0;
    iv_err err = {0};
    if (iv_file_read_all(path, 1 << 26, &all, &len, &err)) return; /* a folder without cases */
    iv_chat_template *ct = NULL;
    if (iv_chat_template_load(&ct, dir, &err) || !ct) {
        iv_test_fail(__FILE__, __LINE__, "%s: load failed: %s", folder, ct ? "" : err.msg);
        (*n_fail)++;
        free(all);
        return;
    }
    iv_strbuf out;
    iv_sb_init(&out);
    for (char *line = all, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *c = cJSON_Parse(line);
        if (!c) continue;
        iv_json_mark_floats(c, line, strlen(line));
        const char *id = iv_json_str(c, "id", "?");
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "expected");
        const cJSON *tname = cJSON_GetObjectItemCaseSensitive(c, "template_name");
        iv_sb_reset(&out);
        int rc = iv_chat_template_render(ct, cJSON_GetObjectItemCaseSensitive(c, "messages"),
                                         cJSON_GetObjectItemCaseSensitive(c, "tools"),
                                         cJSON_GetObjectItemCaseSensitive(c, "kwargs"),
                                         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
                                         cJSON_IsString(tname) ? tname->valuestring : NULL, &out, &err);
        (*n_cases)++;
        if (cJSON_IsString(exp)) {
            char *want = strdup(exp->valuestring);
            const cJSON *now = cJSON_GetObjectItemCaseSensitive(c, "now");
            if (now) expect_today(&want, now);
            if (rc) {
                iv_test_fail(__FILE__, __LINE__, "%s/%s: render failed: %s", folder, id, err.msg);
                (*n_fail)++;
            } else if (out.len != strlen(want) || memcmp(out.data ? out.data : "", want, out.len)) {
                show_diff(folder, id, want, out.data ? out.data : "", out.len);
                (*n_fail)++;
            } else {
                (*n_match)++;
            }
            free(want);
        } else if (!rc || err.code != IV_E_INVALID) {
            iv_test_fail(__FILE__, __LINE__, "%s/%s: transformers raised (%s) but we %s", folder, id,
                         iv_json_str(c, "error", "?"), rc ? err.msg : "rendered");
            (*n_fail)++;
        } else if (!raised_text_in(iv_json_str(c, "error", ""), err.msg)) {
            iv_test_fail(__FILE__, __LINE__, "%s/%s: the template's raise_exception text is lost: want \"%s\", got \"%s\"",
                         folder, id, iv_json_str(c, "error", ""), err.msg);
            (*n_fail)++;
        } else {
            (*n_match)++;
        }
        cJSON_Delete(c);
    }
    iv_sb_free(&out);
    iv_chat_template_free(ct);
    free(all);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(chat_templates_match_transformers)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/chat_templates", iv_test_fixtures_dir());
    DIR *d = opendir(root);
    REQUIRE(d);
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;)
        if (e->d_name[0] != '.' && strcmp(e->d_name, "PROVENANCE.md")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int total = 0, match = 0, templates = 0;
    for (int i = 0; i < n; i++) {
        int cases = 0, ok = 0, fail = 0;
        check_folder(names[i], &cases, &ok, &fail);
        if (cases) {
            templates++;
            printf("    %-40s %4d/%4d\n", names[i], ok, cases);
        }
        total += cases;
        match += ok;
        free(names[i]);
    }
    printf("    %d templates, %d/%d cases as transformers renders them\n", templates, match, total);
    CHECK(templates >= 12);
    CHECK(total >= 300);
}
