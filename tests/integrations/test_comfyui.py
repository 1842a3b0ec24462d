"""The ComfyUI node pack (integrations/comfyui) loaded as ComfyUI loads a custom node (a folder
copied into custom_nodes/ with the shared file, imported by its __init__.py) with stand-ins for exactly the host
modules it imports (standins/comfyui: folder_paths, comfy.utils, comfy.model_management), driving
whole trainings on the demo model through the Python binding.

Checks:
 - an SDXL embedding (a tiny SDXL checkpoint from models/tools) created and trained through the nodes;
 - the four nodes are registered with ComfyUI's class shape, the checkpoint/embedding/hypernetwork
   lists come from folder_paths, the Train node's defaults are the plugin's;
 - Create embedding / Create hypernetwork write into ComfyUI's folders under the name given;
   a clash is refused with a sentence and never overwrites a file the user did not name;
 - Train: ComfyUI's models are unloaded first, the progress bar advances per step on the node's
   thread with previews, ComfyUI's Cancel (the progress hook raising InterruptProcessingException)
   stops the run after a whole step with the embedding and its state saved, the exception comes
   out; a resumed run finishes from that state and returns the preview and the loss plot as IMAGE
   tensors ([1, H, W, 3] float 0..1, with torch) and the path; a hypernetwork and a joint run;
 - refusals: missing checkpoint, missing dataset, nothing chosen, a template without [name];
 - the A1111-compatible apply node patches attn1/attn2 of a cloned model with sdtrain's applier, and
   (with torch) its K and V equal A1111's module computed from the trained file at strength 0.7."""
import glob
import importlib.util
import os
import sys
import tempfile

from common import (HERE, ROOT, check, checkpoint_folder, environment, expect_refusal, finish, has_torch,
                    trained_step)

sys.path.insert(0, os.path.join(HERE, "standins", "comfyui"))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.append(os.path.join(HERE, "standins", "pil"))  # Pillow's frombytes where the interpreter lacks Pillow
import comfy.model_management as mm  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402


PACK = "comfyui-sdtrain"  # the folder name integrations/README.md gives (not "sdtrain": the binding's name)


def load_pack(custom_nodes):
    """As ComfyUI's load_custom_node: the folder's __init__.py as a module named after the folder,
    put in sys.modules before it runs."""
    path = os.path.join(custom_nodes, PACK)
    spec = importlib.util.spec_from_file_location(PACK, os.path.join(path, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACK] = module
    spec.loader.exec_module(module)
    return module


def main():
    _, demo = environment()
    with tempfile.TemporaryDirectory(prefix="sdtrain-comfy-") as work:
        models = os.path.join(work, "models")
        exts = {".ckpt", ".pt", ".bin", ".pth", ".safetensors", ".pkl", ".sft"}  # ComfyUI's supported_pt_extensions
        checkpoint_folder(demo, os.path.join(models, "checkpoints"))
        for kind in ("embeddings", "hypernetworks"):
            os.makedirs(os.path.join(models, kind))
        folder_paths.folder_names_and_paths.update({k: ([os.path.join(models, k)], exts) for k in
                                                    ("checkpoints", "embeddings", "hypernetworks")})
        folder_paths.output_directory = os.path.join(work, "output")
        custom_nodes = os.path.join(work, "custom_nodes")
        os.makedirs(custom_nodes)
        # Installed by copying, as integrations/README.md says: the folder plus the shared file in it
        # (the webui test links its package from the tree instead).
        import shutil
        shutil.copytree(os.path.join(ROOT, "integrations", "comfyui"), os.path.join(custom_nodes, PACK),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(ROOT, "integrations", "common", "sdtrain_integration.py"),
                    os.path.join(custom_nodes, PACK))
        pack = load_pack(custom_nodes)
        nodes = pack.NODE_CLASS_MAPPINGS
        check(sorted(nodes) == ["SdtrainApplyHypernetworkA1111", "SdtrainCreateEmbedding", "SdtrainCreateHypernetwork",
                                "SdtrainTrain"], "registered nodes %s" % sorted(nodes))
        check(set(pack.NODE_DISPLAY_NAME_MAPPINGS) == set(nodes), "display names do not match the nodes")
        for name, cls in nodes.items():
            check(all(hasattr(cls, a) for a in ("INPUT_TYPES", "RETURN_TYPES", "FUNCTION", "CATEGORY"))
                  and callable(getattr(cls(), cls.FUNCTION)), "%s lacks ComfyUI's node shape" % name)
        import sdtrain_integration as kit
        check(os.path.dirname(kit.__file__) == os.path.join(custom_nodes, PACK),
              "the shared file came from %s, not the installed pack" % kit.__file__)
        defaults = kit.read_defaults(kit.open_plugin())
        # The struct read back to its last fields (1.5, 1.6): the header's documented defaults.
        tail = {k: defaults[k] for k in ("timestep_max", "lr_cycles", "huber_delta", "ema_every", "bucket_min_side",
                                         "bucket_max_side", "bucket_step", "deterministic", "loss_type", "lr_scheduler")}
        check(tail == dict(timestep_max=999, lr_cycles=1, huber_delta=1.0, ema_every=1, bucket_min_side=256,
                           bucket_max_side=1024, bucket_step=64, deterministic=False, loss_type="l2",
                           lr_scheduler="constant"), "the plugin's defaults read as %r" % tail)
        train_inputs = nodes["SdtrainTrain"].INPUT_TYPES()
        req, opt = train_inputs["required"], train_inputs["optional"]
        check(req["ckpt_name"][0] == ["sdtrain-demo.safetensors"], "checkpoint list %r" % (req["ckpt_name"],))
        check(opt["max_steps"][1]["default"] == 100000 and opt["embedding_learn_rate"][1]["default"] == "0.005"
              and opt["hypernetwork_learn_rate"][1]["default"] == "0.00001"
              and opt["clip_value"][1]["default"] == "0.1" and opt["precision"][1]["default"] == "fp32"
              and opt["save_every"][1]["default"] == 500 and opt["preview_cfg_scale"][1]["default"] == 0.0,
              "the Train node's defaults are not the plugin's: %r" % {k: opt[k][1]["default"] for k in opt})
        check(all(opt[o.name][1]["default"] == defaults[o.name] or defaults[o.name] is None for o in kit.OPTIONS
                  if not isinstance(o.kind, list)), "a Train default differs from read_defaults()")
        check(nodes["SdtrainTrain"].RETURN_TYPES == ("IMAGE", "IMAGE", "STRING", "STRING"),
              "Train returns %r" % (nodes["SdtrainTrain"].RETURN_TYPES,))

        # ---- create --------------------------------------------------------------------------------
        emb_dir = os.path.join(models, "embeddings")
        create = nodes["SdtrainCreateEmbedding"]()
        name, path = create.create("sdtrain-demo.safetensors", "cmf-star", "object", 2, False)
        check(name == "cmf-star.safetensors" and path == os.path.join(emb_dir, name) and os.path.isfile(path),
              "Create embedding gave %r %r" % (name, path))
        before = os.path.getmtime(path)
        expect_refusal(lambda: create.create("sdtrain-demo.safetensors", "cmf-star", "object", 1, False),
                       "already exists", "cmf-star.safetensors", "Overwrite")
        with open(os.path.join(emb_dir, "cmf-taken.pt"), "wb") as f:
            f.write(b"user's file")
        expect_refusal(lambda: create.create("sdtrain-demo.safetensors", "cmf-taken", "object", 1, True),
                       "cmf-taken.pt", "choose another name")
        check(open(os.path.join(emb_dir, "cmf-taken.pt"), "rb").read() == b"user's file", "cmf-taken.pt was changed")
        expect_refusal(lambda: create.create("sdtrain-demo.safetensors", "../escape", "object", 1, False),
                       "../escape", "letters, digits")
        expect_refusal(lambda: create.create("gone.safetensors", "cmf-x", "object", 1, False), "gone.safetensors")
        check(os.path.getmtime(path) == before, "a refused create touched %s" % path)
        hn_name, hn_path = nodes["SdtrainCreateHypernetwork"]().create(
            name="cmf-style", widths="128, 64", layer_structure="1, 2, 1", activation="relu", weight_init="Normal",
            layer_norm=False, use_dropout=False, dropout_structure="0, 0, 0", activate_output=False, overwrite=False)
        check(hn_name == "cmf-style.pt" and os.path.isfile(hn_path)
              and os.path.dirname(hn_path) == os.path.join(models, "hypernetworks"),
              "Create hypernetwork gave %r" % hn_path)
        check("cmf-style.pt" in nodes["SdtrainTrain"].INPUT_TYPES()["required"]["hypernetwork_name"][0],
              "the new hypernetwork is not in the Train node's list")

        # ---- train, cancelled from ComfyUI ------------------------------------------------------
        import threading
        main_thread = threading.get_ident()
        if not has_torch():
            print("NOTE: torch is missing: the IMAGE outputs are checked as kit images, not tensors")
            pack.nodes.image_tensor = lambda image: image
        cancel_at = 3

        def hook(value, total, preview):  # as ComfyUI's main.py: the progress hook raises on Cancel
            if value >= cancel_at:
                mm.interrupt_current_processing(True)
            mm.throw_exception_if_processing_interrupted()
        comfy.utils.PROGRESS_BAR_HOOK = hook
        train = nodes["SdtrainTrain"]()
        dataset = os.path.join(demo, "dataset")
        common_values = dict(width=64, height=64, device="cpu", seed=7, embedding_learn_rate="0.02",
                             preview_every=2, preview_steps=2, save_every=2)
        try:
            train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "None", dataset,
                        "a [name] on a [filewords]", max_steps=10000, **common_values)
            check(False, "ComfyUI's Cancel did not come out of the Train node")
        except mm.InterruptProcessingException:
            pass
        comfy.utils.PROGRESS_BAR_HOOK = None
        check(mm.calls[:2] == ["unload_all_models", "soft_empty_cache"],
              "ComfyUI's models were not unloaded first: %s" % mm.calls)
        bar = comfy.utils.bars[-1]
        steps = [u[0] for u in bar.updates]
        check(bar.thread == main_thread, "the progress bar was updated off the node's thread")
        check(steps and steps == sorted(steps) and steps[-1] >= cancel_at and steps[-1] < 10000 and bar.total == 10000,
              "progress values %s (total %s)" % (steps, bar.total))
        previews = [u[2] for u in bar.updates if u[2] is not None]
        check(previews and previews[-1][0] == "JPEG" and previews[-1][1].size == (64, 64)
              and previews[-1][2] == pack.nodes.PREVIEW_MAX_SIZE, "no preview reached the progress bar: %r"
              % (previews[-1:],))
        check(len(previews) < len(bar.updates), "every progress update carried a preview (preview_every is 2)")
        last = trained_step(path)
        check(cancel_at <= last < 10000 and last >= steps[-1], "the cancelled embedding is at step %d (bar %s)"
              % (last, steps[-1:]))
        states = glob.glob(os.path.join(work, "output", "sdtrain", "*", "cmf-star", "*.state*"))
        states += glob.glob(os.path.join(work, "output", "sdtrain", "*", "cmf-star", "*state*"))
        check(states, "no training state was saved in ComfyUI's output folder: %s"
              % glob.glob(os.path.join(work, "output", "sdtrain", "*", "*", "*")))

        # ---- resumed to the end: IMAGE outputs and the path ----------------------------------------
        run_dir = glob.glob(os.path.join(work, "output", "sdtrain", "*", "cmf-star"))[0]
        out = train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "None", dataset,
                          "a [name] on a [filewords]", max_steps=last + 2, resume_state_path=run_dir, **common_values)
        preview, plot, out_path, log_folder = out
        check(out_path == path and os.path.isdir(log_folder), "Train returned %r, %r" % (out_path, log_folder))
        check(trained_step(path) == last + 2, "the resumed embedding is at step %d, not %d"
              % (trained_step(path), last + 2))
        if has_torch():
            import torch
            check(isinstance(preview, torch.Tensor) and tuple(preview.shape) == (1, 64, 64, 3)
                  and preview.dtype == torch.float32 and 0 <= float(preview.min()) <= float(preview.max()) <= 1
                  and float(preview.max()) > 0, "the preview IMAGE is %r" % (getattr(preview, "shape", preview),))
            check(isinstance(plot, torch.Tensor) and plot.dim() == 4 and plot.shape[0] == 1 and plot.shape[3] == 3
                  and plot.shape[1] > 64 and float(plot.std()) > 0, "the loss plot IMAGE is %r"
                  % (getattr(plot, "shape", plot),))
            blank = pack.nodes.image_tensor(None)
            check(tuple(blank.shape) == (1, 64, 64, 3), "the empty IMAGE is %r" % (blank.shape,))
        else:
            check(preview.width == 64 and len(preview.pixels) == 64 * 64 * 3 and plot.width > 64,
                  "the preview / loss plot images are %r / %r" % (preview, plot))

        # ---- a hypernetwork, then a joint run ----------------------------------------------------------
        style = os.path.join(demo, "dataset-style")
        out = train.train("sdtrain-demo.safetensors", "None", "cmf-style.pt", style, "[filewords]", max_steps=3,
                          width=64, height=64, device="cpu", hypernetwork_learn_rate="0.002", preview_every=0,
                          save_every=1)
        check(out[2] == hn_path and trained_step(hn_path, hypernetwork=True) == 3,
              "the hypernetwork run gave %r" % (out[2],))
        out = train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "cmf-style.pt", style,
                          "[name], [filewords]",
                          max_steps=5, width=64, height=64, device="cpu", preview_every=0, save_every=0)
        check(out[2] == hn_path + "\n" + path and trained_step(hn_path, hypernetwork=True) == 5,
              "the joint run gave %r" % (out[2],))

        # ---- SDXL: an embedding with clip_l and clip_g rows, created and trained -----------------------
        make_ckpt, make_tok = os.environ.get("SDT_MAKE_CHECKPOINT"), os.environ.get("SDT_MAKE_TOKENIZER")
        if make_ckpt and make_tok:
            import subprocess
            sdxl_dir = os.path.join(models, "checkpoints", "sdxl")
            os.makedirs(sdxl_dir)
            subprocess.run([make_ckpt, "--config", "tiny-sdxl", "--seed", "7", "--out",
                            os.path.join(sdxl_dir, "tiny-sdxl.safetensors")], check=True, stdout=subprocess.DEVNULL)
            subprocess.run([make_tok, "--out", os.path.join(sdxl_dir, "tokenizer")], check=True,
                           stdout=subprocess.DEVNULL)
            check("sdxl/tiny-sdxl.safetensors" in nodes["SdtrainTrain"].INPUT_TYPES()["required"]["ckpt_name"][0],
                  "the SDXL checkpoint is not in the list")
            name, xl_path = create.create("sdxl/tiny-sdxl.safetensors", "cmf-xl", "cat", 2, False)
            with kit.open_plugin().embedding_trainer() as t:
                info = t.inspect(xl_path)
            check(info.format == "safetensors_sdxl" and info.vectors == 2 and info.metadata.get("clip_g_dim"),
                  "the SDXL embedding is %r" % info)
            out = train.train("sdxl/tiny-sdxl.safetensors", name, "None", dataset, "a [name]", max_steps=2, width=64,
                              height=64, device="cpu", preview_every=0, save_every=0)
            check(out[2] == xl_path and trained_step(xl_path) == 2, "the SDXL run gave %r" % (out[2],))
        else:
            print("NOTE: SDT_MAKE_CHECKPOINT / SDT_MAKE_TOKENIZER not set: no SDXL embedding")

        # ---- refusals ------------------------------------------------------------------------
        expect_refusal(lambda: train.train("nope.safetensors", "cmf-star.safetensors", "None", dataset, "[name]"),
                       "nope.safetensors", "checkpoint")
        expect_refusal(lambda: train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "None",
                                           os.path.join(work, "no-such-set"), "[name]"), "no-such-set")
        expect_refusal(lambda: train.train("sdtrain-demo.safetensors", "None", "None", dataset, "[name]"),
                       "Nothing to train")
        expect_refusal(lambda: train.train("sdtrain-demo.safetensors", "gone.pt", "None", dataset, "[name]"),
                       "gone.pt", "embeddings")
        expect_refusal(lambda: train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "None", dataset,
                                           "a photo"), "[name]", "[filewords]")
        expect_refusal(lambda: train.train("sdtrain-demo.safetensors", "cmf-star.safetensors", "None", dataset,
                                           "[name]", precision="fp12"), "fp12")

        # ---- the A1111-compatible apply node -----------------------------------------------------------
        apply_node = nodes["SdtrainApplyHypernetworkA1111"]
        check("cmf-style.pt" in apply_node.INPUT_TYPES()["required"]["hypernetwork_name"][0], "apply node's list")

        class Model:  # ComfyUI's ModelPatcher as far as a patching node sees it
            def __init__(self):
                self.patches = {}

            def clone(self):
                c = Model()
                c.patches = dict(self.patches)
                return c

            def set_model_attn1_patch(self, patch):
                self.patches["attn1"] = patch

            def set_model_attn2_patch(self, patch):
                self.patches["attn2"] = patch
        base = Model()
        (patched,) = apply_node().apply(base, "cmf-style.pt", 1.0)
        check(not base.patches and set(patched.patches) == {"attn1", "attn2"}, "the apply node patched %r / %r"
              % (base.patches, patched.patches))
        if has_torch():
            import torch
            g = torch.Generator().manual_seed(0)
            x = torch.randn(2, 5, 128, generator=g)
            q, k, v = patched.patches["attn2"](x, x, x, {})
            check(q is x and k.shape == x.shape and k.dtype == x.dtype and not torch.equal(k, x)
                  and not torch.equal(k, v), "the patch on width 128 gave %r" % ((k - x).abs().max(),))
            y = torch.randn(1, 3, 40, generator=g, dtype=torch.float64)
            _, k2, v2 = patched.patches["attn1"](y, y, y, {})
            check(torch.equal(k2, y) and torch.equal(v2, y) and k2.dtype == torch.float64,
                  "a width without a module changed")
            # A1111's module for relu, layer structure 1, 2, 1, no layer norm, no dropout, computed here
            # from the file (torch.load) as A1111's HypernetworkModule: Linear, ReLU, Linear; x + f(x) * s.
            state = torch.load(hn_path, map_location="cpu")

            def a1111(index, t, strength):
                w = state[128][index]
                h = torch.relu(t.double() @ w["linear.0.weight"].double().T + w["linear.0.bias"].double())
                return t.double() + (h @ w["linear.2.weight"].double().T + w["linear.2.bias"].double()) * strength
            (strong,) = apply_node().apply(base, "cmf-style.pt", 0.7)
            _, k7, v7 = strong.patches["attn2"](x, x, x, {})
            for got, index in ((k7, 0), (v7, 1)):
                change, want = got.double() - x.double(), a1111(index, x, 0.7) - x.double()
                err = float((change - want).abs().max() / want.abs().max())  # of the module's change, not of x
                check(err < 1e-3, "the A1111-compatible patch's %s change differs from A1111's by %.3g"
                      % ("KV"[index], err))
            (zero,) = apply_node().apply(base, "cmf-style.pt", 0.0)
            _, k0, _ = zero.patches["attn2"](x, x, x, {})
            check(torch.allclose(k0, x), "strength 0 changed the keys")
        expect_refusal(lambda: apply_node().apply(base, "missing.pt", 1.0), "missing.pt")
    return finish("the ComfyUI node pack: create, train, cancel, resume, IMAGE outputs, refusals, apply")


if __name__ == "__main__":
    sys.exit(main())
