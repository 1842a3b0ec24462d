/* vae_gen.c - seeded random-weight VAE files; see vae_gen.h. */
#include "vae_gen.h"

#include "param_file_gen.h"

typedef struct vae_gen_args {
    const vae_config *cfg;
    const char *prefix;
} vae_gen_args;

static bool enumerate_vae(const void *args, sdt_param_visitor visit, void *user)
{
    const vae_gen_args *a = args;
    return vae_params_under(a->cfg, a->prefix, visit, user);
}

bool vae_generate(const char *path, const vae_config *cfg, const char *prefix, sdt_dtype dtype, uint64_t seed,
                  bool perturb_all, sdt_error *error)
{
    vae_gen_args a = {cfg, prefix};
    return vae_config_check(cfg, error) &&
           sdt_param_file_generate(path, "VAE", "vae_generate", enumerate_vae, &a, dtype, seed, perturb_all, error);
}
