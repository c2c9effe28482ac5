/* The CUDA attention kernels (src/ops/cuda/cuda_attention.cu) run on the CPU
 * under emu_rt.h, against a double-precision reference: no GPU needed. It
 * checks the kernel's logic (fragment layouts, masks, online softmax,
 * tiling, zero fill, barriers and cp.async ordering under random warp
 * schedules), not the PTX strings or the timing. q/k/v/out are NaN-padded
 * windows (reads outside a view poison results, writes outside are seen)
 * and every "device" buffer ends at a PROT_NONE page (reads past bias,
 * key_mask, cu_seqlens or the QKV buffer fault).
 *
 * Build and run from the repository root (x86-64; CUDA headers only):
 *   mkdir -p build/gpu_emu
 *   python3 tests/gpu/emu/gen_attention_emu.py src/ops/cuda/cuda_attention.cu build/gpu_emu/attention_emu.cpp
 *   g++ -std=c++17 -O2 -Isrc -Itests/gpu/emu -I/usr/local/cuda/include -w build/gpu_emu/attention_emu.cpp \
 *       tests/gpu/emu/emu_rt.cpp tests/gpu/emu/attention_emu_check.cpp -o build/gpu_emu/attention_emu_check
 *   build/gpu_emu/attention_emu_check            # fixed cases, bf16 and f16 (~15 s)
 *   build/gpu_emu/attention_emu_check stress 200 # random shapes and flags
 * With MAX_GRID_Z 5 passed to the generator, `attention_emu_check many`
 * covers the launch loop over grid z chunks. Exit status 1 on a failure. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "ops/cuda/cuda_internal.h"
#include "emu_rt.h"
#include "emu_harness.h"



static uint16_t to16(float x, iv_dtype dt)
{
    if (dt == IV_BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    return __half_as_ushort(__float2half_rn(x));
}
static float from16(uint16_t x, iv_dtype dt)
{
    if (dt == IV_BF16) return __bfloat162float(__ushort_as_bfloat16(x));
    return __half2float(__ushort_as_half(x));
}
static uint16_t nan16(iv_dtype dt) { return dt == IV_BF16 ? 0x7fc0 : 0x7e00; }
static const uint16_t SENTINEL = 0x7fff;


struct Case {
    const char *name;
    int H, KV, d, causal, wl, wr, alibi, bias, km;
    float softcap, q_range;
    int odd;
    int cap_after; /* softcap_after_bias (Gemma4's audio attention) */
};

static int run(const Case &c, iv_dtype dt, const std::vector<int> &lens, uint64_t seed, int defer)
{
    rs = seed;
    emu.rng = seed * 2654435761ull + 1;
    emu.defer_pct = defer;
    const int n = (int)lens.size();
    std::vector<int32_t> cu(n + 1, 0);
    int max_len = 0;
    for (int s = 0; s < n; s++) {
        cu[s + 1] = cu[s] + lens[s];
        max_len = std::max(max_len, lens[s]);
    }
    const int64_t T = cu[n], d = c.d, qw = c.H * d, kw = c.KV * d;
    const int64_t col0 = c.odd ? 1 : 0, ld = qw + 2 * kw + (c.odd ? 3 : 8), o_ld = qw + (c.odd ? 3 : 8), pad = 2;
    const int64_t rows = T + 2 * pad;
    uint16_t *qkv = (uint16_t *)guarded(rows * ld * 2, 256);
    for (int64_t i = 0; i < rows * ld; i++) qkv[i] = nan16(dt);
    for (int64_t t = 0; t < T; t++) {
        uint16_t *row = qkv + (pad + t) * ld + col0;
        for (int64_t k = 0; k < qw; k++) row[k] = to16(runi(-fabsf(c.q_range), fabsf(c.q_range)), dt);
        for (int64_t k = qw; k < qw + 2 * kw; k++) row[k] = to16(runi(-1, 1), dt);
    }
    uint16_t *out = (uint16_t *)guarded(rows * o_ld * 2, 256);
    for (int64_t i = 0; i < rows * o_ld; i++) out[i] = SENTINEL;
    int32_t *cu_dev = (int32_t *)guarded((n + 1) * 4, 4);
    memcpy(cu_dev, cu.data(), (n + 1) * 4);

    iv_attn_args a;
    memset(&a, 0, sizeof a);
    uint16_t *base = qkv + pad * ld + col0;
    a.q = iv_view_make(base, dt, T, qw, ld);
    a.k = iv_view_make(base + qw, dt, T, kw, ld);
    a.v = iv_view_make(base + qw + kw, dt, T, kw, ld);
    a.out = iv_view_make(out + pad * o_ld + col0, dt, T, qw, o_ld);
    a.cu_seqlens = cu.data();
    a.cu_seqlens_dev = cu_dev;
    a.n_seqs = n;
    a.max_seqlen = max_len;
    a.n_heads = c.H;
    a.n_kv_heads = c.KV;
    a.head_dim = c.d;
    a.scale = (c.q_range < 0 ? -1.0f : 1.0f) / sqrtf((float)c.d);
    a.causal = c.causal;
    a.window_left = c.wl;
    a.window_right = c.wr;
    a.softcap = c.softcap;
    a.softcap_after_bias = c.cap_after;
    std::vector<float> slopes(c.H);
    for (int h = 0; h < c.H; h++) slopes[h] = powf(2.0f, -8.0f * (h + 1) / c.H);
    if (c.alibi) a.alibi_slopes = slopes.data();
    std::vector<int64_t> boff(n);
    float *bias = NULL;
    if (c.bias) {
        int64_t total = 0;
        for (int s = 0; s < n; s++) {
            boff[s] = total;
            total += (int64_t)c.H * lens[s] * lens[s];
        }
        bias = (float *)guarded(total * 4, 4);
        for (int64_t i = 0; i < total; i++) bias[i] = runi(-2, 2);
        int64_t *boff_dev = (int64_t *)guarded(n * 8, 8);
        memcpy(boff_dev, boff.data(), n * 8);
        a.bias = bias;
        a.bias_offsets = boff.data();
        a.bias_offsets_dev = boff_dev;
    }
    uint8_t *km = NULL;
    if (c.km) {
        km = (uint8_t *)guarded(T > 0 ? T : 1, 1);
        for (int s = 0; s < n; s++)
            for (int t = cu[s]; t < cu[s + 1]; t++) km[t] = t == cu[s] ? 0 : (rnext() % 5 != 0);
        a.key_mask = km;
    }
    g_err = 0;
    emu.collectives = 0;
    iv_cuda_attention(NULL, &a);
    if (g_err) {
        printf("%s: error %s\n", c.name, g_msg);
        free_all();
        return 0;
    }
    /* reference */
    double max_err = 0, dot = 0, ng = 0, nw = 0;
    int64_t bad_zero = 0, nans = 0, outside = 0;
    const int group = c.H / c.KV;
    for (int s = 0; s < n; s++) {
        const int64_t b0 = cu[s], len = lens[s];
        std::vector<double> sc(len > 0 ? len : 1);
        std::vector<char> vis(len > 0 ? len : 1);
        for (int64_t i = 0; i < len; i++)
            for (int h = 0; h < c.H; h++) {
                const int kvh = h / group;
                double mx = -INFINITY;
                for (int64_t j = 0; j < len; j++) {
                    vis[j] = (!c.causal || j <= i) && (c.wl < 0 || i - j <= c.wl) && (c.wr < 0 || j - i <= c.wr) &&
                             (!km || km[b0 + j]);
                    if (!vis[j]) continue;
                    double dd = 0;
                    for (int k = 0; k < d; k++)
                        dd += (double)from16(qkv[(pad + b0 + i) * ld + col0 + h * d + k], dt) *
                              from16(qkv[(pad + b0 + j) * ld + col0 + qw + kvh * d + k], dt);
                    double v = dd * a.scale;
                    if (c.softcap != 0 && !c.cap_after) v = c.softcap * tanh(v / c.softcap);
                    if (bias) v += bias[boff[s] + (h * len + i) * len + j];
                    if (c.softcap != 0 && c.cap_after) v = c.softcap * tanh(v / c.softcap);
                    if (c.alibi) v -= slopes[h] * fabs((double)(i - j));
                    sc[j] = v;
                    mx = std::max(mx, v);
                }
                double sum = 0;
                for (int64_t j = 0; j < len; j++)
                    if (vis[j]) sum += (sc[j] = exp(sc[j] - mx));
                for (int k = 0; k < d; k++) {
                    double w = 0;
                    if (sum > 0)
                        for (int64_t j = 0; j < len; j++)
                            if (vis[j]) w += sc[j] / sum * from16(qkv[(pad + b0 + j) * ld + col0 + qw + kw + kvh * d + k], dt);
                    const uint16_t raw = out[(pad + b0 + i) * o_ld + col0 + h * d + k];
                    const double g = from16(raw, dt);
                    if (g != g) {
                        nans++;
                        continue;
                    }
                    if (sum == 0 && raw != 0) bad_zero++;
                    max_err = std::max(max_err, fabs(g - w));
                    dot += g * w;
                    ng += g * g;
                    nw += w * w;
                }
            }
    }
    for (int64_t t = 0; t < rows; t++)
        for (int64_t k = 0; k < o_ld; k++) {
            const bool inside = t >= pad && t < pad + T && k >= col0 && k < col0 + qw;
            if (!inside && out[t * o_ld + k] != SENTINEL) outside++;
        }
    const double cosv = ng > 0 && nw > 0 ? dot / sqrt(ng * nw) : (ng == nw ? 1 : 0);
    const double tol = dt == IV_BF16 ? 2e-2 : 4e-3;
    const int pass = !nans && !bad_zero && !outside && max_err <= tol && cosv >= 0.9995;
    printf("emu %s %s (defer %d%%): max abs err %.3g, cosine %.6f%s%s%s, %llu collectives: %s\n",
           dt == IV_BF16 ? "bf16" : "f16", c.name, defer, max_err, cosv, nans ? ", NaN" : "",
           bad_zero ? ", nonzero empty rows" : "", outside ? ", writes outside" : "",
           (unsigned long long)emu.collectives, pass ? "PASS" : "FAIL");
    fflush(stdout);
    free_all();
    return pass;
}

int main(int argc, char **argv)
{
    const Case cases[] = {
        {"d32 bidir", 2, 2, 32, 0, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d64 causal gqa", 4, 2, 64, 1, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d64 bidir", 2, 2, 64, 0, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d80 causal", 2, 2, 80, 1, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d128 bidir gqa", 4, 2, 128, 0, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d128 causal", 2, 2, 128, 1, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d256 causal", 2, 1, 256, 1, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d192 window", 2, 2, 192, 1, 64, -1, 0, 0, 0, 0, 1, 0},
        {"d8 bidir", 2, 2, 8, 0, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d40 bidir", 2, 2, 40, 0, -1, -1, 0, 0, 0, 0, 1, 0},
        {"d64 window 37/11", 2, 2, 64, 0, 37, 11, 0, 0, 0, 0, 1, 0},
        {"d64 window right 5", 2, 2, 64, 0, -1, 5, 0, 0, 0, 0, 1, 0},
        {"d64 alibi", 2, 2, 64, 0, -1, -1, 1, 0, 0, 0, 1, 0},
        {"d64 bias", 2, 2, 64, 0, -1, -1, 0, 1, 0, 0, 1, 0},
        {"d64 key mask", 2, 2, 64, 0, -1, -1, 0, 0, 1, 0, 1, 0},
        {"d128 causal key mask", 2, 1, 128, 1, -1, -1, 0, 0, 1, 0, 1, 0},
        {"d64 softcap", 2, 2, 64, 0, -1, -1, 0, 0, 0, 2, 4, 0},
        {"d80 everything", 4, 2, 80, 1, 40, -1, 1, 1, 1, 8, 3, 0},
        {"d96 everything", 3, 3, 96, 0, 50, 20, 1, 1, 1, 8, 3, 0},
        {"d256 everything", 2, 1, 256, 0, 100, 100, 1, 1, 1, 8, 3, 0},
        {"d64 odd", 4, 2, 64, 1, -1, -1, 0, 0, 0, 0, 1, 1},
        {"d128 odd", 2, 2, 128, 0, -1, -1, 0, 0, 0, 0, 1, 1},
        {"d17 everything odd", 4, 2, 17, 1, 30, -1, 1, 1, 1, 8, 3, 1},
        {"d64 negative scale", 2, 2, 64, 1, -1, -1, 0, 0, 0, 0, -1, 0},
        {"d64 softcap after bias", 2, 2, 64, 0, 11, -1, 0, 1, 0, 5, 4, 0, 1},
        {"d32 softcap after bias, alibi", 4, 2, 32, 1, -1, -1, 1, 1, 1, 8, 3, 1, 1},
    };
    const std::vector<int> lens = {1, 7, 0, 33, 130, 200, 64};
    if (argc > 1 && !strcmp(argv[1], "stress")) {
        const int n_iter = argc > 2 ? atoi(argv[2]) : 50;
        int f = 0;
        for (int it = 0; it < n_iter; it++) {
            rs = 5000 + it;
            const int dims[] = {8, 16, 17, 24, 32, 40, 48, 56, 64, 72, 80, 96, 100, 112, 128, 144, 160, 192, 200, 256};
            Case c;
            c.name = "stress";
            c.d = dims[rnext() % 20];
            c.KV = 1 + (int)(rnext() % 3);
            c.H = c.KV * (1 + (int)(rnext() % 3));
            c.causal = rnext() % 2;
            c.wl = rnext() % 3 == 0 ? (int)(rnext() % 300) : -1;
            c.wr = rnext() % 3 == 0 ? (int)(rnext() % 300) : -1;
            c.alibi = rnext() % 3 == 0;
            c.bias = rnext() % 3 == 0;
            c.km = rnext() % 3 == 0;
            c.softcap = rnext() % 4 == 0 ? 5.0f : 0.0f;
            c.q_range = (c.softcap != 0 ? 3.0f : 1.0f) * (rnext() % 8 == 0 ? -1.0f : 1.0f);
            c.odd = rnext() % 4 == 0;
            c.cap_after = c.softcap != 0 && rnext() % 2;
            std::vector<int> L(1 + rnext() % 5);
            for (auto &l : L) l = rnext() % 4 == 0 ? (int)(rnext() % 600) : (int)(rnext() % 140);
            printf("[%d] d %d H %d/%d causal %d wl %d wr %d alibi %d bias %d km %d softcap %g odd %d lens", it, c.d, c.H,
                   c.KV, c.causal, c.wl, c.wr, c.alibi, c.bias, c.km, c.softcap, c.odd);
            for (int l : L) printf(" %d", l);
            printf("\n");
            const uint64_t seed = rnext();
            f += !run(c, it % 2 ? IV_F16 : IV_BF16, L, seed, (int)(seed % 101));
        }
        printf("stress: %d of %d failed\n", f, n_iter);
        return f != 0;
    }
    if (argc > 1 && !strcmp(argv[1], "many")) {
        std::vector<int> L(23);
        for (size_t s = 0; s < L.size(); s++) L[s] = (int)(s % 3) + 1;
        const Case c = {"23 short sequences", 2, 1, 32, 1, -1, -1, 0, 0, 0, 0, 1, 0};
        return !run(c, IV_BF16, L, 7, 50);
    }
    int only = argc > 1 ? atoi(argv[1]) : -1;
    int failed = 0, total = 0;
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int ci = 0; ci < nc; ci++) {
        if (only >= 0 && ci != only) continue;
        for (int k = 0; k < 2; k++) {
            const int defer = (ci + k) % 3 == 0 ? 0 : (ci + k) % 3 == 1 ? 100 : 50;
            total++;
            failed += !run(cases[ci], k ? IV_F16 : IV_BF16, lens, 100 + ci * 7 + k, defer);
        }
    }
    printf("emu: %d of %d passed\n", total - failed, total);
    return failed != 0;
}
