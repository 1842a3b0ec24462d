/* hn_hook.h - hypernetworks bound to the UNet's K/V hook (models/networks/unet/unet.h).
 *
 * A binding holds a chain of hypernetworks, each with a strength: at every attention
 * whose K/V input width matches a module, K passes through each hypernetwork's K
 * module in chain order and V through each V module (A1111's apply_hypernetworks).
 * Q is untouched. A hypernetwork without a module for a width passes it through, and so does
 * one at strength 0 (skipped: its x + f(x) * 0 is x, and it costs nothing).
 *
 * Training (sdt_hn_binding_set_step) turns dropout on for the entries added with
 * `training`; their masks are keyed by (seed, counter, attention layer, K/V, chain
 * position, layer), so the UNet's checkpointing recompute and the backward see the
 * forward's masks and a resumed run draws what an uninterrupted one would. A1111
 * trains at strength 1 (its multiplier applies only in eval): pass 1 for the entry
 * being trained to match it.
 *
 * The backward recomputes the chain from the hook's input (cheap next to the UNet)
 * and accumulates the weight gradients of entries added with `training` whose
 * gradients are enabled (sdt_hn_enable_grads).
 *
 * A UNet pass (unet.h: sdt_unet_kv_hook.pass; a forward, or a forward and its backward)
 * computes once what does not change within it:
 *  - every cross-attention's K/V input is the one text context, so the chain's output on it
 *    is computed at the first cross site and handed to the others (and to the checkpointing
 *    recompute); their output gradients are summed (f32) and taken back through the chain once
 *    at the backward's end, weight gradients and d(context) alike. Equal to the per-site
 *    computation up to float summation order. Not when a member draws dropout masks in
 *    training (keyed per site: those chains keep running per site);
 *  - a 16-bit call's copies of the Linear weights are made once per module and pass, not per call.
 * Both are forgotten when the next pass begins and by every call below that changes the chain or
 * its mode, so new weights (the optimizer, an upload, a swap) are always seen by the next pass.
 * Calls outside a pass (the applier's) compute per call.
 */
#ifndef SDT_HN_HOOK_H
#define SDT_HN_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hn/hn_module.h"
#include "unet.h"

#define SDT_HN_MAX_CHAIN 8

typedef struct sdt_hn_binding sdt_hn_binding;

/* An empty chain on a backend (every hypernetwork added must live on it). */
sdt_hn_binding *sdt_hn_binding_create(sdt_backend *be, sdt_error *error);
/* Frees the binding's workspace; the hypernetworks stay the caller's. */
void sdt_hn_binding_free(sdt_hn_binding *b);

/* Appends hn at `strength` (finite; A1111's <hypernet:name:strength>). `training`:
 * dropout on during steps and weight gradients accumulated in backward. */
bool sdt_hn_binding_add(sdt_hn_binding *b, sdt_hn *hn, float strength, bool training, sdt_error *error);
int sdt_hn_binding_count(const sdt_hn_binding *b);
/* Changes an entry's strength (previews at another strength than training). */
bool sdt_hn_binding_set_strength(sdt_hn_binding *b, int index, float strength, sdt_error *error);

/* Before each UNet forward of a training micro-batch: the dropout key. counter must
 * differ between micro-batches (e.g. the global micro-step), be the same for that
 * micro-batch's forward and backward. eval: no dropout anywhere (previews, generation). */
void sdt_hn_binding_set_step(sdt_hn_binding *b, uint64_t seed, uint64_t counter);
void sdt_hn_binding_set_eval(sdt_hn_binding *b);

/* Whether a pass computes the context's chain once (the default) or at every cross site, as
 * before; the per-site way is the reference the tests compare the shared one against. */
void sdt_hn_binding_share_context(sdt_hn_binding *b, bool share);

/* The hook to put in sdt_unet_options.hook; valid while the binding lives. */
const sdt_unet_kv_hook *sdt_hn_binding_hook(sdt_hn_binding *b);

/* Device bytes the binding's workspace needs for K/V inputs of up to max_rows rows
 * (batch x tokens, e.g. batch x (latent H x W) at the widest self-attention), for the
 * memory estimate; sdt_hn_binding_reserve allocates it now so no step fails later. */
size_t sdt_hn_binding_workspace_bytes(const sdt_hn_binding *b, int64_t max_rows);
bool sdt_hn_binding_reserve(sdt_hn_binding *b, int64_t max_rows, sdt_error *error);
/* The same with each width's own largest input: rows(user, width) is the most K/V rows an attention
 * of that width takes (0: none). SDXL's 2048-wide context has 77 tokens while its self-attentions
 * see thousands, so one maximum for every width would size the workspace several times too large. */
typedef int64_t (*sdt_hn_width_rows)(void *user, int width);
size_t sdt_hn_binding_workspace_bytes_by_width(const sdt_hn_binding *b, sdt_hn_width_rows rows, void *user);
bool sdt_hn_binding_reserve_by_width(sdt_hn_binding *b, sdt_hn_width_rows rows, void *user, sdt_error *error);

/* Device bytes of the pass caches for a text context of up to context_rows rows (batch x tokens) of
 * context_width: the shared K and V outputs and their gradient sums, and with weights16 (a 16-bit
 * precision) the members' 16-bit weight copies; sdt_hn_binding_reserve_cache allocates them now.
 * Without a reserve a pass sizes them itself and, refused, works per site and per call. */
size_t sdt_hn_binding_cache_bytes(const sdt_hn_binding *b, int context_width, int64_t context_rows, bool weights16);
bool sdt_hn_binding_reserve_cache(sdt_hn_binding *b, int context_width, int64_t context_rows, bool weights16,
                                  sdt_error *error);

#endif
