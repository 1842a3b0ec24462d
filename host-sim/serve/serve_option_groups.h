/* serve_option_groups.h - where each Train-tab option sits on the page, grouped as A1111's
 * Train tab groups them. The options themselves (names, help, defaults) come from
 * panel_options.h; this is only their layout. */
#ifndef SDT_SERVE_OPTION_GROUPS_H
#define SDT_SERVE_OPTION_GROUPS_H

#include <stddef.h>

/* The group's title for option name ("Advanced" for one not listed). */
const char *serve_option_group(const char *name);

/* For a path option the page picks from its folder's list (a select, as A1111's): the label of its
 * empty choice ("" for the page's own); NULL for an option typed in. */
const char *serve_option_picked(const char *name);

/* The i-th option name the layout names (every group's, in order, then the picked ones); NULL past
 * the last. A name that is not an option of the table would lay out nothing:
 * tests/host/test_panel_options.c. */
const char *serve_option_group_member(size_t i);

#endif
