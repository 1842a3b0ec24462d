/* hn_test_util.h - what the hypernetwork tests share (header only). */
#ifndef SDT_HN_TEST_UTIL_H
#define SDT_HN_TEST_UTIL_H

#include <string.h>

#include "hn/hn_module.h"
#include "kernel_test.h"

/* Every parameter's gradient of hn, in parameter order, as one host array (CPU backend). */
static inline float *hn_test_grads_of(sdt_hn *hn)
{
    float *g = kt_alloc((size_t)sdt_hn_param_numel(hn) * sizeof(float));
    int64_t at = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        memcpy(g + at, p->grad.data, sdt_tensor_nbytes(&p->grad));
        at += sdt_tensor_numel(&p->grad);
    }
    return g;
}

#endif
