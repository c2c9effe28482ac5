/* Float to decimal text for JSON output: the shortest "%.{p}g" text,
 * p = 6..9, that reads back (strtof) as the same float. Every embedding,
 * score and token vector the server and CLI write goes through it, so it
 * must be fast: glibc's printf and strtof took ~1 us per float, a quarter
 * of the CLI's time on 1,000 short sentences. */
#ifndef IV_BASE_FLOAT_FMT_H
#define IV_BASE_FLOAT_FMT_H

/* Writes f's text and a NUL into out, returns its length. f must be finite. */
int iv_format_float(char out[32], float f);

/* The same text from snprintf and strtof: the definition the fast path
 * must match, used for the values outside its range and by the tests. */
int iv_format_float_reference(char out[32], float f);

#endif
