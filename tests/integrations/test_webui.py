"""The Forge / reForge / A1111 extension (integrations/webui) loaded as the webui loads an
extension's script (scripts/*.py by path) with stand-ins for exactly the host modules it imports
(standins/webui: modules.script_callbacks, modules.shared, modules.sd_models,
modules.paths_internal, modules.sd_hijack, modules.hypernetworks.hypernetwork, and a minimal
gradio), driving whole trainings on the demo model through the Python binding.

Checks:
 - the extension, linked from the source tree, finds the sdtrain package in the tree's python/ (where the
   interpreter has none installed);
 - the script registers one tab through on_ui_tabs; the tab builds with the webui's checkpoint
   list and the host's folders, its option fields carry the plugin's defaults, and its buttons are
   wired to the create / train / interrupt actions with the fields in TRAIN_FIELDS' order;
 - Create embedding / Create hypernetwork (pressed through their buttons) write into the host's
   embeddings / hypernetwork folders, reload the host's lists, refuse a clash with a sentence;
 - Train (a generator, as gradio runs it): the host's model is unloaded first and reloaded after,
   shared.state begins and ends the job, the host's Interrupt button stops the run after a whole
   step with everything saved, the status says so, the embedding database is reloaded; a
   hypernetwork trains to the end and is in shared.hypernetworks; refusals come as the status."""
import importlib.util
import os
import sys
import tempfile

from common import HERE, ROOT, check, checkpoint_folder, environment, finish, trained_step

sys.path.insert(0, os.path.join(HERE, "standins", "webui"))
# No path to python/ here: the extension, linked from this source tree, finds the binding there itself.
import gradio  # noqa: E402
from modules import paths_internal, script_callbacks, sd_hijack, sd_models, shared  # noqa: E402


def load_script(extension_dir):
    """As the webui's script loader: scripts/<file>.py imported by path under its file name."""
    path = os.path.join(extension_dir, "scripts", "sdtrain_tab.py")
    spec = importlib.util.spec_from_file_location("sdtrain_tab.py", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def button(label):
    for b, fn, inputs, outputs in gradio.clicks:
        if label in (b.label, b.value):
            return fn, inputs, outputs
    raise AssertionError("no button %r" % label)


def main():
    _, demo = environment()
    with tempfile.TemporaryDirectory(prefix="sdtrain-webui-") as work:
        paths_internal.data_path = work
        shared.cmd_opts.embeddings_dir = os.path.join(work, "embeddings")
        shared.cmd_opts.hypernetwork_dir = os.path.join(work, "models", "hypernetworks")
        model = checkpoint_folder(demo, os.path.join(work, "models", "Stable-diffusion"))
        title = sd_models.add_checkpoint(model)
        extensions = os.path.join(work, "extensions")
        os.makedirs(extensions)
        os.symlink(os.path.join(ROOT, "integrations", "webui"), os.path.join(extensions, "sdtrain"))
        installed = importlib.util.find_spec("sdtrain") is not None  # then the installed one is used, rightly
        tab_module = load_script(os.path.join(extensions, "sdtrain"))
        check(installed or os.path.samefile(os.path.dirname(sys.modules["sdtrain"].__file__),
                                            os.path.join(ROOT, "python", "sdtrain")),
              "the extension imported sdtrain from %s" % sys.modules["sdtrain"].__file__)
        check(len(script_callbacks.ui_tabs) == 1, "on_ui_tabs got %d callbacks" % len(script_callbacks.ui_tabs))
        tabs = script_callbacks.ui_tabs[0]()
        check(len(tabs) == 1 and isinstance(tabs[0][0], gradio.Blocks) and tabs[0][1] == "sdtrain Train",
              "the tab callback returned %r" % (tabs,))
        import sdtrain_integration as kit
        defaults = kit.read_defaults(kit.open_plugin())
        train_fn, train_inputs, train_outputs = button("Train")
        check(len(train_inputs) == len(tab_module.TRAIN_FIELDS) and len(train_outputs) == 3,
              "the Train button has %d inputs for %d fields" % (len(train_inputs), len(tab_module.TRAIN_FIELDS)))
        fields = dict(zip(tab_module.TRAIN_FIELDS, train_inputs))
        check(fields["checkpoint"].kwargs.get("choices") == [title], "checkpoint choices %r"
              % fields["checkpoint"].kwargs.get("choices"))
        for name in ("max_steps", "embedding_learn_rate", "hypernetwork_learn_rate", "clip_value", "batch_size",
                     "precision", "latent_sampling", "save_every", "preview_cfg_scale"):
            check(fields[name].value == defaults[name], "the field %s shows %r, the plugin's default is %r"
                  % (name, fields[name].value, defaults[name]))
        check(fields["max_steps"].value == 100000 and fields["embedding_learn_rate"].value == "0.005",
              "defaults %r %r" % (fields["max_steps"].value, fields["embedding_learn_rate"].value))

        # ---- create ------------------------------------------------------------------------------------
        os.makedirs(shared.cmd_opts.embeddings_dir)
        create_emb, emb_inputs, _ = button("Create embedding")
        check(len(emb_inputs) == 5, "Create embedding has %d inputs" % len(emb_inputs))
        reloads = len(sd_hijack.model_hijack.embedding_db.reloads)
        status = create_emb("web-star", title, "object", 2, False)
        path = os.path.join(shared.cmd_opts.embeddings_dir, "web-star.safetensors")
        check(os.path.isfile(path) and "web-star" in status, "Create embedding: %s" % status)
        check(sd_hijack.model_hijack.embedding_db.reloads[reloads:] == [True],
              "the embedding database was not reloaded")
        status = create_emb("web-star", title, "object", 2, False)
        check("already exists" in status and "Overwrite" in status, "a second create said %s" % status)
        status = create_emb("web-x", "missing.ckpt", "object", 1, False)
        check("missing.ckpt" in status and "checkpoint" in status, "a missing checkpoint said %s" % status)
        create_hn, hn_inputs, _ = button("Create hypernetwork")
        status = create_hn("web-style", "128, 64", "1, 2, 1", "relu", "Normal", False, False, "0, 0, 0", False, False)
        hn_path = os.path.join(shared.cmd_opts.hypernetwork_dir, "web-style.pt")
        check(os.path.isfile(hn_path) and shared.hypernetworks.get("web-style") == hn_path,
              "Create hypernetwork: %s; host list %r" % (status, shared.hypernetworks))
        status = create_hn("web-style", "128, 64", "1, 2, 1", "relu", "Normal", False, False, "0, 0, 0", False, False)
        check("already exists" in status, "a second hypernetwork create said %s" % status)

        # ---- train, interrupted by the host's Interrupt button ----------------------------------------
        interrupt_fn = button("Interrupt")[0]

        def values(**changes):
            v = {name: comp.value for name, comp in fields.items()}
            v.update(dataset_dir=os.path.join(demo, "dataset"), checkpoint=title, width=64, height=64, device="cpu",
                     seed=7, embedding_learn_rate="0.02", preview_every=2, preview_steps=2, save_every=2)
            v.update(changes)
            return [v[n] for n in tab_module.TRAIN_FIELDS]

        sd_models.calls.clear()
        shared.state.events.clear()
        updates = []
        for update in train_fn(*values(embedding="web-star", max_steps=10000, template="a [name] on a [filewords]")):
            updates.append(update)
            if shared.state.sampling_step >= 3 and not shared.state.interrupted:
                interrupt_fn()
        final = updates[-1][0]
        check("Interrupted" in final and "web-star" in final, "the last status is %s" % final)
        check(sd_models.calls == ["unload_model_weights", "reload_model_weights"],
              "the host's model calls were %s" % sd_models.calls)
        check(shared.state.events == [("begin", "sdtrain"), ("end",)], "shared.state saw %s" % shared.state.events)
        last = trained_step(path)
        check(3 <= last < 10000, "the interrupted embedding is at step %d" % last)
        check(updates[-1][1] and os.path.isfile(updates[-1][1]), "no preview file in the last update: %r"
              % (updates[-1][1],))
        check(updates[-1][2] and os.path.isfile(updates[-1][2]) and updates[-1][2].endswith("loss.png"),
              "no loss plot in the last update: %r" % (updates[-1][2],))
        check(os.path.dirname(updates[-1][2]).startswith(os.path.join(work, "textual_inversion")),
              "the run's log folder %s is not the webui's textual_inversion folder" % updates[-1][2])
        check(any("Training: step" in u[0] for u in updates[:-1]), "no live progress in the tab")
        live = [u[1] for u in updates[:-1] if u[1]]
        check(live and all(os.path.isfile(p) and p.endswith(".png") for p in live),
              "no live preview in the tab: %r" % live[-1:])

        # ---- a hypernetwork to the end, on a Forge-like host (no embedding_db on model_hijack) --------
        shared.hypernetworks = {}
        del sd_hijack.StableDiffusionModelHijack.embedding_db
        from modules import ui_extra_networks_textual_inversion as forge_db
        updates = list(train_fn(*values(hypernetwork="web-style", max_steps=3, template="[filewords]",
                                        dataset_dir=os.path.join(demo, "dataset-style"),
                                        hypernetwork_learn_rate="0.002", preview_every=0, save_every=1)))
        check("Finished at step 3" in updates[-1][0], "the hypernetwork run said %s" % updates[-1][0])
        check(trained_step(hn_path, hypernetwork=True) == 3 and shared.hypernetworks.get("web-style") == hn_path,
              "the trained hypernetwork is not at step 3 or not in the host's list")
        check(forge_db.embedding_db.reloads == [True], "Forge's embedding database was not reloaded: %r"
              % forge_db.embedding_db.reloads)

        # ---- refusals come as the status -------------------------------------------------------------
        for changes, words in ((dict(embedding="web-star", checkpoint="gone.ckpt"), ("gone.ckpt",)),
                               (dict(embedding="web-star", dataset_dir=os.path.join(work, "nothing")), ("nothing",)),
                               (dict(embedding="nope"), ("nope", "embedding")),
                               (dict(), ("Nothing to train",)),
                               (dict(embedding="web-star", template="plain"), ("[name]",)),
                               (dict(embedding="web-star", precision="fp12"), ("fp12",))):
            v = dict(embedding="None", hypernetwork="None", max_steps=2)
            v.update(changes)
            out = list(train_fn(*values(**v)))
            check(all(w in out[-1][0] for w in words), "%s was answered %s" % (changes, out[-1][0]))
        check(trained_step(path) == last, "a refused run changed the embedding")
    return finish("the webui extension: tab, create, train, interrupt, host lists, refusals")


if __name__ == "__main__":
    sys.exit(main())
