"""sdtrain's Train tab for Forge, reForge and AUTOMATIC1111's webui: create an embedding or a
hypernetwork and train them (SD 1.x/2.x/SDXL) with A1111's fields plus what sdtrain adds.

The host's names used here (read at the commits integrations/README.md gives):
modules.script_callbacks.on_ui_tabs; modules.shared.cmd_opts.embeddings_dir / hypernetwork_dir,
shared.state (begin, end, interrupt, interrupted, textinfo, sampling_step, sampling_steps),
shared.hypernetworks; modules.sd_models.checkpoints_list (title -> info.filename), list_models,
unload_model_weights, reload_model_weights; modules.hypernetworks.hypernetwork.list_hypernetworks;
the embedding database's load_textual_inversion_embeddings(force_reload=True): A1111's
modules.sd_hijack.model_hijack.embedding_db, else (Forge, reForge: their model_hijack has none)
modules.ui_extra_networks_textual_inversion.embedding_db; modules.paths_internal.data_path."""
import html
import os
import sys
import threading

import gradio as gr

from modules import script_callbacks, sd_models, shared

_ext = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
for _candidate in (_ext, os.path.join(os.path.dirname(_ext), "common")):
    if os.path.isfile(os.path.join(_candidate, "sdtrain_integration.py")):
        if _candidate not in sys.path:
            sys.path.append(_candidate)
        break

import sdtrain_integration as kit  # noqa: E402

EXTENSION_DIR = _ext


def plugin():
    return kit.open_plugin(EXTENSION_DIR)


# ---- the host's folders and lists ----------------------------------------------------------------

def embeddings_dir():
    return shared.cmd_opts.embeddings_dir


def hypernetworks_dir():
    return shared.cmd_opts.hypernetwork_dir


def log_dir():
    from modules.paths_internal import data_path
    return os.path.join(data_path, "textual_inversion")  # A1111's Train tab's default log directory


def checkpoints():
    """{title as the host lists it: file}"""
    return {title: info.filename for title, info in sd_models.checkpoints_list.items()}


def _files(folder, extensions):
    out = {}
    if folder and os.path.isdir(folder):
        for root, _, names in os.walk(folder):
            for n in sorted(names):
                stem, ext = os.path.splitext(n)
                if ext.lower() in extensions and stem not in out:
                    out[stem] = os.path.join(root, n)
    return out


def embeddings():
    return _files(embeddings_dir(), kit.EMBEDDING_EXTENSIONS)


def hypernetworks():
    return _files(hypernetworks_dir(), kit.HYPERNETWORK_EXTENSIONS)


def reload_host_lists():
    """Makes the new or trained files usable without a restart: the embedding database reloads its
    folder, the hypernetwork list is read again."""
    db = None
    try:
        from modules.sd_hijack import model_hijack  # A1111
        db = getattr(model_hijack, "embedding_db", None)
    except ImportError:
        pass
    if db is None:
        try:
            from modules.ui_extra_networks_textual_inversion import embedding_db as db  # Forge, reForge
        except ImportError:
            db = None
    if db is not None:
        db.load_textual_inversion_embeddings(force_reload=True)
    from modules.hypernetworks import hypernetwork
    shared.hypernetworks = hypernetwork.list_hypernetworks(hypernetworks_dir())


class WebuiHost(kit.Host):
    """The webui's side of a run: its model off the GPU and back, its Interrupt button, its state."""

    def __init__(self):
        self.step = 0
        self.max_steps = 0
        self.preview_path = None
        self.lock = threading.Lock()

    def progress(self, step, max_steps, preview):
        with self.lock:
            self.step, self.max_steps = step, max_steps
            if preview is not None and preview.path:
                self.preview_path = preview.path
        shared.state.sampling_step, shared.state.sampling_steps = step, max_steps
        shared.state.textinfo = "sdtrain: step %d of %d" % (step, max_steps)

    def interrupted(self):
        return bool(shared.state.interrupted)

    def release_gpu(self):
        sd_models.unload_model_weights()

    def restore_gpu(self):
        sd_models.reload_model_weights()

    def log(self, level, message):
        if level in ("warning", "error"):
            print("[sdtrain] %s: %s" % (level, message))


def _sentence(e):
    return e.sentence if isinstance(e, kit.SdtrainError) else str(e)


def _status(text, error=False):
    style = "color: var(--error-text-color, #c00)" if error else ""
    return "<p style='%s'>%s</p>" % (style, html.escape(text))


# ---- the tab's actions (plain functions: the buttons call them) ----------------------------------

def create_embedding(name, checkpoint, init_text, vectors_per_token, overwrite):
    try:
        model = kit.check_checkpoint(checkpoint, checkpoints().get(checkpoint))
        os.makedirs(embeddings_dir(), exist_ok=True)
        path = kit.create_embedding(plugin(), name, model, embeddings_dir(), init_text=init_text,
                                    vectors_per_token=int(vectors_per_token), overwrite=bool(overwrite))
        reload_host_lists()
        return _status("Created %s; use it as %s in a prompt." % (path, os.path.splitext(os.path.basename(path))[0]))
    except (kit.Refusal, kit.SdtrainError) as e:
        return _status(_sentence(e), error=True)


def create_hypernetwork(name, widths, layer_structure, activation, weight_init, layer_norm, use_dropout,
                        dropout_structure, activate_output, overwrite):
    try:
        os.makedirs(hypernetworks_dir(), exist_ok=True)
        path = kit.create_hypernetwork(plugin(), name, hypernetworks_dir(), overwrite=bool(overwrite), widths=widths,
                                       layer_structure=layer_structure, activation=activation,
                                       weight_init=weight_init, layer_norm=bool(layer_norm),
                                       use_dropout=bool(use_dropout), dropout_structure=dropout_structure,
                                       activate_output=bool(activate_output))
        reload_host_lists()
        return _status("Created %s." % path)
    except (kit.Refusal, kit.SdtrainError) as e:
        return _status(_sentence(e), error=True)


TRAIN_FIELDS = (["embedding", "hypernetwork", "checkpoint", "dataset_dir", "log_directory", "template"]
                + kit.OPTION_NAMES)


def train(*field_values, poll_seconds=0.5):
    """The Train button: a generator of (status HTML, latest preview file, loss plot file) while the
    run works, on the values of TRAIN_FIELDS in that order."""
    values = dict(zip(TRAIN_FIELDS, field_values))
    try:
        model = kit.check_checkpoint(values["checkpoint"], checkpoints().get(values["checkpoint"]))
        embedding = embeddings().get(values["embedding"]) if values["embedding"] not in (None, "", "None") else None
        hypernetwork = (hypernetworks().get(values["hypernetwork"])
                        if values["hypernetwork"] not in (None, "", "None") else None)
        for kind, name, path in (("embedding", values["embedding"], embedding),
                                 ("hypernetwork", values["hypernetwork"], hypernetwork)):
            if name not in (None, "", "None") and path is None:
                raise kit.Refusal("The %s %r is not in %s; refresh the list or create it first."
                                  % (kind, name, embeddings_dir() if kind == "embedding" else hypernetworks_dir()))
    except kit.Refusal as e:
        yield _status(str(e), error=True), None, None
        return
    host = WebuiHost()
    done = {}

    def work():
        try:
            done["result"] = kit.run_training(plugin(), host, model, values["dataset_dir"],
                                              values["log_directory"] or log_dir(), values["template"],
                                              embedding_path=embedding, hypernetwork_path=hypernetwork, values=values)
        except BaseException as e:
            done["error"] = e

    shared.state.begin(job="sdtrain")
    try:
        worker = threading.Thread(target=work, name="sdtrain-tab")
        worker.start()
        while worker.is_alive():
            worker.join(poll_seconds)
            with host.lock:
                step, total, preview = host.step, host.max_steps, host.preview_path
            yield _status("Training: step %d of %d" % (step, total) if total else "Preparing..."), preview, None
    finally:
        shared.state.end()
    if "error" in done:
        if not isinstance(done["error"], (kit.Refusal, kit.SdtrainError)):
            raise done["error"]
        yield _status(_sentence(done["error"]), error=True), None, None
        return
    result = done["result"]
    reload_host_lists()
    previews = [f.path for f in result.saved if f.kind == "preview"]
    plot = os.path.join(result.log_folder, "loss.png") if result.log_folder else None
    trained = ", ".join(p for p in (result.embedding_path, result.hypernetwork_path) if p)
    what = "Finished" if result.status == "finished" else "Interrupted (saved; Resume continues it)"
    yield (_status("%s at step %d: %s; logs in %s." % (what, result.step, trained, result.log_folder)),
           previews[-1] if previews else None, plot if plot and os.path.isfile(plot) else None)


def interrupt():
    shared.state.interrupt()


# ---- the tab -----------------------------------------------------------------------------------

def _component(option, default):
    label = option.label
    if isinstance(option.kind, list):
        return gr.Dropdown(label=label, choices=option.kind, value=default)
    if option.kind == "bool":
        return gr.Checkbox(label=label, value=bool(default))
    if option.kind == "int":
        return gr.Number(label=label, value=default, precision=0)
    if option.kind == "float":
        return gr.Number(label=label, value=default)
    return gr.Textbox(label=label, value=default if isinstance(default, str) else "")


def build_tab():
    defaults = kit.read_defaults(plugin())
    with gr.Blocks(analytics_enabled=False) as tab:
        with gr.Tabs():
            with gr.Tab("Create embedding"):
                e_name = gr.Textbox(label="Name")
                e_ckpt = gr.Dropdown(label="Checkpoint (its text encoders set the width: SD 1.x, 2.x or SDXL)",
                                     choices=list(checkpoints()))
                e_init = gr.Textbox(label="Initialization text", value="*")
                e_vectors = gr.Slider(label="Number of vectors per token", minimum=1, maximum=75, step=1, value=1)
                e_over = gr.Checkbox(label="Overwrite Old Embedding", value=False)
                e_button = gr.Button(value="Create embedding", variant="primary")
                e_status = gr.HTML()
                e_button.click(fn=create_embedding, inputs=[e_name, e_ckpt, e_init, e_vectors, e_over],
                               outputs=[e_status])
            with gr.Tab("Create hypernetwork"):
                h_fields = [gr.Textbox(label="Name"),
                            gr.Textbox(label="Modules (widths)", value="768, 320, 640, 1280"),
                            gr.Textbox(label="Hypernetwork layer structure", value="1, 2, 1"),
                            gr.Dropdown(label="Activation function", choices=kit.HN_ACTIVATIONS, value="linear"),
                            gr.Dropdown(label="Layer weights initialization", choices=kit.HN_WEIGHT_INITS,
                                        value="Normal"),
                            gr.Checkbox(label="Add layer normalization", value=False),
                            gr.Checkbox(label="Use dropout", value=False),
                            gr.Textbox(label="Dropout structure", value="0, 0, 0"),
                            gr.Checkbox(label="Activate the output layer", value=False),
                            gr.Checkbox(label="Overwrite Old Hypernetwork", value=False)]
                h_button = gr.Button(value="Create hypernetwork", variant="primary")
                h_status = gr.HTML()
                h_button.click(fn=create_hypernetwork, inputs=h_fields, outputs=[h_status])
            with gr.Tab("Train"):
                with gr.Row():
                    t_emb = gr.Dropdown(label="Embedding", choices=["None"] + list(embeddings()), value="None")
                    t_hn = gr.Dropdown(label="Hypernetwork", choices=["None"] + list(hypernetworks()), value="None")
                    t_ckpt = gr.Dropdown(label="Checkpoint", choices=list(checkpoints()))
                t_files = [t_emb, t_hn, t_ckpt,
                           gr.Textbox(label="Dataset directory"),
                           gr.Textbox(label="Log directory", value=log_dir()),
                           gr.Textbox(label="Prompt template (a .txt file or the template's text)",
                                      value=kit.DEFAULT_TEMPLATE, lines=3)]
                t_options = []
                for group, options in kit.grouped():
                    with gr.Accordion(group, open=(group == kit.OPTIONS[0].group)):
                        for o in options:
                            t_options.append(_component(o, defaults.get(o.name)))
                with gr.Row():
                    t_button = gr.Button(value="Train", variant="primary")
                    t_stop = gr.Button(value="Interrupt")
                t_status = gr.HTML()
                with gr.Row():
                    t_preview = gr.Image(label="Latest preview", interactive=False)
                    t_plot = gr.Image(label="Loss", interactive=False)
                t_button.click(fn=train, inputs=t_files + t_options, outputs=[t_status, t_preview, t_plot])
                t_stop.click(fn=interrupt, inputs=[], outputs=[])
    return [(tab, "sdtrain Train", "sdtrain_train")]


script_callbacks.on_ui_tabs(build_tab)
