/* stb_image_write.h compiled into one test (static functions), with the warnings its code raises
 * under the project's -Wall -Wextra -Werror silenced for it alone. Include once per test program. */
#ifndef SDT_TESTS_STB_IMAGE_WRITE_STATIC_H
#define SDT_TESTS_STB_IMAGE_WRITE_STATIC_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#pragma GCC diagnostic pop

#endif
