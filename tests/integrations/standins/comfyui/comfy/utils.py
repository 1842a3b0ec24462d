"""Stand-in for comfy.utils.ProgressBar: ProgressBar(total, node_id=None),
update_absolute(value, total=None, preview=None); every call is recorded, and the global hook
(set by the test, as ComfyUI's main.py sets one) runs on each update as ComfyUI's does."""
PROGRESS_BAR_HOOK = None
bars = []


class ProgressBar:
    def __init__(self, total, node_id=None):
        self.total = total
        self.current = 0
        self.updates = []
        self.thread = None
        bars.append(self)

    def update_absolute(self, value, total=None, preview=None):
        import threading
        if total is not None:
            self.total = total
        self.current = min(value, self.total)
        self.updates.append((value, self.total, preview))
        self.thread = threading.get_ident()
        if PROGRESS_BAR_HOOK is not None:
            PROGRESS_BAR_HOOK(self.current, self.total, preview)

    def update(self, value):
        self.update_absolute(self.current + value)
