/* mmdit_gen.c - seeded random-weight SD3 MMDiT transformer files; see mmdit_gen.h. */
#include "mmdit_gen.h"

#include "param_file_gen.h"

static bool enumerate_mmdit(const void *cfg, sdt_param_visitor visit, void *user)
{
    return mmdit_params(cfg, visit, user);
}

bool mmdit_generate(const char *path, const mmdit_config *cfg, sdt_dtype dtype, uint64_t seed, bool perturb_all,
                    sdt_error *error)
{
    return mmdit_config_check(cfg, error) && sdt_param_file_generate(path, "MMDiT", "mmdit_generate", enumerate_mmdit,
                                                                     cfg, dtype, seed, perturb_all, error);
}
