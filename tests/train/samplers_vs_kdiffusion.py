#!/usr/bin/env python3
"""The preview samplers (plugin/train/sampler.c) against a float64 replay written from
k-diffusion's own definitions (k_diffusion/sampling.py: get_sigmas_karras, get_ancestral_step,
sample_euler_ancestral, sample_dpmpp_2m; k_diffusion/external.py: DiscreteSchedule.t_to_sigma,
sigma_to_t, CompVisDenoiser, CompVisVDenoiser) and diffusers' DDIMScheduler (eta 0, leading
spacing, steps_offset 1, set_alpha_to_one False), on the analytic denoiser of sampler_cli.c:
data x0 ~ N(mu, s^2), whose exact denoised value at noise level sigma is
mu + s^2 / (s^2 + sigma^2) (x - mu). Standard library only.

usage: samplers_vs_kdiffusion.py --cli PATH/sampler_cli
"""
import argparse
import json
import math
import subprocess
import sys

# ---- the SD schedule (ldm register_schedule, scaled linear) and k-diffusion's discrete sigmas
T = 1000
betas = [(math.sqrt(0.00085) + (math.sqrt(0.012) - math.sqrt(0.00085)) * i / (T - 1)) ** 2 for i in range(T)]
acp = []
prod = 1.0
for b in betas:
    prod *= 1.0 - b
    acp.append(prod)
sigmas_model = [((1 - a) / a) ** 0.5 for a in acp]
log_sigmas = [math.log(s) for s in sigmas_model]


def t_to_sigma(t):
    low, high = math.floor(t), math.ceil(t)
    w = t - low
    return math.exp((1 - w) * log_sigmas[low] + w * log_sigmas[high])


def sigma_to_t(sigma):
    log_sigma = math.log(sigma)
    dists = [log_sigma - ls for ls in log_sigmas]
    # dists.ge(0).cumsum(dim=0).argmax(dim=0).clamp(max=len - 2): the first index of the largest cumsum
    cums, c = [], 0
    for d in dists:
        c += 1 if d >= 0 else 0
        cums.append(c)
    low_idx = min(cums.index(max(cums)), T - 2)
    high_idx = low_idx + 1
    low, high = log_sigmas[low_idx], log_sigmas[high_idx]
    w = min(max((low - log_sigma) / (low - high), 0.0), 1.0)
    return (1 - w) * low_idx + w * high_idx


def get_sigmas(n):  # DiscreteSchedule.get_sigmas
    t_max = T - 1
    ts = [t_max - t_max * i / (n - 1) for i in range(n)] if n > 1 else [float(t_max)]
    return [t_to_sigma(t) for t in ts] + [0.0]


def get_sigmas_karras(n, sigma_min, sigma_max, rho=7.0):
    ramp = [i / (n - 1) for i in range(n)] if n > 1 else [0.0]
    min_inv_rho, max_inv_rho = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return [(max_inv_rho + r * (min_inv_rho - max_inv_rho)) ** rho for r in ramp] + [0.0]


def get_ancestral_step(sigma_from, sigma_to, eta=1.0):
    sigma_up = min(sigma_to, eta * (sigma_to ** 2 * (sigma_from ** 2 - sigma_to ** 2) / sigma_from ** 2) ** 0.5)
    sigma_down = (sigma_to ** 2 - sigma_up ** 2) ** 0.5
    return sigma_down, sigma_up


class Analytic:
    """The 'UNet': epsilon or v of the exact denoiser, from the scaled input and the timestep."""

    def __init__(self, run, v):
        self.mu_c, self.mu_u, self.s, self.v = run["mu_cond"], run["mu_uncond"], run["data_spread"], v

    def out(self, mu, x_in, t):
        sigma = t_to_sigma(t)
        a = 1 / (1 + sigma ** 2)
        res = []
        for k, xi in enumerate(x_in):
            x = xi / math.sqrt(a)
            d = mu[k] + self.s ** 2 / (self.s ** 2 + sigma ** 2) * (x - mu[k])
            eps = (x - d) / sigma
            res.append(math.sqrt(a) * eps - math.sqrt(1 - a) * d if self.v else eps)
        return res

    def guided(self, x_in, t, cfg):
        c = self.out(self.mu_c, x_in, t)
        if cfg == 1.0:
            return c
        u = self.out(self.mu_u, x_in, t)
        return [ui + cfg * (ci - ui) for ci, ui in zip(c, u)]


def k_denoiser(model, x, sigma, cfg, v):
    """CompVisDenoiser / CompVisVDenoiser (sigma_data 1) with CFG on the model output."""
    c_in = 1 / (sigma ** 2 + 1) ** 0.5
    t = sigma_to_t(sigma)
    out = model.guided([xi * c_in for xi in x], t, cfg)
    if v:
        c_skip, c_out = 1 / (sigma ** 2 + 1), -sigma / (sigma ** 2 + 1) ** 0.5
        return [xi * c_skip + o * c_out for xi, o in zip(x, out)], t
    return [xi + o * -sigma for xi, o in zip(x, out)], t


def sample_euler_ancestral(model, x, sigmas, noise, cfg, v):
    ts = []
    for i in range(len(sigmas) - 1):
        denoised, t = k_denoiser(model, x, sigmas[i], cfg, v)
        ts.append(t)
        sigma_down, sigma_up = get_ancestral_step(sigmas[i], sigmas[i + 1])
        d = [(xi - di) / sigmas[i] for xi, di in zip(x, denoised)]
        dt = sigma_down - sigmas[i]
        x = [xi + dd * dt for xi, dd in zip(x, d)]
        if sigmas[i + 1] > 0:
            x = [xi + ni * sigma_up for xi, ni in zip(x, noise[i])]
    return x, ts


def sample_dpmpp_2m(model, x, sigmas, cfg, v):
    sigma_fn = lambda t: math.exp(-t)
    t_fn = lambda sigma: -math.log(sigma) if sigma > 0 else math.inf
    old_denoised = None
    ts = []
    for i in range(len(sigmas) - 1):
        denoised, tt = k_denoiser(model, x, sigmas[i], cfg, v)
        ts.append(tt)
        t, t_next = t_fn(sigmas[i]), t_fn(sigmas[i + 1])
        h = t_next - t
        if sigmas[i + 1] == 0:  # sigma_fn(inf) = 0, -expm1(-inf) = 1
            x = list(denoised)
        elif old_denoised is None:
            x = [(sigma_fn(t_next) / sigma_fn(t)) * xi - math.expm1(-h) * di for xi, di in zip(x, denoised)]
        else:
            h_last = t - t_fn(sigmas[i - 1])
            r = h_last / h
            dd = [(1 + 1 / (2 * r)) * di - (1 / (2 * r)) * oi for di, oi in zip(denoised, old_denoised)]
            x = [(sigma_fn(t_next) / sigma_fn(t)) * xi - math.expm1(-h) * di for xi, di in zip(x, dd)]
        old_denoised = denoised
    return x, ts


def sample_ddim(model, x, steps, cfg, v):
    ratio = T // steps
    timesteps = [(steps - 1 - i) * ratio + 1 for i in range(steps)]
    for t in timesteps:
        out = model.guided(x, float(t), cfg)
        prev = t - ratio
        a, ap = acp[t], acp[prev] if prev >= 0 else acp[0]
        if v:
            x0 = [math.sqrt(a) * xi - math.sqrt(1 - a) * o for xi, o in zip(x, out)]
            e = [math.sqrt(a) * o + math.sqrt(1 - a) * xi for xi, o in zip(x, out)]
        else:
            e = out
            x0 = [(xi - math.sqrt(1 - a) * ei) / math.sqrt(a) for xi, ei in zip(x, e)]
        x = [math.sqrt(ap) * x0i + math.sqrt(1 - ap) * ei for x0i, ei in zip(x0, e)]
    return x, [float(t) for t in timesteps]


def close(a, b, tol):
    return len(a) == len(b) and all(abs(p - q) <= tol * max(1.0, abs(q)) for p, q in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    failures = 0
    cases = [(k, steps, cfg, v, seed) for k in ("ddim", "euler_a", "dpmpp_2m_karras")
             for steps, cfg, seed in ((20, 1.0, 3), (12, 7.5, 11), (1, 3.0, 5)) for v in (0, 1)]
    for kind, steps, cfg, v, seed in cases:
        name = f"{kind} steps {steps} cfg {cfg} {'v' if v else 'eps'} seed {seed}"
        p = subprocess.run([args.cli, kind, str(steps), repr(cfg), str(v), str(seed)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {name}: sampler_cli exited {p.returncode}: {p.stderr}")
            failures += 1
            continue
        run = json.loads(p.stdout)
        model = Analytic(run, bool(v))
        x = list(run["initial_noise"])
        if kind == "ddim":
            ref, ts = sample_ddim(model, x, steps, cfg, bool(v))
        else:
            if kind == "euler_a":
                sig = get_sigmas(steps)
            else:
                sig = get_sigmas_karras(steps, sigmas_model[0], sigmas_model[-1])
            if not close(run["sigmas"], sig, 1e-12):
                print(f"FAIL {name}: sigmas {run['sigmas'][:4]}... want {sig[:4]}...")
                failures += 1
            x = [xi * sig[0] for xi in x]
            if kind == "euler_a":
                ref, ts = sample_euler_ancestral(model, x, sig, run["step_noise"], cfg, bool(v))
            else:
                ref, ts = sample_dpmpp_2m(model, x, sig, cfg, bool(v))
        if not close(run["timesteps"], ts, 1e-9):
            print(f"FAIL {name}: model timesteps {run['timesteps'][:4]} want {ts[:4]}")
            failures += 1
        # The C sampler keeps x in float32 between steps: a relative 2e-4 covers its rounding, far
        # below what a wrong coefficient, sigma or timestep gives (checked by the sanity case below).
        if not close(run["result"], ref, 2e-4):
            print(f"FAIL {name}: result {run['result']} want {ref}")
            failures += 1
        else:
            err = max(abs(p - q) for p, q in zip(run["result"], ref))
            print(f"ok   {name}: max |C - reference| = {err:.3g}")
    # Sanity: the comparison can fail. Euler without the ancestral noise lands elsewhere.
    p = subprocess.run([args.cli, "euler_a", "12", "7.5", "0", "11"], capture_output=True, text=True)
    run = json.loads(p.stdout)
    sig = get_sigmas(12)
    wrong, _ = sample_euler_ancestral(Analytic(run, False), [xi * sig[0] for xi in run["initial_noise"]], sig,
                                      [[0.0] * 6 for _ in range(12)], 7.5, False)
    if close(run["result"], wrong, 2e-4):
        print("FAIL sanity: the tolerance cannot tell euler_a from euler without noise")
        failures += 1
    # k-diffusion's Karras sigmas for SD at 10 steps begin at sigma_max = 14.6146 and end at 0.0292.
    kar = get_sigmas_karras(10, sigmas_model[0], sigmas_model[-1])
    if not (abs(kar[0] - 14.6146) < 1e-3 and abs(kar[9] - 0.0292) < 1e-3):
        print(f"FAIL karras endpoints {kar[0]} {kar[9]}")
        failures += 1
    print("samplers_vs_kdiffusion:", "FAILED" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
