/* py_lower.h - lowercase as Python's str.lower() does, the same in every locale.
 *
 * CLIP's tokenizer (OpenAI's simple_tokenizer, open_clip, transformers) lowercases prompts with
 * Python's str.lower(): Unicode's default full case mapping, independent of the locale. GLib's
 * g_utf8_strdown follows the process's locale instead (tr_TR and az_AZ lower 'I' to a dotless
 * 'ı', lt_LT adds dots) and leaves cased symbols (Ⅷ, Ⓐ) alone, so "Icon" would tokenize
 * differently in Turkey than in CLIP. */
#ifndef SDT_PY_LOWER_H
#define SDT_PY_LOWER_H

/* text: valid UTF-8. Returns a new string (g_free). */
char *sdt_py_lower(const char *text);

#endif
