/* hn_applier.h - the hypernetwork applier (ABI 1.4; since 1.7 the trainer factory's extension
 * "sdtrain.hypernetwork_applier/1" too): a chain of hypernetworks a host
 * applies to the K/V inputs of its own UNet, on the CPU, in eval mode. It is the training
 * hook's chain (hn/hn_hook.h) called directly, so generation and previews compute the same. */
#ifndef SDT_HN_APPLIER_H
#define SDT_HN_APPLIER_H

#include <stdint.h>

#include "sdtrain.h"

sdt_status sdt_hn_applier_create(sdt_hn_applier **out, char *err, uint32_t err_size);
void sdt_hn_applier_destroy(sdt_hn_applier *applier);
sdt_status sdt_hn_applier_get_last_error(const sdt_hn_applier *applier, char *buf, uint32_t buf_size, uint32_t *needed);
sdt_status sdt_hn_applier_add(sdt_hn_applier *applier, const char *path, double strength);
sdt_status sdt_hn_applier_set_strength(sdt_hn_applier *applier, uint32_t index, double strength);
sdt_status sdt_hn_applier_apply_kv(sdt_hn_applier *applier, uint32_t width, uint32_t kind, const float *in, float *out,
                                   uint64_t rows);
sdt_status sdt_hn_applier_generate(sdt_hn_applier *applier, const sdt_generate_request *request, uint8_t *rgb,
                                   uint64_t rgb_size);

#endif
