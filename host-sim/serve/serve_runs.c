/* serve_runs.c - see serve_runs.h. */
#include <string.h>

#include "data_dirs.h"
#include "dist_mode.h"
#include "panel_options.h"
#include "serve_runs.h"

typedef enum run_state { RUN_PREPARING, RUN_TRAINING, RUN_FINISHED, RUN_INTERRUPTED, RUN_FAILED } run_state;
static const char *const state_names[] = {"preparing", "training", "finished", "interrupted", "failed"};

typedef struct run {
    serve_runs *owner;
    int id;
    panel_method method;
    panel_values *values;
    panel_config config; /* what prepare reads; lives as long as the run */
    host_dist_plan gpus; /* the GPUs its panel lists (options.devices points into it) */
    const sdt_trainer_factory *factory;
    sdt_trainer *trainer;
    GThread *thread;
    run_state state; /* main thread's view */
    char *error;     /* the sentence of a failed run */
    char *name;      /* the file's name without folder */
    gboolean interrupt_asked;
    sdt_status result; /* written by the worker before it reports done */
    int64_t start_step;
    cJSON *last_metrics;
} run;

struct serve_runs {
    const host_plugin *plugin;
    serve_events *events;
    const serve_folders *folders;
    GPtrArray *all; /* run*, in start order */
    int next_id;
};

/* An event crossing from the worker to the main loop. */
typedef struct pending_event {
    run *r;
    cJSON *event;
} pending_event;

static void publish_state(run *r);

static gboolean deliver(gpointer data)
{
    pending_event *p = data;
    cJSON *type = cJSON_GetObjectItemCaseSensitive(p->event, "type");
    if (type && strcmp(type->valuestring, "metrics") == 0) {
        cJSON_Delete(p->r->last_metrics);
        p->r->last_metrics = cJSON_Duplicate(p->event, 1);
    }
    serve_events_publish(p->r->owner->events, p->event);
    g_free(p);
    return G_SOURCE_REMOVE;
}

/* [any thread] Queues an event of run r for the main loop. */
static void post(run *r, const char *type, cJSON *event)
{
    cJSON_AddStringToObject(event, "type", type);
    cJSON_AddNumberToObject(event, "run", r->id);
    pending_event *p = g_new(pending_event, 1);
    p->r = r;
    p->event = event;
    g_idle_add(deliver, p);
}

static void on_log(void *user_data, sdt_log_level level, const char *message)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (level == SDT_LOG_DEBUG) return;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "level", (unsigned)level < 4 ? names[level] : "info");
    cJSON_AddStringToObject(e, "message",
                            g_utf8_validate(message, -1, NULL) ? message : "(a log line that is not UTF-8)");
    post(user_data, "log", e);
}

static void on_metrics(void *user_data, const sdt_metrics *m)
{
    run *r = user_data;
    static const char *const precisions[] = {"fp32", "fp16", "bf16"};
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", (double)m->step);
    cJSON_AddNumberToObject(e, "max_steps", (double)m->max_steps);
    cJSON_AddNumberToObject(e, "start_step", (double)r->start_step);
    cJSON_AddNumberToObject(e, "epoch", (double)m->epoch);
    cJSON_AddNumberToObject(e, "epoch_step", (double)m->epoch_step);
    cJSON_AddNumberToObject(e, "skipped", (double)m->skipped_steps);
    cJSON_AddNumberToObject(e, "loss", m->loss); /* NaN (a skipped step) is written null */
    cJSON_AddNumberToObject(e, "grad_norm", m->grad_norm);
    cJSON_AddNumberToObject(e, "lr", m->learn_rate);
    cJSON_AddNumberToObject(e, "loss_scale", m->loss_scale);
    cJSON_AddNumberToObject(e, "images_per_second", m->images_per_second);
    cJSON_AddNumberToObject(e, "elapsed", m->elapsed_seconds);
    cJSON_AddStringToObject(e, "precision", m->precision < 3 ? precisions[m->precision] : "?");
    cJSON_AddBoolToObject(e, "fallback", m->fallback_fired);
    post(r, "metrics", e);
}

/* A file the plugin wrote, named by the folder the page knows it from. */
static void add_place(const run *r, cJSON *e, const char *path)
{
    static const serve_root places[] = {SERVE_LOGS, SERVE_EMBEDDINGS, SERVE_HYPERNETWORKS};
    for (size_t i = 0; i < G_N_ELEMENTS(places); i++) {
        char *relative = serve_folders_relative(r->owner->folders, places[i], path);
        if (relative) {
            cJSON_AddStringToObject(e, "root", serve_root_name(places[i]));
            cJSON_AddStringToObject(e, "path", relative);
            g_free(relative);
            return;
        }
    }
    cJSON_AddStringToObject(e, "path", g_utf8_validate(path, -1, NULL) ? path : "?");
}

static void on_preview(void *user_data, const sdt_preview *preview)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", (double)preview->step);
    if (preview->prompt)
        cJSON_AddStringToObject(e, "prompt", g_utf8_validate(preview->prompt, -1, NULL) ? preview->prompt : "");
    if (preview->path) add_place(user_data, e, preview->path);
    post(user_data, "preview", e);
}

static void on_file_saved(void *user_data, const sdt_saved_file *file)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "kind", file->kind);
    cJSON_AddNumberToObject(e, "step", (double)file->step);
    add_place(user_data, e, file->path);
    post(user_data, "file", e);
}

static gboolean worker_started(gpointer data)
{
    run *r = data;
    if (r->state == RUN_PREPARING) r->state = RUN_TRAINING;
    publish_state(r);
    return G_SOURCE_REMOVE;
}

static gboolean worker_done(gpointer data)
{
    run *r = data;
    g_thread_join(r->thread);
    r->thread = NULL;
    if (r->result == SDT_STATUS_OK)
        r->state = RUN_FINISHED;
    else if (r->result == SDT_STATUS_INTERRUPTED)
        r->state = RUN_INTERRUPTED;
    else {
        char sentence[2048] = "";
        r->factory->get_last_error(r->trainer, sentence, sizeof sentence, NULL);
        r->state = RUN_FAILED;
        r->error =
            panel_explain(r->method, sentence[0] ? sentence : "training failed without a message from the plugin.");
    }
    r->factory->destroy(r->trainer);
    r->trainer = NULL;
    publish_state(r);
    return G_SOURCE_REMOVE;
}

static gpointer worker(gpointer data)
{
    run *r = data;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r->result = r->factory->prepare(r->trainer, &r->config.trainer, &info);
    if (r->result == SDT_STATUS_OK) {
        r->start_step = info.start_step;
        g_idle_add(worker_started, r);
        r->result = r->factory->run(r->trainer);
    }
    g_idle_add(worker_done, r);
    return NULL;
}

static cJSON *run_json(const run *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "run", r->id);
    cJSON_AddStringToObject(j, "method", r->method == PANEL_HYPERNETWORK ? "hypernetwork" : "embedding");
    cJSON_AddStringToObject(j, "name", r->name);
    cJSON_AddStringToObject(j, "state", state_names[r->state]);
    if (r->error) cJSON_AddStringToObject(j, "error", r->error);
    if (r->last_metrics) cJSON_AddItemToObject(j, "metrics", cJSON_Duplicate(r->last_metrics, 1));
    return j;
}

static void publish_state(run *r)
{
    cJSON *e = run_json(r);
    cJSON_AddStringToObject(e, "type", "state");
    serve_events_publish(r->owner->events, e);
}

serve_runs *serve_runs_new(const host_plugin *plugin, serve_events *events, const serve_folders *folders)
{
    serve_runs *runs = g_new0(serve_runs, 1);
    runs->plugin = plugin;
    runs->events = events;
    runs->folders = folders;
    runs->all = g_ptr_array_new();
    runs->next_id = 1;
    return runs;
}

static void run_free(run *r)
{
    panel_values_free(r->values);
    dist_plan_clear(&r->gpus);
    g_free(r->error);
    g_free(r->name);
    cJSON_Delete(r->last_metrics);
    g_free(r);
}

void serve_runs_free(serve_runs *runs)
{
    for (guint i = 0; i < runs->all->len; i++) {
        run *r = g_ptr_array_index(runs->all, i);
        if (r->thread) r->factory->interrupt(r->trainer);
    }
    /* Each worker's last act is to queue worker_done: run the loop until every one has joined. */
    for (guint i = 0; i < runs->all->len; i++)
        while (((run *)g_ptr_array_index(runs->all, i))->thread) g_main_context_iteration(NULL, TRUE);
    for (guint i = 0; i < runs->all->len; i++) run_free(g_ptr_array_index(runs->all, i));
    g_ptr_array_unref(runs->all);
    g_free(runs);
}

/* Opens a trainer of the trainer factory with the panel's callbacks; fills the defaults table. */
static gboolean open_trainer(run *r, panel_defaults *defaults, char **error)
{
    sdt_host_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.user_data = r;
    cb.log = on_log;
    cb.metrics = on_metrics;
    cb.preview_ready = on_preview;
    cb.file_saved = on_file_saved;
    char sentence[1024] = "";
    r->factory = host_plugin_factory(r->owner->plugin, SDT_FACTORY_TRAINER, error);
    if (!r->factory) return FALSE;
    if (r->factory->create(&cb, &r->trainer, sentence, sizeof sentence) != SDT_STATUS_OK) {
        *error = g_strdup(sentence[0] ? sentence : "The plugin could not create a trainer.");
        return FALSE;
    }
    *defaults = panel_defaults_of(r->factory);
    return TRUE;
}

/* The GPUs the panel lists (gpus=, device=cuda:N): serve is one process, so they train as the
 * plugin's threads, one run with one progress stream. */
static gboolean place_on_gpus(run *r, char **error)
{
    gboolean spread = FALSE;
    if (!dist_choose_in_process(&r->config.host, r->config.options.device, &r->gpus, &spread, error)) return FALSE;
    return !spread || (dist_extension(r->factory, error) && dist_plan_apply(&r->gpus, &r->config.options, error));
}

int serve_runs_start(serve_runs *runs, const char *panel_text, size_t n, char **error)
{
    run *r = g_new0(run, 1);
    r->owner = runs;
    r->values = panel_values_new();
    panel_defaults defaults;
    gboolean usage = FALSE;
    gboolean ok = panel_load_data(r->values, "the panel", panel_text, n, error);
    if (ok) {
        r->method = panel_method_chosen(r->values);
        ok = open_trainer(r, &defaults, error);
    }
    ok = ok && panel_build_config(r->values, r->method, &defaults, &r->config, error, &usage);
    ok = ok && panel_check_required(&r->config, error);
    ok = ok && place_on_gpus(r, error);
    if (ok) panel_finish_config(&r->config);
    if (!ok) {
        if (r->trainer) r->factory->destroy(r->trainer);
        run_free(r);
        return 0;
    }
    /* the run's name: its hypernetwork's file, else its embedding's */
    const sdt_trainer_config *parts = &r->config.trainer;
    r->name = g_path_get_basename(parts->hypernetwork ? parts->hypernetwork->hypernetwork_path
                                                      : parts->embedding->embedding_path);
    r->id = runs->next_id++;
    r->state = RUN_PREPARING;
    g_ptr_array_add(runs->all, r);
    publish_state(r);
    r->thread = g_thread_new("sdt-serve-run", worker, r);
    return r->id;
}

gboolean serve_runs_interrupt(serve_runs *runs, int id, char **error)
{
    for (guint i = 0; i < runs->all->len; i++) {
        run *r = g_ptr_array_index(runs->all, i);
        if (r->id != id) continue;
        if (!r->thread) {
            *error = g_strdup_printf("Run %d is no longer going (%s).", id, state_names[r->state]);
            return FALSE;
        }
        r->factory->interrupt(r->trainer);
        r->interrupt_asked = TRUE;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "level", "info");
        cJSON_AddStringToObject(e, "message",
                                r->state == RUN_TRAINING
                                    ? "Interrupting: the current step finishes, then everything is saved."
                                    : "Interrupting the preparation.");
        post(r, "log", e);
        return TRUE;
    }
    *error = g_strdup_printf("There is no run %d.", id);
    return FALSE;
}

cJSON *serve_runs_json(const serve_runs *runs)
{
    cJSON *list = cJSON_CreateArray();
    for (guint i = 0; i < runs->all->len; i++) cJSON_AddItemToArray(list, run_json(g_ptr_array_index(runs->all, i)));
    return list;
}

gboolean serve_runs_busy(const serve_runs *runs)
{
    for (guint i = 0; i < runs->all->len; i++)
        if (((run *)g_ptr_array_index(runs->all, i))->thread) return TRUE;
    return FALSE;
}
