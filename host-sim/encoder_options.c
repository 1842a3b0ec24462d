/* encoder_options.c - see encoder_options.h. */
#include "encoder_options.h"

void encoder_options_add(GOptionContext *ctx, encoder_files *files, gboolean with_vae)
{
    GOptionEntry entries[] = {
        {"clip-l", 0, 0, G_OPTION_ARG_FILENAME, &files->clip_l,
         "SD3.5/Flux.1: the CLIP-L text encoder when the checkpoint lacks it (clip_l.safetensors; default: the checkpoint's)",
         "FILE"},
        {"clip-g", 0, 0, G_OPTION_ARG_FILENAME, &files->clip_g,
         "SD3.5: the CLIP-G text encoder when the checkpoint lacks it (clip_g.safetensors; default: the checkpoint's)",
         "FILE"},
        {"t5xxl", 0, 0, G_OPTION_ARG_FILENAME, &files->t5xxl,
         "SD3.5/Flux.1: the T5-XXL encoder when the checkpoint lacks it (t5xxl_fp16.safetensors; default: the checkpoint's); T5's tokenizer is "
         "read from t5_tokenizer/ or tokenizer_3/ beside the model, or spiece.model beside this file",
         "FILE"},
        {"vae", 0, 0, G_OPTION_ARG_FILENAME, &files->vae,
         "SD3.5/Flux.1: the 16-channel VAE when the checkpoint lacks it (Flux's ae.safetensors; default: the checkpoint's)",
         "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    if (!with_vae) entries[3] = entries[4];
    /* GLib copies the entries: this array may end with the call */
    g_option_context_add_main_entries(ctx, entries, NULL);
}

void encoder_files_free(encoder_files *files)
{
    g_free(files->clip_l);
    g_free(files->clip_g);
    g_free(files->t5xxl);
    g_free(files->vae);
    *files = (encoder_files){0};
}
