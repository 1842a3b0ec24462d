"""Stand-in for modules.sd_models: checkpoints_list (title -> CheckpointInfo with .filename),
unload_model_weights(sd_model=None, info=None), reload_model_weights(sd_model=None, info=None,
forced_reload=False); calls are recorded."""
import os
import types

checkpoints_list = {}
calls = []


def add_checkpoint(filename):
    title = os.path.basename(filename)
    checkpoints_list[title] = types.SimpleNamespace(filename=filename, title=title, name=title)
    return title


def unload_model_weights(sd_model=None, info=None):
    calls.append("unload_model_weights")


def reload_model_weights(sd_model=None, info=None, forced_reload=False):
    calls.append("reload_model_weights")
