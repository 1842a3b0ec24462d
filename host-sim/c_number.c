/* c_number.c - see c_number.h. */
#include "c_number.h"

const char *c_number(c_number_text *buf, const char *format, double value)
{
    return g_ascii_formatd(buf->text, sizeof buf->text, format, value);
}
