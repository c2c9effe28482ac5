/* Replays fuzz inputs without libFuzzer (sqlite's way): linked with one
 * tests/fuzz/fuzz_*.c target by the normal compiler, it feeds every file of
 * the directories (or files) it is given to LLVMFuzzerTestOneInput, in name
 * order. `make test` runs each target over its seeds and its committed
 * corpus in the release and the ASan+UBSan builds, so an input a fuzzing run
 * once found stays a test. A crash or a sanitizer report fails the run. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return -1;
    }
    size_t n = (size_t)st.st_size;
    /* A private copy of exactly n bytes, so reading past it is a sanitizer report. */
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every regular file of dir, sorted; returns the count or -1. */
static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0; /* a target without a committed corpus yet */
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) break;
            names = grown;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int count = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (names[i] && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path)) rc = -1;
            else count++;
        }
        free(names[i]);
    }
    free(names);
    return rc ? -1 : count;
}

int main(int argc, char **argv)
{
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n = stat(argv[i], &st) == 0 && S_ISREG(st.st_mode) ? (run_file(argv[i]) ? -1 : 1) : run_dir(argv[i]);
        if (n < 0) return 1;
        total += n;
    }
    printf("%s: %d inputs replayed\n", argv[0], total);
    return 0;
}
