"""_closeable.py - closing a wrapper of a plugin handle: on leaving a `with` block, and when it is collected."""


class Closeable:
    """A wrapper of a plugin handle with close(): `with` closes it on leaving, and garbage collection closes it
    too, best effort (at interpreter exit the plugin may be gone already). A class whose close() may refuse
    (a trainer while it runs) overrides _close_when_collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self._close_when_collected()
        except Exception:
            pass

    def _close_when_collected(self):
        self.close()
