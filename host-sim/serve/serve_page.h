/* serve_page.h - the panel's static page (page/: index.html, panel.js, panel.css), compiled into sdt-host by
 * embed_page.cmake: no files to install, no build step for the page. */
#ifndef SDT_SERVE_PAGE_H
#define SDT_SERVE_PAGE_H

#include <stddef.h>

typedef struct serve_page_file {
    const char *path; /* "/", "/panel.js", ... */
    const char *content_type;
    const unsigned char *data;
    size_t size;
} serve_page_file;

/* The file served at path, or NULL. */
const serve_page_file *serve_page_find(const char *path);

#endif
