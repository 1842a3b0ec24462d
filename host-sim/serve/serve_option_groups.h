/* serve_option_groups.h - where each Train-tab option sits on the page, grouped as A1111's
 * Train tab groups them. The options themselves (names, help, defaults) come from
 * panel_options.h; this is only their layout. */
#ifndef SDT_SERVE_OPTION_GROUPS_H
#define SDT_SERVE_OPTION_GROUPS_H

/* The group's title for option name ("Advanced" for one not listed). */
const char *serve_option_group(const char *name);

#endif
