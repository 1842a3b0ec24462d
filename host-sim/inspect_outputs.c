/* inspect_outputs.c - the files a run writes that are not embeddings (see inspect_outputs.h).
 * GLib only: a PNG's chunks, a CSV's lines and a JSON file's text need no decoder. */
#include <stdio.h>
#include <string.h>

#include "file_read.h"
#include "inspect_outputs.h"

#define MAX_OUTPUT_FILE_BYTES (64u << 20) /* previews, CSVs and settings are far smaller */

static guint32 read_be32(const guchar *p)
{
    return (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 | p[3];
}

/* A JSON string literal of UTF-8 text (invalid UTF-8 is replaced). */
static void append_json_string(GString *out, const char *text)
{
    char *valid = g_utf8_make_valid(text, -1);
    g_string_append_c(out, '"');
    for (const char *p = valid; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            g_string_append_printf(out, "\\%c", c);
        else if (c == '\n')
            g_string_append(out, "\\n");
        else if (c < 0x20)
            g_string_append_printf(out, "\\u%04x", c);
        else
            g_string_append_c(out, (char)c);
    }
    g_string_append_c(out, '"');
    g_free(valid);
}

/* ---- preview PNG: its size and the prompt in its "parameters" text chunk ---- */

typedef struct png_facts {
    guint32 width, height;
    char *parameters; /* NULL when absent */
    gboolean has_embedding_chunk;
} png_facts;

static gboolean read_png_facts(const guchar *data, gsize size, png_facts *facts)
{
    static const guchar signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memset(facts, 0, sizeof *facts);
    if (size < 8 + 25 || memcmp(data, signature, 8) != 0) return FALSE;
    gsize at = 8;
    while (at + 12 <= size) {
        guint32 length = read_be32(data + at);
        const guchar *type = data + at + 4, *body = data + at + 8;
        if (length > size - at - 12) return FALSE; /* truncated: not a file a run wrote */
        if (memcmp(type, "IHDR", 4) == 0 && length >= 8) {
            facts->width = read_be32(body);
            facts->height = read_be32(body + 4);
        } else if (memcmp(type, "tEXt", 4) == 0) {
            const guchar *nul = memchr(body, 0, length);
            if (nul && strcmp((const char *)body, "parameters") == 0 && !facts->parameters)
                facts->parameters = g_strndup((const char *)nul + 1, length - (gsize)(nul + 1 - body));
            if (nul && strcmp((const char *)body, "sd-ti-embedding") == 0) facts->has_embedding_chunk = TRUE;
        } else if (memcmp(type, "IEND", 4) == 0) {
            return facts->width > 0;
        }
        at += 12 + (gsize)length;
    }
    return FALSE;
}

static gboolean describe_png(const char *path, const guchar *data, gsize size, gboolean json, GString *out)
{
    png_facts facts;
    /* A card whose embedding the plugin could not read stays the plugin's error, not a picture. */
    if (!read_png_facts(data, size, &facts) || facts.has_embedding_chunk) {
        g_free(facts.parameters);
        return FALSE;
    }
    if (json) {
        g_string_append(out, "{\"file\": ");
        append_json_string(out, path);
        g_string_append_printf(out, ", \"format\": \"png-image\", \"width\": %u, \"height\": %u", facts.width,
                               facts.height);
        if (facts.parameters) {
            g_string_append(out, ", \"parameters\": ");
            append_json_string(out, facts.parameters);
        }
        g_string_append(out, "}\n");
    } else {
        g_string_append_printf(out,
                               "file:        %s\nformat:      PNG image (a preview; no embedding in it)\n"
                               "size:        %u x %u\n",
                               path, facts.width, facts.height);
        if (facts.parameters) g_string_append_printf(out, "parameters:  %s\n", facts.parameters);
    }
    g_free(facts.parameters);
    return TRUE;
}

/* ---- the loss CSV: its columns, how many rows, and the last step and loss ---- */

static gboolean describe_csv(const char *path, const char *text, gboolean json, GString *out)
{
    if (!g_str_has_prefix(text, "step,")) return FALSE;
    char **lines = g_strsplit(text, "\n", -1);
    char **columns = g_strsplit(lines[0], ",", -1);
    int loss_column = -1;
    for (int c = 0; columns[c]; c++)
        if (strcmp(g_strstrip(columns[c]), "loss") == 0) loss_column = c;
    int rows = 0;
    const char *last = NULL;
    for (int i = 1; lines[i]; i++)
        if (lines[i][0]) {
            rows++;
            last = lines[i];
        }
    char **fields = last ? g_strsplit(last, ",", -1) : NULL;
    const char *last_step = fields && fields[0] ? fields[0] : "";
    const char *last_loss =
        fields && loss_column >= 0 && loss_column < (int)g_strv_length(fields) ? fields[loss_column] : "";
    if (json) {
        g_string_append(out, "{\"file\": ");
        append_json_string(out, path);
        g_string_append(out, ", \"format\": \"loss-csv\", \"columns\": [");
        for (int c = 0; columns[c]; c++) {
            if (c) g_string_append(out, ", ");
            append_json_string(out, columns[c]);
        }
        g_string_append_printf(out, "], \"rows\": %d", rows);
        gint64 step = 0;
        if (last && g_ascii_string_to_signed(last_step, 10, 0, G_MAXINT64, &step, NULL))
            g_string_append_printf(out, ", \"last_step\": %" G_GINT64_FORMAT, step);
        g_string_append(out, "}\n");
    } else {
        char *joined = g_strjoinv(",", columns);
        g_string_append_printf(out, "file:        %s\nformat:      loss CSV\ncolumns:     %s\nrows:        %d\n", path,
                               joined, rows);
        if (last) g_string_append_printf(out, "last row:    step %s, loss %s\n", last_step, last_loss);
        g_free(joined);
    }
    g_strfreev(fields);
    g_strfreev(columns);
    g_strfreev(lines);
    return TRUE;
}

/* ---- the settings JSON: shown as it is (sdtrain wrote it, as one object) ---- */

static gboolean describe_settings(const char *path, const char *text, gboolean json, GString *out)
{
    char *trimmed = g_strstrip(g_strdup(text));
    gboolean object = trimmed[0] == '{' && g_str_has_suffix(trimmed, "}");
    if (object) {
        if (json) {
            g_string_append(out, "{\"file\": ");
            append_json_string(out, path);
            g_string_append_printf(out, ", \"format\": \"training-settings\", \"settings\": %s}\n", trimmed);
        } else {
            g_string_append_printf(out, "file:        %s\nformat:      training settings (JSON)\n%s\n", path, trimmed);
        }
    }
    g_free(trimmed);
    return object;
}

gboolean inspect_output_file(const char *path, gboolean json)
{
    gchar *data = NULL;
    gsize size = 0;
    char *why = NULL;
    if (!host_read_file(path, MAX_OUTPUT_FILE_BYTES, &data, &size, &why)) { /* the plugin's sentence follows */
        g_free(why);
        return FALSE;
    }
    GString *out = g_string_new(NULL);
    gboolean known = FALSE;
    if (size >= 8 && (guchar)data[0] == 0x89)
        known = describe_png(path, (const guchar *)data, size, json, out);
    else if (g_str_has_suffix(path, ".csv") && g_utf8_validate(data, (gssize)size, NULL))
        known = describe_csv(path, data, json, out);
    else if (g_str_has_suffix(path, ".json") && g_utf8_validate(data, (gssize)size, NULL))
        known = describe_settings(path, data, json, out);
    if (known) fputs(out->str, stdout);
    g_string_free(out, TRUE);
    g_free(data);
    return known;
}
