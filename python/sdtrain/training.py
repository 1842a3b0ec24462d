"""Embedding and hypernetwork trainers: create, prepare, run on a worker thread, interrupt.

Both are one trainer of the plugin's trainer factory ("sdtrain.trainer/1", ABI 1.7): prepare() sends
the shared options and the parts to train (an embedding, a hypernetwork, or both: joint training);
creating and reading files go through the factory's extensions. The two classes differ only in the
table that says where each of their option names goes.

The plugin calls the host's callbacks on the thread inside run(); here that is the trainer's
threading.Thread, and each callback is a Python callable. A callable that raises stops the run
(interrupt(): the step finishes and everything is saved) and its exception comes out of
TrainingRun.wait()."""
import ctypes
import difflib
import json
import os
import threading

from . import _abi
from ._closeable import Closeable
from .errors import SdtrainError, error_for
from .plugin import copy_out_string, read_struct
from .records import Metrics, PrepareInfo, Preview, SavedFile, record_from

_ERR_SIZE = 2048


class _CallbackState:
    """What the C callbacks reach: the host's callables and the first exception one raised. It
    holds no reference to the trainer, so a trainer nobody keeps is collected."""

    def __init__(self, on_log, on_metrics, on_preview, on_file_saved):
        self.on_log, self.on_metrics, self.on_preview, self.on_file_saved = on_log, on_metrics, on_preview, on_file_saved
        self.error = None
        self.interrupt = None  # set once the handle exists: stops the run when a callback raised

    def guard(self, call):
        """Runs call() (the conversion and the host's callable) so that nothing unwinds into C."""
        try:
            call()
        except BaseException as e:
            if self.error is None:
                self.error = e
            if self.interrupt:
                self.interrupt()

    def table(self):
        """The sdt_host_callbacks struct and the ctypes function objects it points at (keep both)."""
        cb = _abi.HostCallbacks.new()
        refs = []

        def address(ptr):
            return ctypes.cast(ptr, ctypes.c_void_p).value

        def preview_record(ptr):
            p = read_struct(_abi.Preview, address(ptr))
            rec = record_from(p, Preview)
            n = p.width * p.height * p.channels
            rec.pixels = ctypes.string_at(p.pixels, n) if p.pixels and n else b""
            return rec

        if self.on_log:
            refs.append(_abi.LOG_FN(lambda _ud, level, message: self.guard(lambda: self.on_log(
                _abi.LOG_LEVELS.get(level, level), (message or b"").decode("utf-8", "replace")))))
            cb.log = refs[-1]
        if self.on_metrics:
            refs.append(_abi.METRICS_FN(lambda _ud, ptr: self.guard(lambda: self.on_metrics(
                record_from(read_struct(_abi.Metrics, address(ptr)), Metrics)))))
            cb.metrics = refs[-1]
        if self.on_preview:
            refs.append(_abi.PREVIEW_FN(lambda _ud, ptr: self.guard(lambda: self.on_preview(preview_record(ptr)))))
            cb.preview_ready = refs[-1]
        if self.on_file_saved:
            refs.append(_abi.FILE_SAVED_FN(lambda _ud, ptr: self.guard(lambda: self.on_file_saved(
                record_from(read_struct(_abi.SavedFile, address(ptr)), SavedFile)))))
            cb.file_saved = refs[-1]
        return cb, refs


def _to_c(struct, name, value, shown=None):
    """Sets struct.name from a Python value: str/path for strings, an enum's name or number,
    numbers and bools as they are; sentences call it `shown` (the caller's name, default name).
    Returns the object to keep alive (ctypes keeps it too)."""
    shown = shown or name
    ctype = dict(type(struct)._fields_)[name]
    if ctype is ctypes.c_char_p:
        if value is None:
            setattr(struct, name, None)
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = repr(value)  # an LR schedule or clip value given as a number
        raw = os.fsencode(value) if isinstance(value, os.PathLike) else str(value).encode("utf-8")
        setattr(struct, name, raw)
        return raw
    if name in _abi.BITS_FIELDS and not isinstance(value, int):
        value = _bits(_abi.BITS_FIELDS[name], value, shown)
    if name in _abi.ENUM_FIELDS and isinstance(value, str):
        names = _abi.ENUM_FIELDS[name]
        if value.lower() not in names:
            raise SdtrainError(-1, "%s must be one of %s, not %r." % (shown, ", ".join(names), value))
        value = names[value.lower()]
    try:
        setattr(struct, name, value)
    except TypeError:
        raise SdtrainError(-1, "%s takes a %s, not %r." % (shown, ctype.__name__, value)) from None
    return value


def _bits(names, value, shown):
    """A bits field (encoders) from "clip_l,t5xxl", ["clip_l", "t5xxl"] or "all" / [] (0: every one)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    bits = 0
    for item in (str(i).strip().lower() for i in items):
        if item in ("", "all"):
            continue
        if item not in names:
            raise SdtrainError(-1, "%s takes names from %s (or \"all\"), not %r." % (shown, ", ".join(names), item))
        bits |= names[item]
    return bits


def _settable(cls):
    return [n for n, _ in cls._fields_ if n != "struct_size" and not n.startswith("reserved") and n != "train_options"]


def _unknown(kind, name, known):
    near = difflib.get_close_matches(name, known, n=1)
    hint = " (did you mean %s?)" % near[0] if near else ""
    return SdtrainError(-1, "%s has no option %r%s; the options are: %s." % (kind, name, hint, ", ".join(sorted(known))))


class TrainingRun:
    """A run on its worker thread (Trainer.start()). wait() returns "finished" or "interrupted",
    or raises the run's SdtrainError (or a callback's exception)."""

    def __init__(self, trainer, options):
        self._trainer = trainer
        self._options = options
        self._result = None
        self._error = None
        self.prepare_info = None
        self.thread = threading.Thread(target=self._work, name="sdtrain-run", daemon=False)

    def _work(self):
        try:
            if self._options is not None:
                self.prepare_info, status = self._trainer._prepare(self._options)
                if status == 1:  # interrupt() during prepare: nothing was written (docs/abi.md 8.3a)
                    self._result = "interrupted"
                    return
                # prepare() clears a pending request (docs/abi.md 7.3); one made after start() is for this
                # run, so it is made again now that the run is prepared.
                if self._trainer._interrupt_asked:
                    self._trainer._check(self._trainer._f.interrupt(self._trainer._handle))
            self._result = self._trainer.run()
        except BaseException as e:
            self._error = e

    def interrupt(self):
        self._trainer.interrupt()

    def done(self):
        return not self.thread.is_alive()

    def wait(self, timeout=None):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError("the training run is still going after %s s; call interrupt() to stop it" % timeout)
        if self._error is not None:
            raise self._error
        return self._result


# The parts of a config (sdt_trainer_config's members) and their structs, defaults and file fields.
_PARTS = {"embedding": (_abi.EmbeddingPart, "embedding_part_defaults", "embedding_path"),
          "hypernetwork": (_abi.HypernetworkPart, "hypernetwork_part_defaults", "hypernetwork_path")}


class _Trainer(Closeable):
    """One trainer of the trainer factory; a subclass names its part, where its option names go
    (_names: name -> (part, field); every other name is a field of sdt_train_options) and its files'
    extension. A run sends the subclass's part and every part whose file an option names."""
    _part = None
    _names = None
    _files_ext = None
    _files_cls = None
    _info_cls = None
    _kind = None

    def __init__(self, plugin=None, *, on_log=None, on_metrics=None, on_preview=None, on_file_saved=None):
        if plugin is None:
            from .plugin import default_plugin
            plugin = default_plugin()
        self.plugin = plugin
        self.closed = True
        self._interrupt_asked = False
        self._f = plugin.factory(_abi.FACTORY_TRAINER, _abi.TrainerFactory)
        self._files = self._extension(self._files_ext, self._files_cls)
        self._callbacks = _CallbackState(on_log, on_metrics, on_preview, on_file_saved)
        self._cb_struct, self._cb_refs = self._callbacks.table()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_SIZE)
        st = self._f.create(ctypes.byref(self._cb_struct), ctypes.byref(handle), ctypes.cast(err, ctypes.c_void_p),
                            _ERR_SIZE)
        if st < 0:
            raise error_for(st, err.value.decode("utf-8", "replace"))
        self._handle = handle
        self.closed = False
        interrupt, h = self._f.interrupt, handle.value
        self._callbacks.interrupt = lambda: interrupt(h)
        self._run_lock = threading.Lock()
        self._running = False
        plugin._adopt(self)

    def _extension(self, extension_id, cls):
        """A copy of the factory's extension table extension_id; SdtrainError UNSUPPORTED when absent."""
        address = self._f.get_extension(extension_id)
        if not address:
            raise SdtrainError(-4, "The plugin %s (ABI %s) has no extension %s; install a newer sdtrain."
                               % (self.plugin.path, self.plugin.abi_version, extension_id.decode()))
        return read_struct(cls, address)

    # ---- errors ----------------------------------------------------------------------------------

    def last_error(self):
        """The sentence of the last failed call on this trainer ("" when none)."""
        return copy_out_string(self._f.get_last_error, self._handle)[1]

    def _check(self, status):
        if status < 0:
            raise error_for(status, self.last_error())
        return status

    def _require_open(self):
        if self.closed:
            raise SdtrainError(-9, "This %s trainer was closed; make a new one." % self._kind)

    # ---- configuration -------------------------------------------------------------------------------

    def _config(self, options):
        """The trainer config from the plugin's defaults plus options: the shared options and the parts
        it sends, with the objects to keep alive while prepare() reads them."""
        shared = _abi.TrainOptions.new()
        self._check(self._f.train_options_defaults(ctypes.byref(shared)))
        shared.write_metrics = True  # as sdt-host: metrics.jsonl and loss.png unless write_metrics=False
        parts = {}
        for part, (cls, defaults, _file) in _PARTS.items():
            parts[part] = cls.new()
            self._check(getattr(self._f, defaults)(ctypes.byref(parts[part])))
        structs = dict(parts, options=shared)
        shared_names = set(_settable(_abi.TrainOptions))
        keep = []
        for name, value in options.items():
            part, field = self._names.get(name, ("options", name if name in shared_names else None))
            if field is None:
                raise _unknown("%s training" % self._kind, name, shared_names | set(self._names))
            keep.append(_to_c(structs[part], field, value, name))
        config = _abi.TrainerConfig.new()
        config.options = ctypes.pointer(shared)
        for part, (_cls, _defaults, file_field) in _PARTS.items():
            if part == self._part or getattr(parts[part], file_field):
                setattr(config, part, ctypes.pointer(parts[part]))
        return config, (shared, parts), keep

    def prepare(self, **options):
        """Validates the job and loads what run() needs (blocking: seconds). Options are the fields
        of sdt_train_options and the method's own (its part's: docs/abi.md, abi/sdtrain.h), by name:
        model_path, dataset_dir, template_file, log_dir, max_steps, learn_rate, precision="fp16", ...
        Returns a PrepareInfo."""
        return self._prepare(options)[0]

    def _prepare(self, options):
        """prepare(), also returning its status: 1 when interrupt() stopped it."""
        self._require_open()
        config, structs, keep = self._config(options)
        info = _abi.PrepareInfo.new()
        status = self._check(self._f.prepare(self._handle, ctypes.byref(config), ctypes.byref(info)))
        del keep, structs
        return record_from(info, PrepareInfo), status

    def run(self):
        """Trains on the calling thread until max steps, an error or interrupt(). Returns
        "finished" or "interrupted"; raises SdtrainError otherwise."""
        self._require_open()
        with self._run_lock:
            if self._running:
                raise SdtrainError(-9, "run() while this trainer's run is in progress; wait for it to return.")
            self._running = True
        self._callbacks.error = None
        try:
            st = self._f.run(self._handle)
        finally:
            with self._run_lock:
                self._running = False
        if self._callbacks.error is not None:
            raise self._callbacks.error
        self._check(st)
        return "interrupted" if st == 1 else "finished"

    def start(self, **options):
        """Starts a run on a worker thread (a threading.Thread) and returns its TrainingRun. With
        options, prepare(**options) runs on that thread first; without, the trainer must be prepared."""
        self._require_open()
        run = TrainingRun(self, options if options else None)
        self._interrupt_asked = False
        run.thread.start()
        return run

    def interrupt(self):
        """[any thread] Asks the run to stop after the current step and save everything. After
        start(**options) it holds even while that run is still preparing."""
        self._require_open()
        self._interrupt_asked = True  # before the plugin's request: _work reads it after prepare returns
        self._check(self._f.interrupt(self._handle))

    @property
    def state(self):
        """"idle", "prepared", "running", "finished", "interrupted" or "failed"."""
        self._require_open()
        s = ctypes.c_int32(0)
        self._check(self._f.get_run_state(self._handle, ctypes.byref(s)))
        return _abi.RUN_STATES.get(s.value, s.value)

    def metrics(self):
        """[any thread] The Metrics of the latest finished step."""
        self._require_open()
        m = _abi.Metrics.new()
        self._check(self._f.get_metrics(self._handle, ctypes.byref(m)))
        return record_from(m, Metrics)

    def save_state(self, path):
        self._require_open()
        self._check(self._f.save_state(self._handle, os.fsencode(path)))

    def load_state(self, path):
        self._require_open()
        self._check(self._f.load_state(self._handle, os.fsencode(path)))

    def inspect(self, path):
        """Reads a file of this method; a Record of the info struct plus .metadata (the JSON)."""
        self._require_open()
        info = self._info_cls.new()
        path = os.fsencode(path)
        holder = {}

        def call(buf, size, needed):
            holder["st"] = self._files.inspect(self._handle, path, ctypes.byref(info), buf, size, needed)
            return holder["st"]
        st, text = copy_out_string(call)
        self._check(st)
        rec = record_from(info)
        rec.metadata = json.loads(text) if text else {}
        return rec

    def _create_from_spec(self, fn, spec_cls, fields):
        self._require_open()
        spec = spec_cls.new()
        known = _settable(spec_cls)
        keep = []
        for name, value in fields.items():
            if name not in known:
                raise _unknown("the %s spec" % self._kind, name, known)
            keep.append(_to_c(spec, name, value))
        st, path = copy_out_string(lambda buf, size, needed: fn(self._handle, ctypes.byref(spec), buf, size, needed))
        self._check(st)
        return path

    # ---- lifetime --------------------------------------------------------------------------------

    def close(self):
        """Destroys the trainer. Not while it runs: interrupt() and wait for the run first."""
        if self.closed:
            return
        with self._run_lock:
            if self._running:
                raise SdtrainError(-9, "close() while the %s trainer is running; interrupt() and wait for the run "
                                   "to return first." % self._kind)
            self.closed = True
        self._f.destroy(self._handle)

    def _close_when_collected(self):
        if not self.closed and not self._running:
            self.closed = True
            self._f.destroy(self._handle)


class EmbeddingTrainer(_Trainer):
    """Textual inversion: a trainer with an embedding part (embedding_path, learn_rate,
    save_image_with_embedding; SD3.5 / Flux.1: encoders, e.g. "clip_l,t5xxl" or ["clip_l", "t5xxl"], and
    learn_rate_clip_l / learn_rate_clip_g / learn_rate_t5xxl; the rest are the shared options, the
    encoder files clip_l_path, clip_g_path, t5xxl_path, vae_path and the flow options among them).

    EmbeddingTrainer(plugin=None, on_log=None, on_metrics=None, on_preview=None, on_file_saved=None):
    on_log(level, message), on_metrics(Metrics), on_preview(Preview), on_file_saved(SavedFile), called
    on the run's thread."""
    _part = "embedding"
    _names = {"embedding_path": ("embedding", "embedding_path"), "learn_rate": ("embedding", "learn_rate"),
              "save_image_with_embedding": ("embedding", "save_image_with_embedding"),
              # SD3.5 / Flux.1 (ABI 1.9): the tables that train and a rate per table
              "encoders": ("embedding", "encoders"), "learn_rate_clip_l": ("embedding", "learn_rate_clip_l"),
              "learn_rate_clip_g": ("embedding", "learn_rate_clip_g"),
              "learn_rate_t5xxl": ("embedding", "learn_rate_t5xxl")}
    _files_ext = _abi.EXT_EMBEDDING_FILES
    _files_cls = _abi.EmbeddingFilesExt
    _info_cls = _abi.EmbeddingInfo
    _kind = "embedding"

    def create_embedding(self, name, model_path, output_dir, **spec):
        """Writes a new embedding file (A1111's Create embedding: init_text, vectors_per_token,
        overwrite, tokenizer_path; for SD3.5 / Flux.1 the encoders the checkpoint lacks: clip_l_path,
        clip_g_path, t5xxl_path) and returns its path. Blocking: loads the text encoders' token tables."""
        spec.setdefault("vectors_per_token", 1)
        return self._create_from_spec(self._files.create_embedding, _abi.EmbeddingSpec,
                                      dict(spec, name=name, model_path=model_path, output_dir=output_dir))


class HypernetworkTrainer(_Trainer):
    """Hypernetworks: a trainer with a hypernetwork part, and with embedding_path an embedding part too
    (joint training; its embedding_learn_rate, embedding_clip_mode, embedding_clip_value and
    save_image_with_embedding); the same callbacks and lifecycle as EmbeddingTrainer."""
    _part = "hypernetwork"
    _names = {"hypernetwork_path": ("hypernetwork", "hypernetwork_path"), "learn_rate": ("hypernetwork", "learn_rate"),
              "weight_decay": ("hypernetwork", "weight_decay"), "strength": ("hypernetwork", "strength"),
              "preview_hypernetworks": ("hypernetwork", "preview_hypernetworks"),
              "preview_strength": ("hypernetwork", "preview_strength"),
              "embedding_path": ("embedding", "embedding_path"), "embedding_learn_rate": ("embedding", "learn_rate"),
              "embedding_clip_mode": ("embedding", "clip_mode"), "embedding_clip_value": ("embedding", "clip_value"),
              "save_image_with_embedding": ("embedding", "save_image_with_embedding")}
    _files_ext = _abi.EXT_HYPERNETWORK_FILES
    _files_cls = _abi.HypernetworkFilesExt
    _info_cls = _abi.HypernetworkInfo
    _kind = "hypernetwork"

    def create_hypernetwork(self, name, output_dir, **spec):
        """Writes a new hypernetwork .pt (A1111's Create hypernetwork: widths, layer_structure,
        activation, weight_init, dropout_structure, layer_norm, use_dropout, activate_output,
        overwrite) and returns its path."""
        return self._create_from_spec(self._files.create_hypernetwork, _abi.HypernetworkSpec,
                                      dict(spec, name=name, output_dir=output_dir))
