"""Stand-in for modules.hypernetworks.hypernetwork.list_hypernetworks(path): {stem: file} of the
.pt files below path, as the webui's."""
import glob
import os


def list_hypernetworks(path):
    res = {}
    for filename in sorted(glob.iglob(os.path.join(path, "**/*.pt"), recursive=True), key=str.lower):
        name = os.path.splitext(os.path.basename(filename))[0]
        if name != "None":
            res[name] = filename
    return res
