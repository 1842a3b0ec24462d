#!/usr/bin/env python3
"""make_seeds.py - writes the seed corpora of the fuzz targets that need binary files
(tests/fuzz/seeds/<target>/), from the standard library alone so it runs anywhere.

    python3 tests/fuzz/make_seeds.py --build build

The checkpoint seeds are the tiny model's headers (every LDM and diffusers key, so the key
mapping sees them all) with sizes shrunk and zero data in F16: small files whose text encoder
part is a consistent CLIP, while the UNet and VAE parts are left for the fuzzer to repair.
--build names a build folder with models/tools/sdt-make-checkpoint; the checkpoint seeds are
skipped without it. Rerun after a change of the tiny model's keys, and commit the result.
"""
import argparse
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")


def write(target, name, data):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- safetensors

def st_bytes(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def f16(values):
    return struct.pack(f"<{len(values)}e", *values)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def f64(values):
    return struct.pack(f"<{len(values)}d", *values)


def ramp(n, scale=0.01):
    return [scale * ((i * 7) % 13 - 6) for i in range(n)]


# ---------------------------------------------------------------- embeddings

def embedding_seeds():
    meta = {"name": "seedling", "step": "12", "sd_checkpoint": "0123456789", "sd_checkpoint_name": "tiny",
            "vectors_per_token": "2", "init_text": "ring"}
    two = ramp(2 * 8)
    files = {
        "emb_params_f32.safetensors": st_bytes({"emb_params": ("F32", [2, 8], f32(two))}, meta),
        "emb_params_f16.safetensors": st_bytes({"emb_params": ("F16", [2, 8], f16(two))}, {"name": "half"}),
        "emb_params_bf16.safetensors": st_bytes({"emb_params": ("BF16", [2, 8], bf16(two))}),
        "emb_params_f64.safetensors": st_bytes({"emb_params": ("F64", [2, 8], f64(two))}),
        "single_tensor.safetensors": st_bytes({"<seedling>": ("F32", [8], f32(ramp(8)))}),
        "sdxl.safetensors": st_bytes({"clip_l": ("F32", [1, 12], f32(ramp(12))),
                                      "clip_g": ("F16", [1, 20], f16(ramp(20)))}, {"name": "xl"}),
        "sdxl_mismatch.safetensors": st_bytes({"clip_l": ("F32", [2, 12], f32(ramp(24))),
                                               "clip_g": ("F32", [1, 20], f32(ramp(20)))}),
        # SD3.5 / Flux.1: a table per encoder (ComfyUI's t5xxl, OneTrainer's t5), and tables that disagree
        "sd35_tables.safetensors": st_bytes({"clip_g": ("F32", [2, 20], f32(ramp(40))),
                                             "clip_l": ("F32", [2, 12], f32(ramp(24))),
                                             "t5xxl": ("F16", [2, 16], f16(ramp(32)))}, {"name": "sd35"}),
        "flux_t5.safetensors": st_bytes({"clip_l": ("BF16", [1, 12], bf16(ramp(12))),
                                         "t5": ("BF16", [1, 16], bf16(ramp(16))),
                                         "t5_out": ("BF16", [1, 16], bf16(ramp(16)))}),
        "tables_mismatch.safetensors": st_bytes({"clip_l": ("F32", [2, 12], f32(ramp(24))),
                                                 "t5xxl": ("F32", [1, 16], f32(ramp(16)))}),
    }
    for name, data in files.items():
        write("embedding_file", name, data)
        if name in ("emb_params_f32.safetensors", "sdxl.safetensors", "single_tensor.safetensors",
                    "sd35_tables.safetensors"):
            write("embedding_json", name, data)
    card = os.path.join(SEEDS, "png_card", "sdtrain_card.png")
    if os.path.exists(card):
        with open(card, "rb") as f:
            data = f.read()
        write("embedding_file", "card.png", data)
        write("embedding_json", "card.png", data)
    write("embedding_json", "weird_name.safetensors",
          st_bytes({"emb_params": ("F32", [1, 4], f32(ramp(4)))}, {"name": "quote\" back\\slash \u00e9 \u0001"}))


def a1111_json(name, rows, step=5):
    """The JSON A1111 stores in a card: its .pt dict, tensors as {"TORCHTENSOR": nested list}."""
    return json.dumps({"string_to_token": {"*": 265}, "string_to_param": {"*": {"TORCHTENSOR": rows}},
                       "name": name, "step": step, "sd_checkpoint": "0123456789",
                       "sd_checkpoint_name": "tiny"}).encode()


def a1111_json_seeds():
    write("a1111_json", "two_rows.json", a1111_json("seedling", [ramp(4), ramp(4, 0.02)]))
    write("a1111_json", "one_row_no_step.json",
          json.dumps({"string_to_param": {"*": {"TORCHTENSOR": [ramp(3)]}}, "name": "solo"}).encode())
    write("a1111_json", "no_name.json", json.dumps({"string_to_param": {"*": {"TORCHTENSOR": [[1e-3, -2.5e10]]}}}).encode())
    write("a1111_json", "flat_vector.json", json.dumps({"string_to_param": {"*": {"TORCHTENSOR": ramp(5)}}}).encode())
    write("a1111_json", "not_an_object.json", b"[1, 2, 3]")


# ---------------------------------------------------------------- images

def png(width, height, color_type, rows, extra_chunks=b""):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color_type]
    raw = b"".join(b"\0" + bytes(rows[y * width * channels:(y + 1) * width * channels]) for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra_chunks + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def bmp(width, height):
    row = (width * 3 + 3) & ~3
    pixels = b"".join(bytes((x * 40 % 256, y * 60 % 256, 128)) for y in range(height) for x in range(width))
    body = b"".join(pixels[y * width * 3:(y + 1) * width * 3].ljust(row, b"\0") for y in range(height))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(body), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(body), 2835, 2835, 0, 0)
    return header + info + body


def tga(width, height):
    header = struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, width, height, 24, 0)
    return header + b"".join(bytes((x * 30 % 256, y * 50 % 256, 200)) for y in range(height) for x in range(width))


def image_seeds():
    write("image", "rgb_4x3.png", png(4, 3, 2, [(i * 23) % 256 for i in range(4 * 3 * 3)]))
    write("image", "rgba_3x2.png", png(3, 2, 6, [(i * 41) % 256 for i in range(3 * 2 * 4)]))
    write("image", "grey_alpha_2x2.png", png(2, 2, 4, [0, 255, 128, 64, 32, 0, 255, 255]))
    # eXIf chunk: a TIFF block with orientation 6 (a turn by 90 degrees).
    tiff = b"II*\0" + struct.pack("<I", 8) + struct.pack("<H", 1) + struct.pack("<HHII", 0x112, 3, 1, 6) + struct.pack("<I", 0)
    exif_chunk = struct.pack(">I", len(tiff)) + b"eXIf" + tiff + struct.pack(">I", zlib.crc32(b"eXIf" + tiff))
    write("image", "grey_3x1_exif6.png", png(3, 1, 0, [0, 128, 255], exif_chunk))
    write("image", "rgb_3x2.bmp", bmp(3, 2))
    write("image", "rgb_2x2.tga", tga(2, 2))
    write("image", "grey_2x2.pgm", b"P5\n2 2\n255\n\x00\x40\x80\xff")
    write("image", "rgb_1x1.ppm", b"P6\n1 1\n255\n\xff\x80\x00")
    write("image", "one_pixel.gif", bytes.fromhex(
        "474946383961010001008000000000" "00ffffff21f90401000000002c00000000010001000002024401003b"))
    write("image", "huge_header.png", png(1, 1, 0, [7])[:16] + struct.pack(">II", 100000, 100000) + b"\x08\0\0\0\0")
    for name in ("jpeg_ii_6.jpg", "jpeg_mm_8.jpg", "jpeg_bad_count.jpg"):
        src = os.path.join(SEEDS, "exif", name)
        if os.path.exists(src):
            with open(src, "rb") as f:
                write("image", name, f.read())


# ---------------------------------------------------------------- checkpoints

# Every size of the tiny model mapped to a smaller one. The text encoder stays consistent
# (width 128 -> 32, MLP 512 -> 128, vocabulary 1000 -> 16); the UNet and VAE keep their keys
# but their sizes no longer agree, so detection refuses them and the fuzzer must repair.
SHRINK = {1000: 16, 512: 128, 128: 32, 96: 24, 64: 16}


def shrunk_checkpoint(path, prefix_filter=None):
    tensors = {}
    for name, e in st_header(path).items():
        if name == "__metadata__" or (prefix_filter and not name.startswith(prefix_filter)):
            continue
        shape = [SHRINK.get(d, d) for d in e["shape"]]
        n = 1
        for d in shape:
            n *= d
        tensors[name] = ("F16", shape, bytes(2 * n))
    return st_bytes(tensors)


def checkpoint_seeds(build):
    tool = os.path.join(build, "models", "tools", "sdt-make-checkpoint")
    if not os.path.exists(tool):
        print(f"make_seeds: {tool} not found; checkpoint seeds not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        ldm = os.path.join(tmp, "tiny.safetensors")
        folder = os.path.join(tmp, "diffusers")
        subprocess.run([tool, "--config", "tiny", "--layout", "ldm", "--out", ldm, "--dtype", "f16"], check=True,
                       capture_output=True)
        subprocess.run([tool, "--config", "tiny", "--layout", "diffusers", "--out", folder, "--dtype", "f16"],
                       check=True, capture_output=True)
        # The first byte picks the layout (fuzz_checkpoint.c): 0 single file, 1 unet/, 2 text_encoder/, 3 vae/.
        write("checkpoint", "ldm_all_parts.bin", b"\0" + shrunk_checkpoint(ldm))
        write("checkpoint", "ldm_text_only.bin", b"\0" + shrunk_checkpoint(ldm, "cond_stage_model."))
        parts = [(1, "unet/diffusion_pytorch_model.safetensors"), (2, "text_encoder/model.safetensors"),
                 (3, "vae/diffusion_pytorch_model.safetensors")]
        for layout, rel in parts:
            write("checkpoint", f"diffusers_{rel.split('/')[0]}.bin",
                  bytes([layout]) + shrunk_checkpoint(os.path.join(folder, rel)))
    write("checkpoint", "not_safetensors.bin", b"\0PK\x03\x04 a zip (a .ckpt) is not read")


# ---------------------------------------------------------------- transformer families (SD3, Flux)

ST_SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}


def zeroed_checkpoint(path, prefix_filter=None):
    """The file's names, dtypes and shapes with zero data (a mapped layout that reads)."""
    tensors = {}
    for name, e in st_header(path).items():
        if name == "__metadata__" or (prefix_filter and not name.startswith(prefix_filter)):
            continue
        n = ST_SIZES[e["dtype"]]
        for d in e["shape"]:
            n *= d
        tensors[name] = (e["dtype"], e["shape"], bytes(n))
    return st_bytes(tensors)


def bfl_flux(prefix, guidance, H=16, M=64, D=8):
    """A tiny Flux.1 transformer in BFL's names (flux1-dev.safetensors' layout), F16 zeros."""
    shapes = {"img_in": [H, 8], "txt_in": [H, 12], "time_in.in_layer": [H, 256], "time_in.out_layer": [H, H],
              "vector_in.in_layer": [H, 10], "vector_in.out_layer": [H, H], "final_layer.linear": [8, H],
              "final_layer.adaLN_modulation.1": [2 * H, H]}
    if guidance:
        shapes.update({"guidance_in.in_layer": [H, 256], "guidance_in.out_layer": [H, H]})
    for b in range(2):
        for s in ("img", "txt"):
            shapes.update({f"double_blocks.{b}.{s}_mod.lin": [6 * H, H], f"double_blocks.{b}.{s}_attn.qkv": [3 * H, H],
                           f"double_blocks.{b}.{s}_attn.proj": [H, H], f"double_blocks.{b}.{s}_mlp.0": [M, H],
                           f"double_blocks.{b}.{s}_mlp.2": [H, M]})
    shapes.update({"single_blocks.0.linear1": [3 * H + M, H], "single_blocks.0.linear2": [H, H + M],
                   "single_blocks.0.modulation.lin": [3 * H, H]})
    tensors = {}
    for name, (o, i) in shapes.items():
        tensors[f"{prefix}{name}.weight"] = ("F16", [o, i], bytes(2 * o * i))
        tensors[f"{prefix}{name}.bias"] = ("F16", [o], bytes(2 * o))
    norms = [f"double_blocks.{b}.{s}_attn.norm.{q}_norm.scale" for b in range(2) for s in ("img", "txt")
             for q in ("query", "key")] + [f"single_blocks.0.norm.{q}_norm.scale" for q in ("query", "key")]
    for name in norms:
        tensors[prefix + name] = ("F16", [D], bytes(2 * D))
    return st_bytes(tensors)


def transformer_seeds(build):
    tool = os.path.join(build, "models", "tools", "sdt-make-checkpoint")
    if not os.path.exists(tool):
        print(f"make_seeds: {tool} not found; transformer checkpoint seeds not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        mm, t5 = os.path.join(tmp, "mmdit.safetensors"), os.path.join(tmp, "t5.safetensors")
        sai, fp8 = os.path.join(tmp, "sai.safetensors"), os.path.join(tmp, "t5_fp8.safetensors")
        run = lambda *a: subprocess.run([tool, *a], check=True, capture_output=True)
        run("--config", "tiny-mmdit", "--out", mm, "--dtype", "f16")
        run("--config", "tiny-t5", "--out", t5, "--dtype", "f16")
        run("--pack", "sai-sd3", "--transformer", mm, "--t5xxl", t5, "--out", sai)
        run("--pack", "plain", "--t5xxl", t5, "--fp8", "e4m3", "--out", fp8)
        # The first byte picks the layout (fuzz_checkpoint.c): 0 single file, 4 an SD3 folder's transformer/.
        write("checkpoint", "sai_sd35_with_t5.bin", b"\0" + zeroed_checkpoint(sai))
        write("checkpoint", "sai_sd35_no_t5.bin", b"\0" + zeroed_checkpoint(sai, "model.diffusion_model."))
        write("checkpoint", "t5xxl_fp8_e4m3fn.bin", b"\0" + zeroed_checkpoint(fp8))
        write("checkpoint", "sd3_folder_transformer.bin", b"\4" + zeroed_checkpoint(mm))
    write("checkpoint", "bfl_flux_dev.bin", b"\0" + bfl_flux("", True))
    write("checkpoint", "comfy_flux_schnell.bin", b"\0" + bfl_flux("model.diffusion_model.", False))


# ---------------------------------------------------------------- diffusers config files

def diffusers_config_seeds(build):
    """The JSON files of a tiny diffusers folder as the generator writes them, joined by NUL bytes in
    fuzz_diffusers_config.c's order, and edits of them: SD 2.x's keys, an SDXL model_index.json, bad values."""
    import json
    tool = os.path.join(build, "models", "tools", "sdt-make-checkpoint")
    if not os.path.exists(tool):
        print(f"make_seeds: {tool} not found; diffusers config seeds not written", file=sys.stderr)
        return
    rels = ["model_index.json", "unet/config.json", "text_encoder/config.json", "vae/config.json",
            "scheduler/scheduler_config.json"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "diffusers")
        subprocess.run([tool, "--config", "tiny", "--layout", "diffusers", "--out", folder, "--dtype", "f16"],
                       check=True, capture_output=True)
        docs = []
        for rel in rels:
            with open(os.path.join(folder, rel)) as f:
                docs.append(json.load(f))

    def seed(name, edits=None, drop=()):
        parts = []
        for i, d in enumerate(docs):
            d = dict(d)
            for k, v in (edits or {}).get(i, {}).items():
                d[k] = v
            parts.append(b"" if i in drop else json.dumps(d, indent=2).encode())
        while parts and not parts[-1]:
            parts.pop()
        write("diffusers_config", name, b"\0".join(parts))

    seed("as_written.bin")
    seed("sd2_kind.bin", {1: {"attention_head_dim": [2, 4], "upcast_attention": True},
                          2: {"hidden_act": "gelu", "num_attention_heads": 4, "layer_norm_eps": 1e-6},
                          3: {"scaling_factor": 0.13025}, 4: {"prediction_type": "v_prediction"}})
    seed("sdxl_index.bin", {0: {"_class_name": "StableDiffusionXLPipeline",
                                "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"]}})
    seed("contradicts_weights.bin", {1: {"in_channels": 9}, 2: {"hidden_size": 64}})
    seed("bad_values.bin", {2: {"hidden_act": "relu", "num_attention_heads": 3, "layer_norm_eps": 1e300},
                            3: {"scaling_factor": -1}, 4: {"prediction_type": "sample"}})
    seed("unet_only.bin", drop=(0, 2, 3, 4))
    write("diffusers_config", "not_json.bin", b"{\"_class_name\": \0{\"in_channels\": 4")


# ---------------------------------------------------------------- training states

def state_seeds(build):
    """States of the embedding tests/fuzz/state/fuzzstate.safetensors, trained by sdt-host on the
    demo model and one demo image with the seed and sizes fuzz_state.c prepares with."""
    host = os.path.join(build, "host-sim", "sdt-host")
    demo = os.path.join(build, "host-sim", "demo")
    if not os.path.exists(host) or not os.path.isdir(os.path.join(demo, "model")):
        print(f"make_seeds: {host} or its demo model not found; state seeds not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        dataset = os.path.join(tmp, "dataset")
        os.makedirs(dataset)
        for ext in ("png", "txt"):
            with open(os.path.join(demo, "dataset", f"demo_000.{ext}"), "rb") as f, \
                    open(os.path.join(dataset, f"demo_000.{ext}"), "wb") as g:
                g.write(f.read())
        model = os.path.join(demo, "model")
        subprocess.run([host, "create-embedding", "--name", "fuzzstate", "--init-text", "ring", "--vectors", "2",
                        "--model", model, "--out", tmp], check=True, capture_output=True)
        embedding = os.path.join(tmp, "fuzzstate.safetensors")
        # fp32 first, then fp16 goes on: the fp16 state (with the loss scaler's) belongs to the
        # embedding as committed, and the fp32 one is an older state the identity check refuses.
        for precision in ("fp32", "fp16"):
            logs = os.path.join(tmp, f"logs-{precision}")
            subprocess.run([host, "train", "--embedding", embedding, "--model", model, "--dataset", dataset,
                            "--template", "subject_filewords.txt", "--width", "64", "--height", "64",
                            "--max-steps", "2" if precision == "fp32" else "4", "--seed", "7",
                            "--precision", precision, "--device", "cpu", "--threads", "1", "--log-dir", logs,
                            "--save-every", "0", "--preview-every", "0", "--no-embedding-cards"],
                           check=True, capture_output=True)
            for root, _, files in os.walk(logs):
                for name in files:
                    if name.endswith(".state.safetensors"):
                        with open(os.path.join(root, name), "rb") as f:
                            write("state", f"{precision}.state.safetensors", f.read())
        # The embedding as it stands after the last run, which the states belong to.
        os.makedirs(os.path.join(HERE, "state"), exist_ok=True)
        with open(embedding, "rb") as f, open(os.path.join(HERE, "state", "fuzzstate.safetensors"), "wb") as g:
            g.write(f.read())
    write("state", "not_a_state.safetensors", st_bytes({"emb_params": ("F32", [2, 4], f32(ramp(8)))}))


# ---------------------------------------------------------------- hypernetworks

def hn_seeds(build):
    """Real hypernetwork files: sdt-host create-hypernetwork's A1111 .pt (small widths), and
    tests/hn's hn_cli .pt/.safetensors twins (random weights, dropout, layer norm), plus the
    oldest A1111 layout (linear1/linear2, no keys but the modules) as .safetensors."""
    host = os.path.join(build, "host-sim", "sdt-host")
    cli = os.path.join(build, "tests", "hn", "hn_cli")
    if not os.path.exists(host) or not os.path.exists(cli):
        print(f"make_seeds: {host} or {cli} not found; hypernetwork seeds not written", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        created = [("small", ["--sizes", "8,12"]),
                   ("shaped", ["--sizes", "16", "--layer-structure", "1,1.5,1", "--activation", "relu",
                               "--layer-norm", "--dropout", "--dropout-structure", "0,0.1,0", "--activate-output",
                               "--init", "XavierUniform"])]
        for name, options in created:
            subprocess.run([host, "create-hypernetwork", "--name", name, "--out", tmp] + options, check=True,
                           capture_output=True)
            with open(os.path.join(tmp, f"{name}.pt"), "rb") as f:
                write("hn_pt", f"create_{name}.pt", f.read())
        for name, args in (("gelu_norm_dropout", ["gelu", "1", "1", "0", "k", "7"]),
                           ("linear_activate_output", ["linear", "0", "0", "1", "v", "9"])):
            out = os.path.join(tmp, name)
            os.makedirs(out)
            subprocess.run([cli, out] + args, check=True, capture_output=True)
            for ext, target in (("pt", "hn_pt"), ("safetensors", "hn_safetensors")):
                with open(os.path.join(out, f"hn.{ext}"), "rb") as f:
                    write(target, f"{name}.{ext}", f.read())
    old = {}
    for width in (8, 12):
        for kind in (0, 1):
            for layer, (rows, cols) in (("linear1", (2 * width, width)), ("linear2", (width, 2 * width))):
                old[f"{width}.{kind}.{layer}.weight"] = ("F32", [rows, cols], f32(ramp(rows * cols)))
                old[f"{width}.{kind}.{layer}.bias"] = ("F32", [rows], f32(ramp(rows)))
    write("hn_safetensors", "oldest_names.safetensors", st_bytes(old, {"name": "old", "modules": "[8, 12]"}))
    hn_legacy_seeds()


# torch's legacy (pre-zip) layout has no CRCs, so the fuzzer's changes reach the unpickler and the
# hypernetwork key rules instead of stopping at a zip checksum. Written by Debian's torch (optional).
HN_LEGACY = r"""
import collections, sys, torch
created, out_dir = sys.argv[1], sys.argv[2]
d = torch.load(created)  # our own file, just written by create-hypernetwork
torch.save(d, out_dir + "/legacy_create_small.pt", _use_new_zipfile_serialization=False)
old = {}
for width in (8, 12):
    pair = []
    for kind in range(2):
        sd = collections.OrderedDict()
        sd["linear1.weight"] = torch.full((2 * width, width), 0.01)
        sd["linear1.bias"] = torch.zeros(2 * width)
        sd["linear2.weight"] = torch.full((width, 2 * width), -0.01)
        sd["linear2.bias"] = torch.zeros(width)
        pair.append(sd)
    old[width] = tuple(pair)
old["name"] = "old"
torch.save(old, out_dir + "/legacy_oldest_names.pt", _use_new_zipfile_serialization=False)
"""


def hn_legacy_seeds():
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0:
        print("make_seeds: /usr/bin/python3 has no torch; legacy-layout hypernetwork seeds not written", file=sys.stderr)
        return
    folder = os.path.join(SEEDS, "hn_pt")
    subprocess.run([python, "-c", HN_LEGACY, os.path.join(folder, "create_small.pt"), folder], check=True,
                   capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    embedding_seeds()
    a1111_json_seeds()
    image_seeds()
    checkpoint_seeds(args.build)
    transformer_seeds(args.build)
    diffusers_config_seeds(args.build)
    state_seeds(args.build)
    hn_seeds(args.build)
    return 0


if __name__ == "__main__":
    sys.exit(main())
