/* serve_train_request.h - a panel file posted by the page, made safe to train from: each key
 * that names a path (those the option table gives a folder, panel_option_info) is resolved
 * inside its configured folder (serve_folders.h) and written back absolute; a dataset folder's
 * files and the log folder's run folders hold no link leading out; the log folder is the
 * configured one; the template defaults as in the CLI. */
#ifndef SDT_SERVE_TRAIN_REQUEST_H
#define SDT_SERVE_TRAIN_REQUEST_H

#include <glib.h>

#include "serve_folders.h"

/* The checked panel file's text (g_free), or NULL with a sentence naming the key and its folder. */
char *serve_train_request_check(const serve_folders *folders, const char *body, size_t n, char **error);

#endif
