/* fuzz_hn_pt.c - libFuzzer target: any bytes as an A1111 .pt hypernetwork, read by sdt_hn_load_pt
 * (plugin/hn/hn_file.c over the restricted torch reader: zip or legacy layout, A1111's defaults and
 * old linear1/linear2 names); what loads survives a .pt save and load unchanged (fuzz_hn_check.h). */
#include "fuzz_hn_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_hn_check(data, size, ".pt", sdt_hn_load_pt, sdt_hn_save_pt);
}
