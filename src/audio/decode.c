/* Audio bytes -> mono float32 with libsndfile, read from memory through its
 * virtual I/O. libsndfile sniffs the container itself (WAV, FLAC, OGG,
 * MP3, AIFF, ...): the MIME type a client claims is not trusted. */
#include <math.h>
#include <stdio.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"

typedef struct mem_reader {
    const uint8_t *p;
    sf_count_t n, pos;
} mem_reader;

static sf_count_t mem_len(void *u) { return ((mem_reader *)u)->n; }

static sf_count_t mem_seek(sf_count_t off, int whence, void *u)
{
    mem_reader *m = u;
    sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->n : 0;
    sf_count_t to = base + off;
    if (to < 0) to = 0;
    if (to > m->n) to = m->n;
    m->pos = to;
    return to;
}

static sf_count_t mem_read(void *dst, sf_count_t count, void *u)
{
    mem_reader *m = u;
    sf_count_t left = m->n - m->pos;
    if (count > left) count = left;
    if (count <= 0) return 0;
    memcpy(dst, m->p + m->pos, (size_t)count);
    m->pos += count;
    return count;
}

static sf_count_t mem_write(const void *src, sf_count_t count, void *u) { return 0; }
static sf_count_t mem_tell(void *u) { return ((mem_reader *)u)->pos; }

static const char *major_name(int format)
{
    switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV: return "WAV";
    case SF_FORMAT_WAVEX: return "WAV";
    case SF_FORMAT_RF64: return "RF64";
    case SF_FORMAT_W64: return "W64";
    case SF_FORMAT_AIFF: return "AIFF";
    case SF_FORMAT_AU: return "AU";
    case SF_FORMAT_FLAC: return "FLAC";
    case SF_FORMAT_OGG: return "OGG";
    case SF_FORMAT_MPEG: return "MP3";
    case SF_FORMAT_CAF: return "CAF";
    default: return "other";
    }
}

void iv_audio_free(iv_audio *a)
{
    if (!a) return;
    free(a->samples);
    memset(a, 0, sizeof *a);
}

/* Channels averaged as numpy's mean(axis=0) over float32 frames does it:
 * a float32 running sum over the channels in order, then one division. */
static void downmix(const float *frames, sf_count_t n, int ch, float *out)
{
    for (sf_count_t i = 0; i < n; i++) {
        const float *f = frames + i * ch;
        float s = f[0];
        for (int c = 1; c < ch; c++) s += f[c];
        out[i] = ch > 1 ? s / (float)ch : s;
    }
}

int iv_audio_decode(const uint8_t *p, size_t n, const iv_audio_limits *limits, iv_audio *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    size_t max_bytes = limits && limits->max_bytes ? limits->max_bytes : IV_AUDIO_DEFAULT_MAX_BYTES;
    double max_s = limits && limits->max_seconds > 0 ? limits->max_seconds : IV_AUDIO_DEFAULT_MAX_SECONDS;
    if (n == 0) return iv_errf(err, IV_E_INVALID, "audio is empty");
    if (n > max_bytes)
        return iv_errf(err, IV_E_TOO_LARGE, "audio is %zu bytes, over the limit of %zu", n, max_bytes);

    /* libsndfile 1.2.0 leaks libvorbis state when an Ogg stream is
     * malformed (a truncated upload is enough), so a server that read Ogg
     * would lose memory to bad requests: Ogg is refused. */
    if (n >= 4 && !memcmp(p, "OggS", 4))
        return iv_errf(err, IV_E_UNSUPPORTED, "Ogg audio (Vorbis, Opus) is not read: send WAV, FLAC or MP3");
    mem_reader m = {p, (sf_count_t)n, 0};
    SF_VIRTUAL_IO io = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &info, &m);
    if (!sf)
        return iv_errf(err, IV_E_INVALID,
                       "audio is corrupt or in an unknown format (WAV, FLAC and MP3 are read): %s",
                       sf_strerror(NULL));
    int rc = -1;
    float *frames = NULL;
    if (info.channels < 1 || info.samplerate < 1) {
        iv_errf(err, IV_E_INVALID, "audio header declares %d channels at %d Hz", info.channels, info.samplerate);
        goto done;
    }
    if (info.channels > 64) {
        iv_errf(err, IV_E_INVALID, "audio has %d channels; at most 64 are read", info.channels);
        goto done;
    }
    /* The largest sample count allowed; a header that promises more is
     * refused before anything is allocated (MP3 headers only estimate, so
     * the decoded count is checked again below). */
    double max_frames_d = floor(max_s * info.samplerate);
    sf_count_t max_frames = (sf_count_t)max_frames_d;
    if (info.frames > max_frames && info.frames != SF_COUNT_MAX) {
        iv_errf(err, IV_E_TOO_LARGE, "audio is %.1f s long, over the limit of %.1f s",
                (double)info.frames / info.samplerate, max_s);
        goto done;
    }
    /* Read in chunks until EOF: frames may be an estimate (MP3) or
     * overstated by a truncated file. */
    sf_count_t cap = info.frames > 0 && info.frames <= max_frames ? info.frames : 65536;
    if (cap < 1) cap = 1;
    out->samples = malloc((size_t)cap * sizeof(float));
    const sf_count_t chunk = 16384;
    frames = malloc((size_t)chunk * (size_t)info.channels * sizeof(float));
    if (!out->samples || !frames) {
        iv_errf(err, IV_E_NOMEM, "out of memory decoding audio");
        goto done;
    }
    sf_count_t total = 0;
    for (;;) {
        sf_count_t got = sf_readf_float(sf, frames, chunk);
        if (got <= 0) break;
        if (total + got > max_frames) {
            iv_errf(err, IV_E_TOO_LARGE, "audio is over the limit of %.1f s", max_s);
            goto done;
        }
        if (total + got > cap) {
            sf_count_t ncap = cap * 2 > total + got ? cap * 2 : total + got;
            if (ncap > max_frames) ncap = max_frames;
            float *ns = realloc(out->samples, (size_t)ncap * sizeof(float));
            if (!ns) {
                iv_errf(err, IV_E_NOMEM, "out of memory decoding audio");
                goto done;
            }
            out->samples = ns;
            cap = ncap;
        }
        downmix(frames, got, info.channels, out->samples + total);
        total += got;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        iv_errf(err, IV_E_INVALID, "audio is corrupt: %s", sf_strerror(sf));
        goto done;
    }
    if (total == 0) {
        iv_errf(err, IV_E_INVALID, "audio has no samples");
        goto done;
    }
    out->n = total;
    out->sample_rate = info.samplerate;
    out->channels = info.channels;
    snprintf(out->format, sizeof out->format, "%s", major_name(info.format));
    rc = 0;
done:
    free(frames);
    sf_close(sf);
    if (rc) iv_audio_free(out);
    return rc;
}
