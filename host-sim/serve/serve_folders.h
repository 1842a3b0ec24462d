/* serve_folders.h - the folders the training panel may read and write, and the one check every
 * path a request names goes through: it must resolve (realpath, symlinks followed) inside its
 * configured folder. Nothing else on the machine is reachable from the page. */
#ifndef SDT_SERVE_FOLDERS_H
#define SDT_SERVE_FOLDERS_H

#include <glib.h>

typedef enum serve_root {
    SERVE_MODELS,        /* checkpoints and diffusers folders */
    SERVE_DATASETS,      /* dataset folders */
    SERVE_EMBEDDINGS,    /* embedding files (created and trained here) */
    SERVE_HYPERNETWORKS, /* hypernetwork files */
    SERVE_LOGS,          /* the log folder runs write to: <logs>/<date>/<name>/ */
    SERVE_TEMPLATES,     /* prompt templates (the shipped ones) */
    SERVE_N_ROOTS
} serve_root;

typedef struct serve_folders {
    char *root[SERVE_N_ROOTS]; /* absolute and resolved (realpath) */
} serve_folders;

/* The root's name in requests and JSON ("models", "datasets", ...); -1 from serve_root_named for none. */
const char *serve_root_name(serve_root r);
int serve_root_named(const char *name);

/* Fills each root: the given folder, else one under webui (A1111's layout: models/Stable-diffusion,
 * embeddings, models/hypernetworks, textual_inversion; datasets: <webui>/datasets), templates from
 * sdt-host's shipped folder. The log, embedding and hypernetwork folders are created when missing.
 * FALSE with one sentence naming the option to give. */
gboolean serve_folders_init(serve_folders *f, char *const given[SERVE_N_ROOTS], const char *webui, char **error);
void serve_folders_clear(serve_folders *f);

/* The absolute, resolved path of relative (a name inside root r, as the page lists it), when it
 * exists and lies inside r; else NULL with a sentence. An absolute path is accepted when it
 * resolves inside r. "" names the root itself. */
char *serve_folders_resolve(const serve_folders *f, serve_root r, const char *relative, char **error);

/* Whether no entry of folder (a resolved path inside root r), down to depth levels, is a symbolic
 * link that leads out of r: a run reads each file of a dataset folder (captions) and writes into
 * its run folder following links, so one would reach outside. FALSE with a sentence naming it. */
gboolean serve_folders_check_links(const serve_folders *f, serve_root r, const char *folder, int depth, char **error);

/* path (absolute) relative to root r when it lies inside it, else NULL (g_free). */
char *serve_folders_relative(const serve_folders *f, serve_root r, const char *path);

/* The entries of root r the page offers, sorted: files (and, for models and datasets, folders)
 * up to depth levels down; relative names (g_ptr_array_unref). */
GPtrArray *serve_folders_list(const serve_folders *f, serve_root r);

#endif
