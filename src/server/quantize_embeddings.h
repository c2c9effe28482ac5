/* Embedding output quantization (Cohere's embedding_types, and the
 * precisions of sentence-transformers' quantize_embeddings):
 *
 *   int8    trunc((x - lo) / ((hi - lo) / 255) - 128)  as int8
 *   uint8   trunc((x - lo) / ((hi - lo) / 255))        as uint8
 *   binary  packbits(x > 0) - 128                      as int8
 *   ubinary packbits(x > 0)                            as uint8
 *
 * with numpy's packbits bit order (the first dimension is the most
 * significant bit of the first byte; a last partial byte is zero-padded,
 * one row at a time). The rule is sentence-transformers' quantize_embeddings
 * with explicit ranges lo = -1, hi = 1 in every dimension (computed in
 * double, truncated toward zero as numpy's astype does): the vectors are
 * L2-normalised, so no component leaves [-1, 1], and fixed ranges make an
 * input's codes independent of the other inputs of its request. ST's own
 * default (per-dimension min/max of the batch being quantized) would give a
 * query embedded alone different codes from the same text in a batch, and
 * divides by zero for a single input. tools/gen_quantize_reference.py
 * produces the reference the tests compare with. */
#ifndef IV_SERVER_QUANTIZE_EMBEDDINGS_H
#define IV_SERVER_QUANTIZE_EMBEDDINGS_H

#include <stddef.h>
#include "base/strbuf.h"

typedef enum iv_quant {
    IV_QUANT_FLOAT = 0,
    IV_QUANT_INT8,
    IV_QUANT_UINT8,
    IV_QUANT_BINARY,
    IV_QUANT_UBINARY,
    IV_QUANT_BASE64, /* Cohere's "base64": little-endian float32 bytes */
    IV_QUANT_COUNT
} iv_quant;

/* "float", "int8", ... -> IV_QUANT_*, or -1. */
int iv_quant_parse(const char *name);
const char *iv_quant_name(iv_quant q);

/* Bytes one vector of n dimensions takes in precision q (float: 4n). */
size_t iv_quant_size(iv_quant q, int n);

/* Quantizes v[0..n) into out (iv_quant_size bytes); int8 and binary codes
 * are stored as their two's-complement bytes. */
void iv_quantize(iv_quant q, const float *v, int n, unsigned char *out);

/* Appends one vector in precision q as JSON: a number array (float, int8,
 * uint8, binary, ubinary) or a base64 string (base64). */
void iv_quant_json(iv_strbuf *b, iv_quant q, const float *v, int n);

#endif
