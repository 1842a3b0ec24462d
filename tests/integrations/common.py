"""What both integration tests share: checks, the demo model laid out in a host's folders, and
reading a trained file's step through the binding."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)
    return cond


def expect_refusal(fn, *words):
    """fn() must raise the kit's Refusal (or an SdtrainError) whose sentence has every word."""
    import sdtrain_integration as kit
    try:
        fn()
    except (kit.Refusal, kit.SdtrainError) as e:
        text = e.sentence if isinstance(e, kit.SdtrainError) else str(e)
        for w in words:
            check(w in text, "the sentence %r does not name %r" % (text, w))
        return text
    check(False, "expected a refusal naming %s" % (words,))
    return None


def environment():
    """(plugin path, demo folder) or exits 77 (skip) when the build's are missing."""
    plugin = os.environ.get("SDTRAIN_PLUGIN")
    demo = os.environ.get("SDT_DEMO")
    if not plugin or not demo or not os.path.isfile(os.path.join(demo, "model", "sdtrain-demo.safetensors")):
        print("SKIP: SDTRAIN_PLUGIN and SDT_DEMO (with the demo model) are needed")
        sys.exit(77)
    return plugin, demo


def checkpoint_folder(demo, folder):
    """A host's checkpoint folder holding the demo model (and its tokenizer/ beside it)."""
    os.makedirs(folder, exist_ok=True)
    for name in ("sdtrain-demo.safetensors", "tokenizer"):
        os.symlink(os.path.join(demo, "model", name), os.path.join(folder, name))
    return os.path.join(folder, "sdtrain-demo.safetensors")


def trained_step(path, hypernetwork=False):
    import sdtrain_integration as kit
    plugin = kit.open_plugin()
    make = plugin.hypernetwork_trainer if hypernetwork else plugin.embedding_trainer
    with make() as t:
        return t.inspect(path).step


def has_torch():
    import importlib.util
    return importlib.util.find_spec("torch") is not None


def finish(what):
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("OK:", what)
    return 0
