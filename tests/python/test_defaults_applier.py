"""sdtrain.defaults() and sdtrain.HypernetworkApplier: the binding's public API over the trainer
factory ("sdtrain.trainer/1") that hosts (integrations/) use instead of the deprecated method factory.

Environment: SDTRAIN_PLUGIN (the plugin under test).
Checks:
 - defaults(): the options and both parts as dicts; enums by the names the trainers take, strings as
   str; the same values the deprecated factories' config_defaults give (the parts mean the same);
 - HypernetworkApplier on a created hypernetwork: strength 0 and an unknown width leave x as it is,
   strength 1 changes it; the result is bit-identical with the deprecated factory's 1.4 applier on
   the same file; set_strength; dst may be src;
 - generate(): the request's fields reach the plugin (a T5 length past 512 and 5000 steps refused naming the
   field, a missing model named);
 - refusals: a missing file (named), a bad kind, a closed applier, Plugin.close() while one is open."""
import array
import ctypes
import os
import sys
import tempfile

import sdtrain
from checks import check, expect_error, failures
from sdtrain import _abi


def check_defaults(plugin):
    d = sdtrain.defaults(plugin)
    check(set(d) == {"options", "embedding", "hypernetwork"}, "defaults() keys %s" % sorted(d))
    o, e, h = d["options"], d["embedding"], d["hypernetwork"]
    check(o["precision"] in _abi.PRECISIONS and o["device"] in _abi.DEVICES and o["loss_type"] in _abi.LOSS_TYPES,
          "enum defaults by name: %r %r %r" % (o["precision"], o["device"], o["loss_type"]))
    check(isinstance(o["max_steps"], int) and o["max_steps"] > 0, "max_steps default %r" % o["max_steps"])
    check(isinstance(e["learn_rate"], str) and e["learn_rate"], "embedding learn_rate default %r" % e["learn_rate"])
    check(isinstance(h["learn_rate"], str) and h["learn_rate"], "hypernetwork learn_rate %r" % h["learn_rate"])
    check(not any(k.startswith("reserved") or k == "struct_size" for part in d.values() for k in part),
          "reserved fields are left out")
    # The deprecated factories' defaults (the same plugin's other tables) must agree.
    hn = plugin.factory(_abi.FACTORY_HYPERNETWORK, _abi.HnFactory)
    config, options = _abi.HnConfig.new(), _abi.TrainOptions.new()
    check(hn.config_defaults(ctypes.byref(config)) == 0 and hn.train_options_defaults(ctypes.byref(options)) == 0,
          "the deprecated factory's defaults")
    check(h["learn_rate"] == config.learn_rate.decode() and h["weight_decay"] == config.weight_decay
          and h["strength"] == config.strength, "hypernetwork part defaults differ from sdt_hn_config's")
    check(e["learn_rate"] == (config.embedding_learn_rate or b"").decode(), "embedding learn_rate differs")
    check(o["max_steps"] == options.max_steps and o["batch_size"] == options.batch_size
          and o["seed"] == options.seed, "train options defaults differ from the deprecated factory's")
    # The trainers take the names defaults() gives.
    with plugin.hypernetwork_trainer() as trainer:
        trainer._config(dict(precision=o["precision"], latent_sampling=o["latent_sampling"], learn_rate=h["learn_rate"]))
    # SD3.5 / Flux.1 (ABI 1.9): encoders reads as names ([]: all), and the embedding trainer takes it back, as
    # "clip_l,t5xxl" or a list, with a rate per table and the encoder files and flow options of sdt_train_options.
    check(e["encoders"] == [], "encoders default %r, want [] (every encoder of the family)" % (e["encoders"],))
    with plugin.embedding_trainer() as trainer:
        _config, (shared, parts), _keep = trainer._config(dict(
            encoders="clip_l, t5xxl", learn_rate_clip_l="0.01", learn_rate_clip_g=0.02, learn_rate_t5xxl="1e-3:100, 1e-4",
            clip_l_path="m/clip_l.safetensors", t5xxl_path="m/t5xxl_fp16.safetensors", vae_path="m/ae.safetensors",
            timestep_sampling="mode", flow_weighting="cosmap", flow_shift=3.0, guidance=4.5, t5_max_length=128))
        emb = parts["embedding"]
        check(emb.encoders == _abi.ENCODERS["clip_l"] | _abi.ENCODERS["t5xxl"], "encoders bits %#x" % emb.encoders)
        check(emb.learn_rate_clip_l == b"0.01" and emb.learn_rate_clip_g == b"0.02"
              and emb.learn_rate_t5xxl == b"1e-3:100, 1e-4", "the per-table rates")
        check(shared.clip_l_path == b"m/clip_l.safetensors" and shared.t5xxl_path == b"m/t5xxl_fp16.safetensors"
              and shared.vae_path == b"m/ae.safetensors" and shared.timestep_sampling == b"mode"
              and shared.flow_weighting == b"cosmap" and shared.flow_shift == 3.0 and shared.guidance == 4.5
              and shared.t5_max_length == 128, "the SD3.5/Flux options of sdt_train_options")
        _config, (shared, parts), _keep = trainer._config(dict(encoders=["clip_g"]))
        check(parts["embedding"].encoders == _abi.ENCODERS["clip_g"], "encoders as a list")
        _config, (shared, parts), _keep = trainer._config(dict(encoders=e["encoders"]))
        check(parts["embedding"].encoders == 0, "encoders=[] is every encoder")
        expect_error(lambda: trainer._config(dict(encoders="clip_l,t5")), "INVALID_ARGUMENT", "'t5'", "t5xxl")


def floats(values):
    return (ctypes.c_float * len(values))(*values)


def old_applier_kv(plugin, path, strength, width, kind, src):
    """The deprecated factory's 1.4 applier on the same input: the reference."""
    hn = plugin.factory(_abi.FACTORY_HYPERNETWORK, _abi.HnFactory)
    handle = _abi._Applier()
    err = ctypes.create_string_buffer(512)
    assert hn.applier_create(ctypes.byref(handle), ctypes.cast(err, ctypes.c_void_p), 512) == 0, err.value
    try:
        assert hn.applier_add(handle, os.fsencode(path), strength) == 0
        out = floats([0.0] * len(src))
        assert hn.applier_apply_kv(handle, width, kind, src, out, len(src) // width) == 0
        return list(out)
    finally:
        hn.applier_destroy(handle)


def check_applier(plugin, work):
    with plugin.hypernetwork_trainer() as trainer:
        path = trainer.create_hypernetwork("py-hn", work, widths="8", layer_structure="1, 2, 1")
    width, rows = 8, 3
    src = floats([((i * 7) % 11 - 5) / 4.0 for i in range(width * rows)])
    with sdtrain.HypernetworkApplier(plugin) as applier:
        applier.add(path, 1.0)
        check(applier.members == [[path, 1.0]], "members %r" % applier.members)
        out = floats([0.0] * (width * rows))
        applier.apply_kv("k", width, src, out, rows)
        check(list(out) != list(src), "strength 1 left the keys' input unchanged")
        check(list(out) == old_applier_kv(plugin, path, 1.0, width, 0, src),
              "the applier extension differs from the deprecated factory's applier")
        out_v = floats([0.0] * (width * rows))
        applier.apply_kv(sdtrain.KV_V, width, ctypes.addressof(src), ctypes.addressof(out_v), rows)
        check(list(out_v) == old_applier_kv(plugin, path, 1.0, width, 1, src), "the values' input differs")
        other = floats([1.5] * 16)
        wide = floats([0.0] * 16)
        applier.apply_kv("k", 16, other, wide, 1)
        check(list(wide) == list(other), "a width without a module changed x")
        applier.set_strength(0, 0.0)
        check(applier.members[0][1] == 0.0, "set_strength did not update members")
        same = floats(list(src))
        applier.apply_kv("v", width, same, same, rows)  # dst may be src
        check(list(same) == list(src), "strength 0 changed x")
        expect_error(lambda: applier.add(os.path.join(work, "missing.pt")), "NOT_FOUND", "missing.pt")
        expect_error(lambda: applier.apply_kv("q", width, src, out, rows), "INVALID_ARGUMENT", "kind")
        expect_error(lambda: applier.apply_kv("k", width, array.array("f", [0.0]), out, 1), "INVALID_ARGUMENT",
                     "src")
        # generate (ABI 1.10's t5_max_length): the wrapper sends the request's fields; the plugin checks them
        # before any model is opened, and a model that is not there is named
        missing = os.path.join(work, "no-model.safetensors")
        expect_error(lambda: applier.generate(missing, "a cat", width=64, height=64, t5_max_length=513),
                     "VALIDATION", "request.t5_max_length 513", "1..512")
        expect_error(lambda: applier.generate(missing, "a cat", width=64, height=64, steps=5000), "VALIDATION",
                     "request.steps")
        expect_error(lambda: applier.generate(missing, "a cat", width=64, height=64, t5_max_length=16), "NOT_FOUND",
                     "no-model.safetensors")
        expect_error(lambda: applier.generate(missing, "a cat", device="tpu"), "INVALID_ARGUMENT", "device")
        expect_error(plugin.close, "BAD_STATE", "close them first")
    check(applier.closed, "the with-block closed the applier")
    expect_error(lambda: applier.add(path), "BAD_STATE", "closed")


def main():
    try:
        plugin = sdtrain.Plugin()
    except sdtrain.SdtrainError as e:
        print("SKIP: no plugin:", e)
        return 77
    check_defaults(plugin)
    with tempfile.TemporaryDirectory() as work:
        check_applier(plugin, work)
    plugin.close()
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
