/* test_trainer_factory - "sdtrain.trainer/1" (ABI 1.7), as a host drives it through dlopen:
 *  1. the factory and its extensions: get_extension gives the three tables by id, NULL for an
 *     unknown id or NULL; each table's struct_size is its sizeof;
 *  2. an embedding part alone, a hypernetwork part alone and both (joint training) train to the
 *     same bytes as the deprecated method factories on the same files and options: the trained
 *     files, the loss CSV and the state's trained values and moments;
 *  3. misuse: a NULL config, NULL options, no part, reserved fields not 0, struct_size unset (the
 *     config, a part), each a status and a sentence naming the field; the defaults of the parts;
 *  4. options.log_dir NULL resolves to A1111's folder: "textual_inversion" for an embedding,
 *     "hypernetworks" when a hypernetwork trains;
 *  5. options from an older host (a 1.5 struct_size, before `deterministic`) still prepare and run. */
#include "hn_fixture.h"

typedef struct trainer_ctx {
    hn_env env;
    const sdt_trainer_factory *tr;
    const sdt_embedding_files_ext *emb_files;
    const sdt_hypernetwork_files_ext *hn_files;
} trainer_ctx;

static const char *tr_error(const trainer_ctx *c, const sdt_trainer *t)
{
    static _Thread_local char buf[2048];
    buf[0] = 0;
    c->tr->get_last_error(t, buf, sizeof buf, NULL);
    return buf;
}

static sdt_trainer *tr_create(const trainer_ctx *c, fx_recorder *rec)
{
    sdt_host_callbacks cb = fx_recorder_init(rec);
    sdt_trainer *t = NULL;
    char err[512] = "";
    CHECK(c->tr->create(&cb, &t, err, sizeof err) == SDT_STATUS_OK && t, "create: %s", err);
    return t;
}

/* The same fast preset as hn_config/fx_config, through this factory's defaults. */
static void tr_options(const trainer_ctx *c, sdt_train_options *o, const char *log_dir, int64_t max_steps,
                       uint64_t seed)
{
    static _Thread_local char template_path[FX_PATH];
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    CHECK(c->tr->train_options_defaults(o) == SDT_STATUS_OK, "train_options_defaults");
    fx_fast_options(&c->env.base, o, template_path, log_dir, max_steps, seed);
}

static sdt_status tr_prepare_run(const trainer_ctx *c, sdt_trainer *t, const sdt_trainer_config *config,
                                 sdt_prepare_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    sdt_status st = c->tr->prepare(t, config, info);
    return st != SDT_STATUS_OK ? st : c->tr->run(t);
}

/* <dir of the state file>/<csv> */
static void run_file(const fx_recorder *rec, const char *name, char *out)
{
    snprintf(out, FX_PATH, "%s", rec->last_saved[SDT_FILE_TRAINING_STATE]);
    char *slash = strrchr(out, '/');
    if (slash) snprintf(slash, FX_PATH - (size_t)(slash - out), "/%s", name);
}

/* The loss CSVs hold the same rows but for the last column (images per second, a timing). */
static bool same_csv_rows(const char *a, const char *b)
{
    size_t na, nb;
    char *x = (char *)fx_read_file(a, &na), *y = (char *)fx_read_file(b, &nb);
    bool same = x && y && na > 0;
    char *px = x, *py = y;
    int rows = 0;
    while (same && *px && *py) {
        char *ex = strchr(px, '\n'), *ey = strchr(py, '\n');
        if (!ex || !ey) break;
        *ex = *ey = '\0';
        char *cx = strrchr(px, ','), *cy = strrchr(py, ',');
        same = cx && cy && cx - px == cy - py && memcmp(px, py, (size_t)(cx - px)) == 0;
        px = ex + 1, py = ey + 1, rows++;
    }
    same = same && !*px && !*py && rows > 1;
    free(x);
    free(y);
    return same;
}

/* Two copies of a file at <tmp>/<tag>-a/<base> and <tmp>/<tag>-b/<base>. */
static void two_copies(const trainer_ctx *c, const char *src, const char *tag, char *a, char *b)
{
    char dir[FX_PATH], name[64];
    const char *base = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
    snprintf(name, sizeof name, "%s-a", tag);
    fx_subdir(&c->env.base, dir, name);
    fx_path(a, dir, base);
    snprintf(name, sizeof name, "%s-b", tag);
    fx_subdir(&c->env.base, dir, name);
    fx_path(b, dir, base);
    CHECK(fx_copy_file(src, a) && fx_copy_file(src, b), "copy %s", src);
}

/* ---- 1. the factory and its extensions ---- */

static void check_extensions(const trainer_ctx *c)
{
    printf("-- the factory and its extensions\n");
    CHECK(c->tr->struct_size == sizeof(sdt_trainer_factory), "the factory's struct_size is its sizeof");
    const sdt_hypernetwork_applier_ext *ap =
        (const sdt_hypernetwork_applier_ext *)c->tr->get_extension(SDT_EXT_HYPERNETWORK_APPLIER);
    CHECK(c->emb_files && c->emb_files->struct_size == sizeof(sdt_embedding_files_ext) &&
              c->emb_files->create_embedding && c->emb_files->inspect,
          "%s: the table", SDT_EXT_EMBEDDING_FILES);
    CHECK(c->hn_files && c->hn_files->struct_size == sizeof(sdt_hypernetwork_files_ext) &&
              c->hn_files->create_hypernetwork && c->hn_files->inspect,
          "%s: the table", SDT_EXT_HYPERNETWORK_FILES);
    CHECK(ap && ap->struct_size == sizeof(sdt_hypernetwork_applier_ext) && ap->create && ap->destroy &&
              ap->get_last_error && ap->add && ap->set_strength && ap->apply_kv && ap->generate,
          "%s: the table", SDT_EXT_HYPERNETWORK_APPLIER);
    CHECK(c->tr->get_extension(NULL) == NULL, "get_extension(NULL) is NULL");
    CHECK(c->tr->get_extension("sdtrain.embedding_files/2") == NULL && c->tr->get_extension("") == NULL &&
              c->tr->get_extension("sdtrain.trainer/1") == NULL,
          "an unknown id is NULL");
    /* the applier works through the extension: an empty chain passes K through */
    sdt_hn_applier *a = NULL;
    char err[256] = "";
    if (ap && ap->create(&a, err, sizeof err) == SDT_STATUS_OK && a) {
        float in[4] = {1, 2, 3, 4}, out[4] = {0};
        CHECK(ap->apply_kv(a, 4, SDT_KV_K, in, out, 1) == SDT_STATUS_OK && memcmp(in, out, sizeof in) == 0,
              "an empty chain from the extension leaves K as it is");
        ap->destroy(a);
    } else {
        CHECK(false, "the applier extension creates an applier: %s", err);
    }
    /* a trainer of a deprecated factory is not a trainer of this one */
    fx_recorder rec;
    sdt_ti_trainer *old = fx_create(&c->env.base, &rec);
    char path[FX_PATH];
    CHECK(c->emb_files->inspect((sdt_trainer *)old, "x.safetensors", NULL, path, sizeof path, NULL) ==
              SDT_STATUS_INVALID_ARGUMENT,
          "an sdt_ti_trainer passed to the extension is refused");
    c->env.base.ti->destroy(old);
}

/* ---- 2. the same bytes as the method factories ---- */

static void check_embedding_alone(const trainer_ctx *c)
{
    printf("-- an embedding part alone = the textual-inversion factory\n");
    char dir[FX_PATH], src[FX_PATH], a[FX_PATH], b[FX_PATH], log_a[FX_PATH], log_b[FX_PATH];
    fx_subdir(&c->env.base, dir, "emb-src");
    if (!fx_make_embedding(&c->env.base, dir, "same", 2, "ring", src)) return;
    two_copies(c, src, "emb", a, b);
    fx_subdir(&c->env.base, log_a, "emb-log-a");
    fx_subdir(&c->env.base, log_b, "emb-log-b");

    fx_recorder rec_a, rec_b;
    sdt_ti_trainer *ta = fx_create(&c->env.base, &rec_a);
    sdt_ti_config tc;
    fx_config(&c->env.base, &tc, a, NULL, log_a, 4);
    tc.save_image_with_embedding = true;
    CHECK(fx_prepare_run(&c->env.base, ta, &tc) == SDT_STATUS_OK, "the TI factory's run: %s",
          fx_last_error(&c->env.base, ta));
    c->env.base.ti->destroy(ta);

    sdt_trainer *tb = tr_create(c, &rec_b);
    sdt_train_options o;
    tr_options(c, &o, log_b, 4, 1234);
    sdt_embedding_part e;
    e.struct_size = sizeof e;
    CHECK(c->tr->embedding_part_defaults(&e) == SDT_STATUS_OK && e.save_image_with_embedding && !e.clip_value &&
              strcmp(e.learn_rate, "0.005") == 0,
          "embedding_part_defaults: 0.005, cards, the options' clip");
    e.embedding_path = b;
    sdt_trainer_config config = {.struct_size = sizeof config, .options = &o, .embedding = &e};
    sdt_prepare_info info;
    CHECK(tr_prepare_run(c, tb, &config, &info) == SDT_STATUS_OK, "the trainer factory's run: %s", tr_error(c, tb));
    CHECK(info.vectors == 2 && info.embedding_dim > 0, "info names the embedding's rows (%u x %u)", info.vectors,
          info.embedding_dim);
    c->tr->destroy(tb);

    CHECK(fx_same_bytes(a, b), "the trained embeddings are the same bytes");
    CHECK(rec_a.saved[SDT_FILE_EMBEDDING_CARD] > 0 &&
              rec_a.saved[SDT_FILE_EMBEDDING_CARD] == rec_b.saved[SDT_FILE_EMBEDDING_CARD],
          "the same number of PNG cards (%d, %d)", rec_a.saved[SDT_FILE_EMBEDDING_CARD],
          rec_b.saved[SDT_FILE_EMBEDDING_CARD]);
    CHECK(fx_same_bytes(rec_a.last_saved[SDT_FILE_EMBEDDING_CARD], rec_b.last_saved[SDT_FILE_EMBEDDING_CARD]),
          "the last PNG cards are the same bytes");
    char csv_a[FX_PATH], csv_b[FX_PATH];
    run_file(&rec_a, "textual_inversion_loss.csv", csv_a);
    run_file(&rec_b, "textual_inversion_loss.csv", csv_b);
    CHECK(same_csv_rows(csv_a, csv_b), "the loss CSVs hold the same rows but the timing (%s)", csv_a);
    const char *sa = rec_a.last_saved[SDT_FILE_TRAINING_STATE], *sb = rec_b.last_saved[SDT_FILE_TRAINING_STATE];
    CHECK(same_floats(sa, "emb_params", sb, "emb_params") && same_floats(sa, "adamw_m", sb, "adamw_m") &&
              same_floats(sa, "adamw_v", sb, "adamw_v"),
          "the states hold the same values and moments");
}

#define FIRST_WEIGHT "128.0.linear.0.weight"

static void check_hypernetwork(const trainer_ctx *c, bool joint)
{
    printf("-- a hypernetwork part%s = the hypernetwork factory\n",
           joint ? " and an embedding part (joint)" : " alone");
    const char *tag = joint ? "joint" : "hn";
    char dir[FX_PATH], hn_src[FX_PATH], emb_src[FX_PATH], name[64];
    snprintf(name, sizeof name, "%s-src", tag);
    fx_subdir(&c->env.base, dir, name);
    if (!make_joint_pair(&c->env, dir, tag, 2, hn_src, emb_src)) return;
    char hn_a[FX_PATH], hn_b[FX_PATH], emb_a[FX_PATH], emb_b[FX_PATH], log_a[FX_PATH], log_b[FX_PATH];
    snprintf(name, sizeof name, "%s-h", tag);
    two_copies(c, hn_src, name, hn_a, hn_b);
    snprintf(name, sizeof name, "%s-e", tag);
    two_copies(c, emb_src, name, emb_a, emb_b);
    snprintf(name, sizeof name, "%s-log-a", tag);
    fx_subdir(&c->env.base, log_a, name);
    snprintf(name, sizeof name, "%s-log-b", tag);
    fx_subdir(&c->env.base, log_b, name);

    fx_recorder rec_a, rec_b;
    sdt_hn_trainer *ta = hn_create(&c->env, &rec_a);
    hn_run r;
    hn_config(&c->env, &r, hn_a, log_a, 4);
    r.options.clip_mode = SDT_CLIP_NORM;
    r.options.clip_value = "1.0";
    if (joint) {
        r.config.embedding_path = emb_a;
        r.config.embedding_learn_rate = "0.01";
        r.config.embedding_clip_mode = SDT_CLIP_VALUE;
        r.config.embedding_clip_value = "0.05";
    }
    CHECK(hn_prepare_run(&c->env, ta, &r) == SDT_STATUS_OK, "the hypernetwork factory's run: %s",
          hn_error(&c->env, ta));
    c->env.hn->destroy(ta);

    sdt_trainer *tb = tr_create(c, &rec_b);
    sdt_train_options o;
    tr_options(c, &o, log_b, 4, 4321);
    o.clip_mode = SDT_CLIP_NORM;
    o.clip_value = "1.0";
    sdt_hypernetwork_part h;
    h.struct_size = sizeof h;
    CHECK(c->tr->hypernetwork_part_defaults(&h) == SDT_STATUS_OK && strcmp(h.learn_rate, "0.00001") == 0 &&
              h.weight_decay == 0.01 && h.strength == 1.0,
          "hypernetwork_part_defaults: A1111's");
    h.hypernetwork_path = hn_b;
    h.learn_rate = "0.002";
    sdt_embedding_part e;
    e.struct_size = sizeof e;
    c->tr->embedding_part_defaults(&e);
    e.embedding_path = emb_b;
    e.learn_rate = "0.01";
    e.clip_mode = SDT_CLIP_VALUE;
    e.clip_value = "0.05";
    sdt_trainer_config config = {
        .struct_size = sizeof config, .options = &o, .hypernetwork = &h, .embedding = joint ? &e : NULL};
    sdt_prepare_info info;
    CHECK(tr_prepare_run(c, tb, &config, &info) == SDT_STATUS_OK, "the trainer factory's run: %s", tr_error(c, tb));
    CHECK(joint ? info.vectors == 2 : info.vectors == 0, "info's vectors %u", info.vectors);
    c->tr->destroy(tb);

    CHECK(fx_same_bytes(hn_a, hn_b), "the trained hypernetworks (.pt) are the same bytes");
    CHECK(rec_a.last_saved[SDT_FILE_HYPERNETWORK][0] &&
              fx_same_bytes(rec_a.last_saved[SDT_FILE_HYPERNETWORK], rec_b.last_saved[SDT_FILE_HYPERNETWORK]),
          "the .safetensors twins are the same bytes");
    if (joint)
        CHECK(!fx_same_bytes(emb_src, emb_a) && fx_same_bytes(emb_a, emb_b),
              "the trained embeddings are the same bytes");
    else
        CHECK(fx_same_bytes(emb_src, emb_b), "no embedding trains without an embedding part");
    char csv_a[FX_PATH], csv_b[FX_PATH];
    run_file(&rec_a, "hypernetwork_loss.csv", csv_a);
    run_file(&rec_b, "hypernetwork_loss.csv", csv_b);
    CHECK(same_csv_rows(csv_a, csv_b), "the loss CSVs hold the same rows but the timing (%s)", csv_a);
    const char *sa = rec_a.last_saved[SDT_FILE_TRAINING_STATE], *sb = rec_b.last_saved[SDT_FILE_TRAINING_STATE];
    CHECK(same_floats(sa, "hypernetwork." FIRST_WEIGHT, sb, "hypernetwork." FIRST_WEIGHT) &&
              same_floats(sa, "hypernetwork.adamw_v." FIRST_WEIGHT, sb, "hypernetwork.adamw_v." FIRST_WEIGHT),
          "the states hold the same values and moments");
    if (joint)
        CHECK(same_floats(sa, "embedding.adamw_m", sb, "embedding.adamw_m"),
              "the states hold the same embedding moments");
}

/* ---- 3. misuse ---- */

static void expect(const trainer_ctx *c, sdt_trainer *t, const sdt_trainer_config *config, sdt_status want,
                   const char *words, const char *what)
{
    sdt_status st = c->tr->prepare(t, config, NULL);
    const char *sentence = tr_error(c, t);
    CHECK(st == want && strstr(sentence, words) != NULL, "%s: status %d (want %d), \"%s\" (want \"%s\")", what, (int)st,
          (int)want, sentence, words);
}

static void check_misuse(const trainer_ctx *c)
{
    printf("-- misuse: each a status and a sentence naming the field\n");
    fx_recorder rec;
    sdt_trainer *t = tr_create(c, &rec);
    if (!t) return;
    char log[FX_PATH];
    fx_subdir(&c->env.base, log, "misuse-log");
    sdt_train_options o;
    tr_options(c, &o, log, 4, 1);
    sdt_embedding_part e;
    e.struct_size = sizeof e;
    c->tr->embedding_part_defaults(&e);
    e.embedding_path = "/nonexistent/x.safetensors";
    sdt_hypernetwork_part h;
    h.struct_size = sizeof h;
    c->tr->hypernetwork_part_defaults(&h);
    h.hypernetwork_path = "/nonexistent/x.pt";

    expect(c, t, NULL, SDT_STATUS_INVALID_ARGUMENT, "config is NULL", "a NULL config");
    sdt_trainer_config config = {.struct_size = 0, .options = &o, .embedding = &e};
    expect(c, t, &config, SDT_STATUS_INVALID_ARGUMENT, "struct_size", "the config's struct_size unset");
    config.struct_size = sizeof config;
    config.reserved0 = 1;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "config->reserved0", "the config's reserved0");
    config.reserved0 = 0;
    config.options = NULL;
    expect(c, t, &config, SDT_STATUS_INVALID_ARGUMENT, "options is NULL", "NULL options");
    config.options = &o;
    config.embedding = NULL;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "nothing to train", "no part");
    config.embedding = &e;
    o.reserved0 = 1;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "options: the reserved fields", "the options' reserved0");
    o.reserved0 = 0;
    e.reserved0[3] = 1;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "embedding->reserved0", "the embedding part's reserved bytes");
    e.reserved0[3] = 0;
    e.struct_size = 0;
    expect(c, t, &config, SDT_STATUS_INVALID_ARGUMENT, "config->embedding->struct_size",
           "the embedding part's struct_size");
    e.struct_size = sizeof e;
    e.learn_rate = "";
    expect(c, t, &config, SDT_STATUS_VALIDATION, "embedding->learn_rate", "an empty embedding learning rate");
    e.learn_rate = "0.005";
    e.clip_value = "";
    e.clip_mode = SDT_CLIP_NORM;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "embedding->clip_value", "an empty own clip value");
    e.clip_value = NULL;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "embedding->clip_mode is set but embedding->clip_value is not",
           "a clip mode without its value (never silently ignored)");
    e.clip_mode = SDT_CLIP_DISABLED;
    e.embedding_path = NULL;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "embedding->embedding_path", "no embedding file");
    e.embedding_path = "/nonexistent/x.safetensors";
    config.hypernetwork = &h;
    h.reserved0 = 7;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "hypernetwork->reserved0", "the hypernetwork part's reserved0");
    h.reserved0 = 0;
    h.struct_size = 0;
    expect(c, t, &config, SDT_STATUS_INVALID_ARGUMENT, "config->hypernetwork->struct_size",
           "the hypernetwork part's struct_size");
    h.struct_size = sizeof h;
    h.strength = 0;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "hypernetwork->strength", "strength 0");
    h.strength = 1;
    o.batch_size = 0;
    expect(c, t, &config, SDT_STATUS_VALIDATION, "options->batch_size", "an options value named options->");
    o.batch_size = 1;
    h.preview_hypernetworks = "/nonexistent/chained.pt";
    expect(c, t, &config, SDT_STATUS_NOT_FOUND, "hypernetwork->preview_hypernetworks: /nonexistent/chained.pt",
           "a preview-only hypernetwork named as the part names it");
    h.preview_hypernetworks = NULL;
    /* the part's file is checked before the shared paths */
    o.model_path = NULL;
    expect(c, t, &config, SDT_STATUS_NOT_FOUND, "/nonexistent/x.pt", "the hypernetwork's file first");
    CHECK(c->tr->run(t) == SDT_STATUS_BAD_STATE, "run() after a failed prepare is BAD_STATE");
    c->tr->destroy(t);
    c->tr->destroy(NULL);
    sdt_trainer *none = NULL;
    CHECK(c->tr->create(NULL, &none, NULL, 0) == SDT_STATUS_OK && none, "create with no callbacks");
    c->tr->destroy(none);
}

/* ---- 4. log_dir NULL: A1111's folder for the parts ---- */

static bool folder_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void check_default_log_dir(const trainer_ctx *c)
{
    printf("-- options.log_dir NULL: textual_inversion, or hypernetworks when a hypernetwork trains\n");
    char cwd[FX_PATH], work[FX_PATH], dir[FX_PATH], hn[FX_PATH], emb[FX_PATH], path[FX_PATH];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    fx_subdir(&c->env.base, work, "cwd");
    fx_subdir(&c->env.base, dir, "logdir-src");
    if (!make_joint_pair(&c->env, dir, "ld", 1, hn, emb)) return;
    CHECK(chdir(work) == 0, "chdir %s", work);
    for (int k = 0; k < 2; k++) {
        fx_recorder rec;
        sdt_trainer *t = tr_create(c, &rec);
        sdt_train_options o;
        tr_options(c, &o, NULL, 4, 1);
        CHECK(o.log_dir == NULL, "train_options_defaults leaves log_dir NULL");
        sdt_embedding_part e;
        e.struct_size = sizeof e;
        c->tr->embedding_part_defaults(&e);
        e.embedding_path = emb;
        sdt_hypernetwork_part h;
        h.struct_size = sizeof h;
        c->tr->hypernetwork_part_defaults(&h);
        h.hypernetwork_path = hn;
        sdt_trainer_config config = {.struct_size = sizeof config,
                                     .options = &o,
                                     .embedding = k == 0 ? &e : NULL,
                                     .hypernetwork = k == 1 ? &h : NULL};
        sdt_prepare_info info = {.struct_size = sizeof info};
        CHECK(c->tr->prepare(t, &config, &info) == SDT_STATUS_OK, "prepare with log_dir NULL: %s", tr_error(c, t));
        const char *want = k == 0 ? "textual_inversion" : "hypernetworks";
        CHECK(folder_exists(fx_path(path, work, want)), "the run's folder is under %s", want);
        c->tr->destroy(t);
    }
    CHECK(chdir(cwd) == 0, "chdir back");
}

/* ---- 5. an older host's options ---- */

static void check_older_options(const trainer_ctx *c)
{
    printf("-- options at a 1.5 struct_size prepare and run\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH];
    fx_subdir(&c->env.base, dir, "old-src");
    fx_subdir(&c->env.base, log, "old-log");
    if (!fx_make_embedding(&c->env.base, dir, "old", 1, "ring", emb)) return;
    fx_recorder rec;
    sdt_trainer *t = tr_create(c, &rec);
    sdt_train_options o;
    tr_options(c, &o, log, 2, 1);
    o.struct_size = (uint32_t)offsetof(sdt_train_options, deterministic);
    o.deterministic = true; /* past struct_size: not read */
    o.reserved6[0] = 1;
    sdt_embedding_part e;
    e.struct_size = sizeof e;
    c->tr->embedding_part_defaults(&e);
    e.embedding_path = emb;
    sdt_trainer_config config = {.struct_size = sizeof config, .options = &o, .embedding = &e};
    sdt_prepare_info info;
    CHECK(tr_prepare_run(c, t, &config, &info) == SDT_STATUS_OK, "a 1.5 options struct trains: %s", tr_error(c, t));
    CHECK(fx_file_step(emb) == 2, "the embedding reached step 2");
    c->tr->destroy(t);
}

int main(int argc, char **argv)
{
    trainer_ctx c;
    memset(&c, 0, sizeof c);
    if (!hn_env_open(&c.env, argc, argv, "trainer_factory")) return trainer_env_abandon(&c.env.base);
    c.tr = (const sdt_trainer_factory *)c.env.base.entry->get_factory(SDT_FACTORY_TRAINER);
    CHECK(c.tr != NULL, "no %s factory", SDT_FACTORY_TRAINER);
    if (c.tr) {
        c.emb_files = (const sdt_embedding_files_ext *)c.tr->get_extension(SDT_EXT_EMBEDDING_FILES);
        c.hn_files = (const sdt_hypernetwork_files_ext *)c.tr->get_extension(SDT_EXT_HYPERNETWORK_FILES);
        check_extensions(&c);
        check_embedding_alone(&c);
        check_hypernetwork(&c, false);
        check_hypernetwork(&c, true);
        check_misuse(&c);
        check_default_log_dir(&c);
        check_older_options(&c);
    }
    trainer_env_close(&c.env.base);
    return sdt_test_finish("trainer_factory");
}
