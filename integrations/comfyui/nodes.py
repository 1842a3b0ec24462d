"""The sdtrain nodes: Create embedding, Create hypernetwork, Train, and Apply hypernetwork
(A1111-compatible). ComfyUI's names used here (read at the commits integrations/README.md gives):
folder_paths.get_filename_list / get_full_path / get_folder_paths / get_output_directory,
comfy.utils.ProgressBar(total).update_absolute(value, total, preview),
comfy.model_management.unload_all_models / soft_empty_cache / processing_interrupted /
throw_exception_if_processing_interrupted, and a MODEL's clone() / set_model_attn1_patch /
set_model_attn2_patch."""
import os

import comfy.model_management
import comfy.utils
import folder_paths

import sdtrain_integration as kit

PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
CATEGORY = "sdtrain"
NONE = "None"
PREVIEW_MAX_SIZE = 512


def plugin():
    return kit.open_plugin(PACKAGE_DIR)


def _first_folder(kind):
    folders = folder_paths.get_folder_paths(kind)
    if not folders:
        raise kit.Refusal("ComfyUI has no %s folder; add one in extra_model_paths.yaml." % kind)
    os.makedirs(folders[0], exist_ok=True)
    return folders[0]


def _full_path(kind, name, label):
    if not name or name == NONE:
        return None
    path = folder_paths.get_full_path(kind, name)
    if path is None:
        raise kit.Refusal("The %s %r is not in ComfyUI's %s folders (%s); refresh the list or put the file there."
                          % (label, name, kind, ", ".join(folder_paths.get_folder_paths(kind))))
    return path


def _log_dir():
    return os.path.join(folder_paths.get_output_directory(), "sdtrain")


# ---- IMAGE conversion (torch [B, H, W, C] float 0..1) ------------------------------------------

def image_tensor(image):
    """A ComfyUI IMAGE (1 x H x W x 3 float32 in 0..1) of a kit.Image; a black 64 x 64 one for None."""
    import torch
    if image is None:
        return torch.zeros((1, 64, 64, 3), dtype=torch.float32)
    data = torch.frombuffer(bytearray(image.pixels), dtype=torch.uint8)
    return data.reshape(1, image.height, image.width, 3).to(torch.float32) / 255.0


def preview_for_progress_bar(image):
    """The preview ComfyUI's progress hook sends: ("JPEG", PIL image, max size), as its samplers'
    previews are; None without PIL."""
    if image is None:
        return None
    try:
        from PIL import Image as PILImage
    except ImportError:
        return None
    return ("JPEG", PILImage.frombytes("RGB", (image.width, image.height), image.pixels), PREVIEW_MAX_SIZE)


class ComfyHost(kit.Host):
    """ComfyUI's side of a training job: its progress bar, Cancel and model management."""

    def __init__(self, bar):
        self.bar = bar

    def progress(self, step, max_steps, preview):
        self.bar.update_absolute(step, max_steps, preview_for_progress_bar(preview))

    def interrupted(self):
        return comfy.model_management.processing_interrupted()

    def release_gpu(self):
        comfy.model_management.unload_all_models()
        comfy.model_management.soft_empty_cache()

    def restore_gpu(self):
        comfy.model_management.soft_empty_cache()  # ComfyUI loads its models again when a node needs them

    def log(self, level, message):
        if level in ("warning", "error"):
            print("[sdtrain] %s: %s" % (level, message))


# ---- nodes ----------------------------------------------------------------------------------------

class CreateEmbedding:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "ckpt_name": (folder_paths.get_filename_list("checkpoints"),),
            "name": ("STRING", {"default": ""}),
            "init_text": ("STRING", {"default": "*"}),
            "vectors_per_token": ("INT", {"default": 1, "min": 1, "max": 75}),
            "overwrite": ("BOOLEAN", {"default": False}),
        }}

    RETURN_TYPES = ("STRING", "STRING")
    RETURN_NAMES = ("embedding_name", "path")
    FUNCTION = "create"
    CATEGORY = CATEGORY
    OUTPUT_NODE = True

    def create(self, ckpt_name, name, init_text, vectors_per_token, overwrite):
        model = kit.check_checkpoint(ckpt_name, folder_paths.get_full_path("checkpoints", ckpt_name))
        path = kit.create_embedding(plugin(), name, model, _first_folder("embeddings"), init_text=init_text,
                                    vectors_per_token=vectors_per_token, overwrite=overwrite)
        return (os.path.basename(path), path)


class CreateHypernetwork:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "name": ("STRING", {"default": ""}),
            "widths": ("STRING", {"default": "768, 320, 640, 1280"}),
            "layer_structure": ("STRING", {"default": "1, 2, 1"}),
            "activation": (kit.HN_ACTIVATIONS,),
            "weight_init": (kit.HN_WEIGHT_INITS,),
            "layer_norm": ("BOOLEAN", {"default": False}),
            "use_dropout": ("BOOLEAN", {"default": False}),
            "dropout_structure": ("STRING", {"default": "0, 0, 0"}),
            "activate_output": ("BOOLEAN", {"default": False}),
            "overwrite": ("BOOLEAN", {"default": False}),
        }}

    RETURN_TYPES = ("STRING", "STRING")
    RETURN_NAMES = ("hypernetwork_name", "path")
    FUNCTION = "create"
    CATEGORY = CATEGORY
    OUTPUT_NODE = True

    def create(self, name, overwrite, **spec):
        path = kit.create_hypernetwork(plugin(), name, _first_folder("hypernetworks"), overwrite=overwrite, **spec)
        return (os.path.basename(path), path)


def _widget(option, default):
    """A ComfyUI input of one Train option, its default the plugin's."""
    if isinstance(option.kind, list):
        return (option.kind, {"default": default if default in option.kind else option.kind[0]})
    if option.kind == "bool":
        return ("BOOLEAN", {"default": bool(default)})
    if option.kind in ("int", "float"):
        spec = {"default": default if default is not None else 0}
        for key, value in (("min", option.minimum), ("max", option.maximum), ("step", option.step)):
            if value is not None:
                spec[key] = value
        return ("INT" if option.kind == "int" else "FLOAT", spec)
    return ("STRING", {"default": default if isinstance(default, str) else ""})


class Train:
    """Trains an embedding, a hypernetwork, or both together, on the chosen checkpoint."""

    @classmethod
    def INPUT_TYPES(cls):
        defaults = kit.read_defaults(plugin())
        optional = {o.name: _widget(o, defaults.get(o.name)) for o in kit.OPTIONS}
        return {"required": {
            "ckpt_name": (folder_paths.get_filename_list("checkpoints"),),
            "embedding_name": ([NONE] + folder_paths.get_filename_list("embeddings"),),
            "hypernetwork_name": ([NONE] + folder_paths.get_filename_list("hypernetworks"),),
            "dataset_dir": ("STRING", {"default": ""}),
            "template": ("STRING", {"default": kit.DEFAULT_TEMPLATE, "multiline": True}),
        }, "optional": optional}

    RETURN_TYPES = ("IMAGE", "IMAGE", "STRING", "STRING")
    RETURN_NAMES = ("preview", "loss_plot", "path", "log_folder")
    FUNCTION = "train"
    CATEGORY = CATEGORY
    OUTPUT_NODE = True

    def train(self, ckpt_name, embedding_name, hypernetwork_name, dataset_dir, template, **values):
        model = kit.check_checkpoint(ckpt_name, folder_paths.get_full_path("checkpoints", ckpt_name))
        embedding = _full_path("embeddings", embedding_name, "embedding")
        hypernetwork = _full_path("hypernetworks", hypernetwork_name, "hypernetwork")
        max_steps = int(values.get("max_steps") or kit.read_defaults(plugin())["max_steps"])
        bar = comfy.utils.ProgressBar(max_steps)
        result = kit.run_training(plugin(), ComfyHost(bar), model, dataset_dir, _log_dir(), template,
                                  embedding_path=embedding, hypernetwork_path=hypernetwork, values=values)
        # A Cancel seen by polling (not through the bar's hook) ends the prompt as ComfyUI's own nodes do.
        comfy.model_management.throw_exception_if_processing_interrupted()
        paths = [p for p in (result.hypernetwork_path, result.embedding_path) if p]
        return (image_tensor(result.preview), image_tensor(result.loss_plot), "\n".join(paths),
                result.log_folder or "")


class _A1111HypernetworkPatch:
    """ComfyUI's attention patch (q, k, v, extra_options) -> (q, k, v) computing A1111's chain
    with sdtrain's applier: k and v are the attention's inputs before their projections."""

    def __init__(self, chain):
        self.chain = chain

    def _apply(self, kind, x):
        import torch
        width = x.shape[-1]
        src = x.detach().to("cpu", torch.float32).contiguous()
        out = torch.empty_like(src)
        self.chain.apply_kv(kind, width, src.data_ptr(), out.data_ptr(), src.numel() // width)
        # x plus the chain's change: a width no member has (change exactly 0) leaves x as it was,
        # in its own dtype, as A1111 passes it through.
        return x + (out - src).to(device=x.device, dtype=x.dtype)

    def __call__(self, q, k, v, extra_options):
        return q, self._apply(kit.KV_K, k), self._apply(kit.KV_V, v)

    def to(self, device):
        return self  # the applier computes on the CPU; _apply moves the values back to x's device


class ApplyHypernetworkA1111:
    """A hypernetwork as A1111 applies it (dropout off at inference, no extra activation after the
    last layer), unlike ComfyUI's HypernetworkLoader; integrations/README.md says when they agree."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": ("MODEL",),
            "hypernetwork_name": (folder_paths.get_filename_list("hypernetworks"),),
            "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
        }}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "apply"
    CATEGORY = CATEGORY

    def apply(self, model, hypernetwork_name, strength):
        path = _full_path("hypernetworks", hypernetwork_name, "hypernetwork")
        if path is None:
            raise kit.Refusal("No hypernetwork is chosen; pick one from the list.")
        chain = kit.HypernetworkChain(plugin())
        chain.add(path, strength)
        patched = model.clone()
        patch = _A1111HypernetworkPatch(chain)
        patched.set_model_attn1_patch(patch)
        patched.set_model_attn2_patch(patch)
        return (patched,)


NODE_CLASS_MAPPINGS = {
    "SdtrainCreateEmbedding": CreateEmbedding,
    "SdtrainCreateHypernetwork": CreateHypernetwork,
    "SdtrainTrain": Train,
    "SdtrainApplyHypernetworkA1111": ApplyHypernetworkA1111,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "SdtrainCreateEmbedding": "Create embedding (sdtrain)",
    "SdtrainCreateHypernetwork": "Create hypernetwork (sdtrain)",
    "SdtrainTrain": "Train embedding / hypernetwork (sdtrain)",
    "SdtrainApplyHypernetworkA1111": "Apply hypernetwork, A1111-compatible (sdtrain)",
}
