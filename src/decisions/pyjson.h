/* Python's json.dumps(v, ensure_ascii=False) for a cJSON value: how Laya
 * and colibri turn an object or array state (and non-string criteria and
 * instructions) into the text the model reads. Separators are ", " and
 * ": " (Python's defaults), keys keep their order, non-ASCII stays raw.
 * Numbers: integers (|v| < 2^53, no fraction) print as integers, others as
 * Python's repr (shortest round-trip, "1e-05" style exponents); cJSON does
 * not keep "2.0" apart from "2", which Python prints as "2.0". */
#ifndef IV_DECISIONS_PYJSON_H
#define IV_DECISIONS_PYJSON_H

#include <cJSON.h>
#include "base/strbuf.h"

void iv_pyjson_dumps(iv_strbuf *b, const cJSON *v);
/* iv_pyjson_dumps with holes: hole(v, b->len, ctx) is asked of every value
 * before it is written, and a value it returns nonzero for is left out (the
 * caller records where it stood: an image in a state, whose text is cut
 * there). */
void iv_pyjson_dumps_holes(iv_strbuf *b, const cJSON *v, int (*hole)(const cJSON *v, size_t at, void *ctx),
                           void *ctx);
/* json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True):
 * Clef's render() of an object or array state, instructions and option
 * semantics. */
void iv_pyjson_dumps_compact_sorted(iv_strbuf *b, const cJSON *v);

#endif
