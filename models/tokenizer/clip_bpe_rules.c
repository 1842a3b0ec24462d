/* clip_bpe_rules.c - see clip_bpe_rules.h. */
#include "clip_bpe_rules.h"

#include <glib.h>
#include <stdbool.h>

const char clip_pretoken_pattern[] =
    "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+";

static bool is_printable_byte(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

unsigned clip_byte_code_point(unsigned char b)
{
    if (is_printable_byte(b)) return b;
    unsigned shifted = 0; /* non-printable bytes below b */
    for (unsigned i = 0; i < b; i++) shifted += !is_printable_byte(i);
    return 256 + shifted;
}

void clip_byte_symbols(char sym[256][4])
{
    for (unsigned b = 0; b < 256; b++) {
        int len = g_unichar_to_utf8((gunichar)clip_byte_code_point((unsigned char)b), sym[b]);
        sym[b][len] = 0;
    }
}
