/* status.h - names of the ABI status codes (for logs and the entry's status_name). */
#ifndef SDT_PLUGIN_STATUS_H
#define SDT_PLUGIN_STATUS_H

#include "sdtrain.h"

/* A constant name such as "SDT_STATUS_IO"; "SDT_STATUS_UNKNOWN" for codes this build lacks. */
const char *sdt_status_name(sdt_status status);

#endif
