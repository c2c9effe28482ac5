/* safetensors loader. A file is [u64 LE header length][JSON header][data];
 * the header maps each tensor name to {dtype, shape, data_offsets} relative
 * to the data section, plus an optional "__metadata__" object of strings.
 *
 * Everything in the header is treated as hostile: lengths, offsets and
 * shapes are checked against the bytes actually present before any tensor
 * pointer is formed, and each failure names the file and the field. Once a
 * checkpoint is open its entries sit in one array sorted by name, so lookups
 * are a binary search and prefix queries a lower-bound search. */
#include "tensor/safetensors.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/file.h"
#include "base/json.h"
#include "base/log.h"

/* More dims than this is not a tensor any model has: the header is corrupt.
 * Between IV_MAX_DIMS and this, the tensor is indexed but not loadable (see
 * st_entry.ndim). Vision towers store Conv3d kernels with 5 dims, and a
 * text-only load of such a checkpoint must still open it. */
#define ST_PARSE_MAX_DIMS 8
/* model.safetensors.index.json is a name -> file map; real ones are < 1 MiB. */
#define ST_INDEX_MAX_BYTES (64u << 20)

typedef struct st_entry {
    char *name;
    int shard;
    int ndim;                       /* as stored; > IV_MAX_DIMS means not loadable */
    int64_t dims[ST_PARSE_MAX_DIMS];
    uint64_t begin, end;            /* byte range within the shard's data section */
    iv_tensor raw;                  /* file dtype, pointing into the shard's bytes */
    iv_tensor f32;                  /* F32 view, valid when has_f32 */
    float *owned;                   /* converted copy behind f32, or NULL when it points into the file */
    int has_f32;
    int released;                   /* its mapped bytes were given back: nothing reads them any more */
} st_entry;

typedef struct st_shard {
    char *path;          /* file path, or the caller's name for a memory image */
    iv_mapped_file map;  /* data NULL for memory images */
} st_shard;

typedef struct st_kv {
    char *key, *value;
} st_kv;

struct iv_weights {
    char *origin;        /* the file or directory, for error messages */
    st_shard *shards;
    int n_shards;
    st_entry *entries;   /* sorted by name once open */
    int n_entries, cap_entries;
    st_kv *meta;         /* first shard to define a key wins */
    int n_meta, cap_meta;
};

/* ---------- small helpers ---------- */

static int oom(iv_err *err, const char *what) { return iv_errf(err, IV_E_NOMEM, "out of memory reading %s", what); }

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static const char *dims_str(const int64_t *dims, int ndim, char *buf, size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
    return buf;
}

static iv_weights *weights_new(const char *origin)
{
    iv_weights *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->origin = strdup(origin);
    if (!w->origin) {
        free(w);
        return NULL;
    }
    return w;
}

/* Adds a shard record (not yet mapped); returns its index or -1. */
static int add_shard(iv_weights *w, const char *path)
{
    st_shard *s = realloc(w->shards, (size_t)(w->n_shards + 1) * sizeof *s);
    if (!s) return -1;
    w->shards = s;
    memset(&s[w->n_shards], 0, sizeof *s);
    s[w->n_shards].path = strdup(path);
    if (!s[w->n_shards].path) return -1;
    return w->n_shards++;
}

/* Safetensors dtypes that are well-formed but that no kernel here reads:
 * refusing them is "unsupported", not "corrupt". */
static int is_known_unsupported_dtype(const char *name)
{
    static const char *const k[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",
                                     "U16",     "U32",     "U64",     "C64",     "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(name, k[i]) == 0) return 1;
    return 0;
}

/* ---------- header parsing ---------- */

static int parse_metadata(iv_weights *w, const char *what, const cJSON *md, iv_err *err)
{
    if (!cJSON_IsObject(md))
        return iv_errf(err, IV_E_FORMAT, "%s: \"__metadata__\" must be an object of strings", what);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, md)
    {
        if (!cJSON_IsString(kv))
            return iv_errf(err, IV_E_FORMAT, "%s: \"__metadata__\" value \"%.200s\" is not a string", what,
                           kv->string);
        if (iv_weights_metadata(w, kv->string)) continue; /* earlier shard wins */
        if (grow((void **)&w->meta, &w->cap_meta, w->n_meta + 1, sizeof *w->meta)) return oom(err, what);
        st_kv *m = &w->meta[w->n_meta];
        m->key = strdup(kv->string);
        m->value = strdup(kv->valuestring);
        if (!m->key || !m->value) {
            free(m->key);
            free(m->value);
            return oom(err, what);
        }
        w->n_meta++;
    }
    return 0;
}

/* Reads a JSON number that must be a non-negative integer. */
static int get_uint(const cJSON *v, uint64_t *out)
{
    if (!iv_json_is_integer(v) || v->valuedouble < 0) return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static int parse_entry(iv_weights *w, int shard, const char *name, const cJSON *v,
                       const unsigned char *base, uint64_t data_size, iv_err *err)
{
    const char *what = w->shards[shard].path;
    if (!cJSON_IsObject(v))
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": entry must be an object with dtype, shape and data_offsets",
                       what, name);

    const cJSON *jdt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    if (!cJSON_IsString(jdt))
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": \"dtype\" is missing or not a string", what, name);
    int dt = iv_dtype_from_safetensors(jdt->valuestring);
    if (dt < 0) {
        if (is_known_unsupported_dtype(jdt->valuestring))
            return iv_errf(err, IV_E_UNSUPPORTED, "%s: tensor \"%.200s\" has dtype %s, which infinity_v3 does not support",
                           what, name, jdt->valuestring);
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\" has unknown dtype \"%.64s\"", what, name,
                       jdt->valuestring);
    }

    const cJSON *jshape = cJSON_GetObjectItemCaseSensitive(v, "shape");
    if (!cJSON_IsArray(jshape))
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": \"shape\" is missing or not an array", what, name);
    int ndim = cJSON_GetArraySize(jshape);
    if (ndim > ST_PARSE_MAX_DIMS)
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": shape has %d dims, more than the %d allowed", what,
                       name, ndim, ST_PARSE_MAX_DIMS);
    int64_t dims[ST_PARSE_MAX_DIMS];
    uint64_t numel = 1;
    int overflow = 0, i = 0;
    const cJSON *jd;
    cJSON_ArrayForEach(jd, jshape)
    {
        uint64_t d;
        if (get_uint(jd, &d))
            return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": shape dim %d is not a non-negative integer", what,
                           name, i);
        dims[i++] = (int64_t)d;
        if (__builtin_mul_overflow(numel, d, &numel)) overflow = 1;
    }
    uint64_t nbytes = 0;
    if (overflow || numel > (uint64_t)INT64_MAX || __builtin_mul_overflow(numel, iv_dtype_size(dt), &nbytes)) {
        char sb[256];
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": shape %s has too many elements (overflows 64 bits)",
                       what, name, dims_str(dims, ndim, sb, sizeof sb));
    }

    const cJSON *joff = cJSON_GetObjectItemCaseSensitive(v, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(joff) || cJSON_GetArraySize(joff) != 2 || get_uint(cJSON_GetArrayItem(joff, 0), &begin) ||
        get_uint(cJSON_GetArrayItem(joff, 1), &end))
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": \"data_offsets\" must be [begin, end] with non-negative integers",
                       what, name);
    if (begin > end)
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": data_offsets begin %llu is after end %llu", what, name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": data_offsets end %llu is past the data section (%llu bytes); the file may be truncated",
                       what, name, (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != nbytes) {
        char sb[256];
        return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\": data_offsets span %llu bytes but %s shape %s needs %llu",
                       what, name, (unsigned long long)(end - begin), jdt->valuestring,
                       dims_str(dims, ndim, sb, sizeof sb), (unsigned long long)nbytes);
    }

    if (grow((void **)&w->entries, &w->cap_entries, w->n_entries + 1, sizeof *w->entries)) return oom(err, what);
    st_entry *e = &w->entries[w->n_entries];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return oom(err, what);
    e->shard = shard;
    e->ndim = ndim;
    memcpy(e->dims, dims, (size_t)ndim * sizeof dims[0]);
    e->begin = begin;
    e->end = end;
    e->raw.dtype = (iv_dtype)dt;
    e->raw.device = IV_CPU;
    e->raw.ndim = ndim <= IV_MAX_DIMS ? ndim : 0;
    if (ndim <= IV_MAX_DIMS) memcpy(e->raw.shape, dims, (size_t)ndim * sizeof dims[0]);
    /* The tensor API has no const view; the bytes are mapped read-only. */
    e->raw.data = (void *)(uintptr_t)(base + begin);
    w->n_entries++;
    return 0;
}

typedef struct st_range {
    uint64_t begin, end;
    int entry;
} st_range;

static int cmp_range(const void *a, const void *b)
{
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Tensors of one image [first, n_entries) must not share bytes: a writer
 * never produces that, and a reader that allows it can be tricked into
 * aliasing weights. */
static int check_overlaps(iv_weights *w, int first, const char *what, iv_err *err)
{
    int n = w->n_entries - first;
    if (n < 2) return 0;
    st_range *r = malloc((size_t)n * sizeof *r);
    if (!r) return oom(err, what);
    for (int i = 0; i < n; i++) r[i] = (st_range){w->entries[first + i].begin, w->entries[first + i].end, first + i};
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    for (int i = 1; i < n; i++) {
        if (r[i - 1].end > r[i].begin) {
            const st_entry *a = &w->entries[r[i - 1].entry], *b = &w->entries[r[i].entry];
            iv_errf(err, IV_E_FORMAT, "%s: tensors \"%.200s\" [%llu, %llu) and \"%.200s\" [%llu, %llu) overlap", what,
                    a->name, (unsigned long long)a->begin, (unsigned long long)a->end, b->name,
                    (unsigned long long)b->begin, (unsigned long long)b->end);
            free(r);
            return -1;
        }
    }
    free(r);
    return 0;
}

static int is_json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Parses one safetensors image into w as shard `shard`. */
static int parse_image(iv_weights *w, int shard, const unsigned char *data, size_t size, iv_err *err)
{
    const char *what = w->shards[shard].path;
    if (size < 8)
        return iv_errf(err, IV_E_FORMAT, "%s: %zu bytes is too short for a safetensors file (the header length alone takes 8)",
                       what, size);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)data[i] << (8 * i);
    if (hlen > IV_SAFETENSORS_MAX_HEADER)
        return iv_errf(err, IV_E_FORMAT, "%s: header length %llu exceeds the %u byte limit (corrupt or not a safetensors file)",
                       what, (unsigned long long)hlen, IV_SAFETENSORS_MAX_HEADER);
    if (hlen > size - 8)
        return iv_errf(err, IV_E_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes); the file is truncated",
                       what, (unsigned long long)hlen, size);

    /* A private NUL-terminated copy: the parser then never depends on the
     * mapping's bounds, and the header is small next to the data. */
    char *text = malloc((size_t)hlen + 1);
    if (!text) return oom(err, what);
    memcpy(text, data + 8, (size_t)hlen);
    text[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &end, 0);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        free(text);
        return iv_errf(err, IV_E_FORMAT, "%s: header is not valid JSON (error near byte %zu of %llu)", what, off,
                       (unsigned long long)hlen);
    }
    /* Writers pad the header with spaces; anything else after the object is corrupt. */
    for (const char *p = end; p < text + hlen; p++) {
        if (!is_json_space((unsigned char)*p)) {
            size_t off = (size_t)(p - text);
            cJSON_Delete(root);
            free(text);
            return iv_errf(err, IV_E_FORMAT, "%s: header has trailing bytes after the JSON object (byte %zu)", what, off);
        }
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return iv_errf(err, IV_E_FORMAT, "%s: header is not a JSON object", what);
    }

    const unsigned char *base = data + 8 + hlen;
    uint64_t data_size = (uint64_t)(size - 8 - (size_t)hlen);
    int first = w->n_entries, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, "__metadata__") == 0) rc = parse_metadata(w, what, it, err);
        else rc = parse_entry(w, shard, it->string, it, base, data_size, err);
        if (rc) break;
    }
    cJSON_Delete(root);
    if (rc) return -1;
    return check_overlaps(w, first, what, err);
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* Sorts the entries by name and rejects a name stored twice. */
static int finish(iv_weights *w, iv_err *err)
{
    if (w->n_entries > 1) qsort(w->entries, (size_t)w->n_entries, sizeof *w->entries, cmp_entry_name);
    for (int i = 1; i < w->n_entries; i++) {
        const st_entry *a = &w->entries[i - 1], *b = &w->entries[i];
        if (strcmp(a->name, b->name) != 0) continue;
        if (a->shard == b->shard)
            return iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\" is listed twice in the header",
                           w->shards[a->shard].path, a->name);
        return iv_errf(err, IV_E_FORMAT, "tensor \"%.200s\" is stored in two shards: %s and %s", a->name,
                       w->shards[a->shard].path, w->shards[b->shard].path);
    }
    return 0;
}

static st_entry *find_entry(const iv_weights *w, const char *name)
{
    int lo = 0, hi = w->n_entries;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(w->entries[mid].name, name);
        if (c == 0) return &w->entries[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Maps path as shard and parses it. */
static int load_file_shard(iv_weights *w, const char *path, int *shard_out, iv_err *err)
{
    int s = add_shard(w, path);
    if (s < 0) return oom(err, path);
    if (iv_file_map(&w->shards[s].map, path, err)) return -1;
    if (shard_out) *shard_out = s;
    return parse_image(w, s, w->shards[s].map.data, w->shards[s].map.size, err);
}

/* ---------- public: opening ---------- */

/* The whole pages of [p, p + n) inside a file mapping go back to the kernel
 * (read-only private mappings: touching them again re-reads the file). */
static void release_mapped(const iv_weights *w, const char *p, size_t n)
{
    for (int i = 0; i < w->n_shards; i++) {
        const char *base = (const char *)w->shards[i].map.data;
        if (!base || p < base || p + n > base + w->shards[i].map.size) continue;
        const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        const uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

void iv_weights_release(iv_weights *w, const iv_tensor *t)
{
    for (int i = 0; i < w->n_entries; i++) {
        st_entry *e = &w->entries[i];
        if (e->owned && t == &e->f32) {
            /* A converted copy: freed, and converted again if asked for.
             * A reader that ignored the contract faults on NULL instead of
             * reading freed memory. */
            free(e->owned);
            e->owned = NULL;
            e->f32.data = NULL;
            e->has_f32 = 0;
            return;
        }
    }
    for (int i = 0; i < w->n_entries; i++)
        if (w->entries[i].raw.data == t->data) w->entries[i].released = 1;
    release_mapped(w, t->data, iv_tensor_nbytes(t));
}

/* The pages [lo, hi) of a file mapping replaced by anonymous memory
 * holding the same bytes, at the same addresses (pointers taken at load
 * stay valid): a fresh anonymous mapping is filled, then moved over the
 * range by mremap, atomically. Copy-on-write would not do: truncating a
 * file zaps even a private mapping's copied pages (unmap_mapping_range with
 * even_cows), and the next read past the new end is SIGBUS. */
static int own_range(uintptr_t lo, uintptr_t hi)
{
    const size_t n = hi - lo;
    void *fresh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) return -1;
    memcpy(fresh, (const void *)lo, n);
    if (mprotect(fresh, n, PROT_READ) ||
        mremap(fresh, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)lo) == MAP_FAILED) {
        munmap(fresh, n);
        return -1;
    }
    return 0;
}

typedef struct page_range {
    uintptr_t lo, hi;
} page_range;

static int cmp_page_range(const void *a, const void *b)
{
    const page_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int iv_weights_own_mapped(iv_weights *w, iv_err *err)
{
    if (!w || !w->n_entries) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    page_range *r = malloc((size_t)w->n_entries * sizeof *r);
    if (!r) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < w->n_entries; i++) {
        const st_entry *e = &w->entries[i];
        if (!e->has_f32 || e->owned || e->released || w->shards[e->shard].map.data == NULL) continue;
        const uintptr_t p = (uintptr_t)e->f32.data, len = iv_tensor_nbytes(&e->f32);
        if (!len) continue;
        r[n++] = (page_range){p / page * page, (p + len + page - 1) / page * page};
    }
    /* Tensors share their edge pages: move each run of touching pages once. */
    qsort(r, (size_t)n, sizeof *r, cmp_page_range);
    size_t bytes = 0;
    for (int i = 0; i < n;) {
        page_range run = r[i++];
        for (; i < n && r[i].lo <= run.hi; i++)
            if (r[i].hi > run.hi) run.hi = r[i].hi;
        if (own_range(run.lo, run.hi)) {
            free(r);
            return iv_errf(err, IV_E_NOMEM, "cannot copy %zu bytes of %s into memory: %s", (size_t)(run.hi - run.lo),
                           w->origin, strerror(errno));
        }
        bytes += run.hi - run.lo;
    }
    free(r);
    if (bytes) IV_DEBUG("%s: %.1f MiB read in place now held in memory", w->origin, (double)bytes / 1048576.0);
    return 0;
}

void iv_weights_close(iv_weights *w)
{
    if (!w) return;
    for (int i = 0; i < w->n_entries; i++) {
        free(w->entries[i].name);
        free(w->entries[i].owned);
    }
    free(w->entries);
    for (int i = 0; i < w->n_shards; i++) {
        iv_file_unmap(&w->shards[i].map);
        free(w->shards[i].path);
    }
    free(w->shards);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    free(w->origin);
    free(w);
}

int iv_weights_open_memory(iv_weights **out, const void *data, size_t size, const char *what, iv_err *err)
{
    *out = NULL;
    if (!what) what = "safetensors image";
    iv_weights *w = weights_new(what);
    if (!w || add_shard(w, what) < 0) {
        iv_weights_close(w);
        return oom(err, what);
    }
    if (parse_image(w, 0, data, size, err) || finish(w, err)) {
        iv_weights_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

int iv_weights_open_file(iv_weights **out, const char *path, iv_err *err)
{
    *out = NULL;
    iv_weights *w = weights_new(path);
    if (!w) return oom(err, path);
    if (load_file_shard(w, path, NULL, err) || finish(w, err)) {
        iv_weights_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

typedef struct st_mapping {
    const char *tensor, *file;
    int shard;
} st_mapping;

static int cmp_mapping_file(const void *a, const void *b)
{
    return strcmp(((const st_mapping *)a)->file, ((const st_mapping *)b)->file);
}

/* A shard name is a file inside the checkpoint directory. */
static int shard_name_ok(const char *f)
{
    if (!*f || f[0] == '/') return 0;
    for (const char *p = f; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
        if (!slash) break;
        p = slash + 1;
    }
    return 1;
}

/* Opens every shard listed by index (once each) and checks that each tensor
 * the index names lives in the shard it says. */
static int open_index(iv_weights *w, const char *dir, const char *index_path, iv_err *err)
{
    cJSON *root;
    if (iv_json_load_file(index_path, ST_INDEX_MAX_BYTES, &root, err)) return -1;
    const cJSON *wm = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return iv_errf(err, IV_E_FORMAT, "%s: \"weight_map\" is missing or not an object", index_path);
    }
    int n = cJSON_GetArraySize(wm);
    if (n == 0) {
        cJSON_Delete(root);
        return iv_errf(err, IV_E_FORMAT, "%s: \"weight_map\" lists no tensors", index_path);
    }
    st_mapping *m = malloc((size_t)n * sizeof *m);
    if (!m) {
        cJSON_Delete(root);
        return oom(err, index_path);
    }
    int k = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, wm)
    {
        if (!cJSON_IsString(it) || !shard_name_ok(it->valuestring)) {
            rc = iv_errf(err, IV_E_FORMAT, "%s: tensor \"%.200s\" must map to a shard file name inside the directory",
                         index_path, it->string);
            break;
        }
        m[k++] = (st_mapping){it->string, it->valuestring, -1};
    }
    if (!rc) qsort(m, (size_t)k, sizeof *m, cmp_mapping_file);
    char path[PATH_MAX];
    for (int i = 0; !rc && i < k; i++) {
        if (i > 0 && strcmp(m[i].file, m[i - 1].file) == 0) {
            m[i].shard = m[i - 1].shard;
            continue;
        }
        iv_path_join(path, sizeof path, dir, m[i].file);
        if (!iv_file_exists(path)) {
            rc = iv_errf(err, IV_E_NOTFOUND, "%s maps tensor \"%.200s\" to shard %s, which does not exist in %s",
                         index_path, m[i].tensor, m[i].file, dir);
            break;
        }
        rc = load_file_shard(w, path, &m[i].shard, err);
    }
    if (!rc) rc = finish(w, err);
    for (int i = 0; !rc && i < k; i++) {
        const st_entry *e = find_entry(w, m[i].tensor);
        if (!e)
            rc = iv_errf(err, IV_E_FORMAT, "%s lists tensor \"%.200s\" in shard %s, but that shard does not contain it",
                         index_path, m[i].tensor, m[i].file);
        else if (e->shard != m[i].shard)
            rc = iv_errf(err, IV_E_FORMAT, "%s lists tensor \"%.200s\" in shard %s, but it is stored in %s", index_path,
                         m[i].tensor, m[i].file, w->shards[e->shard].path);
    }
    free(m);
    cJSON_Delete(root);
    return rc;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The first PyTorch pickle checkpoint in dir (pytorch_model.bin preferred), or 0. */
static int find_pickle(const char *dir, char *name, size_t cap)
{
    char path[PATH_MAX];
    if (iv_file_exists(iv_path_join(path, sizeof path, dir, "pytorch_model.bin"))) {
        snprintf(name, cap, "pytorch_model.bin");
        return 1;
    }
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        if (!(has_suffix(de->d_name, ".bin") || has_suffix(de->d_name, ".pt") || has_suffix(de->d_name, ".pth")))
            continue;
        if (iv_file_exists(iv_path_join(path, sizeof path, dir, de->d_name))) {
            snprintf(name, cap, "%s", de->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

int iv_weights_open_dir(iv_weights **out, const char *dir, iv_err *err)
{
    *out = NULL;
    char path[PATH_MAX];
    if (!iv_dir_exists(dir)) return iv_errf(err, IV_E_NOTFOUND, "model directory %s does not exist", dir);
    if (iv_file_exists(iv_path_join(path, sizeof path, dir, "model.safetensors")))
        return iv_weights_open_file(out, path, err);
    if (iv_file_exists(iv_path_join(path, sizeof path, dir, "model.safetensors.index.json"))) {
        iv_weights *w = weights_new(dir);
        if (!w) return oom(err, path);
        if (open_index(w, dir, path, err)) {
            iv_weights_close(w);
            return -1;
        }
        *out = w;
        return 0;
    }
    char pickle[256];
    if (find_pickle(dir, pickle, sizeof pickle))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "%s has no model.safetensors, only %s; safetensors is required (convert with: python -c "
                       "\"from transformers import AutoModel; AutoModel.from_pretrained('%s').save_pretrained('%s', "
                       "safe_serialization=True)\", or the safetensors convert script)",
                       dir, pickle, dir, dir);
    return iv_errf(err, IV_E_NOTFOUND, "%s has no model.safetensors or model.safetensors.index.json", dir);
}

/* ---------- public: queries ---------- */

const iv_tensor *iv_weights_find(const iv_weights *w, const char *name)
{
    const st_entry *e = find_entry(w, name);
    return e && e->ndim <= IV_MAX_DIMS ? &e->raw : NULL;
}

int iv_weights_count(const iv_weights *w) { return w->n_entries; }

const char *iv_weights_name(const iv_weights *w, int i)
{
    return i >= 0 && i < w->n_entries ? w->entries[i].name : NULL;
}

int iv_weights_has_prefix(const iv_weights *w, const char *prefix)
{
    size_t n = strlen(prefix);
    int lo = 0, hi = w->n_entries;
    while (lo < hi) { /* first name >= prefix */
        int mid = lo + (hi - lo) / 2;
        if (strcmp(w->entries[mid].name, prefix) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->n_entries && strncmp(w->entries[lo].name, prefix, n) == 0;
}

const char *iv_weights_metadata(const iv_weights *w, const char *key)
{
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0) return w->meta[i].value;
    return NULL;
}

static int entry_f32(iv_weights *w, st_entry *e, const char *name, const iv_tensor **out, iv_err *err);

int iv_weights_f32(iv_weights *w, const char *name, int ndim, const int64_t *shape, const iv_tensor **out,
                   iv_err *err)
{
    *out = NULL;
    st_entry *e = find_entry(w, name);
    if (!e) return iv_errf(err, IV_E_NOTFOUND, "tensor \"%s\" not found in %s", name, w->origin);
    char have[256], want[256];
    if (e->ndim > IV_MAX_DIMS)
        return iv_errf(err, IV_E_UNSUPPORTED, "tensor \"%s\" has shape %s: %d dims, more than the %d supported", name,
                       dims_str(e->dims, e->ndim, have, sizeof have), e->ndim, IV_MAX_DIMS);
    if (ndim < 0 || ndim > IV_MAX_DIMS)
        return iv_errf(err, IV_E_INTERNAL, "tensor \"%s\": expected rank %d is out of range", name, ndim);
    if (ndim > 0 && (ndim != e->ndim || memcmp(shape, e->dims, (size_t)ndim * sizeof shape[0]) != 0))
        return iv_errf(err, IV_E_FORMAT, "tensor %s has shape %s, expected %s", name,
                       dims_str(e->dims, e->ndim, have, sizeof have), dims_str(shape, ndim, want, sizeof want));
    return entry_f32(w, e, name, out, err);
}

int iv_weights_f32_matrix(iv_weights *w, const char *name, int64_t rows, int64_t cols, const iv_tensor **out,
                          iv_err *err)
{
    *out = NULL;
    st_entry *e = find_entry(w, name);
    if (!e) return iv_errf(err, IV_E_NOTFOUND, "tensor \"%s\" not found in %s", name, w->origin);
    int64_t rest = 1;
    for (int i = 1; i < e->ndim; i++) rest *= e->dims[i];
    char have[256];
    if (e->ndim < 2 || e->dims[0] != rows || rest != cols)
        return iv_errf(err, IV_E_FORMAT, "tensor %s has shape %s, expected [%lld, ...] with %lld values per row", name,
                       dims_str(e->dims, e->ndim, have, sizeof have), (long long)rows, (long long)cols);
    if (e->has_f32 && (e->f32.ndim != 2 || e->f32.shape[1] != cols))
        return iv_errf(err, IV_E_INTERNAL, "tensor \"%s\" was already read with another shape", name);
    /* Row-major data is the same bytes whatever the rank: only the header
     * (the raw view of a tensor no other reader can load) becomes 2-D. */
    e->raw.ndim = 2;
    e->raw.shape[0] = rows;
    e->raw.shape[1] = cols;
    return entry_f32(w, e, name, out, err);
}

static int entry_f32(iv_weights *w, st_entry *e, const char *name, const iv_tensor **out, iv_err *err)
{
    if (e->has_f32) {
        *out = &e->f32;
        return 0;
    }
    iv_dtype dt = e->raw.dtype;
    if (dt != IV_F32 && dt != IV_F16 && dt != IV_BF16 && dt != IV_F64)
        return iv_errf(err, IV_E_FORMAT, "tensor \"%s\" has dtype %s; a float tensor (F32, F16, BF16, F64) is expected",
                       name, iv_dtype_name(dt));
    e->f32 = e->raw;
    e->f32.dtype = IV_F32;
    if (dt != IV_F32 || (uintptr_t)e->raw.data % sizeof(float) != 0) {
        int64_t n = iv_tensor_numel(&e->raw);
        size_t bytes;
        if (__builtin_mul_overflow((size_t)n, sizeof(float), &bytes) || bytes > SIZE_MAX - 64)
            return iv_errf(err, IV_E_NOMEM, "tensor \"%s\" is too large to convert", name);
        bytes = (bytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple of the alignment */
        if (bytes == 0) bytes = 64;
        e->owned = aligned_alloc(64, bytes);
        if (!e->owned) return iv_errf(err, IV_E_NOMEM, "out of memory converting tensor \"%s\" to F32", name);
        iv_convert_to_f32(e->owned, e->raw.data, dt, n);
        e->f32.data = e->owned;
        /* The file's copy has been read: only the converted one stays
         * resident (a BF16 checkpoint would otherwise keep both). */
        release_mapped(w, e->raw.data, iv_tensor_nbytes(&e->raw));
    }
    e->has_f32 = 1;
    *out = &e->f32;
    return 0;
}
