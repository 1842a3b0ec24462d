"""What the ComfyUI node pack and the webui extension share: the Train tab's options (grouped as
A1111's tab groups them, defaults read from the plugin), the refusals, one training job with the
host's progress, interrupt and GPU hand-over as plain callables, a PNG reader for the loss plot,
and A1111's hypernetwork chain (sdtrain's applier) for ComfyUI's attention patches.

Host-independent: nothing here imports ComfyUI, webui, gradio or torch. It uses only the public
API of the `sdtrain` Python package (python/sdtrain): trainers, sdtrain.defaults() and
sdtrain.HypernetworkApplier, all over the trainer factory "sdtrain.trainer/1"."""
import os
import queue
import re
import struct
import sys
import threading
import zlib

_HERE = os.path.dirname(os.path.realpath(__file__))


def _import_sdtrain():
    """The sdtrain package: installed in the host's Python, else the checkout's python/ beside
    integrations/ (a package linked from a source tree)."""
    try:
        import sdtrain
        return sdtrain
    except ImportError:
        pass
    for base in (_HERE, os.path.dirname(_HERE)):
        candidate = os.path.join(os.path.dirname(base), "python")
        if os.path.isfile(os.path.join(candidate, "sdtrain", "__init__.py")):
            sys.path.append(candidate)
            import sdtrain
            return sdtrain
    raise ImportError("The sdtrain Python package is not installed in this host's Python (%s); install it there with "
                      "`%s -m pip install --no-index /path/to/sdtrain-*.whl` (the wheel sdtrain's build writes) and "
                      "restart the host." % (sys.executable, sys.executable))


sdtrain = _import_sdtrain()
SdtrainError = sdtrain.SdtrainError


class Refusal(ValueError):
    """A bad input, refused before anything is written: the message is the sentence for the user."""


# ---- the plugin --------------------------------------------------------------------------------

_plugin = None
_plugin_lock = threading.Lock()


def plugin_path_candidates(package_dir):
    """libsdtrain.so dropped into the package folder comes first, then the binding's own rule
    (SDTRAIN_PLUGIN, pkg-config)."""
    return [os.path.join(package_dir, "libsdtrain.so")]


def open_plugin(package_dir=None):
    """The one sdtrain.Plugin of this host process, opened at first use."""
    global _plugin
    with _plugin_lock:
        if _plugin is None:
            path = None
            for candidate in plugin_path_candidates(package_dir) if package_dir else []:
                if os.path.isfile(candidate):
                    path = candidate
                    break
            _plugin = sdtrain.Plugin(path) if path else sdtrain.default_plugin()
        return _plugin


# ---- defaults read from the plugin -------------------------------------------------------------

_ENUMS = {
    "clip_mode": ["disabled", "value", "norm"],
    "latent_sampling": ["once", "deterministic", "random"],
    "precision": ["fp32", "fp16", "bf16"],
    "device": ["auto", "cpu", "cuda"],
    "loss_type": ["l2", "l1", "huber"],
    "lr_scheduler": ["constant", "linear", "cosine", "cosine_with_restarts"],
}


def read_defaults(plugin):
    """{option name: the plugin's default} for every option OPTIONS lists (enums by name), from
    sdtrain.defaults() (the trainer factory's options and parts)."""
    d = sdtrain.defaults(plugin)
    out = dict(d["options"])
    out["hypernetwork_learn_rate"] = d["hypernetwork"]["learn_rate"] or ""
    out["embedding_learn_rate"] = d["embedding"]["learn_rate"] or ""
    out["weight_decay"] = d["hypernetwork"]["weight_decay"]
    out["strength"] = d["hypernetwork"]["strength"]
    out["save_image_with_embedding"] = d["embedding"]["save_image_with_embedding"]
    return out


# ---- the Train tab's options, grouped as A1111's tab groups them, then what sdtrain adds ----------

class Option:
    """One field of the Train tab: name (the binding's option name, or one of this module's),
    label, kind ("int", "float", "str", "bool", "text", a list of choices), group."""

    def __init__(self, name, label, kind, group, minimum=None, maximum=None, step=None):
        self.name, self.label, self.kind, self.group = name, label, kind, group
        self.minimum, self.maximum, self.step = minimum, maximum, step


_A = "Train (A1111's fields)"
OPTIONS = [
    Option("embedding_learn_rate", "Embedding learning rate", "str", _A),
    Option("hypernetwork_learn_rate", "Hypernetwork learning rate", "str", _A),
    Option("clip_mode", "Gradient clipping", _ENUMS["clip_mode"], _A),
    Option("clip_value", "Gradient clipping value (schedule)", "str", _A),
    Option("batch_size", "Batch size", "int", _A, 1, 1024),
    Option("grad_accum_steps", "Gradient accumulation steps", "int", _A, 1, 1024),
    Option("width", "Width", "int", _A, 64, 2048, 8),
    Option("height", "Height", "int", _A, 64, 2048, 8),
    Option("varsize", "Do not resize images", "bool", _A),
    Option("max_steps", "Max steps", "int", _A, 1, 10 ** 9),
    Option("preview_every", "Save an image to log directory every N steps, 0 to disable", "int", _A, 0, 10 ** 9),
    Option("save_every", "Save a copy of the result to log directory every N steps, 0 to disable", "int", _A, 0,
           10 ** 9),
    Option("use_alpha_as_loss_weight", "Use PNG alpha channel as loss weight", "bool", _A),
    Option("save_image_with_embedding", "Save images with embedding in PNG chunks", "bool", _A),
    Option("shuffle_tags", "Shuffle tags by ',' when creating prompts", "bool", _A),
    Option("tag_dropout", "Drop out tags when creating prompts", "float", _A, 0.0, 1.0, 0.01),
    Option("latent_sampling", "Latent sampling method", _ENUMS["latent_sampling"], _A),
    Option("preview_prompt", "Preview prompt (empty: the first caption of the batch)", "str", _A),
    Option("preview_negative_prompt", "Preview negative prompt", "str", _A),
    Option("preview_steps", "Preview sampling steps", "int", _A, 1, 150),
    Option("preview_cfg_scale", "Preview CFG scale (0: the model family's, 7; Flux.1 1)", "float", _A, 0.0, 30.0, 0.5),
    Option("preview_seed", "Preview seed (-1: random)", "int", _A, -1, 2 ** 62),
]
_X = "sdtrain adds"
OPTIONS += [
    Option("precision", "Precision", _ENUMS["precision"], _X),
    Option("device", "Device", _ENUMS["device"], _X),
    Option("seed", "Training seed", "int", _X, 0, 2 ** 62),
    Option("gradient_checkpointing", "Gradient checkpointing (less memory, slower)", "bool", _X),
    Option("lr_scheduler", "Learning-rate scheduler", _ENUMS["lr_scheduler"], _X),
    Option("warmup_steps", "Warmup steps", "int", _X, 0, 10 ** 9),
    Option("loss_type", "Loss", _ENUMS["loss_type"], _X),
    Option("min_snr_gamma", "Min-SNR gamma (0: off)", "float", _X, 0.0, 100.0, 0.5),
    Option("noise_offset", "Noise offset (0: off)", "float", _X, 0.0, 1.0, 0.01),
    Option("caption_dropout", "Caption dropout", "float", _X, 0.0, 1.0, 0.01),
    Option("flip", "Flip images left-right", "bool", _X),
    Option("buckets", "Aspect-ratio buckets", "bool", _X),
    Option("validation_split", "Validation split (0: none)", "float", _X, 0.0, 0.9, 0.01),
    Option("validate_every", "Validate every N steps (0: never)", "int", _X, 0, 10 ** 9),
    Option("ema_decay", "EMA decay (0: off)", "float", _X, 0.0, 0.99999, 0.0001),
    Option("preview_seeds", "Preview grid seeds (\"N\" or \"S1, S2\"; empty: one image)", "str", _X),
    Option("resume_state_path", "Resume from a training state (a file or a folder; empty: start anew)", "str", _X),
]
OPTION_NAMES = [o.name for o in OPTIONS]

DEFAULT_TEMPLATE = "a photo of [name], [filewords]\n"

# A1111's Create hypernetwork choices (modules/hypernetworks/ui.py keys, docs/hypernetworks.md).
HN_ACTIVATIONS = ["linear", "relu", "leakyrelu", "elu", "swish", "tanh", "sigmoid", "celu", "gelu", "glu",
                  "hardshrink", "hardsigmoid", "hardtanh", "logsigmoid", "mish", "prelu", "rrelu", "relu6", "selu",
                  "silu", "softplus", "softshrink", "softsign", "tanhshrink"]
HN_WEIGHT_INITS = ["Normal", "KaimingUniform", "KaimingNormal", "XavierUniform", "XavierNormal"]


def grouped(options=OPTIONS):
    """[(group, [Option, ...]), ...] in the tab's order."""
    groups = []
    for o in options:
        if not groups or groups[-1][0] != o.group:
            groups.append((o.group, []))
        groups[-1][1].append(o)
    return groups


# ---- names and refusals ----------------------------------------------------------------------

_NAME_OK = re.compile(r"^[A-Za-z0-9._ -]+$")
EMBEDDING_EXTENSIONS = (".safetensors", ".pt", ".bin", ".png")
HYPERNETWORK_EXTENSIONS = (".pt", ".safetensors")


def check_new_name(kind, name, folder, extensions, overwrite):
    """Refuses a name a new file cannot take: empty, path characters, or one that another file in
    the folder answers to (the host picks files by stem, so NAME.pt beside NAME.safetensors would
    make `embedding:NAME` ambiguous); overwrite replaces only the file of that exact name."""
    name = (name or "").strip()
    if not name:
        raise Refusal("The %s needs a name; type one in the Name field." % kind)
    if not _NAME_OK.match(name) or name in (".", ".."):
        raise Refusal("The %s name %r may hold only letters, digits, spaces, '.', '_' and '-'; choose another name."
                      % (kind, name))
    if not os.path.isdir(folder):
        raise Refusal("The %s folder %s does not exist; create it or set the host's %s folder." % (kind, folder, kind))
    own = extensions[0]
    for ext in extensions:
        existing = os.path.join(folder, name + ext)
        if not os.path.exists(existing):
            continue
        if ext == own and overwrite:
            continue
        if ext == own:
            raise Refusal("The %s %s already exists; tick Overwrite to replace it, or choose another name."
                          % (kind, existing))
        raise Refusal("The name %r is taken by %s, which the host would confuse with the new %s; choose another "
                      "name (that file is left as it is)." % (name, existing, kind))
    return name


def check_dataset(dataset_dir):
    dataset_dir = (dataset_dir or "").strip()
    if not dataset_dir:
        raise Refusal("The dataset directory is empty; type the folder that holds the training images.")
    if not os.path.isdir(dataset_dir):
        raise Refusal("The dataset directory %s does not exist; type the folder that holds the training images."
                      % dataset_dir)
    images = [f for f in os.listdir(dataset_dir) if f.lower().endswith((".png", ".jpg", ".jpeg", ".webp", ".bmp"))]
    if not images:
        raise Refusal("The dataset directory %s holds no images (.png, .jpg, .webp, .bmp); put the training images "
                      "there." % dataset_dir)
    return dataset_dir


def check_checkpoint(name, path):
    if not name:
        raise Refusal("No checkpoint is chosen; pick the model to train on from the checkpoint list.")
    if not path or not os.path.exists(path):
        raise Refusal("The checkpoint %r was not found in the host's checkpoint folders; refresh the list or put the "
                      "model there." % name)
    return path


def template_file(template, log_dir):
    """A template given as a file path is used as it is; else its text is written to
    <log_dir>/template.txt (the folder the run's logs go to)."""
    template = template if template is not None else DEFAULT_TEMPLATE
    if "\n" not in template and template.strip().endswith(".txt"):
        if not os.path.isfile(template.strip()):
            raise Refusal("The prompt template file %s does not exist; type its path or the template's text."
                          % template.strip())
        return template.strip()
    if "[name]" not in template and "[filewords]" not in template:
        raise Refusal("The prompt template has neither [name] nor [filewords]; the trained word would never be in a "
                      "prompt. Write e.g. \"a photo of [name], [filewords]\".")
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, "template.txt")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(template if template.endswith("\n") else template + "\n")
    os.replace(tmp, path)
    return path


# ---- creating files ----------------------------------------------------------------------------

def create_embedding(plugin, name, model_path, output_dir, init_text="*", vectors_per_token=1, overwrite=False):
    """Writes <output_dir>/<name>.safetensors (SD 1.x/2.x: one tensor; SDXL: clip_l and clip_g,
    as the checkpoint's text encoders say) and returns its path."""
    name = check_new_name("embedding", name, output_dir, EMBEDDING_EXTENSIONS, overwrite)
    if not model_path or not os.path.exists(model_path):
        raise Refusal("The checkpoint %s does not exist; pick one from the host's checkpoint list." % model_path)
    with plugin.embedding_trainer() as trainer:
        return trainer.create_embedding(name, model_path=model_path, output_dir=output_dir, init_text=init_text,
                                        vectors_per_token=int(vectors_per_token), overwrite=bool(overwrite))


def create_hypernetwork(plugin, name, output_dir, overwrite=False, **spec):
    """Writes <output_dir>/<name>.pt (A1111's format) and returns its path. spec: widths,
    layer_structure, activation, weight_init, dropout_structure, layer_norm, use_dropout,
    activate_output; empty text fields take the plugin's defaults."""
    name = check_new_name("hypernetwork", name, output_dir, HYPERNETWORK_EXTENSIONS, overwrite)
    fields = {k: v for k, v in spec.items() if not (isinstance(v, str) and not v.strip())}
    with plugin.hypernetwork_trainer() as trainer:
        return trainer.create_hypernetwork(name, output_dir, overwrite=bool(overwrite), **fields)


# ---- one training job ------------------------------------------------------------------------

class Image:
    """An RGB picture: width, height, pixels (bytes, rows top to bottom, 3 bytes a pixel), and the
    file it was saved to (path, or None)."""

    def __init__(self, width, height, pixels, path=None):
        self.width, self.height, self.pixels, self.path = width, height, pixels, path


class Result:
    """What a job gives back: status ("finished" or "interrupted"), the trained files, the log
    folder, the latest preview (Image or None), the loss plot (Image or None), the last step."""

    def __init__(self):
        self.status = None
        self.embedding_path = None
        self.hypernetwork_path = None
        self.log_folder = None
        self.preview = None
        self.loss_plot = None
        self.step = 0
        self.saved = []


def train_options(values, defaults):
    """The binding's options from the tab's values (name -> value): empty text means the
    plugin's default (left out); numbers typed as floats where the field is an integer are cast."""
    out = {}
    for o in OPTIONS:
        if o.name not in values or o.name in ("embedding_learn_rate", "hypernetwork_learn_rate"):
            continue
        v = values[o.name]
        if v is None or (isinstance(v, str) and not v.strip() and o.kind in ("str", "text")):
            continue
        if o.kind == "int":
            v = int(v)
        elif o.kind == "float":
            v = float(v)
        elif o.kind == "bool":
            v = bool(v)
        if isinstance(o.kind, list) and v not in o.kind:
            raise Refusal("%s must be one of %s, not %r." % (o.label, ", ".join(o.kind), v))
        out[o.name] = v
    return out


class Host:
    """What a host gives a job: progress(step, max_steps, preview Image or None) on the host's
    thread (it may raise the host's interrupt exception: the job stops the run and re-raises it
    once everything is saved), interrupted() -> bool polled while the run works,
    release_gpu() before it starts and restore_gpu() after it ends, log(level, message)."""

    def progress(self, step, max_steps, preview):
        pass

    def interrupted(self):
        return False

    def release_gpu(self):
        pass

    def restore_gpu(self):
        pass

    def log(self, level, message):
        pass


def run_training(plugin, host, model_path, dataset_dir, log_dir, template, embedding_path=None,
                 hypernetwork_path=None, values=None, poll_seconds=0.2):
    """Trains the embedding, the hypernetwork, or both together, on a worker thread while the
    calling (host) thread reports progress and watches the host's interrupt. Returns a Result;
    the host's interrupt exception (raised from host.progress) comes out after the run saved."""
    values = dict(values or {})
    if not embedding_path and not hypernetwork_path:
        raise Refusal("Nothing to train: choose an embedding, a hypernetwork, or both.")
    for kind, path in (("embedding", embedding_path), ("hypernetwork", hypernetwork_path)):
        if path and not os.path.isfile(path):
            raise Refusal("The %s %s does not exist; create it first or pick one from the list." % (kind, path))
    dataset_dir = check_dataset(dataset_dir)
    defaults = read_defaults(plugin)
    options = train_options(values, defaults)
    os.makedirs(log_dir, exist_ok=True)
    options.update(model_path=model_path, dataset_dir=dataset_dir, log_dir=log_dir,
                   template_file=template_file(template, log_dir))
    emb_lr = str(values.get("embedding_learn_rate") or defaults["embedding_learn_rate"])
    if hypernetwork_path:
        options.update(hypernetwork_path=hypernetwork_path,
                       learn_rate=str(values.get("hypernetwork_learn_rate") or defaults["hypernetwork_learn_rate"]))
        if embedding_path:
            options.update(embedding_path=embedding_path, embedding_learn_rate=emb_lr)
    else:
        options.update(embedding_path=embedding_path, learn_rate=emb_lr)

    events = queue.Queue()  # the plugin's callbacks come on the run's thread; the host's calls stay on this one
    callbacks = dict(on_metrics=lambda m: events.put(("metrics", m)),
                     on_preview=lambda p: events.put(("preview", p)),
                     on_file_saved=lambda f: events.put(("file", f)),
                     on_log=lambda level, message: events.put(("log", (level, message))))
    make = plugin.hypernetwork_trainer if hypernetwork_path else plugin.embedding_trainer
    result = Result()
    result.embedding_path, result.hypernetwork_path = embedding_path, hypernetwork_path
    host_exception = None
    host.release_gpu()
    try:
        with make(**callbacks) as trainer:
            run = trainer.start(**options)
            latest = [0, options.get("max_steps", defaults["max_steps"])]
            stopping = False

            def drain():
                nonlocal host_exception, stopping
                while True:
                    try:
                        what, item = events.get_nowait()
                    except queue.Empty:
                        return
                    preview = None
                    if what == "metrics":
                        latest[:] = [item.step, item.max_steps]
                        result.step = item.step
                    elif what == "preview":
                        if item.pixels and item.channels == 3:
                            preview = result.preview = Image(item.width, item.height, item.pixels, item.path)
                    elif what == "file":
                        result.saved.append(item)
                        if item.kind in ("settings", "training_state") and not result.log_folder:
                            result.log_folder = os.path.dirname(item.path)
                        continue
                    elif what == "log":
                        host.log(*item)
                        continue
                    try:
                        host.progress(latest[0], latest[1], preview)
                    except BaseException as e:  # the host's cancel: stop after the step, keep everything
                        if host_exception is None:
                            host_exception = e
                        if not stopping:
                            stopping = True
                            trainer.interrupt()

            while not run.done():
                run.thread.join(poll_seconds)
                drain()
                if not stopping and host.interrupted():
                    stopping = True
                    trainer.interrupt()
            drain()
            result.status = run.wait()
    finally:
        host.restore_gpu()
    if result.log_folder:
        plot = os.path.join(result.log_folder, "loss.png")
        if os.path.isfile(plot):
            result.loss_plot = read_png(plot)
    if host_exception is not None:
        raise host_exception
    return result


# ---- PNG reading (the loss plot; standard library only) ----------------------------------------

def read_png(path):
    """An Image (RGB) of an 8-bit, non-interlaced PNG (grey, grey+alpha, RGB, RGBA or palette),
    which is what the plugin writes; anything else is a Refusal naming the file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Refusal("%s is not a PNG file." % path)
    pos, idat, palette = 8, [], None
    width = height = depth = ctype = interlace = None
    while pos + 8 <= len(data):
        length, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if tag == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif tag == b"PLTE":
            palette = body
        elif tag == b"IDAT":
            idat.append(body)
        elif tag == b"IEND":
            break
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(ctype)
    if width is None or depth != 8 or interlace != 0 or channels is None:
        raise Refusal("%s is a PNG this reader does not take (depth %s, colour type %s, interlace %s); save it as "
                      "8-bit RGB." % (path, depth, ctype, interlace))
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    pixels = bytearray()
    for line in rows:
        if ctype == 2:
            pixels += line
        elif ctype == 6:
            for x in range(width):
                pixels += line[x * 4:x * 4 + 3]
        elif ctype == 0:
            for v in line:
                pixels += bytes((v, v, v))
        elif ctype == 4:
            for x in range(width):
                pixels += bytes((line[x * 2],) * 3)
        else:
            for v in line:
                pixels += palette[v * 3:v * 3 + 3]
    return Image(width, height, bytes(pixels))


# ---- A1111's hypernetwork chain (sdtrain's applier) ------------------------------------------

KV_K, KV_V = sdtrain.KV_K, sdtrain.KV_V


class HypernetworkChain(sdtrain.HypernetworkApplier):
    """A1111's apply_hypernetworks on the CPU in float32 and eval mode (no dropout, no activation
    after the last layer unless the file asks for it): each member's K module to the keys' input,
    V to the values', x + f(x) * strength, members without a module for the width passing x on.
    The binding's HypernetworkApplier; a plugin without the applier is a Refusal naming the fix."""

    def __init__(self, plugin):
        try:
            super().__init__(plugin)
        except SdtrainError as e:
            if e.status_name != "UNSUPPORTED":
                raise
            raise Refusal("The plugin %s (ABI %s) cannot apply hypernetworks (ABI 1.7 or newer needed); install a "
                          "newer sdtrain." % (plugin.path, plugin.abi_version)) from None
