#include "engine/device_list.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int all_digits(const char *s, size_t n)
{
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

int iv_device_list_parse(const char *spec, iv_device_list *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) spec = "cpu";
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!len) return iv_errf(err, IV_E_INVALID, "--device \"%s\" has an empty entry", spec);
        if (out->n == IV_MAX_REPLICAS)
            return iv_errf(err, IV_E_INVALID, "--device \"%s\" lists more than %d replicas", spec, IV_MAX_REPLICAS);
        char *name = out->names[out->n];
        if (all_digits(p, len)) {
            /* "cuda:0,1": a bare number is another GPU of the previous kind. */
            if (!out->n || strncmp(out->names[out->n - 1], "cuda", 4))
                return iv_errf(err, IV_E_INVALID,
                               "--device \"%s\": the bare number %.*s needs a cuda entry before it (cuda:0,1)", spec,
                               (int)len, p);
            if (len + 5 >= IV_DEVICE_NAME_MAX)
                return iv_errf(err, IV_E_INVALID, "--device \"%s\": device number %.*s is too long", spec, (int)len, p);
            snprintf(name, IV_DEVICE_NAME_MAX, "cuda:%.*s", (int)len, p);
        } else {
            if (len >= IV_DEVICE_NAME_MAX)
                return iv_errf(err, IV_E_INVALID, "--device \"%s\": entry \"%.*s\" is too long", spec, (int)len, p);
            memcpy(name, p, len);
            name[len] = 0;
        }
        out->n++;
        if (!comma) return 0;
        p = comma + 1;
    }
}

int iv_device_list_cpu_count(const iv_device_list *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++) n += !strcmp(l->names[i], "cpu");
    return n;
}
