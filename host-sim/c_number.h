/* c_number.h - one number as text with '.' as the decimal point, whatever the user's locale.
 * sdt-host calls setlocale(LC_ALL, "") as a GUI host does (its messages and file names follow
 * the user's settings), so printf's "%g" would write "0,005" in de_DE; every number it prints
 * or writes goes through here (GLib's g_ascii_formatd), and every number it reads through
 * g_ascii_strtod. */
#ifndef SDT_HOST_C_NUMBER_H
#define SDT_HOST_C_NUMBER_H

#include <glib.h>

typedef struct c_number_text {
    char text[G_ASCII_DTOSTR_BUF_SIZE];
} c_number_text;

/* format: one printf double conversion ("%.4f", "%.2e", "%g", ...). */
const char *c_number(c_number_text *buf, const char *format, double value);

#endif
