"""HypernetworkApplier: A1111's hypernetwork chain applied in the host's own generation, over the
trainer factory's extension "sdtrain.hypernetwork_applier/1" (ABI 1.7; docs/abi.md).

A chain of hypernetwork files, each with its strength; apply_kv() runs A1111's apply_hypernetworks
for one attention input (the keys' or the values') on float32 rows in host memory. One call at a time
per applier (abi/sdtrain.h): the class serialises its calls with a lock."""
import ctypes
import os
import threading

from . import _abi
from ._closeable import Closeable
from .errors import SdtrainError, error_for
from .plugin import copy_out_string, read_struct

_ERR_SIZE = 2048
_FLOAT_P = ctypes.POINTER(ctypes.c_float)

KV_K = 0  # the keys' input (A1111's context_k; SDT_KV_K)
KV_V = 1  # the values' input (A1111's context_v; SDT_KV_V)
_KINDS = {"k": KV_K, "v": KV_V, KV_K: KV_K, KV_V: KV_V}


def _float_pointer(buffer, what):
    """A float* from an address (int, e.g. a CPU torch tensor's data_ptr()) or a ctypes object."""
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        if not buffer:
            raise SdtrainError(-1, "apply_kv: %s is a NULL address; pass a float32 buffer's address." % what)
        return ctypes.cast(ctypes.c_void_p(buffer), _FLOAT_P)
    if isinstance(buffer, ctypes.Array):
        return ctypes.cast(buffer, _FLOAT_P)
    raise SdtrainError(-1, "apply_kv: %s must be an address (int) or a ctypes float array, not %s."
                       % (what, type(buffer).__name__))


class HypernetworkApplier(Closeable):
    """HypernetworkApplier(plugin=None): an empty chain. add(path, strength) appends a hypernetwork
    file (A1111's .pt or sdtrain's .safetensors); set_strength(index, strength) changes one member's;
    apply_kv(kind, width, src, dst, rows) writes dst[rows, width] = the chain on src[rows, width]
    (kind "k"/"v" or KV_K/KV_V; members without a module for the width pass x on); generate(model, prompt,
    ...) renders one txt2img image with the chain. close() (or the
    with-block's end) frees it; Plugin.close() refuses while it is open."""

    def __init__(self, plugin=None):
        if plugin is None:
            from .plugin import default_plugin
            plugin = default_plugin()
        self.plugin = plugin
        self.closed = True
        self.members = []
        factory = plugin.factory(_abi.FACTORY_TRAINER, _abi.TrainerFactory)
        address = factory.get_extension(_abi.EXT_HYPERNETWORK_APPLIER) if _abi.has_function(
            factory, "get_extension") else None
        if not address:
            raise SdtrainError(-4, "The plugin %s (ABI %s) has no extension %s, so it cannot apply hypernetworks; "
                               "install sdtrain 1.7 or newer." % (plugin.path, plugin.abi_version,
                                                                  _abi.EXT_HYPERNETWORK_APPLIER.decode()))
        self._x = read_struct(_abi.HypernetworkApplierExt, address)
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_SIZE)
        status = self._x.create(ctypes.byref(handle), ctypes.cast(err, ctypes.c_void_p), _ERR_SIZE)
        if status < 0:
            raise error_for(status, err.value.decode("utf-8", "replace"))
        self._handle = handle
        self._lock = threading.Lock()
        self.closed = False
        plugin._adopt(self)

    def _check(self, status):
        if status < 0:
            raise error_for(status, copy_out_string(self._x.get_last_error, self._handle)[1])
        return status

    def _require_open(self):
        if self.closed:
            raise SdtrainError(-9, "This HypernetworkApplier was closed; make a new one.")

    def add(self, path, strength=1.0):
        """Appends the hypernetwork file at path with its strength (A1111's multiplier). Blocking:
        reads the file."""
        with self._lock:
            self._require_open()
            self._check(self._x.add(self._handle, os.fsencode(path), float(strength)))
        self.members.append([os.fspath(path), float(strength)])

    def set_strength(self, index, strength):
        """Sets the strength of the chain's member index (0: the first added)."""
        with self._lock:
            self._require_open()
            self._check(self._x.set_strength(self._handle, int(index), float(strength)))
        self.members[index][1] = float(strength)

    def apply_kv(self, kind, width, src, dst, rows):
        """dst[rows, width] = the chain on src[rows, width]: row-major float32 in host memory, given
        as addresses (int) or ctypes float arrays; dst may be src."""
        if kind not in _KINDS:
            raise SdtrainError(-1, "apply_kv: kind must be \"k\" or \"v\" (KV_K or KV_V), not %r." % (kind,))
        src_p, dst_p = _float_pointer(src, "src"), _float_pointer(dst, "dst")
        with self._lock:
            self._require_open()
            self._check(self._x.apply_kv(self._handle, int(width), _KINDS[kind], src_p, dst_p, int(rows)))

    def generate(self, model, prompt, negative_prompt="", width=512, height=512, steps=20, cfg_scale=7.0, seed=0,
                 clip_skip=1, sampler=None, embedding=None, tokenizer=None, device="auto", cpu_threads=0,
                 clip_l=None, clip_g=None, t5xxl=None, vae=None, t5_max_length=0):
        """One txt2img image with the chain (applier_generate, docs/abi.md 8.7): bytes of width x height x 3,
        RGB rows top to bottom. model: an SD checkpoint; embedding: a file whose name in the prompt stands for
        its vectors; sampler: None ("ddim"), "euler_a" or "dpmpp_2m_karras". SD3.5/Flux.1: clip_l, clip_g,
        t5xxl, vae name the parts a checkpoint lacks, and t5_max_length (ABI 1.10) the T5 tokens a prompt is
        padded or cut to, 1..512 (the length the embedding trained at; 0: the family's, SD3.5 256, Flux dev
        512, schnell 256). Blocking: loads the model."""
        if device not in _abi.DEVICES:
            raise SdtrainError(-1, "generate: device must be one of %s, not %r." % (", ".join(_abi.DEVICES), device))
        if t5_max_length and self.plugin._entry.abi_version.minor < 10:
            raise SdtrainError(-4, "generate: t5_max_length needs a plugin of ABI 1.10 or newer, and %s speaks ABI "
                               "%s, which would ignore it; update the plugin or leave t5_max_length at 0."
                               % (self.plugin.path, self.plugin.abi_version))

        def path(p):
            return None if p is None else os.fsencode(p)

        def text(t):
            return None if t is None else t.encode("utf-8")
        rq = _abi.GenerateRequest.new()
        rq.device = _abi.DEVICES[device]
        rq.model_path, rq.tokenizer_path, rq.embedding_path = path(model), path(tokenizer), path(embedding)
        rq.prompt, rq.negative_prompt, rq.sampler = text(prompt), text(negative_prompt), text(sampler)
        rq.width, rq.height, rq.steps, rq.clip_skip = int(width), int(height), int(steps), int(clip_skip)
        rq.cfg_scale, rq.seed, rq.cpu_threads = float(cfg_scale), int(seed), int(cpu_threads)
        rq.clip_l_path, rq.clip_g_path, rq.t5xxl_path, rq.vae_path = path(clip_l), path(clip_g), path(t5xxl), path(vae)
        rq.t5_max_length = int(t5_max_length)
        size = max(int(width), 0) * max(int(height), 0) * 3
        rgb = (ctypes.c_uint8 * max(size, 1))()
        with self._lock:
            self._require_open()
            self._check(self._x.generate(self._handle, ctypes.byref(rq), rgb, size))
        return bytes(rgb)[:size]

    def close(self):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._x.destroy(self._handle)
