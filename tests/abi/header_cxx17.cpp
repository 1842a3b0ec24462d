// header_cxx17.cpp - sdtrain.h alone compiles as C++17 with -Wall -Wextra -Werror -pedantic,
// and a C++ host can fill the structs the usual way.
#include "sdtrain.h"

#include <cstddef>

static_assert(offsetof(sdt_entry, abi_version) == 0, "the version is the entry's first field");
static_assert(sizeof(sdt_status) == 4, "enums are 32-bit");

int main()
{
    sdt_version v = SDT_ABI_VERSION_INIT;
    sdt_ti_config config{};
    config.struct_size = sizeof config;
    sdt_host_callbacks callbacks{};
    callbacks.struct_size = sizeof callbacks;
    return (v.major == SDT_ABI_VERSION_MAJOR && config.struct_size && callbacks.struct_size) ? 0 : 1;
}
