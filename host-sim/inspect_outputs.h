/* inspect_outputs.h - `sdt-host inspect` on the files a training run writes that are not
 * embeddings, so that inspect reads every file a run leaves: preview PNGs (size and the
 * prompt in their "parameters" chunk), the loss CSV (columns, rows, last step and loss) and
 * the settings JSON. Embeddings in any format are the plugin's to read. */
#ifndef SDT_HOST_INSPECT_OUTPUTS_H
#define SDT_HOST_INSPECT_OUTPUTS_H

#include <glib.h>

/* Prints what FILE is (as text, or one JSON object) and returns TRUE when it is one of those
 * outputs; FALSE, printing nothing, otherwise (a PNG with an sd-ti-embedding chunk included:
 * a damaged card is the plugin's error to report). */
gboolean inspect_output_file(const char *path, gboolean json);

#endif
