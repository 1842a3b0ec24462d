/* py_lower.c - see py_lower.h. Follows CPython's lower_ucs4 (Objects/unicodeobject.c). */
#include "py_lower.h"

#include <glib.h>
#include <stdbool.h>
#include <string.h>

#define CAPITAL_SIGMA 0x03A3
#define SMALL_SIGMA 0x03C3
#define FINAL_SIGMA 0x03C2
#define CAPITAL_I_WITH_DOT 0x0130
#define COMBINING_DOT_ABOVE 0x0307

/* Symbols with a case that GLib's letter types do not show: Roman numerals (Nl), circled and
 * squared Latin letters (So). Unicode's Other_Uppercase / Other_Lowercase. */
static bool is_cased_symbol(gunichar c)
{
    return (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
           (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189) || c == 0x00AA || c == 0x00BA;
}

/* Unicode's Cased property (Lowercase, Uppercase or Titlecase). */
static bool is_cased(gunichar c)
{
    GUnicodeType t = g_unichar_type(c);
    return t == G_UNICODE_UPPERCASE_LETTER || t == G_UNICODE_LOWERCASE_LETTER || t == G_UNICODE_TITLECASE_LETTER ||
           is_cased_symbol(c);
}

/* Unicode's Case_Ignorable property: marks, format characters, modifiers, and the Word_Break
 * MidLetter / MidNumLet / Single_Quote punctuation. */
static bool is_case_ignorable(gunichar c)
{
    switch (g_unichar_type(c)) {
        case G_UNICODE_NON_SPACING_MARK:
        case G_UNICODE_ENCLOSING_MARK:
        case G_UNICODE_FORMAT:
        case G_UNICODE_MODIFIER_LETTER:
        case G_UNICODE_MODIFIER_SYMBOL:
            return true;
        default:
            break;
    }
    static const gunichar word_break_mid[] = {0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
                                              0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    for (size_t i = 0; i < G_N_ELEMENTS(word_break_mid); i++)
        if (word_break_mid[i] == c) return true;
    return false;
}

/* Σ at text[i] of n code points: final (ς) after a cased letter and not before one, case-ignorables skipped. */
static gunichar lower_sigma(const gunichar *text, glong n, glong i)
{
    glong j = i - 1;
    while (j >= 0 && is_case_ignorable(text[j])) j--;
    if (j < 0 || !is_cased(text[j])) return SMALL_SIGMA;
    j = i + 1;
    while (j < n && is_case_ignorable(text[j])) j++;
    return j < n && is_cased(text[j]) ? SMALL_SIGMA : FINAL_SIGMA;
}

/* The simple lowercase mapping of one code point (GLib's, plus the cased symbols it skips). */
static gunichar lower_one(gunichar c)
{
    if (c >= 0x2160 && c <= 0x216F) return c + 0x10; /* Ⅰ..Ⅿ -> ⅰ..ⅿ */
    if (c >= 0x24B6 && c <= 0x24CF) return c + 0x1A; /* Ⓐ..Ⓩ -> ⓐ..ⓩ */
    return g_unichar_tolower(c);
}

char *sdt_py_lower(const char *text)
{
    glong n = 0;
    gunichar *chars = g_utf8_to_ucs4_fast(text, -1, &n);
    GString *out = g_string_sized_new(strlen(text) + 8);
    for (glong i = 0; i < n; i++) {
        gunichar c = chars[i];
        if (c == CAPITAL_I_WITH_DOT) { /* SpecialCasing's one unconditional lowercase expansion */
            g_string_append_c(out, 'i');
            g_string_append_unichar(out, COMBINING_DOT_ABOVE);
        } else if (c == CAPITAL_SIGMA) {
            g_string_append_unichar(out, lower_sigma(chars, n, i));
        } else {
            g_string_append_unichar(out, lower_one(c));
        }
    }
    g_free(chars);
    return g_string_free(out, FALSE);
}
