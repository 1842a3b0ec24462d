#!/usr/bin/python3
"""flow_reference.py - rectified flow's formulas as diffusers and kohya's sd-scripts write them, in torch
float64 (Debian's python3-torch), for tests/train/test_flow_match.c (diffusers itself is not needed: the
few lines are restated here from the named functions).

  flow_reference.py
      prints one case a line, "KIND A B C VALUE" (C-locale numbers, %.17g):
        shift T SHIFT 0 t'        FlowMatchEulerDiscreteScheduler: shift t / (1 + (shift - 1) t)
        mu SEQ BASE MAX mu        diffusers' calculate_shift(SEQ, 256, 4096, BASE, MAX)
        time_shift T MU 0 t'      FlowMatchEulerDiscreteScheduler.time_shift(mu, 1.0, t)
        weight KIND SIGMA 0 w     training_utils.compute_loss_weighting_for_sd3 (0 none, 1 sigma_sqrt, 2 cosmap)
        logit_normal Z MEAN STD t compute_density_for_timestep_sampling("logit_normal") for the normal draw Z
        mode U SCALE 0 t          compute_density_for_timestep_sampling("mode") for the uniform draw U
        sigmas_shift N SHIFT I s  the I-th of FluxPipeline's sigmas (linspace(1, 1/N, N)) after set_timesteps
                                  with a constant shift (the last, I = N, is 0)
        sigmas_mu N MU I s        the same with use_dynamic_shifting and mu
        sigmas_sd3 N SHIFT I s    set_timesteps(N) without sigmas: linspace(sigma_to_t(sigma_max),
                                  sigma_to_t(sigma_min), N) / 1000 of the scheduler's shifted train sigmas, shifted
"""
import math

import torch

D = torch.float64


def shift_constant(t, shift):
    return shift * t / (1 + (shift - 1) * t)


def calculate_shift(seq, base_seq_len=256, max_seq_len=4096, base_shift=0.5, max_shift=1.15):
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return seq * m + b


def time_shift(mu, sigma, t):
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** sigma)


def weighting(kind, sigmas):
    if kind == 1:
        return sigmas ** -2.0
    if kind == 2:
        bot = 1 - 2 * sigmas + 2 * sigmas ** 2
        return 2 / (math.pi * bot)
    return torch.ones_like(sigmas)


def out(kind, a, b, c, v):
    print("%s %.17g %.17g %.17g %.17g" % (kind, a, b, c, float(v)))


def main():
    ts = torch.tensor([1e-3, 0.05, 0.25, 0.5, 0.75, 0.9, 0.999, 1.0], dtype=D)
    for shift in (1.0, 3.0, 0.5):
        for t in ts:
            out("shift", t, shift, 0, shift_constant(t, shift))
    for seq in (256, 1024, 4096, 1369, 64):
        for base, mx in ((0.5, 1.15), (0.3, 2.0)):
            out("mu", seq, base, mx, calculate_shift(seq, 256, 4096, base, mx))
    for mu in (0.5, 1.15, 0.7, -0.2):
        for t in ts:
            out("time_shift", t, mu, 0, time_shift(mu, 1.0, t))
    for kind in (0, 1, 2):
        for t in ts:
            out("weight", kind, t, 0, weighting(kind, t))
    for z in (-3.0, -0.5, 0.0, 1.25, 4.0):
        for mean, std in ((0.0, 1.0), (0.3, 0.8)):
            out("logit_normal", z, mean, std, torch.sigmoid(mean + std * torch.tensor(z, dtype=D)))
    for u in (1e-6, 0.1, 0.5, 0.77, 0.999999):
        for scale in (1.29, 0.0, -0.5):
            uu = torch.tensor(u, dtype=D)
            out("mode", u, scale, 0, 1 - uu - scale * (torch.cos(math.pi * uu / 2) ** 2 - 1 + uu))
    for n in (1, 4, 28):
        base = torch.tensor([1.0 + i * (1.0 / n - 1.0) / (n - 1) for i in range(n)] if n > 1 else [1.0], dtype=D)
        base[-1] = 1.0 / n  # numpy's linspace ends exactly at its end
        for shift in (3.0, 1.0):
            s = torch.cat([shift_constant(base, shift), torch.zeros(1, dtype=D)])
            for i in range(n + 1):
                out("sigmas_shift", n, shift, i, s[i])
        for mu in (1.15, 0.6):
            s = [time_shift(mu, 1.0, float(x)) for x in base] + [0.0]
            for i in range(n + 1):
                out("sigmas_mu", n, mu, i, s[i])
        for shift in (3.0,):
            # __init__: timesteps linspace(1, 1000, 1000) reversed, sigmas = t / 1000 shifted;
            # set_timesteps(n): linspace(sigma_max * 1000, sigma_min * 1000, n) / 1000, shifted again
            train = shift_constant(torch.linspace(1, 1000, 1000, dtype=D).flip(0) / 1000, shift)
            lo, hi = float(train[-1]), float(train[0])
            sig = torch.linspace(hi * 1000, lo * 1000, n, dtype=D) / 1000 if n > 1 else torch.tensor([hi], dtype=D)
            s = torch.cat([shift_constant(sig, shift), torch.zeros(1, dtype=D)])
            for i in range(n + 1):
                out("sigmas_sd3", n, shift, i, s[i])


if __name__ == "__main__":
    main()
