"""A training run driven from Python through the binding (python/sdtrain), on the demo model.

Environment: SDTRAIN_PLUGIN (the plugin under test), SDT_DEMO (build/host-sim/demo: model/ and
the datasets), SDT_FAKE_NEXT_PLUGIN (optional: a plugin of the next ABI major).
Checks:
 - an embedding created and trained on a worker thread (TrainingRun), interrupted from the main
   thread once the metrics callback reported step 3: run() stops after a whole step, the saved-file
   callbacks name files that exist, the embedding and the state hold the last reported step;
 - previews reach the preview callback with their pixels, log lines the log callback;
 - a hypernetwork created and trained to the end, its files reported and readable;
 - a hypernetwork and an embedding trained together (embedding_path= on the hypernetwork trainer: both
   parts in one config), each file reported at the run's last step;
 - an exception in a callback stops the run (saved) and comes out of wait();
 - errors: a bad option, a missing dataset, a plugin of another ABI major, a plugin that is not
   found; each an SdtrainError with its status and a sentence naming the cause;
 - the plugin found through pkg-config's `plugin` variable."""
import glob
import os
import sys
import tempfile
import threading

import sdtrain
from checks import check, expect_error, failures


def embedding_run(plugin, demo, work):
    model = os.path.join(demo, "model", "sdtrain-demo.safetensors")
    template = os.path.join(work, "template.txt")
    with open(template, "w") as f:
        f.write("a [name] on a [filewords]\n")
    steps, files, previews, logs = [], [], [], []
    reached = threading.Event()
    main_thread = threading.get_ident()
    callback_threads = set()

    def on_metrics(m):
        callback_threads.add(threading.get_ident())
        steps.append(m.step)
        check(m.loss == m.loss and m.loss >= 0, "step %d: loss %r is not a finite number" % (m.step, m.loss))
        if m.step >= 3:
            reached.set()

    trainer = plugin.embedding_trainer(on_metrics=on_metrics, on_file_saved=files.append,
                                       on_preview=previews.append, on_log=lambda level, msg: logs.append((level, msg)))
    out = os.path.join(work, "embeddings")
    os.mkdir(out)
    path = trainer.create_embedding("py-star", model, out, init_text="object", vectors_per_token=2)
    check(os.path.isfile(path) and path.endswith("py-star.safetensors"), "create_embedding wrote %r" % path)
    expect_error(lambda: trainer.create_embedding("py-star", model, out), "ALREADY_EXISTS", "py-star")
    check(trainer.state == "idle", "a new trainer's state is %s" % trainer.state)

    run = trainer.start(embedding_path=path, model_path=model, dataset_dir=os.path.join(demo, "dataset"),
                        template_file=template, log_dir=os.path.join(work, "logs"), max_steps=10000, width=64,
                        height=64, save_every=2, preview_every=2, preview_steps=2, write_csv_every=1,
                        learn_rate="0.02", device="cpu", seed=7)
    if not reached.wait(240):
        trainer.interrupt()
        run.wait()
        check(False, "the run did not reach step 3 in 240 s (steps %s)" % steps)
        return
    trainer.interrupt()  # from the main thread while run() works on its own
    result = run.wait(240)
    check(result == "interrupted", "run.wait() gave %r, not 'interrupted'" % result)
    check(trainer.state == "interrupted", "the state after the interrupt is %s" % trainer.state)
    check(callback_threads and main_thread not in callback_threads, "the callbacks did not run on the worker thread")
    last = steps[-1]
    check(steps == list(range(1, last + 1)), "the metrics steps %s are not 1..%d" % (steps, last))
    check(3 <= last < 10000, "the run stopped at step %d" % last)
    check(run.prepare_info.dataset_images == 12 and run.prepare_info.device == "cpu",
          "prepare info %r" % run.prepare_info)
    check(trainer.metrics().step == last, "get_metrics() says step %d, the callback %d" % (trainer.metrics().step, last))

    kinds = {}
    for f in files:
        kinds.setdefault(f.kind, []).append(f)
        check(os.path.isfile(f.path), "the saved file %s (%s) does not exist" % (f.path, f.kind))
    for kind in ("embedding", "embedding_snapshot", "training_state", "settings", "preview", "embedding_card"):
        check(kind in kinds, "no %s file was reported (got %s)" % (kind, sorted(kinds)))
    if "settings" in kinds:  # the loss CSV (not reported through file_saved) beside the settings, up to the last step
        csv = os.path.join(os.path.dirname(kinds["settings"][0].path), "textual_inversion_loss.csv")
        with open(csv) as f:
            rows = [line.split(",")[0] for line in f.read().splitlines()[1:]]
        check(rows == [str(s) for s in range(1, last + 1)], "the loss CSV's steps are %s, not 1..%d" % (rows, last))
    final = [f for f in kinds.get("embedding", []) if f.step == last]
    check(final and os.path.samefile(final[-1].path, path), "the embedding at step %d was not reported" % last)
    state = kinds.get("training_state", [None])[-1]
    check(state is not None and state.step == last, "the last training state is not at step %d" % last)
    info = trainer.inspect(path)
    check(info.step == last and info.vectors == 2 and info.all_finite and info.name == "py-star",
          "inspect of the final embedding: %r" % info)
    check(info.metadata.get("step") == last, "inspect's JSON step is %r" % info.metadata.get("step"))
    if state is not None:
        check(trainer.inspect(state.path).step == last, "the training state is not at step %d" % last)
    for p in previews:
        check(len(p.pixels) == p.width * p.height * p.channels and p.width == 64 and p.channels == 3,
              "preview at step %d: %dx%dx%d with %d bytes" % (p.step, p.width, p.height, p.channels, len(p.pixels)))
        check(os.path.isfile(p.path) and "py-star" in p.prompt, "preview %s / prompt %r" % (p.path, p.prompt))
    check(len(previews) >= 1, "no preview reached the callback")
    check(any(level == "info" and "Interrupted" in msg for level, msg in logs),
          "the log callback did not get the interrupt's line: %s" % logs[-3:])

    # Bad input: one sentence, the plugin's status; the trainer stays usable.
    expect_error(lambda: trainer.prepare(embedding_path=path, model_path=model, dataset_dir=os.path.join(work, "nope"),
                                         template_file=template), "VALIDATION", "nope")
    expect_error(lambda: trainer.prepare(max_step=3), "INVALID_ARGUMENT", "max_step", "max_steps")
    expect_error(lambda: trainer.prepare(precision="fp12"), "INVALID_ARGUMENT", "fp16")

    trainer.close()  # its locks on the embedding go with it
    expect_error(lambda: trainer.metrics(), "BAD_STATE", "closed")

    # A callback that raises stops the run after its step (everything saved) and wait() raises it.
    class Boom(Exception):
        pass

    def explode(m):
        if m.step >= last + 2:
            raise Boom("host callback failed at step %d" % m.step)
    trainer2 = plugin.embedding_trainer(on_metrics=explode)
    run = trainer2.start(embedding_path=path, model_path=model, dataset_dir=os.path.join(demo, "dataset"),
                         template_file=template, log_dir=os.path.join(work, "logs"), max_steps=10000, width=64,
                         height=64, save_every=0, preview_every=0, device="cpu", learn_rate="0.02")
    try:
        run.wait(240)
        check(False, "the callback's exception did not come out of wait()")
    except Boom as e:
        check("step %d" % (last + 2) in str(e), "unexpected exception %s" % e)
    check(trainer2.state == "interrupted", "after a callback raised the state is %s" % trainer2.state)
    check(trainer2.inspect(path).step == last + 2, "the embedding was not saved at the step the callback stopped")
    trainer2.close()


def hypernetwork_run(plugin, demo, work):
    model = os.path.join(demo, "model", "sdtrain-demo.safetensors")
    template = os.path.join(work, "style.txt")
    with open(template, "w") as f:
        f.write("[filewords]\n")
    files, steps = [], []
    with plugin.hypernetwork_trainer(on_file_saved=files.append, on_metrics=lambda m: steps.append(m.step)) as t:
        out = os.path.join(work, "hypernetworks")
        os.mkdir(out)
        path = t.create_hypernetwork("py-style", out, widths="128, 64", layer_structure="1, 2, 1")
        check(path.endswith("py-style.pt") and os.path.isfile(path), "create_hypernetwork wrote %r" % path)
        check(t.inspect(path).step == 0, "a new hypernetwork is not at step 0")
        expect_error(lambda: t.create_hypernetwork("x", out, activation="nope"), "VALIDATION", "activation")
        run = t.start(hypernetwork_path=path, model_path=model, dataset_dir=os.path.join(demo, "dataset-style"),
                      template_file=template, log_dir=os.path.join(work, "hn-logs"), max_steps=3, width=64, height=64,
                      save_every=1, preview_every=0, learn_rate=0.002, device="cpu")
        check(run.wait(240) == "finished", "the hypernetwork run did not finish")
        check(t.state == "finished", "state %s" % t.state)
        check(steps == [1, 2, 3], "hypernetwork steps %s" % steps)
        kinds = {f.kind for f in files}
        for kind in ("hypernetwork", "hypernetwork_snapshot", "training_state"):
            check(kind in kinds, "no %s file was reported (got %s)" % (kind, sorted(kinds)))
        for f in files:
            check(os.path.isfile(f.path), "the saved file %s does not exist" % f.path)
        info = t.inspect(path)
        check(info.step == 3 and info.widths[:info.width_count] == [128, 64] and info.all_finite,
              "inspect of the trained hypernetwork: %r" % info)
        # The loss plot is on by default, as in sdt-host; write_metrics=False turns it off.
        run_dirs = glob.glob(os.path.join(work, "hn-logs", "*", "py-style"))
        check(len(run_dirs) == 1 and os.path.isfile(os.path.join(run_dirs[0], "metrics.jsonl"))
              and os.path.isfile(os.path.join(run_dirs[0], "loss.png")), "no metrics.jsonl and loss.png by default: %r" % run_dirs)
        run = t.start(hypernetwork_path=path, model_path=model, dataset_dir=os.path.join(demo, "dataset-style"),
                      template_file=template, log_dir=os.path.join(work, "hn-logs-plain"), max_steps=4, width=64,
                      height=64, save_every=0, preview_every=0, learn_rate=0.002, device="cpu", write_metrics=False)
        check(run.wait(240) == "finished", "the hypernetwork run with write_metrics=False did not finish")
        plain = glob.glob(os.path.join(work, "hn-logs-plain", "*", "py-style"))
        check(len(plain) == 1 and not os.path.exists(os.path.join(plain[0], "metrics.jsonl")),
              "write_metrics=False still wrote metrics.jsonl: %r" % plain)

    # Joint training: the embedding part beside the hypernetwork's, one run.
    joint_dir = os.path.join(work, "joint")
    os.mkdir(joint_dir)
    with open(os.path.join(work, "joint.txt"), "w") as f:
        f.write("a [name] on a [filewords]\n")
    with plugin.embedding_trainer() as e:
        star = e.create_embedding("py-joint", model, joint_dir, init_text="object")
    files = []
    with plugin.hypernetwork_trainer(on_file_saved=files.append) as t:
        hn = t.create_hypernetwork("py-joint-style", joint_dir, widths="128, 64")
        run = t.start(hypernetwork_path=hn, embedding_path=star, embedding_learn_rate="0.02", embedding_clip_mode="norm",
                      embedding_clip_value="1", model_path=model, dataset_dir=os.path.join(demo, "dataset-joint"),
                      template_file=os.path.join(work, "joint.txt"), log_dir=os.path.join(work, "joint-logs"), max_steps=2,
                      width=64, height=64, save_every=0, preview_every=0, learn_rate=0.002, device="cpu")
        check(run.wait(240) == "finished", "the joint run did not finish")
        saved = {(f.kind, os.path.basename(f.path)) for f in files if f.step == 2}
        for kind, name in (("embedding", "py-joint.safetensors"), ("hypernetwork", "py-joint-style.pt")):
            check((kind, name) in saved, "the joint run did not report %s %s at step 2 (got %s)" % (kind, name, sorted(saved)))
        check(t.inspect(hn).step == 2, "the jointly trained hypernetwork is not at step 2")
        expect_error(lambda: t.prepare(hypernetwork_path=hn, embedding_clip_mode="sideways"), "INVALID_ARGUMENT",
                     "embedding_clip_mode", "norm")


def loading(plugin_path, work):
    # pkg-config's `plugin` variable, with $SDTRAIN_PLUGIN unset.
    pc_dir = os.path.join(work, "pkgconfig")
    os.mkdir(pc_dir)
    with open(os.path.join(pc_dir, "sdtrain.pc"), "w") as f:
        f.write("plugin=%s\n\nName: sdtrain\nDescription: test\nVersion: 1.4.0\n" % plugin_path)
    saved = dict(os.environ)
    try:
        os.environ.pop("SDTRAIN_PLUGIN", None)
        os.environ["PKG_CONFIG_PATH"] = pc_dir
        found = sdtrain.find_plugin()
        check(found == plugin_path, "pkg-config gave %r, not %r" % (found, plugin_path))
        os.environ["SDTRAIN_PLUGIN"] = os.path.join(work, "missing.so")
        os.environ["PKG_CONFIG_PATH"] = os.path.join(work, "empty")
        os.environ["PKG_CONFIG_LIBDIR"] = os.path.join(work, "empty")
        expect_error(lambda: sdtrain.Plugin(), "NOT_FOUND", "SDTRAIN_PLUGIN", "missing.so")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    expect_error(lambda: sdtrain.Plugin(os.path.join(work, "template.txt")), "IO", "template.txt")
    fake_next = os.environ.get("SDT_FAKE_NEXT_PLUGIN")
    if fake_next:
        e = expect_error(lambda: sdtrain.Plugin(fake_next), "VERSION_MISMATCH", "ABI 2.", "ABI 1.")
        print("a plugin of the next major:", e)


def interrupt_right_after_start(plugin, demo, work):
    """The docs' example: interrupt() at once after start(**options), while the worker thread is still
    preparing (prepare() clears the plugin's pending request): the run still stops and saves."""
    model = os.path.join(demo, "model", "sdtrain-demo.safetensors")
    out = os.path.join(work, "early")
    os.mkdir(out)
    steps = []
    trainer = plugin.embedding_trainer(on_metrics=lambda m: steps.append(m.step))
    path = trainer.create_embedding("py-early", model, out, init_text="object", vectors_per_token=1)
    run = trainer.start(embedding_path=path, model_path=model, dataset_dir=os.path.join(demo, "dataset"),
                        template_file=os.path.join(work, "template.txt"), log_dir=os.path.join(work, "early-logs"),
                        max_steps=100000, width=64, height=64, save_every=0, preview_every=0, device="cpu", seed=7)
    trainer.interrupt()
    try:
        result = run.wait(240)
    except TimeoutError:
        trainer.interrupt()
        run.wait()
        check(False, "an interrupt right after start() was lost: the run went on to step %s" % (steps[-1:] or [0]))
        return
    check(result == "interrupted", "an interrupt right after start() gave %r, not 'interrupted'" % result)
    check(len(steps) <= 1, "an interrupt right after start() let the run train %d steps" % len(steps))
    trainer.close()


def main():
    plugin_path = os.environ.get("SDTRAIN_PLUGIN")
    demo = os.environ.get("SDT_DEMO")
    if not plugin_path or not demo or not os.path.isfile(os.path.join(demo, "model", "sdtrain-demo.safetensors")):
        print("SKIP: SDTRAIN_PLUGIN and SDT_DEMO (with the demo model) are needed")
        return 77
    with tempfile.TemporaryDirectory(prefix="sdtrain-py-") as work:
        with sdtrain.Plugin() as plugin:
            check(plugin.abi_version.startswith("1."), "the plugin speaks ABI %s" % plugin.abi_version)
            embedding_run(plugin, demo, work)
            interrupt_right_after_start(plugin, demo, work)
            hypernetwork_run(plugin, demo, work)
        loading(os.path.abspath(plugin_path), work)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("OK: training from Python, interrupt from another thread, files, callbacks and errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
