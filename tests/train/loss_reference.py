#!/usr/bin/python3
"""loss_reference.py - the loss options as kohya's sd-scripts and diffusers compute them, in torch
(Debian's python3-torch), for tests/train/test_loss_options.c.

  loss_reference.py loss DIR B C H W GAMMA V ZTSNR TYPE DELTA SCALE [DIR B C ... SCALE]...
      for each case (11 arguments; one torch start for all), reads DIR/pred, DIR/target (f32 [B,C,H,W]), DIR/mask (f32 [B,H,W]), DIR/timesteps (f32 [B]);
      prints the loss and writes DIR/grad: d(loss)/d(pred) from (loss * SCALE).backward() divided by
      SCALE, as a GradScaler run unscales it. The loss: kohya's train_util/custom_train_functions,
      elementwise (F.mse_loss / F.l1_loss / F.huber_loss(delta), reduction none) times the alpha mask,
      mean over C,H,W, times apply_snr_weight's min(SNR, gamma)/SNR (or /(SNR+1) for v), mean.
  loss_reference.py schedule ZTSNR
      prints alphas_cumprod (1000 lines, float64): SD's scaled-linear betas, rescaled by diffusers'
      rescale_zero_terminal_snr (Lin et al. 2023, Algorithm 1) when ZTSNR is 1.
"""
import sys

import torch
import torch.nn.functional as F


def rescale_zero_terminal_snr(betas):
    # diffusers.schedulers.scheduling_ddpm.rescale_zero_terminal_snr, verbatim in substance
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_bar_sqrt = alphas_cumprod.sqrt()
    a0 = alphas_bar_sqrt[0].clone()
    a_t = alphas_bar_sqrt[-1].clone()
    alphas_bar_sqrt -= a_t
    alphas_bar_sqrt *= a0 / (a0 - a_t)
    alphas_bar = alphas_bar_sqrt ** 2
    alphas = alphas_bar[1:] / alphas_bar[:-1]
    alphas = torch.cat([alphas_bar[0:1], alphas])
    return 1 - alphas


def alphas_cumprod(ztsnr):
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2
    if ztsnr:
        betas = rescale_zero_terminal_snr(betas)
    return torch.cumprod(1.0 - betas, dim=0)


def read(path, shape):
    with open(path, "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape).to(torch.float64)


def loss_mode(argv):
    d = argv[0]
    b, c, h, w = (int(x) for x in argv[1:5])
    gamma, v, ztsnr, kind, delta, scale = float(argv[5]), argv[6] == "1", argv[7] == "1", argv[8], float(argv[9]), float(argv[10])
    pred = read(d + "/pred", (b, c, h, w)).requires_grad_(True)
    target = read(d + "/target", (b, c, h, w))
    mask = read(d + "/mask", (b, 1, h, w))
    timesteps = read(d + "/timesteps", (b,)).long()
    if kind == "l2":
        elem = F.mse_loss(pred, target, reduction="none")
    elif kind == "l1":
        elem = F.l1_loss(pred, target, reduction="none")
    else:
        elem = F.huber_loss(pred, target, reduction="none", delta=delta)
    loss = (elem * mask).mean([1, 2, 3])
    if gamma > 0:
        acp = alphas_cumprod(ztsnr)
        alpha, sigma = acp.sqrt(), (1.0 - acp).sqrt()
        all_snr = (alpha / sigma) ** 2  # kohya's prepare_scheduler_for_custom_training
        snr = torch.stack([all_snr[t] for t in timesteps])
        min_snr_gamma = torch.minimum(snr, torch.full_like(snr, gamma))
        snr_weight = min_snr_gamma / (snr + 1) if v else min_snr_gamma / snr
        loss = loss * snr_weight
    loss = loss.mean()
    (loss * scale).backward()
    grad = (pred.grad / scale).to(torch.float32)
    with open(d + "/grad", "wb") as f:
        f.write(grad.numpy().tobytes())
    print(repr(loss.item()))


def main():
    if sys.argv[1] == "loss":
        args = sys.argv[2:]
        for i in range(0, len(args), 11):
            loss_mode(args[i:i + 11])
    elif sys.argv[1] == "schedule":
        for x in alphas_cumprod(sys.argv[2] == "1").tolist():
            print(repr(x))
    else:
        sys.exit("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
