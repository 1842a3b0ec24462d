"""Embedding and hypernetwork trainers: create, prepare, run on a worker thread, interrupt.

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


def _to_c(struct, name, value):
    """Sets struct.name from a Python value: str/path for strings, an enum's name or number,
    numbers and bools as they are. Returns the object to keep alive (ctypes keeps it too)."""
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
    if name in _abi.ENUM_FIELDS and isinstance(value, str):
        names = _abi.ENUM_FIELDS[name]
        if value.lower() not in names:
            raise SdtrainError(-1, "%s must be one of %s, not %r." % (name, ", ".join(names), value))
        value = names[value.lower()]
    try:
        setattr(struct, name, value)
    except TypeError:
        raise SdtrainError(-1, "%s takes a %s, not %r." % (name, ctype.__name__, value)) from None
    return value


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


class _Trainer:
    """What both trainers share: the factories have the same lifecycle members (docs/abi.md 8.6)."""
    _factory_id = None
    _factory_cls = None
    _config_cls = None
    _info_cls = None
    _kind = None

    def __init__(self, plugin=None, *, on_log=None, on_metrics=None, on_preview=None, on_file_saved=None):
        if plugin is None:
            from .plugin import default_plugin
            plugin = default_plugin()
        self.plugin = plugin
        self.closed = True
        self._interrupt_asked = False
        self._f = plugin.factory(self._factory_id, self._factory_cls)
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
        """The method's config and the shared train options from the plugin's defaults plus options."""
        config = self._config_cls.new()
        self._check(self._f.config_defaults(ctypes.byref(config)))
        shared = _abi.TrainOptions.new()
        if _abi.has_function(self._f, "train_options_defaults"):
            self._check(self._f.train_options_defaults(ctypes.byref(shared)))
            shared.write_metrics = True  # as sdt-host: metrics.jsonl and loss.png unless write_metrics=False
            config.train_options = ctypes.pointer(shared)
            shared_names = set(_settable(_abi.TrainOptions))
        else:
            shared_names = set()
        config_names = set(_settable(self._config_cls))
        keep = []
        for name, value in options.items():
            if name in shared_names:  # with train_options set, the config's inline copies are ignored (3.7)
                keep.append(_to_c(shared, name, value))
            elif name in config_names:
                keep.append(_to_c(config, name, value))
            else:
                raise _unknown("%s training" % self._kind, name, shared_names | config_names)
        return config, shared, keep

    def prepare(self, **options):
        """Validates the job and loads what run() needs (blocking: seconds). Options are the fields
        of sdt_train_options and of the method's config (docs/abi.md, abi/sdtrain.h), by name:
        model_path, dataset_dir, template_file, log_dir, max_steps, learn_rate, precision="fp16", ...
        Returns a PrepareInfo."""
        return self._prepare(options)[0]

    def _prepare(self, options):
        """prepare(), also returning its status: 1 when interrupt() stopped it."""
        self._require_open()
        config, shared, keep = self._config(options)
        info = _abi.PrepareInfo.new()
        status = self._check(self._f.prepare(self._handle, ctypes.byref(config), ctypes.byref(info)))
        del keep, shared
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
            holder["st"] = self._f.inspect(self._handle, path, ctypes.byref(info), buf, size, needed)
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self.closed and not self._running:
                self.closed = True
                self._f.destroy(self._handle)
        except Exception:
            pass


class EmbeddingTrainer(_Trainer):
    """Textual inversion ("sdtrain.textual_inversion/1").

    EmbeddingTrainer(plugin=None, on_log=None, on_metrics=None, on_preview=None, on_file_saved=None):
    on_log(level, message), on_metrics(Metrics), on_preview(Preview), on_file_saved(SavedFile), called
    on the run's thread."""
    _factory_id = _abi.FACTORY_TEXTUAL_INVERSION
    _factory_cls = _abi.TiFactory
    _config_cls = _abi.TiConfig
    _info_cls = _abi.EmbeddingInfo
    _kind = "embedding"

    def create_embedding(self, name, model_path, output_dir, **spec):
        """Writes a new embedding file (A1111's Create embedding: init_text, vectors_per_token,
        overwrite, tokenizer_path) and returns its path. Blocking: loads the text encoder."""
        spec.setdefault("vectors_per_token", 1)
        return self._create_from_spec(self._f.create_embedding, _abi.EmbeddingSpec,
                                      dict(spec, name=name, model_path=model_path, output_dir=output_dir))


class HypernetworkTrainer(_Trainer):
    """Hypernetworks ("sdtrain.hypernetwork/1"), alone or jointly with an embedding (embedding_path);
    the same callbacks and lifecycle as EmbeddingTrainer."""
    _factory_id = _abi.FACTORY_HYPERNETWORK
    _factory_cls = _abi.HnFactory
    _config_cls = _abi.HnConfig
    _info_cls = _abi.HypernetworkInfo
    _kind = "hypernetwork"

    def create_hypernetwork(self, name, output_dir, **spec):
        """Writes a new hypernetwork .pt (A1111's Create hypernetwork: widths, layer_structure,
        activation, weight_init, dropout_structure, layer_norm, use_dropout, activate_output,
        overwrite) and returns its path."""
        return self._create_from_spec(self._f.create_hypernetwork, _abi.HypernetworkSpec,
                                      dict(spec, name=name, output_dir=output_dir))
