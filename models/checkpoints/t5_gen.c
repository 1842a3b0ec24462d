/* t5_gen.c - seeded random-weight T5 encoder files; see t5_gen.h. */
#include "t5_gen.h"

#include "param_file_gen.h"

static bool enumerate_t5(const void *cfg, sdt_param_visitor visit, void *user)
{
    return t5_params(cfg, visit, user);
}

bool t5_generate(const char *path, const t5_config *cfg, sdt_dtype dtype, uint64_t seed, bool perturb_all,
                 sdt_error *error)
{
    return t5_config_check(cfg, error) &&
           sdt_param_file_generate(path, "T5", "t5_generate", enumerate_t5, cfg, dtype, seed, perturb_all, error);
}
