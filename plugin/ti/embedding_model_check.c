/* embedding_model_check.c - whether an embedding's rows fit a model's text encoders (see embedding_model_check.h). */
#include "ti/embedding_model_check.h"

#include <stdio.h>

#include "sd_text_rules.h"

/* SD3/SD3.5's embeddings hold a table per encoder (plugin/ti/embedding.h's encoder_dims, table-major): the file
 * and the model must both be of that kind, and each table as wide as its encoder. */
static bool check_tables(const sdt_embedding *e, const sd_runtime *rt, const char *path, sdt_error *error)
{
    const sd_config *c = &rt->cfg;
    bool tf_model = sd_config_is_transformer(c);
    bool tf_file = e->encoder_dims[0] > 0 || e->encoder_dims[1] > 0 || e->encoder_dims[2] > 0;
    const int want[3] = {c->clip.width, c->clip2.width, tf_model ? c->t5.d_model : 0};
    if (!tf_file)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the embedding has %d values per vector, one table for a UNet model's text encoders, but "
                        "the model (%s) takes a table per text encoder (clip_l %d, clip_g %d, t5xxl %d); it was made "
                        "for another model family: create one for this model",
                        path, e->dim, sd_family_title(c->family), want[0], want[1], want[2]);
    if (!tf_model)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the embedding holds a table per text encoder (clip_l %d, clip_g %d, t5xxl %d: an SD3.5 or "
                        "Flux.1 embedding), but the model is %s, whose text encoders take %d values per vector; use "
                        "or create one for this model",
                        path, e->encoder_dims[0], e->encoder_dims[1], e->encoder_dims[2], sd_family_title(c->family),
                        c->clip.width + sd_text_rules_of(c).width_g);
    const char *file_family = e->encoder_dims[1] > 0 ? "an SD3.5 embedding" : "a Flux.1 embedding";
    /* a table the one family has and the other lacks first: name the families, not a [N, 0] shape */
    for (int k = 0; k < 3; k++) {
        if (!e->encoder_dims[k] && want[k])
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: the embedding has no %s table (%s: clip_l %d, clip_g %d, t5xxl %d), but the model "
                            "(%s) reads %s rows too (clip_l %d, clip_g %d, t5xxl %d); create one for this model",
                            path, sdt_embedding_encoder_key(k), file_family, e->encoder_dims[0], e->encoder_dims[1],
                            e->encoder_dims[2], sd_family_title(c->family), sdt_embedding_encoder_key(k), want[0],
                            want[1], want[2]);
        if (e->encoder_dims[k] && !want[k])
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: the embedding has a %s table (%s: clip_l %d, clip_g %d, t5xxl %d), but the model "
                            "(%s) has no %s encoder (clip_l %d, t5xxl %d); create one for this model",
                            path, sdt_embedding_encoder_key(k), file_family, e->encoder_dims[0], e->encoder_dims[1],
                            e->encoder_dims[2], sd_family_title(c->family), sdt_embedding_encoder_key(k), want[0],
                            want[2]);
    }
    for (int k = 0; k < 3; k++)
        if (e->encoder_dims[k] != want[k])
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: its %s table is [%d, %d] but the model's %s takes %d values per vector (%s: clip_l "
                            "%d, clip_g %d, t5xxl %d); it was made for another model: create one for this model",
                            path, sdt_embedding_encoder_key(k), e->n_vectors, e->encoder_dims[k],
                            sdt_embedding_encoder_key(k), want[k], sd_family_title(c->family), want[0], want[1],
                            want[2]);
    if (e->dim != want[0] + want[1] + want[2])
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "%s: the embedding's tables add up to %d values per vector, not its %d (a bug: please report)",
                        path, want[0] + want[1] + want[2], e->dim);
    return true;
}

bool ti_embedding_check_model(const sdt_embedding *e, const sd_runtime *rt, const char *path, sdt_error *error)
{
    if (sd_config_is_transformer(&rt->cfg) || e->encoder_dims[0] > 0 || e->encoder_dims[1] > 0 ||
        e->encoder_dims[2] > 0)
        return check_tables(e, rt, path, error);
    int width = rt->cfg.clip.width, width_g = sd_text_rules_of(&rt->cfg).width_g;
    bool sdxl_file = e->clip_l_dim > 0, sdxl_model = width_g > 0;
    if (sdxl_file == sdxl_model && e->dim == width + width_g && (!sdxl_file || e->clip_l_dim == width)) return true;
    char has[64], wants[64];
    if (sdxl_file)
        snprintf(has, sizeof has, "clip_l %d + clip_g %d values per vector", e->clip_l_dim, e->dim - e->clip_l_dim);
    else
        snprintf(has, sizeof has, "%d values per vector", e->dim);
    if (sdxl_model)
        snprintf(wants, sizeof wants, "clip_l %d + clip_g %d", width, width_g);
    else
        snprintf(wants, sizeof wants, "%d", width);
    return sdt_fail(error, SDT_ERR_VALIDATION,
                    "%s: the embedding has %s but the model's text encoders take %s (%s); it was "
                    "made for another model family: use or create one for this model",
                    path, has, wants, sd_family_title(rt->cfg.family));
}
