"""sdtrain for ComfyUI: create and train textual-inversion embeddings and hypernetworks inside
ComfyUI, and apply hypernetworks as A1111 does. Install: link or copy this folder into
ComfyUI/custom_nodes/ (integrations/README.md)."""
import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
# The shared part: beside this file when the package was copied whole (install step), else in
# integrations/common/ of the source tree this folder is linked from.
for _candidate in (_here, os.path.join(os.path.dirname(_here), "common")):
    if os.path.isfile(os.path.join(_candidate, "sdtrain_integration.py")):
        if _candidate not in sys.path:
            sys.path.append(_candidate)
        break

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS  # noqa: E402

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]
