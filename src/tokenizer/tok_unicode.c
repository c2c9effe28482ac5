/* Character classes with the exact definitions the Rust library uses
 * (std char methods, the unicode_categories crate, the regex crate's \w),
 * backed by utf8proc's Unicode tables. */
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

long tok_utf8_invalid_at(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
            cp = c & 0x1F;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            cp = c & 0x0F;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return (long)i;
        }
        if (i + n > len) return (long)i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += n;
    }
    return -1;
}

int32_t tok_utf8_count(const char *s, int32_t len)
{
    int32_t n = 0;
    for (int32_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

int tok_is_whitespace(uint32_t c)
{
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
        return 1;
    default:
        return c >= 0x2000 && c <= 0x200A;
    }
}

static int cat(uint32_t c)
{
    return utf8proc_category((utf8proc_int32_t)c);
}

int tok_is_other_ccfco(uint32_t c)
{
    int k = cat(c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO;
}

int tok_is_punctuation(uint32_t c)
{
    int k = cat(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

int tok_is_bert_punct(uint32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    return tok_is_punctuation(c);
}

int tok_is_mark_nonspacing(uint32_t c)
{
    return c >= 0x300 && cat(c) == UTF8PROC_CATEGORY_MN;
}

int tok_is_combining_mark(uint32_t c)
{
    if (c < 0x300) return 0;
    int k = cat(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

int tok_is_numeric(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    int k = cat(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

int tok_is_word(uint32_t c)
{
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (c == 0x200C || c == 0x200D) return 1; /* Join_Control */
    /* Other_Alphabetic symbols (circled and squared letters). */
    if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
        (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
        return 1;
    switch (cat(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

int tok_is_chinese(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int tok_to_lower(uint32_t c, uint32_t out[2])
{
    if (c < 0x80) {
        out[0] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
        return 1;
    }
    /* The only unconditional multi-char lowercase mapping (SpecialCasing). */
    if (c == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    return 1;
}

/* GPT-2's reversible byte <-> printable char table: printable Latin-1
 * bytes map to themselves, the other 68 bytes (0x00-0x20, 0x7F-0xA0, 0xAD)
 * to U+0100.. in byte order. */
uint32_t tok_byte_to_char(unsigned char b)
{
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 289u + (b - 0x7Fu);
    if (b == 0xAD) return 323u;
    return b;
}

int tok_char_to_byte(uint32_t c)
{
    if (c < 256) return (c <= 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) ? -1 : (int)c;
    if (c <= 288) return (int)(c - 256);
    if (c <= 322) return (int)(c - 289 + 0x7F);
    if (c == 323) return 0xAD;
    return -1;
}
