#!/usr/bin/env python3
"""data/buckets.c against kohya's sd-scripts, replayed here from its own code (library/model_util.py
make_bucket_resolutions; library/train_util.py BucketManager.select_bucket without no_upscale, and
trim_and_resize_if_required's centre crop): the bucket lists for several (area, min side, max side,
step) settings, and each image's bucket, resized size and crop corner. Standard library only.

usage: buckets_vs_kohya.py --cli PATH/bucket_cli
"""
import argparse
import math
import subprocess
import sys


def make_bucket_resolutions(max_reso, min_size=256, max_size=1024, divisible=64):
    # model_util.py, verbatim but for the commented-out part
    max_width, max_height = max_reso
    max_area = max_width * max_height
    resos = set()
    width = int(math.sqrt(max_area) // divisible) * divisible
    resos.add((width, width))
    width = min_size
    while width <= max_size:
        height = min(max_size, int((max_area // width) // divisible) * divisible)
        if height >= min_size:
            resos.add((width, height))
            resos.add((height, width))
        width += divisible
    resos = list(resos)
    resos.sort()
    return resos


def select_bucket(resos, image_width, image_height):
    # BucketManager.select_bucket, no_upscale False (numpy's argmin: the first of equal errors)
    aspect_ratio = image_width / image_height
    reso = (image_width, image_height)
    if reso not in set(resos):
        errors = [abs(w / h - aspect_ratio) for (w, h) in resos]
        reso = resos[errors.index(min(errors))]
    ar_reso = reso[0] / reso[1]
    if aspect_ratio > ar_reso:
        scale = reso[1] / image_height
    else:
        scale = reso[0] / image_width
    resized_size = (int(image_width * scale + 0.5), int(image_height * scale + 0.5))
    return reso, resized_size


def centre_crop(reso, resized_size):
    # trim_and_resize_if_required without random_crop: p = trim_size // 2 on each side that is longer
    left = (resized_size[0] - reso[0]) // 2 if resized_size[0] > reso[0] else 0
    top = (resized_size[1] - reso[1]) // 2 if resized_size[1] > reso[1] else 0
    return left, top


SETTINGS = [  # (width, height) of the area, min side, max side, step
    ((512, 512), 256, 1024, 64),
    ((768, 512), 256, 1024, 64),
    ((1024, 1024), 256, 2048, 64),
    ((640, 384), 128, 768, 32),
    ((64, 64), 32, 128, 16),
    ((96, 64), 32, 128, 8),
]
IMAGES = [(512, 512), (1024, 768), (768, 1024), (1920, 1080), (1080, 1920), (300, 1200), (1200, 300), (333, 777),
          (640, 448), (100, 100), (64, 96), (97, 61), (4000, 3000), (3000, 4000), (250, 251)]
REFUSED = [  # (area, min, max, step): what the plugin must refuse with a sentence naming the option
    (512 * 512, 256, 1024, 60, "bucket_step"),
    (512 * 512, 256, 1024, 4, "bucket_step"),
    (512 * 512, 250, 1024, 64, "bucket_min_side"),
    (512 * 512, 256, 1000, 64, "bucket_max_side"),
    (512 * 512, 576, 1024, 64, "bucket_max_area"),   # smaller than the smallest bucket
    (2048 * 2048, 256, 1024, 64, "bucket_max_area"),  # the square bucket past the max side
]


def run(cli, args):
    out = subprocess.run([cli] + [str(a) for a in args], check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    cli = ap.parse_args().cli
    failures = 0
    for (mw, mh), lo, hi, step in SETTINGS:
        want = make_bucket_resolutions((mw, mh), lo, hi, step)
        args = [mw * mh, lo, hi, step] + [v for im in IMAGES for v in im]
        lines = run(cli, args)
        got = [tuple(int(v) for v in l.split()[1:]) for l in lines if l.startswith("bucket ")]
        if got != want:
            print(f"FAIL buckets for area {mw}x{mh}, sides {lo}..{hi}, step {step}:\n  got  {got}\n  want {want}")
            failures += 1
        fits = [l for l in lines if l.startswith("fit ")]
        for (w, h), line in zip(IMAGES, fits):
            reso, resized = select_bucket(want, w, h)
            left, top = centre_crop(reso, resized)
            expect = f"fit {w} {h} -> {reso[0]} {reso[1]} {resized[0]} {resized[1]} {left} {top}"
            if line != expect:
                print(f"FAIL area {mw}x{mh} step {step}: got '{line}', kohya gives '{expect}'")
                failures += 1
        print(f"area {mw}x{mh}, sides {lo}..{hi}, step {step}: {len(want)} buckets, {len(fits)} images as kohya")
    for area, lo, hi, step, field in REFUSED:
        lines = run(cli, [area, lo, hi, step])
        if not (lines and lines[0].startswith("refused ") and field in lines[0]):
            print(f"FAIL ({area}, {lo}, {hi}, {step}) should be refused naming {field}: {lines[:1]}")
            failures += 1
    if failures:
        print(f"{failures} failure(s)")
        return 1
    print("the bucket lists and fits match kohya's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
