"""Stand-in for modules.shared: cmd_opts.embeddings_dir / hypernetwork_dir, state (State's
begin, end, interrupt, interrupted, textinfo, sampling_step, sampling_steps), hypernetworks."""
import types

cmd_opts = types.SimpleNamespace(embeddings_dir="", hypernetwork_dir="")
hypernetworks = {}


class State:
    interrupted = False
    job = ""
    textinfo = None
    sampling_step = 0
    sampling_steps = 0

    def __init__(self):
        self.events = []

    def begin(self, job="(unknown)"):
        self.interrupted = False
        self.job = job
        self.events.append(("begin", job))

    def end(self):
        self.job = ""
        self.events.append(("end",))

    def interrupt(self):
        self.interrupted = True


state = State()
