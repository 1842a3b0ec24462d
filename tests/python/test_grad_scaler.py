"""sdtrain.GradScaler (the plugin's scaler through the Python binding) against torch's GradScaler
algorithm, in a small PyTorch training loop on the CPU.

Torch 1.13 (Debian's) has no CPU GradScaler: torch.cuda.amp.GradScaler disables itself without
CUDA and its kernels (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_) have no CPU
implementation. So the reference is TorchAlgorithmScaler below: torch.amp.GradScaler's Python
logic (stages, per-optimizer found_inf, one update per iteration) with its two kernels written
out as torch computes them (the reciprocal in float64 rounded to float32, a float32 multiply, the
finiteness test on the scaled value; the update in float64 stored as float32, growth suppressed
at the float32 limit). Where torch.amp.GradScaler("cpu") exists and runs (torch >= 2.3), the real
one is run beside it and must agree too (on torch 2.11, an H100 machine: CPU and CUDA agreed,
every value bit for bit; only the bit pattern of a NaN gradient differed on the CPU, so NaNs are
compared as NaN).

The loop: two optimizers (SGD with momentum, Adam) over two parts of one model, gradient
accumulation over two micro-batches, clipping after unscale_ for one optimizer, step() unscaling
the other, and injected non-finite values: an inf loss (both optimizers skip), a NaN in one
optimizer's gradient (that one skips), an inf in the other's. After every iteration: the scale,
which optimizers stepped, every parameter and every unscaled gradient are bit-identical."""
import copy
import math
import struct
import sys

try:
    import torch
except ImportError:
    print("SKIP: torch is not installed")
    sys.exit(77)

import sdtrain
from checks import check, failures


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(t):
    """A tensor's bits, so -0 != 0, with every NaN as one pattern: which NaN a multiply returns is
    the machine's (torch 2.11's vectorised CPU kernel and x87/SSE scalar code differ), not the
    scaler's."""
    flat = t.detach().contiguous().view(-1)
    b = flat.view(torch.int32 if t.element_size() == 4 else torch.int16).clone()
    b[torch.isnan(flat)] = -1
    return b


class TorchAlgorithmScaler:
    """torch.amp.GradScaler (torch/amp/grad_scaler.py) on the CPU, kernels written out."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.scale_t = None  # made on the device of the first scaled tensor, as torch's
        self.init_scale = init_scale
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.tracker = 0
        self.states = {}

    def scale(self, outputs):
        if self.scale_t is None:
            self.scale_t = torch.full((), self.init_scale, dtype=torch.float32, device=outputs.device)
        return outputs * self.scale_t

    def _state(self, opt):
        return self.states.setdefault(id(opt), {"stage": "ready", "found_inf": None})

    def unscale_(self, opt):
        st = self._state(opt)
        if st["stage"] == "unscaled":
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self.scale_t.double().reciprocal().float()
        found, any_grad = False, False
        with torch.no_grad():
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    any_grad = True
                    if not bool(torch.isfinite(p.grad).all()):  # _amp_foreach_non_finite_check_and_unscale_
                        found = True
                    if float(inv_scale) != 1.0:  # in float32 (opmath), stored in the gradient's dtype
                        p.grad.copy_((p.grad.float() * inv_scale).to(p.grad.dtype))
        st["found_inf"] = found if any_grad else None
        st["stage"] = "unscaled"

    def step(self, opt):
        st = self._state(opt)
        if st["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == "ready":
            self.unscale_(opt)
        assert st["found_inf"] is not None, "No inf checks were recorded for this optimizer."
        ret = None if st["found_inf"] else opt.step()
        st["stage"] = "stepped"
        return ret

    def update(self):
        records = [s["found_inf"] for s in self.states.values() if s["found_inf"] is not None]
        assert records, "No inf checks were recorded prior to update."
        scale = float(self.scale_t)
        if any(records):  # _amp_update_scale_
            self.scale_t.fill_(f32(scale * self.backoff_factor))
            self.tracker = 0
        else:
            successful = self.tracker + 1
            if successful == self.growth_interval:
                grown = f32(scale * self.growth_factor)
                if math.isfinite(grown):
                    self.scale_t.fill_(grown)
                self.tracker = 0
            else:
                self.tracker = successful
        self.states = {}

    def get_scale(self):
        return self.init_scale if self.scale_t is None else float(self.scale_t)

    def state_dict(self):
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "_growth_tracker": self.tracker}


def real_torch_scaler(device, **kw):
    """torch.amp.GradScaler(device) when this torch has one that runs there, else None."""
    cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if cls is None:
        return None
    try:
        s = cls(device, **kw)
        p = torch.nn.Parameter(torch.ones(2, device=device))
        p.grad = torch.ones(2, device=device)
        o = torch.optim.SGD([p], lr=0.0)
        s.scale(torch.ones((), device=device))
        s.step(o)
        s.update()
        return cls(device, **kw)
    except Exception as e:
        print("torch.amp.GradScaler(%r) does not run here (%s); the written-out algorithm is the reference"
              % (device, e))
        return None


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


# step -> what is injected: "inf_loss" (all grads non-finite), "nan_b" (optimizer b only), "inf_a" (a only)
INJECT = {3: "inf_loss", 6: "nan_b", 9: "inf_a", 10: "nan_b"}
STEPS = 16
ACCUM = 2
SCALER_ARGS = dict(init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)


def iteration(model, opt_a, opt_b, scaler, step, data):
    for micro in range(ACCUM):
        x, y = data[step][micro]
        loss = torch.nn.functional.mse_loss(model(x), y) / ACCUM
        if INJECT.get(step) == "inf_loss" and micro == 1:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
    if INJECT.get(step) == "nan_b":
        model.b.weight.grad[1, 2] = float("nan")
    if INJECT.get(step) == "inf_a":
        model.a.bias.grad[0] = float("-inf")
    scaler.unscale_(opt_a)  # clipping after unscale, as torch's docs show it
    torch.nn.utils.clip_grad_norm_(model.a.parameters(), max_norm=0.05)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    scaler.step(opt_a)
    scaler.step(opt_b)  # unscales itself
    grads = {name: bits(p.grad) for name, p in model.named_parameters()}
    scaler.update()
    stepped = {part: not all(torch.equal(before[n], p.detach()) for n, p in model.named_parameters() if n[0] == part)
               for part in "ab"}
    for p in model.parameters():
        p.grad = None
    return grads, stepped


def make_optimizers(model):
    return (torch.optim.SGD(model.a.parameters(), lr=0.2, momentum=0.9),
            torch.optim.Adam(model.b.parameters(), lr=0.01))


def training_loop(device):
    torch.manual_seed(1234)
    data = [[(torch.randn(5, 6, device=device), torch.randn(5, 3, device=device)) for _ in range(ACCUM)]
            for _ in range(STEPS)]
    ours_model = Net().to(device)
    runs = {"sdtrain": (ours_model, sdtrain.GradScaler(device, **SCALER_ARGS)),
            "algorithm": (copy.deepcopy(ours_model), TorchAlgorithmScaler(**SCALER_ARGS))}
    real = real_torch_scaler(device, **SCALER_ARGS)
    if real is not None:
        runs["torch"] = (copy.deepcopy(ours_model), real)
    opts = {k: make_optimizers(m) for k, (m, _) in runs.items()}
    scales = []
    for step in range(STEPS):
        results = {}
        for k, (model, scaler) in runs.items():
            results[k] = iteration(model, opts[k][0], opts[k][1], scaler, step, data)
        ours_grads, ours_stepped = results["sdtrain"]
        expected = {"a": INJECT.get(step) not in ("inf_loss", "inf_a"), "b": INJECT.get(step) not in ("inf_loss", "nan_b")}
        check(ours_stepped == expected, "step %d: stepped %s, expected %s" % (step, ours_stepped, expected))
        ours_scale = runs["sdtrain"][1].get_scale()
        scales.append(ours_scale)
        for k, (model, scaler) in runs.items():
            if k == "sdtrain":
                continue
            grads, stepped = results[k]
            check(stepped == ours_stepped, "step %d: %s stepped %s, sdtrain %s" % (step, k, stepped, ours_stepped))
            check(scaler.get_scale() == ours_scale, "step %d: scale %r (%s) vs %r (sdtrain)"
                  % (step, scaler.get_scale(), k, ours_scale))
            for name, p in model.named_parameters():
                ours_p = dict(runs["sdtrain"][0].named_parameters())[name]
                check(torch.equal(bits(p), bits(ours_p)), "step %d: parameter %s differs from %s" % (step, name, k))
                if not torch.equal(grads[name], ours_grads[name]):
                    i = int((grads[name] != ours_grads[name]).nonzero()[0])
                    check(False, "step %d: unscaled gradient %s differs from %s at element %d: bits %08x vs %08x"
                          % (step, name, k, i, int(grads[name][i]) & 0xFFFFFFFF, int(ours_grads[name][i]) & 0xFFFFFFFF))
        sd, ref_sd = runs["sdtrain"][1].state_dict(), runs["algorithm"][1].state_dict()
        check({k: v for k, v in sd.items() if k != "sdtrain_scaler_state"} == ref_sd,
              "step %d: state_dict %s vs the algorithm's %s" % (step, sd, ref_sd))
    # The schedule itself, independently: 1024, backoff on the skips, growth after 3 clean updates.
    expect, s, clean = [], 1024.0, 0
    for step in range(STEPS):
        if step in INJECT:
            s, clean = s * 0.5, 0
        else:
            clean += 1
            if clean == 3:
                s, clean = s * 2, 0
        expect.append(s)
    check(scales == expect, "scales %s, expected %s" % (scales, expect))
    print("%s scales:" % device, scales)
    print("%s: sdtrain compared with:" % device, ", ".join(k for k in runs if k != "sdtrain"))
    return runs["sdtrain"][1]


def expect_misuse(fn, *words, cls=sdtrain.ScalerMisuseError):
    try:
        fn()
    except AssertionError as e:
        check(False, "an AssertionError (%s) instead of the plugin's sentence" % e)
        return
    except cls as e:
        for w in words:
            check(w in e.sentence, "the sentence %r does not say %r" % (e.sentence, w))
        return e
    check(False, "no %s for %s" % (cls.__name__, words))
    return None


def misuse():
    model = Net()
    opt_a, opt_b = make_optimizers(model)
    scaler = sdtrain.GradScaler()
    loss = model(torch.randn(2, 6)).sum()
    scaler.scale(loss).backward()
    scaler.unscale_(opt_a)
    expect_misuse(lambda: scaler.unscale_(opt_a), "unscale", "already been called")
    scaler.step(opt_a)
    expect_misuse(lambda: scaler.unscale_(opt_a), "after step")
    expect_misuse(lambda: scaler.step(opt_a), "step() has already been called")
    expect_misuse(lambda: scaler.state_dict(), "middle of an iteration", cls=sdtrain.SdtrainError)
    scaler.step(opt_b)
    scaler.update()
    e = expect_misuse(lambda: scaler.update(), "optimizers 'optimizer 0', 'optimizer 1': update with nothing",
                      "No inf checks were recorded prior to update")
    # Only the two optimizers in use, not the 8 a GradScaler can take.
    check(e is None or "optimizer 2" not in e.sentence, "the sentence names unused optimizers: %s" % e)
    empty = torch.optim.SGD([torch.nn.Parameter(torch.ones(3))], lr=0.1)  # no gradient at all
    scaler.scale(torch.ones((), requires_grad=True))
    expect_misuse(lambda: scaler.step(empty), "No inf checks were recorded for this optimizer")
    half = torch.nn.Parameter(torch.ones(3, dtype=torch.float16))
    half.grad = torch.ones(3, dtype=torch.float16)
    expect_misuse(lambda: scaler.unscale_(torch.optim.SGD([half], lr=0.1)), "FP16")
    expect_misuse(lambda: scaler.step(opt_a, closure=lambda: 0.0), "Closure")
    for bad, word in ((dict(growth_factor=1.0), "growth"), (dict(backoff_factor=1.5), "backoff"),
                      (dict(init_scale=-1.0), "scale"), (dict(growth_interval=0), "interval")):
        expect_misuse(lambda: sdtrain.GradScaler(**bad), word, cls=sdtrain.SdtrainError)
    expect_misuse(lambda: scaler.load_state_dict({}), "empty", cls=sdtrain.SdtrainError)
    scaler.update(new_scale=4.0)  # ends the iteration started above
    opt_a.add_param_group({"params": [torch.nn.Parameter(torch.ones(2))]})
    scaler.scale(model(torch.randn(2, 6)).sum()).backward()
    expect_misuse(lambda: scaler.unscale_(opt_a), "add_param_group", cls=sdtrain.SdtrainError)
    bad_dict = dict(scaler.state_dict(), growth_factor=0.5)
    del bad_dict["sdtrain_scaler_state"]  # a torch-style dict: the plugin validates what it holds
    expect_misuse(lambda: scaler.load_state_dict(bad_dict), "growth", cls=sdtrain.SdtrainError)
    expect_misuse(lambda: scaler.load_state_dict({"scale": 2.0}), "growth_factor", cls=sdtrain.SdtrainError)


def complex_refused():
    """Complex values would lose their imaginary part on the way to float32 ([2+4j, 6-8j] unscaled
    by 2 became [1+0j, 3+0j]): refused, naming the parameter, with no gradient touched."""
    real = torch.nn.Parameter(torch.zeros(3))
    real.grad = torch.full((3,), 4.0)
    z = torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))
    z.grad = torch.tensor([2 + 4j, 6 - 8j], dtype=torch.complex64)
    before = z.grad.clone()
    scaler = sdtrain.GradScaler(init_scale=2.0)
    scaler.scale(torch.ones(()))
    unsupported = dict(cls=sdtrain.SdtrainError)
    e = expect_misuse(lambda: scaler.unscale_(torch.optim.SGD([real, z], lr=0.1)),
                      "parameter 1 of optimizer 0 (shape [2])", "complex64", **unsupported)
    check(e is None or e.status_name == "UNSUPPORTED", "complex gradient: status %s" % (e and e.status_name))
    check(torch.equal(z.grad, before) and torch.equal(real.grad, torch.full((3,), 4.0)),
          "a refused unscale_ changed the gradients: %s %s" % (z.grad, real.grad))
    expect_misuse(lambda: scaler.scale(torch.ones((), dtype=torch.complex64)), "the loss is complex",
                  "complex64", **unsupported)
    expect_misuse(lambda: scaler.scale(2 + 4j), "the loss is complex (2+4j)", **unsupported)
    expect_misuse(lambda: scaler.update(new_scale=2 + 0j), "new_scale is complex", **unsupported)
    with sdtrain.LossScaler(init_scale=2.0) as plain:
        expect_misuse(lambda: plain.scale_loss(1 - 1j), "the loss is complex", **unsupported)
        try:
            import numpy
        except ImportError:
            return
        plain.scale_loss(1.0)
        buf = numpy.array([2 + 4j, 6 - 8j], dtype=numpy.complex64)
        expect_misuse(lambda: plain.unscale(0, [buf]), "buffer 0 holds complex numbers", "'Zf'", **unsupported)
        check(list(buf) == [2 + 4j, 6 - 8j], "a refused unscale changed the buffer: %s" % buf)
        pairs = buf.view(numpy.float32)  # the fix the sentence gives: both parts, unscaled alike
        check(plain.unscale(0, [pairs]) is False and list(buf) == [1 + 2j, 3 - 4j], "float32 view: %s" % buf)


def other_gradients():
    """Strided and bfloat16 gradients go through a float32 copy: still exactly torch's result."""
    for dtype in (torch.float32, torch.bfloat16):
        p = torch.nn.Parameter(torch.zeros(4, 3, dtype=dtype))
        g = (torch.randn(3, 4) * 1000).to(dtype).t()  # not contiguous
        p.grad = g.clone() if dtype == torch.bfloat16 else g
        ref = torch.nn.Parameter(torch.zeros(4, 3, dtype=dtype))
        ref.grad = g.clone()
        ours, algo = sdtrain.GradScaler(init_scale=3.0), TorchAlgorithmScaler(init_scale=3.0)
        ours.scale(torch.ones(()))
        algo.scale(torch.ones(()))
        ours.unscale_(torch.optim.SGD([p], lr=0.1))
        algo.unscale_(torch.optim.SGD([ref], lr=0.1))
        check(torch.equal(bits(p.grad), bits(ref.grad)), "%s strided gradient unscaled differently" % dtype)


def state_round_trip(scaler):
    sd = scaler.state_dict()
    torch_keys = {k: v for k, v in sd.items() if k != "sdtrain_scaler_state"}
    for source in (sd, torch_keys):  # our dict, and torch's five keys alone (a torch GradScaler's)
        other = sdtrain.GradScaler(init_scale=7.0, growth_interval=50)
        other.load_state_dict(source)
        check(other.get_scale() == scaler.get_scale() and other._get_growth_tracker() == scaler._get_growth_tracker()
              and other.get_growth_interval() == scaler.get_growth_interval(),
              "state_dict round trip: %s vs %s" % (other.state_dict(), sd))
    tracker = scaler._get_growth_tracker()
    scaler.update(new_scale=8.0)
    check(scaler.get_scale() == 8.0 and scaler._get_growth_tracker() == tracker, "update(new_scale) %s"
          % scaler.state_dict())
    off = sdtrain.GradScaler(enabled=False)
    x = torch.ones(())
    check(off.scale(x) is x and off.get_scale() == 1.0 and off.state_dict() == {}, "a disabled scaler is not identity")


def main():
    scaler = training_loop("cpu")
    if torch.cuda.is_available():  # gradients on the GPU: the binding's float32 CPU copy
        training_loop("cuda")
    misuse()
    complex_refused()
    other_gradients()
    state_round_trip(scaler)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("OK: sdtrain.GradScaler is bit-identical with torch's GradScaler algorithm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
