/* fuzz_hn_safetensors.c - libFuzzer target: any bytes as a .safetensors hypernetwork, read by
 * sdt_hn_load_safetensors (plugin/hn/hn_file.c: tensor names, metadata keys with A1111's
 * defaults); what loads survives a .safetensors save and load unchanged (fuzz_hn_check.h). */
#include "fuzz_hn_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_hn_check(data, size, ".safetensors", sdt_hn_load_safetensors, sdt_hn_save_safetensors);
}
