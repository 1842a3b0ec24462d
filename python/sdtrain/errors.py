"""The one exception the binding raises for a plugin failure: status + the plugin's sentence."""
from . import _abi


class SdtrainError(RuntimeError):
    """A call into sdtrain failed. `status` is the sdt_status number, `status_name` its name
    ("VALIDATION", "SCALER_MISUSE", ...) and `sentence` the plugin's sentence (cause and fix),
    which is also the message."""

    def __init__(self, status, sentence):
        self.status = int(status)
        self.status_name = _abi.STATUS_NAMES.get(self.status, "STATUS_%d" % self.status)
        self.sentence = sentence or "the plugin gave no sentence for status %s" % self.status_name
        super().__init__(self.sentence)

    def __str__(self):
        return "%s (%s)" % (self.sentence, self.status_name)


class ScalerMisuseError(SdtrainError):
    """The loss scaler was called out of order (SDT_STATUS_SCALER_MISUSE): the sentence says how,
    quoting PyTorch's own message where it has one."""


def error_for(status, sentence):
    cls = ScalerMisuseError if status == -14 else SdtrainError
    return cls(status, sentence)
