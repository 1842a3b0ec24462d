/* test_py_lower.c - CLIP's prompt lowering is Python's str.lower(), not GLib's locale-following
 * g_utf8_strdown: the dotted capital I's expansion, the final sigma rule, cased symbols (Roman
 * numerals, circled letters) that GLib's letter-only mapping leaves alone. The expected strings
 * are Python 3.11's; sdt_py_lower was also compared with it over every code point and every
 * sigma context once (0 differences). It runs in the caller's locale as a host does (e.g.
 * LOCPATH=... LC_ALL=tr_TR.UTF-8 gives the same); tests/e2e/test_locale.sh generates tr_TR.UTF-8
 * and checks the whole tokenizer path end to end. */
#include "py_lower.h"

#include <glib.h>
#include <locale.h>
#include <string.h>

#include "sdt_test.h"

int main(void)
{
    setlocale(LC_ALL, "");
    static const struct {
        const char *text, *lower;
    } cases[] = {
        {"Icon IN Istanbul", "icon in istanbul"},
        {"\xc4\xb0zmir", "i\xcc\x87zmir"},                          /* İzmir -> i̇zmir */
        {"\xce\xa3\xce\x91\xce\xa3", "\xcf\x83\xce\xb1\xcf\x82"},   /* ΣΑΣ -> σας */
        {"\xce\xa3", "\xcf\x83"},                                   /* Σ alone -> σ */
        {"\xce\x91\xce\xa3.", "\xce\xb1\xcf\x82."},                 /* ΑΣ. -> ας. */
        {"\xce\x91\xce\xa3'\xce\x91", "\xce\xb1\xcf\x83'\xce\xb1"}, /* ΑΣ'Α -> ασ'α */
        {"\xce\x91\xce\xa3\xcc\x81", "\xce\xb1\xcf\x82\xcc\x81"},   /* ΑΣ + accent -> ας + accent */
        {"\xe2\x85\xa7 \xe2\x92\xb6", "\xe2\x85\xb7 \xe2\x93\x90"}, /* Ⅷ Ⓐ -> ⅷ ⓐ */
        {"\xc7\x85", "\xc7\x86"},                                   /* ǅ (titlecase) -> ǆ */
        {"\xe1\xba\x9e", "\xc3\x9f"},                               /* ẞ -> ß */
        {"\xe2\x84\xaa", "k"},                                      /* Kelvin sign -> k */
        {"\xc3\x80\xc3\x89\xc3\x8e", "\xc3\xa0\xc3\xa9\xc3\xae"},   /* ÀÉÎ -> àéî */
        {"", ""},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *got = sdt_py_lower(cases[i].text);
        CHECK(strcmp(got, cases[i].lower) == 0, "lowering \"%s\" gave \"%s\", Python gives \"%s\"", cases[i].text, got,
              cases[i].lower);
        g_free(got);
    }
    return sdt_test_finish("test_py_lower");
}
