/* test_hn_train.c - hypernetwork training through the ABI (issue 8), on the demo model (K/V
 * widths 128 for cross-attention, 64 for self-attention), CPU, fixed seed:
 *  1. a run learns: the mean loss of the last steps is below that of the first; the file named
 *     (.pt) and its .safetensors twin (in the run folder, not beside the .pt where ComfyUI would
 *     list it), the copies hypernetworks/<name>-<step>.pt, previews,
 *     hypernetwork_loss.csv (one row per step) and the state are written; the .pt, the twin and
 *     the state hold the same values bit for bit, and the files record the step;
 *  2. resume is bit-exact, fp32 and fp16 (the scaler's state): N steps in one run equal K steps plus
 *     N-K resumed (dropout on, batch 2, accumulation 2, random latents, a schedule that changes
 *     between K and N);
 *  3. previews (eval mode, no dropout) leave training alone: with a preview after every step the
 *     losses and the hypernetwork are the same bits as without;
 *  4. interrupt() during the run saves the hypernetwork and the state at the step reached;
 *  5. the validation sentences: modules that match no attention of the model, max steps already
 *     reached, a schedule that does not parse, a hypernetwork holding NaN, a memory plan over the
 *     cap (SDTRAIN_MEMORY_LIMIT_MB), an embedding for joint
 *     training that is missing; a file beside the .pt at the twin's name that is not this
 *     hypernetwork's twin is never replaced, and one that is (an earlier version's layout) is kept
 *     up to date; each shared option out of range (batch, accumulation, clip skip, tag
 *     dropout, save/CSV/preview cadences, preview size, CFG and sampler...) names its field;
 *  6. joint training (hypernetwork + embedding), fp16, an inf injected into the embedding's
 *     gradients at one step (SDTRAIN_FAULT_INF_GRAD): that step the embedding's optimizer skips,
 *     the hypernetwork's steps, and the loss scale backs off exactly once; both files are saved;
 *  7. joint training where the embedding's schedule ends first: it rests, the hypernetwork goes on;
 *  8. joint training, fp16, a NaN pixel (SDTRAIN_FAULT_NAN_PIXEL): the one-shot fallback switches
 *     to fp32 and halves the learning rate of both groups;
 *  9. inspect on a run's state (hypernetwork, joint, embedding) through both factories: the
 *     method(s), step, paired files and their hashes, precision, loss scale, seal.
 * Runs on the test build of the plugin (fault hooks). */
#include <cjson/cJSON.h>

#include "hn_fixture.h"

static int count_lines(const char *path)
{
    size_t n;
    unsigned char *b = fx_read_file(path, &n);
    int lines = 0;
    for (size_t i = 0; b && i < n; i++) lines += b[i] == '\n';
    free(b);
    return lines;
}

/* The tensor names of the first module's first Linear: what the checks compare. */
#define FIRST_WEIGHT "128.0.linear.0.weight"
#define LAST_BIAS "64.1.linear.3.bias"         /* V module of width 64: Linear, ReLU, LayerNorm, Linear (position 3) */
#define LAST_BIAS_DROPOUT "64.1.linear.4.bias" /* with Dropout after the first LayerNorm */

static void check_learns(const hn_env *env)
{
    printf("-- a hypernetwork run learns and writes what A1111 writes\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], buf[FX_PATH];
    run_dirs(env, "learn", dir, log);
    if (!make_hn(env, dir, "shapes", "128, 64", false, hn)) return;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 24);
    r.options.batch_size = 2;
    r.options.save_every = 8;
    r.options.preview_every = 12;
    r.options.preview_steps = 2;
    sdt_status st = hn_prepare_run(env, t, &r);
    CHECK(st == SDT_STATUS_OK, "the run finishes: %s", hn_error(env, t));
    CHECK(rec.n_steps == 24, "24 steps published (%d)", rec.n_steps);
    double first = 0, last = 0;
    for (int i = 0; i < 8 && rec.n_steps == 24; i++) {
        first += rec.steps[i].loss / 8;
        last += rec.steps[16 + i].loss / 8;
    }
    printf("  mean loss of steps 1-8 %.5f, of steps 17-24 %.5f\n", first, last);
    CHECK(last < first, "the loss falls (%.5f -> %.5f)", first, last);
    CHECK(rec.saved[SDT_FILE_HYPERNETWORK_SNAPSHOT] == 3, "a copy every 8 steps (%d)",
          rec.saved[SDT_FILE_HYPERNETWORK_SNAPSHOT]);
    CHECK(strstr(rec.last_saved[SDT_FILE_HYPERNETWORK_SNAPSHOT], "/hypernetworks/shapes-24.pt") != NULL,
          "copies are hypernetworks/<name>-<step>.pt: %s", rec.last_saved[SDT_FILE_HYPERNETWORK_SNAPSHOT]);
    CHECK(rec.saved[SDT_FILE_PREVIEW] == 2, "a preview every 12 steps (%d)", rec.saved[SDT_FILE_PREVIEW]);
    CHECK(rec.saved[SDT_FILE_HYPERNETWORK] == 2, "the file named and its twin (%d)", rec.saved[SDT_FILE_HYPERNETWORK]);
    const char *twin = rec.last_saved[SDT_FILE_HYPERNETWORK], *state = rec.last_saved[SDT_FILE_TRAINING_STATE];
    char beside[FX_PATH], run_folder_twin[FX_PATH];
    snprintf(beside, sizeof beside, "%.*s.safetensors", (int)(strlen(hn) - 3), hn);
    snprintf(run_folder_twin, sizeof run_folder_twin, "%.*s/shapes.safetensors", (int)(strrchr(state, '/') - state),
             state);
    CHECK(strcmp(twin, run_folder_twin) == 0 && access(twin, F_OK) == 0,
          "the .safetensors twin is in the run folder, beside the state: %s", twin);
    CHECK(access(beside, F_OK) != 0, "no .safetensors beside the .pt, where ComfyUI would list a file it cannot apply");
    CHECK(same_floats(twin, FIRST_WEIGHT, state, "hypernetwork." FIRST_WEIGHT) &&
              same_floats(twin, LAST_BIAS, state, "hypernetwork." LAST_BIAS),
          "the twin holds the state's values bit for bit");
    char *step = fx_read_metadata(twin, "step");
    CHECK(step && strcmp(step, "24") == 0, "the twin records step 24 (%s)", step ? step : "-");
    free(step);
    /* the .pt through inspect: step and the same values as the twin (read back through the plugin) */
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(env->hn->inspect(t, hn, &info, NULL, 0, NULL) == SDT_STATUS_OK && info.step == 24 && info.all_finite,
          "the .pt reads back at step 24: %s", hn_error(env, t));
    char csv[FX_PATH];
    snprintf(csv, sizeof csv, "%.3000s/hypernetwork_loss.csv", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    char *slash = strrchr(csv, '/');
    if (slash) *slash = '\0';
    slash = strrchr(csv, '/');
    if (slash) snprintf(slash, sizeof csv - (size_t)(slash - csv), "/hypernetwork_loss.csv");
    CHECK(count_lines(csv) == 25, "hypernetwork_loss.csv has a header and 24 rows (%d lines in %s)", count_lines(csv),
          csv);
    (void)buf;
    env->hn->destroy(t);
}

/* The .pt bytes after N steps in one run vs K steps, then resumed to N from the state. */
static void check_resume(const hn_env *env, sdt_precision precision)
{
    const char *tag = precision == SDT_PRECISION_FP16 ? "fp16" : "fp32";
    printf("-- resume is bit-exact, %s\n", tag);
    char dir[FX_PATH], log_a[FX_PATH], log_b[FX_PATH], hn_a[FX_PATH], hn_b[FX_PATH], name[64];
    snprintf(name, sizeof name, "resume-hn-%s", tag);
    fx_subdir(&env->base, dir, name);
    snprintf(name, sizeof name, "resume-log-a-%s", tag);
    fx_subdir(&env->base, log_a, name);
    snprintf(name, sizeof name, "resume-log-b-%s", tag);
    fx_subdir(&env->base, log_b, name);
    if (!make_hn(env, dir, "resumed", "128, 64", true, hn_a)) return;
    snprintf(hn_b, sizeof hn_b, "%.3900s/resumed-b.pt", dir);
    CHECK(fx_copy_file(hn_a, hn_b), "copy the hypernetwork");
    hn_run r;
    fx_recorder rec_a, rec_b, rec_c;
    /* A: 6 steps at once */
    sdt_hn_trainer *t = hn_create(env, &rec_a);
    hn_config(env, &r, hn_a, log_a, 6);
    r.options.batch_size = 2;
    r.options.grad_accum_steps = 2;
    r.options.latent_sampling = SDT_LATENT_RANDOM;
    r.options.shuffle_tags = true;
    r.config.learn_rate = "0.004:3, 0.001";
    r.options.precision = precision;
    r.options.loss_scale_init = 1024;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "run A: %s", hn_error(env, t));
    env->hn->destroy(t);
    /* B: 4 steps, then 6 resumed from its state */
    t = hn_create(env, &rec_b);
    r.config.hypernetwork_path = hn_b;
    r.options.log_dir = log_b;
    r.options.max_steps = 4;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "run B to 4: %s", hn_error(env, t));
    env->hn->destroy(t);
    t = hn_create(env, &rec_c);
    r.options.max_steps = 6;
    r.options.resume_state_path = log_b;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "run B resumed to 6: %s", hn_error(env, t));
    env->hn->destroy(t);
    CHECK(rec_c.n_steps == 2 && rec_c.steps[0].step == 5, "the resumed run did steps 5 and 6 (%d steps)",
          rec_c.n_steps);
    CHECK(rec_a.n_steps == 6 && rec_c.n_steps == 2 && rec_a.steps[4].loss == rec_c.steps[0].loss &&
              rec_a.steps[5].loss == rec_c.steps[1].loss,
          "the losses of steps 5 and 6 are the same bits");
    const char *twin_a = rec_a.last_saved[SDT_FILE_HYPERNETWORK], *twin_b = rec_c.last_saved[SDT_FILE_HYPERNETWORK];
    CHECK(same_floats(twin_a, FIRST_WEIGHT, twin_b, FIRST_WEIGHT) &&
              same_floats(twin_a, LAST_BIAS_DROPOUT, twin_b, LAST_BIAS_DROPOUT),
          "the hypernetworks are the same bits");
    CHECK(same_floats(rec_a.last_saved[SDT_FILE_TRAINING_STATE], "hypernetwork.adamw_m." FIRST_WEIGHT,
                      rec_c.last_saved[SDT_FILE_TRAINING_STATE], "hypernetwork.adamw_m." FIRST_WEIGHT),
          "the AdamW moments are the same bits");
}

/* Previews (eval mode, their own random streams) change nothing in training: the same run with a
 * preview every step and without any ends with the same bits. */
static void check_previews_leave_training_alone(const hn_env *env)
{
    printf("-- previews do not disturb training\n");
    char dir[FX_PATH], log_a[FX_PATH], log_b[FX_PATH], hn_a[FX_PATH], hn_b[FX_PATH];
    fx_subdir(&env->base, dir, "preview-hn");
    fx_subdir(&env->base, log_a, "preview-log-a");
    fx_subdir(&env->base, log_b, "preview-log-b");
    if (!make_hn(env, dir, "previewed", "128, 64", true, hn_a)) return;
    snprintf(hn_b, sizeof hn_b, "%.3900s/previewed-b.pt", dir);
    CHECK(fx_copy_file(hn_a, hn_b), "copy the hypernetwork");
    hn_run r;
    fx_recorder rec_a, rec_b;
    sdt_hn_trainer *t = hn_create(env, &rec_a);
    hn_config(env, &r, hn_a, log_a, 3);
    r.options.preview_every = 1;
    r.options.preview_steps = 2;
    r.options.preview_seed = -1;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "with previews: %s", hn_error(env, t));
    env->hn->destroy(t);
    CHECK(rec_a.saved[SDT_FILE_PREVIEW] == 3, "a preview after every step (%d)", rec_a.saved[SDT_FILE_PREVIEW]);
    t = hn_create(env, &rec_b);
    r.config.hypernetwork_path = hn_b;
    r.options.log_dir = log_b;
    r.options.preview_every = 0;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "without previews: %s", hn_error(env, t));
    env->hn->destroy(t);
    const char *twin_a = rec_a.last_saved[SDT_FILE_HYPERNETWORK], *twin_b = rec_b.last_saved[SDT_FILE_HYPERNETWORK];
    bool same_losses = rec_a.n_steps == 3 && rec_b.n_steps == 3;
    for (int i = 0; same_losses && i < 3; i++) same_losses = rec_a.steps[i].loss == rec_b.steps[i].loss;
    CHECK(same_losses && same_floats(twin_a, FIRST_WEIGHT, twin_b, FIRST_WEIGHT) &&
              same_floats(twin_a, LAST_BIAS_DROPOUT, twin_b, LAST_BIAS_DROPOUT),
          "the same losses and the same hypernetwork bits with and without previews");
}

/* One step with a preview after it, the trained file a fresh copy of src named <dir>/<name>.pt; the preview's
 * path in preview, the trained twin's in twin. */
static sdt_status preview_run(const hn_env *env, const char *src, const char *dir, const char *name, const char *chain,
                              double preview_strength, char *preview, char *twin)
{
    char path[FX_PATH], log[FX_PATH];
    snprintf(path, sizeof path, "%.3900s/%s.pt", dir, name);
    snprintf(log, sizeof log, "%.3900s/log-%s", dir, name);
    CHECK(fx_copy_file(src, path), "copy the hypernetwork to %s", path);
    hn_run r;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_config(env, &r, path, log, 1);
    r.options.preview_every = 1;
    r.options.preview_steps = 2;
    r.options.preview_seed = 5;
    r.config.preview_hypernetworks = chain;
    r.config.preview_strength = preview_strength;
    sdt_status st = hn_prepare_run(env, t, &r);
    if (st != SDT_STATUS_OK) printf("   %s: %s\n", name, hn_error(env, t));
    env->hn->destroy(t);
    snprintf(preview, FX_PATH, "%s", st == SDT_STATUS_OK ? rec.last_saved[SDT_FILE_PREVIEW] : "");
    snprintf(twin, FX_PATH, "%s", st == SDT_STATUS_OK ? rec.last_saved[SDT_FILE_HYPERNETWORK] : "");
    return st;
}

/* Previews with other hypernetworks chained after the trained one (1.4): one at strength 0 gives the preview
 * without it, bit for bit; at another strength another preview; the trained one's preview strength changes the
 * preview; none of it changes training (the same trained bits); a missing file or a bad strength is refused. */
static void check_preview_chain(const hn_env *env)
{
    printf("-- previews with other hypernetworks chained in\n");
    char dir[FX_PATH], src[FX_PATH], other[FX_PATH], chain[2 * FX_PATH + 64];
    fx_subdir(&env->base, dir, "preview-chain");
    if (!make_hn(env, dir, "trained", "128, 64", false, src) || !make_hn(env, dir, "other", "128, 64", false, other))
        return;
    char p_plain[FX_PATH], p_zero[FX_PATH], p_on[FX_PATH], p_strong[FX_PATH];
    char t_plain[FX_PATH], t_zero[FX_PATH], t_on[FX_PATH], t_strong[FX_PATH];
    CHECK(preview_run(env, src, dir, "plain", NULL, 0, p_plain, t_plain) == SDT_STATUS_OK, "no chain");
    snprintf(chain, sizeof chain, " %s:0 ;", other);
    CHECK(preview_run(env, src, dir, "zero", chain, 0, p_zero, t_zero) == SDT_STATUS_OK, "a member at strength 0");
    snprintf(chain, sizeof chain, "%s:8", other);
    CHECK(preview_run(env, src, dir, "on", chain, 0, p_on, t_on) == SDT_STATUS_OK, "a member at strength 8");
    CHECK(preview_run(env, src, dir, "strong", NULL, 9, p_strong, t_strong) == SDT_STATUS_OK, "preview strength 9");
    CHECK(p_plain[0] && fx_same_bytes(p_plain, p_zero),
          "a chained hypernetwork at strength 0 leaves the preview as it was");
    CHECK(p_on[0] && !fx_same_bytes(p_plain, p_on), "a chained hypernetwork at strength 8 changes the preview");
    CHECK(p_strong[0] && !fx_same_bytes(p_plain, p_strong), "the trained one's preview strength changes the preview");
    CHECK(fx_same_bytes(t_plain, t_zero) && fx_same_bytes(t_plain, t_on) && fx_same_bytes(t_plain, t_strong),
          "the preview chain and strength change nothing in training");
    char unused[FX_PATH], unused_twin[FX_PATH];
    snprintf(chain, sizeof chain, "%.3900s/absent.pt:1", dir);
    CHECK(preview_run(env, src, dir, "missing", chain, 0, unused, unused_twin) == SDT_STATUS_NOT_FOUND,
          "a missing preview hypernetwork is NOT_FOUND");
    snprintf(chain, sizeof chain, "%s:20", other);
    CHECK(preview_run(env, src, dir, "too-strong", chain, 0, unused, unused_twin) == SDT_STATUS_VALIDATION,
          "a preview strength past 10 is refused");
    CHECK(preview_run(env, src, dir, "bad-strength", NULL, 11, unused, unused_twin) == SDT_STATUS_VALIDATION,
          "config.preview_strength past 10 is refused");
}

typedef struct interrupt_at {
    const hn_env *env;
    sdt_hn_trainer *t;
    int64_t step;
} interrupt_at;

static void interrupt_on_step(fx_recorder *r, const sdt_metrics *m)
{
    interrupt_at *a = r->user;
    if (m->step == a->step) a->env->hn->interrupt(a->t);
}

static void check_interrupt(const hn_env *env)
{
    printf("-- interrupt saves\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH];
    run_dirs(env, "stop", dir, log);
    if (!make_hn(env, dir, "stopped", "128, 64", false, hn)) return;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    interrupt_at at = {env, t, 3};
    rec.on_step = interrupt_on_step;
    rec.user = &at;
    hn_run r;
    hn_config(env, &r, hn, log, 50);
    sdt_status st = hn_prepare_run(env, t, &r);
    CHECK(st == SDT_STATUS_INTERRUPTED, "run() says INTERRUPTED (%d): %s", (int)st, hn_error(env, t));
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(env->hn->inspect(t, hn, &info, NULL, 0, NULL) == SDT_STATUS_OK && info.step == 3,
          "the hypernetwork was saved at step 3 (%lld)", (long long)info.step);
    CHECK(rec.last_saved[SDT_FILE_TRAINING_STATE][0] && access(rec.last_saved[SDT_FILE_TRAINING_STATE], F_OK) == 0,
          "the state was saved");
    env->hn->destroy(t);
}

/* A file beside the .pt at the twin's name that is not this hypernetwork's twin is left alone (the
 * twin goes to the run folder); one that is (the layout before the twin moved) is kept up to date. */
static void check_twin_safety(const hn_env *env)
{
    printf("-- a file at the twin's name that is another hypernetwork is not replaced\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], other[FX_PATH], beside[FX_PATH];
    run_dirs(env, "twin", dir, log);
    if (!make_hn(env, dir, "twin", "128, 64", false, hn) || !make_hn(env, dir, "other", "128", false, other)) return;
    snprintf(beside, sizeof beside, "%.*s.safetensors", (int)(strlen(hn) - 3), hn);
    /* another hypernetwork where the twin used to go (a .pt's bytes under the .safetensors name: any other file) */
    CHECK(fx_copy_file(other, beside), "a foreign file at %s", beside);
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 2);
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "the run finishes: %s", hn_error(env, t));
    CHECK(fx_same_bytes(other, beside), "the foreign file is unchanged");
    CHECK(rec.saved[SDT_FILE_HYPERNETWORK] == 2 && strcmp(rec.last_saved[SDT_FILE_HYPERNETWORK], beside) != 0,
          "the file named and its twin in the run folder were written (%d, %s)", rec.saved[SDT_FILE_HYPERNETWORK],
          rec.last_saved[SDT_FILE_HYPERNETWORK]);
    env->hn->destroy(t);
    /* the earlier layout: this hypernetwork's twin beside the .pt is updated there, no second twin */
    CHECK(fx_copy_file(rec.last_saved[SDT_FILE_HYPERNETWORK], beside), "an old-layout twin at %s", beside);
    t = hn_create(env, &rec);
    hn_config(env, &r, hn, log, 3);
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "the run on the old layout finishes: %s", hn_error(env, t));
    char *step = fx_read_metadata(beside, "step");
    CHECK(rec.saved[SDT_FILE_HYPERNETWORK] == 2 && strcmp(rec.last_saved[SDT_FILE_HYPERNETWORK], beside) == 0 && step &&
              strcmp(step, "3") == 0,
          "the old-layout twin is the one written, at step 3 (%s, step %s)", rec.last_saved[SDT_FILE_HYPERNETWORK],
          step ? step : "-");
    free(step);
    env->hn->destroy(t);
}

static void expect_refusal(const hn_env *env, hn_run *r, sdt_status want, const char *a, const char *b,
                           const char *what)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r->config.train_options = &r->options;
    sdt_status st = env->hn->prepare(t, &r->config, &info);
    const char *msg = hn_error(env, t);
    printf("  %s: %d %s\n", what, (int)st, msg);
    CHECK(st == want && strstr(msg, a) && (!b || strstr(msg, b)), "%s: status %d (want %d), sentence: %s", what,
          (int)st, (int)want, msg);
    env->hn->destroy(t);
}

static void check_refusals(const hn_env *env)
{
    printf("-- validation sentences\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], wide[FX_PATH];
    run_dirs(env, "refuse", dir, log);
    if (!make_hn(env, dir, "refused", "128, 64", false, hn) || !make_hn(env, dir, "wide", "320", false, wide)) return;
    hn_run r;
    hn_config(env, &r, wide, log, 5);
    expect_refusal(env, &r, SDT_STATUS_NO_GRADIENT, "match no attention",
                   "this model's attention widths are 128 (cross-attention context 128) and 64",
                   "modules for another model");
    hn_config(env, &r, hn, log, 0);
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.train_options->max_steps", NULL, "max steps 0");
    hn_config(env, &r, hn, log, 5);
    r.config.learn_rate = "0.001:x";
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "0.001:x", NULL, "a schedule that does not parse");
    /* a hypernetwork holding a NaN (a .safetensors copy of it, poked) */
    char nan_hn[FX_PATH];
    snprintf(nan_hn, sizeof nan_hn, "%.3900s/nan.safetensors", dir);
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run once;
    hn_config(env, &once, hn, log, 1); /* one step writes the .safetensors twin to copy */
    CHECK(hn_prepare_run(env, t, &once) == SDT_STATUS_OK &&
              fx_copy_file(rec.last_saved[SDT_FILE_HYPERNETWORK], nan_hn) && fx_poke_f32(nan_hn, FIRST_WEIGHT, 3, NAN),
          "a hypernetwork with a NaN made");
    env->hn->destroy(t);
    hn_config(env, &r, hn, log, 1); /* the file is at step 1 now */
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "max steps", hn, "max steps reached");
    hn_config(env, &r, nan_hn, log, 5);
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "NaN", "nan.safetensors", "a hypernetwork holding NaN");
    hn_config(env, &r, hn, log, 5);
    setenv("SDTRAIN_MEMORY_LIMIT_MB", "1", 1);
    expect_refusal(env, &r, SDT_STATUS_OUT_OF_MEMORY, "MiB", "limits it to 1 MiB", "a memory plan over the cap");
    unsetenv("SDTRAIN_MEMORY_LIMIT_MB");
    hn_config(env, &r, hn, log, 5);
    r.config.embedding_path = "no-such-embedding.safetensors";
    /* NOT_FOUND from the open's errno, as for every missing file (the bounded reader, models/formats/file_read.h) */
    expect_refusal(env, &r, SDT_STATUS_NOT_FOUND, "no-such-embedding.safetensors", NULL, "a missing embedding");
    hn_config(env, &r, hn, log, 5);
    r.options.v_prediction = true;
    r.options.prediction_type = SDT_PREDICTION_EPSILON;
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.train_options->v_prediction",
                   "config.train_options->prediction_type", "v_prediction beside prediction_type epsilon (ABI 1.3)");
}

/* The shared options' checks (train/train_options.c) on the hypernetwork path: each bad value is a
 * VALIDATION sentence naming config.train_options-><field>, refused before any file is read. */
static void check_shared_option_refusals(const hn_env *env)
{
    printf("-- shared option checks\n");
    char dir[FX_PATH], log[FX_PATH];
    run_dirs(env, "options", dir, log);
    char hn[FX_PATH];
    fx_path(hn, dir, "never-read.pt"); /* the checks come before the file is opened */
    hn_run r;
#define BAD_OPTION(field, assign)                                                                                      \
    do {                                                                                                               \
        hn_config(env, &r, hn, log, 5);                                                                                \
        r.options.preview_every = 1;                                                                                   \
        assign;                                                                                                        \
        expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.train_options->" field, NULL, #assign);                 \
    } while (0)
    BAD_OPTION("batch_size", r.options.batch_size = 0);
    BAD_OPTION("grad_accum_steps", r.options.grad_accum_steps = 0);
    BAD_OPTION("clip_skip", r.options.clip_skip = 0);
    BAD_OPTION("clip_skip", r.options.clip_skip = 13);
    BAD_OPTION("tag_dropout", r.options.tag_dropout = 3);
    BAD_OPTION("save_every", r.options.save_every = -1);
    BAD_OPTION("write_csv_every", r.options.write_csv_every = -5);
    BAD_OPTION("preview_cfg_scale", r.options.preview_cfg_scale = -1);
    BAD_OPTION("preview_width", r.options.preview_width = 13);
    BAD_OPTION("preview_height", r.options.preview_height = 4096);
    BAD_OPTION("width", r.options.width = 100);
    BAD_OPTION("preview_sampler", r.options.preview_sampler = "euler");
    BAD_OPTION("preview_steps", r.options.preview_steps = 0);
    BAD_OPTION("lr_backoff", r.options.lr_backoff = 0);
    BAD_OPTION("loss_scale_init", r.options.loss_scale_init = 0);
    BAD_OPTION("max_consecutive_nonfinite", r.options.max_consecutive_nonfinite = 0);
    BAD_OPTION("precision", r.options.precision = 7);
    BAD_OPTION("save_state_every_seconds", r.options.save_state_every_seconds = -1);
#undef BAD_OPTION
}

/* A bad clip value or embedding learning rate is named as such, not as "learning rate schedule". */
static void check_schedule_field_names(const hn_env *env)
{
    printf("-- schedule sentences name their field\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], emb[FX_PATH];
    run_dirs(env, "fields", dir, log);
    if (!make_joint_pair(env, dir, "fields", 2, hn, emb)) return;
    hn_run r;
    hn_config(env, &r, hn, log, 5);
    r.options.clip_mode = SDT_CLIP_NORM;
    r.options.clip_value = "0.1:x";
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.train_options->clip_value: ", "0.1:x", "a bad clip value");
    hn_config(env, &r, hn, log, 5);
    r.config.embedding_path = emb;
    r.config.embedding_learn_rate = "0.005:3, fast";
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.embedding_learn_rate: ", "fast",
                   "a bad embedding learning rate");
    hn_config(env, &r, hn, log, 5);
    r.config.learn_rate = "0.001:2, 0.002:1";
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.learn_rate: ", "steps must increase",
                   "a bad hypernetwork learning rate");
}

/* ABI 1.4's joint-training fields: the embedding's PNG cards (on by default, as for an embedding
 * alone; off when asked), its own clip settings (a bad one named as such), and a 1.3 host's
 * smaller config getting the defaults. */
static void check_joint_options(const hn_env *env)
{
    printf("-- joint training: the embedding's cards and clip settings (ABI 1.4)\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], emb[FX_PATH];
    run_dirs(env, "jointopts", dir, log);
    if (!make_joint_pair(env, dir, "opts", 2, hn, emb)) return;
    hn_run r;
    hn_config(env, &r, hn, log, 5);
    r.config.embedding_path = emb;
    r.config.embedding_clip_mode = SDT_CLIP_NORM;
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.embedding_clip_mode", "config.embedding_clip_value",
                   "an embedding clip mode without its value");
    r.config.embedding_clip_value = "0.5:x";
    expect_refusal(env, &r, SDT_STATUS_VALIDATION, "config.embedding_clip_value: ", "0.5:x",
                   "a bad embedding clip value");
    const bool cards[3] = {true, false, true};
    const uint32_t sizes[3] = {sizeof(sdt_hn_config), sizeof(sdt_hn_config),
                               (uint32_t)offsetof(sdt_hn_config, save_image_with_embedding)};
    for (int k = 0; k < 3; k++) {
        char run_log[FX_PATH], tag[32];
        snprintf(tag, sizeof tag, "jointopts-log%d", k);
        fx_subdir(&env->base, run_log, tag);
        fx_recorder rec;
        sdt_hn_trainer *t = hn_create(env, &rec);
        hn_config(env, &r, hn, run_log, k + 2); /* the files step on from run to run */
        r.config.embedding_path = emb;
        r.config.save_image_with_embedding = k == 0; /* k == 2 sets false past its struct_size: not read */
        if (k == 0) {
            r.config.embedding_clip_mode = SDT_CLIP_VALUE; /* the embedding's own clipping, the hypernetwork's off */
            r.config.embedding_clip_value = "0.05";
        }
        r.config.struct_size = sizes[k]; /* k == 2: a 1.3 host, which has none of the fields: the defaults */
        sdt_status st = hn_prepare_run(env, t, &r);
        CHECK(st == SDT_STATUS_OK, "joint run %d: %s", k, hn_error(env, t));
        CHECK((rec.saved[SDT_FILE_EMBEDDING_CARD] > 0) == cards[k], "joint run %d: %d PNG cards (want %s)", k,
              rec.saved[SDT_FILE_EMBEDDING_CARD], cards[k] ? "some" : "none");
        env->hn->destroy(t);
    }
}

/* One state file through both factories' inspect: the shared description (method(s), step,
 * paired files with the hashes the state records, precision, loss scale, seal). */
static void expect_state_described(const hn_env *env, const char *state, const char *methods, int64_t step,
                                   const char *precision, bool scaled, const char *what)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    sdt_ti_trainer *ti = fx_create(&env->base, &rec);
    if (!t || !ti) return;
    char hn_json[32768] = "", ti_json[32768] = "";
    sdt_hypernetwork_info hn_info;
    memset(&hn_info, 0, sizeof hn_info);
    hn_info.struct_size = sizeof hn_info;
    sdt_embedding_info ti_info;
    memset(&ti_info, 0, sizeof ti_info);
    ti_info.struct_size = sizeof ti_info;
    CHECK(env->hn->inspect(t, state, &hn_info, hn_json, sizeof hn_json, NULL) == SDT_STATUS_OK,
          "%s: the hypernetwork "
          "factory describes the state: %s",
          what, hn_error(env, t));
    CHECK(env->base.ti->inspect(ti, state, &ti_info, ti_json, sizeof ti_json, NULL) == SDT_STATUS_OK,
          "%s: the embedding "
          "factory describes the state: %s",
          what, fx_last_error(&env->base, ti));
    CHECK(hn_info.step == step && ti_info.step == step && ti_info.format == SDT_EMBEDDING_FILE_TRAINING_STATE &&
              hn_info.all_finite && ti_info.all_finite,
          "%s: step %lld/%lld (want %lld), finite, a training state", what, (long long)hn_info.step,
          (long long)ti_info.step, (long long)step);
    const char *jsons[2] = {hn_json, ti_json};
    for (int k = 0; k < 2; k++) {
        cJSON *root = cJSON_Parse(jsons[k]);
        const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
        const cJSON *prec = cJSON_GetObjectItemCaseSensitive(root, "precision");
        const cJSON *scale = cJSON_GetObjectItemCaseSensitive(root, "loss_scale");
        const cJSON *sealed = cJSON_GetObjectItemCaseSensitive(root, "sealed");
        const cJSON *jstep = cJSON_GetObjectItemCaseSensitive(root, "step");
        CHECK(cJSON_IsString(format) && strcmp(format->valuestring, "sdtrain-training-state") == 0 &&
                  cJSON_IsString(prec) && strcmp(prec->valuestring, precision) == 0 &&
                  (scaled ? cJSON_IsNumber(scale) && scale->valuedouble > 0 : cJSON_IsNull(scale)) &&
                  cJSON_IsTrue(sealed) && cJSON_IsNumber(jstep) && (int64_t)jstep->valuedouble == step,
              "%s (%s factory): format, precision %s, scale, seal and step in the JSON", what,
              k ? "embedding" : "hypernetwork", precision);
        char listed[128] = "";
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "methods")) snprintf(
            listed + strlen(listed), sizeof listed - strlen(listed), "%s%s", listed[0] ? "," : "", m->valuestring);
        CHECK(strcmp(listed, methods) == 0, "%s: methods %s (want %s)", what, listed, methods);
        const cJSON *pair;
        int pairs = 0;
        cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(root, "paired_files"))
        {
            const char *method = cJSON_GetObjectItemCaseSensitive(pair, "method")->valuestring;
            char key[64];
            snprintf(key, sizeof key, "%s_sha256", method);
            char *hash = fx_read_metadata(state, key);
            snprintf(key, sizeof key, "%s_file", method);
            char *file = fx_read_metadata(state, key);
            const cJSON *jhash = cJSON_GetObjectItemCaseSensitive(pair, "sha256");
            const cJSON *jfile = cJSON_GetObjectItemCaseSensitive(pair, "file");
            CHECK(hash && file && cJSON_IsString(jhash) && strcmp(jhash->valuestring, hash) == 0 &&
                      cJSON_IsString(jfile) && strcmp(jfile->valuestring, file) == 0 && access(file, F_OK) == 0,
                  "%s: the %s's paired file and hash are the state's", what, method);
            free(hash);
            free(file);
            pairs++;
        }
        CHECK(pairs == (strchr(methods, ',') ? 2 : 1), "%s: %d paired files", what, pairs);
        cJSON_Delete(root);
    }
    if (strstr(methods, "hypernetwork"))
        CHECK(hn_info.parameter_count > 0, "%s: the hypernetwork's trained values counted", what);
    if (strstr(methods, "embedding"))
        CHECK(ti_info.vectors == 2 && ti_info.embedding_dim > 0, "%s: the embedding's shape %u x %u", what,
              ti_info.vectors, ti_info.embedding_dim);
    env->hn->destroy(t);
    env->base.ti->destroy(ti);
}

static void check_state_inspect(const hn_env *env)
{
    printf("-- inspect on a run's state: embedding, hypernetwork, joint\n");
    char dir[FX_PATH], log[FX_PATH], joint_log[FX_PATH], emb_log[FX_PATH], hn[FX_PATH], emb[FX_PATH], alone[FX_PATH],
        state[FX_PATH];
    run_dirs(env, "inspect", dir, log);
    fx_subdir(&env->base, joint_log, "inspect-joint-log");
    fx_subdir(&env->base, emb_log, "inspect-emb-log");
    if (!make_joint_pair(env, dir, "inspect", 2, hn, emb) ||
        !fx_make_embedding(&env->base, dir, "inspectalone", 2, "ring", alone))
        return;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 2);
    r.options.precision = SDT_PRECISION_FP16;
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "the hypernetwork run: %s", hn_error(env, t));
    snprintf(state, sizeof state, "%s", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    env->hn->destroy(t);
    expect_state_described(env, state, "hypernetwork", 2, "fp16", true, "a hypernetwork's state");
    t = hn_create(env, &rec);
    hn_config(env, &r, hn, joint_log, 4);
    r.config.embedding_path = emb;
    r.config.embedding_learn_rate = "0.005";
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "the joint run: %s", hn_error(env, t));
    snprintf(state, sizeof state, "%s", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    env->hn->destroy(t);
    expect_state_described(env, state, "hypernetwork,embedding", 4, "fp32", false, "a joint run's state");
    sdt_ti_trainer *ti = fx_create(&env->base, &rec);
    sdt_ti_config c;
    fx_config(&env->base, &c, alone, NULL, emb_log, 2);
    CHECK(fx_prepare_run(&env->base, ti, &c) == SDT_STATUS_OK, "the embedding run: %s", fx_last_error(&env->base, ti));
    snprintf(state, sizeof state, "%s", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    env->base.ti->destroy(ti);
    expect_state_described(env, state, "embedding", 2, "fp32", false, "an embedding's state");
}

/* Joint training: both groups' per-group records in the state JSON. */
static cJSON *state_groups(const char *state, cJSON **root)
{
    char *training = fx_read_metadata(state, "training");
    *root = training ? cJSON_Parse(training) : NULL;
    free(training);
    return cJSON_GetObjectItem(*root, "groups");
}

static double group_number(cJSON *groups, const char *group, const char *key)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(groups, group), key));
}

static void check_joint_inf(const hn_env *env)
{
    printf("-- joint training, fp16, an inf in the embedding's gradients at step 3\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], emb[FX_PATH];
    run_dirs(env, "joint", dir, log);
    if (!make_hn(env, dir, "jointhn", "128, 64", false, hn) ||
        !fx_make_embedding(&env->base, dir, "jointemb", 2, "ring", emb))
        return;
    int64_t n0;
    float *emb0 = fx_read_embedding(emb, &n0);
    setenv("SDTRAIN_FAULT_INF_GRAD", "embedding:3", 1);
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 5);
    r.config.embedding_path = emb;
    r.config.embedding_learn_rate = "0.005";
    r.options.precision = SDT_PRECISION_FP16;
    r.options.loss_scale_init = 1024;
    r.options.save_every = 5;
    sdt_status st = hn_prepare_run(env, t, &r);
    unsetenv("SDTRAIN_FAULT_INF_GRAD");
    CHECK(strstr(rec.last_saved[SDT_FILE_HYPERNETWORK_SNAPSHOT], "/hypernetworks/jointhn-5.pt") &&
              strstr(rec.last_saved[SDT_FILE_EMBEDDING_SNAPSHOT], "/embeddings/jointemb-5.safetensors"),
          "each part's copy in its own folder: %s, %s", rec.last_saved[SDT_FILE_HYPERNETWORK_SNAPSHOT],
          rec.last_saved[SDT_FILE_EMBEDDING_SNAPSHOT]);
    CHECK(st == SDT_STATUS_OK, "the joint run finishes: %s", hn_error(env, t));
    for (int i = 0; i < rec.n_steps; i++)
        printf("  step %lld loss %.5f scale %g skipped %lld\n", (long long)rec.steps[i].step, rec.steps[i].loss,
               rec.steps[i].loss_scale, (long long)rec.steps[i].skipped);
    CHECK(rec.n_steps == 5, "5 steps (%d)", rec.n_steps);
    if (rec.n_steps == 5) {
        CHECK(rec.steps[1].loss_scale == 1024 && rec.steps[2].loss_scale == 512 && rec.steps[4].loss_scale == 512,
              "exactly one backoff, at step 3 (%g, %g, %g)", rec.steps[1].loss_scale, rec.steps[2].loss_scale,
              rec.steps[4].loss_scale);
        CHECK(rec.steps[1].skipped == 0 && rec.steps[2].skipped == 1 && rec.steps[4].skipped == 1,
              "one step counted as skipped (by one group)");
        for (int i = 0; i < 5; i++) CHECK(isfinite(rec.steps[i].loss), "step %d's loss is finite", i + 1);
    }
    cJSON *root;
    cJSON *groups = state_groups(rec.last_saved[SDT_FILE_TRAINING_STATE], &root);
    CHECK(group_number(groups, "hypernetwork", "optimizer_steps") == 5 &&
              group_number(groups, "hypernetwork", "skipped") == 0,
          "the hypernetwork's optimizer took all 5 steps");
    CHECK(group_number(groups, "embedding", "optimizer_steps") == 4 &&
              group_number(groups, "embedding", "skipped") == 1,
          "the embedding's optimizer skipped step 3 only");
    cJSON_Delete(root);
    int64_t n1;
    float *emb1 = fx_read_embedding(emb, &n1);
    bool moved = emb0 && emb1 && n0 == n1 && memcmp(emb0, emb1, (size_t)n0 * sizeof(float)) != 0;
    CHECK(moved && fx_all_finite(emb1, n1), "the embedding was trained and saved in its own file");
    free(emb0);
    free(emb1);
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(env->hn->inspect(t, hn, &info, NULL, 0, NULL) == SDT_STATUS_OK && info.step == 5 && info.all_finite,
          "the hypernetwork was saved in its own file at step 5");
    env->hn->destroy(t);
}

/* Joint training where the embedding's schedule ends first: it rests (no update) while the
 * hypernetwork trains on to the run's end. */
static void check_joint_rest(const hn_env *env)
{
    printf("-- joint training, the embedding's schedule ends at step 2 of 4\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], emb[FX_PATH];
    run_dirs(env, "rest", dir, log);
    if (!make_joint_pair(env, dir, "rest", 1, hn, emb)) return;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 4);
    r.config.embedding_path = emb;
    r.config.embedding_learn_rate = "0.005:2";
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "the run finishes: %s", hn_error(env, t));
    CHECK(rec.n_steps == 4 && rec.steps[3].skipped == 0, "4 steps, none counted as skipped (%d)", rec.n_steps);
    cJSON *root;
    cJSON *groups = state_groups(rec.last_saved[SDT_FILE_TRAINING_STATE], &root);
    CHECK(group_number(groups, "hypernetwork", "optimizer_steps") == 4 &&
              group_number(groups, "embedding", "optimizer_steps") == 2 &&
              group_number(groups, "embedding", "skipped") == 0,
          "the hypernetwork stepped 4 times, the embedding 2 (then rested)");
    cJSON_Delete(root);
    env->hn->destroy(t);
}

static void check_joint_nan(const hn_env *env)
{
    printf("-- joint training, fp16, a NaN pixel: the fallback for both groups\n");
    char dir[FX_PATH], log[FX_PATH], hn[FX_PATH], emb[FX_PATH], data[FX_PATH];
    run_dirs(env, "nan", dir, log);
    fx_path(data, env->base.tmp, "nan-data");
    const char *stems[] = {"demo_000", "demo_001"};
    fx_copy_images(&env->base, data, stems, 2);
    if (!make_joint_pair(env, dir, "nan", 1, hn, emb)) return;
    setenv("SDTRAIN_FAULT_NAN_PIXEL", "demo_001.png", 1);
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, hn, log, 6);
    r.options.dataset_dir = data;
    r.config.embedding_path = emb;
    r.config.learn_rate = "0.002";
    r.config.embedding_learn_rate = "0.004";
    r.options.precision = SDT_PRECISION_FP16;
    r.options.loss_scale_init = 1024;
    sdt_status st = hn_prepare_run(env, t, &r);
    unsetenv("SDTRAIN_FAULT_NAN_PIXEL");
    CHECK(st == SDT_STATUS_OK, "the run finishes after the fallback: %s", hn_error(env, t));
    bool fired = false;
    for (int i = 0; i < rec.n_steps; i++) fired |= rec.steps[i].fallback;
    CHECK(fired && rec.n_steps > 0 && rec.steps[rec.n_steps - 1].precision == SDT_PRECISION_FP32,
          "the fallback fired and the run ends in fp32");
    cJSON *root;
    cJSON *groups = state_groups(rec.last_saved[SDT_FILE_TRAINING_STATE], &root);
    const char *lr_hn =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(groups, "hypernetwork"), "learn_rate"));
    const char *lr_emb =
        cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(groups, "embedding"), "learn_rate"));
    printf("  schedules after the fallback: hypernetwork %s, embedding %s\n", lr_hn ? lr_hn : "-",
           lr_emb ? lr_emb : "-");
    CHECK(lr_hn && strstr(lr_hn, "0.001") && lr_emb && strstr(lr_emb, "0.002"), "both learning rates were halved");
    cJSON_Delete(root);
    env->hn->destroy(t);
}

int main(int argc, char **argv)
{
    hn_env env;
    if (!hn_env_open(&env, argc, argv, "test_hn_train")) return trainer_env_abandon(&env.base);
    check_learns(&env);
    check_resume(&env, SDT_PRECISION_FP32);
    check_resume(&env, SDT_PRECISION_FP16);
    check_previews_leave_training_alone(&env);
    check_preview_chain(&env);
    check_interrupt(&env);
    check_refusals(&env);
    check_shared_option_refusals(&env);
    check_schedule_field_names(&env);
    check_state_inspect(&env);
    check_joint_options(&env);
    check_twin_safety(&env);
    check_joint_inf(&env);
    check_joint_rest(&env);
    check_joint_nan(&env);
    trainer_env_close(&env.base);
    return sdt_test_finish("test_hn_train");
}
