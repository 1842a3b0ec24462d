"""ldm_vae.py - a PyTorch AutoencoderKL written to LDM's published code
(ldm/modules/diffusionmodules/model.py: Encoder, Decoder, ResnetBlock, AttnBlock,
Downsample with pad (0,1,0,1), Upsample), with LDM's parameter names under
first_stage_model. Shared by clip_vae_parity.py (parity with the C VAE) and
models/demo_model/train.py (the demo model's VAE). Needs only torch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def Normalize(c):
    return nn.GroupNorm(num_groups=32, num_channels=c, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = Normalize(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, 1, 1)
        self.norm2 = Normalize(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        if cin != cout:
            self.nin_shortcut = nn.Conv2d(cin, cout, 1, 1, 0)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        if hasattr(self, "nin_shortcut"):
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = Normalize(c)
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)
        self.v = nn.Conv2d(c, c, 1)
        self.proj_out = nn.Conv2d(c, c, 1)

    def forward(self, x):
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        b, c, hh, ww = q.shape
        q = q.reshape(b, c, hh * ww).permute(0, 2, 1)
        k = k.reshape(b, c, hh * ww)
        w_ = torch.softmax(torch.bmm(q, k) * (int(c) ** (-0.5)), dim=2)
        v = v.reshape(b, c, hh * ww)
        h = torch.bmm(v, w_.permute(0, 2, 1)).reshape(b, c, hh, ww)
        return x + self.proj_out(h)


class Downsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 2, 0)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1), mode="constant", value=0))


class Upsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Mid(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block_1 = ResnetBlock(c, c)
        self.attn_1 = AttnBlock(c)
        self.block_2 = ResnetBlock(c, c)

    def forward(self, x):
        return self.block_2(self.attn_1(self.block_1(x)))


class Encoder(nn.Module):
    def __init__(self, ch, mult, nres, z, cin=3):
        super().__init__()
        self.conv_in = nn.Conv2d(cin, ch, 3, 1, 1)
        self.down = nn.ModuleList()
        in_mult = (1,) + tuple(mult)
        for i, m in enumerate(mult):
            level = nn.Module()
            level.block = nn.ModuleList()
            bin_, bout = ch * in_mult[i], ch * m
            for _ in range(nres):
                level.block.append(ResnetBlock(bin_, bout))
                bin_ = bout
            if i != len(mult) - 1:
                level.downsample = Downsample(bout)
            self.down.append(level)
        c = ch * mult[-1]
        self.mid = Mid(c)
        self.norm_out = Normalize(c)
        self.conv_out = nn.Conv2d(c, 2 * z, 3, 1, 1)

    def forward(self, x):
        h = self.conv_in(x)
        for level in self.down:
            for b in level.block:
                h = b(h)
            if hasattr(level, "downsample"):
                h = level.downsample(h)
        h = self.mid(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class Decoder(nn.Module):
    def __init__(self, ch, mult, nres, z, cout=3):
        super().__init__()
        c = ch * mult[-1]
        self.conv_in = nn.Conv2d(z, c, 3, 1, 1)
        self.mid = Mid(c)
        self.up = nn.ModuleList()
        for i in reversed(range(len(mult))):
            level = nn.Module()
            level.block = nn.ModuleList()
            bout = ch * mult[i]
            for _ in range(nres + 1):
                level.block.append(ResnetBlock(c, bout))
                c = bout
            if i != 0:
                level.upsample = Upsample(c)
            self.up.insert(0, level)  # LDM numbers up levels by resolution
        self.norm_out = Normalize(c)
        self.conv_out = nn.Conv2d(c, cout, 3, 1, 1)

    def forward(self, z):
        h = self.mid(self.conv_in(z))
        for level in reversed(self.up):
            for b in level.block:
                h = b(h)
            if hasattr(level, "upsample"):
                h = level.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class AutoencoderKL(nn.Module):
    """use_quant_conv False and a shift: SD3's and Flux's 16-channel VAE (diffusers' AutoencoderKL with
    use_quant_conv / use_post_quant_conv false; the pipelines decode latents / scaling_factor + shift_factor)."""

    def __init__(self, ch, mult, nres, z, scaling, use_quant_conv=True, shift=0.0):
        super().__init__()
        self.encoder = Encoder(ch, mult, nres, z)
        self.decoder = Decoder(ch, mult, nres, z)
        if use_quant_conv:
            self.quant_conv = nn.Conv2d(2 * z, 2 * z, 1)
            self.post_quant_conv = nn.Conv2d(z, z, 1)
        self.use_quant_conv = use_quant_conv
        self.scaling = scaling
        self.shift = shift

    def encode(self, x):
        h = self.encoder(x)
        mean, logvar = torch.chunk(self.quant_conv(h) if self.use_quant_conv else h, 2, dim=1)
        return mean, logvar

    def decode(self, latents):
        z = latents / self.scaling + self.shift
        return self.decoder(self.post_quant_conv(z) if self.use_quant_conv else z)


