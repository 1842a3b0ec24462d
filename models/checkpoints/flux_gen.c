/* flux_gen.c - seeded random-weight Flux.1 transformer files; see flux_gen.h. */
#include "flux_gen.h"

#include "param_file_gen.h"

static bool enumerate_flux(const void *cfg, sdt_param_visitor visit, void *user)
{
    return flux_params(cfg, visit, user);
}

bool flux_generate(const char *path, const flux_config *cfg, sdt_dtype dtype, uint64_t seed, bool perturb_all,
                   sdt_error *error)
{
    return flux_config_check(cfg, error) &&
           sdt_param_file_generate(path, "Flux", "flux_generate", enumerate_flux, cfg, dtype, seed, perturb_all, error);
}
