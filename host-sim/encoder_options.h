/* encoder_options.h - the options naming the separate files of an SD3.5/Flux.1 checkpoint that lacks
 * them (--clip-l, --clip-g, --t5xxl and, for a command that decodes, --vae), for every command that
 * opens such a model (create-embedding, generate): one set of entries and help lines. */
#ifndef SDT_HOST_ENCODER_OPTIONS_H
#define SDT_HOST_ENCODER_OPTIONS_H

#include <glib.h>

/* The paths the options fill (NULL: the checkpoint's own); the plugin's *_path fields take them as they are. */
typedef struct encoder_files {
    char *clip_l, *clip_g, *t5xxl, *vae;
} encoder_files;

/* Adds the entries to ctx's main group, after those added before (--vae only with_vae). The strings
 * and files must outlive the parse. */
void encoder_options_add(GOptionContext *ctx, encoder_files *files, gboolean with_vae);
/* Frees what the parse filled. */
void encoder_files_free(encoder_files *files);

#endif
