/* hn_preview_chain.h - other hypernetworks chained after the trained one in a training run's
 * previews only (sdt_hn_config.preview_hypernetworks, ABI 1.4), and the trained one's preview
 * strength. They sit on the training binding at strength 0, which the hook skips (hn_hook.h), so
 * training computes exactly what it computes without them; a preview sets their strengths and
 * the end of the preview puts the zeros back. */
#ifndef SDT_HN_PREVIEW_CHAIN_H
#define SDT_HN_PREVIEW_CHAIN_H

#include <stdbool.h>

#include "hn/hn_hook.h"
#include "sdt_error.h"

#define SDT_HN_PREVIEW_EXTRA_MAX (SDT_HN_MAX_CHAIN - 1)

typedef struct sdt_hn_preview_chain {
    int count;
    char *paths[SDT_HN_PREVIEW_EXTRA_MAX];
    float strengths[SDT_HN_PREVIEW_EXTRA_MAX];
    sdt_hn *members[SDT_HN_PREVIEW_EXTRA_MAX];
    float trained_strength;         /* while training */
    float trained_preview_strength; /* in previews */
} sdt_hn_preview_chain;

/* Before the model: "FILE[:STRENGTH]; ..." (NULL or "" is none; a part after the last ':' that
 * is a number is the strength, else part of the file name), each file readable. preview_strength
 * 0 means the training strength. false + a sentence naming field (as the host's struct names the list). */
bool sdt_hn_preview_chain_parse(sdt_hn_preview_chain *c, const char *list, const char *field, float strength,
                                double preview_strength, sdt_error *error);
/* After the model: each file loaded on be and appended to b (after the trained one, index 0) at
 * strength 0. */
bool sdt_hn_preview_chain_bind(sdt_hn_preview_chain *c, sdt_hn_binding *b, sdt_backend *be, sdt_error *error);
/* Around a preview: the preview strengths, then the training ones back. */
void sdt_hn_preview_chain_begin(const sdt_hn_preview_chain *c, sdt_hn_binding *b);
void sdt_hn_preview_chain_end(const sdt_hn_preview_chain *c, sdt_hn_binding *b);
void sdt_hn_preview_chain_free(sdt_hn_preview_chain *c);

#endif
