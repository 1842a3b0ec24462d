"""checks.py - the Python binding tests' checking: check() records a failure and goes on, expect_error()
wants an SdtrainError of one status whose sentence names given words; `failures` is what main() reports."""
import sdtrain

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def expect_error(fn, status_name, *words):
    """fn() must raise an SdtrainError with status_name and a sentence holding every word; returns it (or None)."""
    try:
        fn()
    except sdtrain.SdtrainError as e:
        check(e.status_name == status_name, "expected %s, got %s: %s" % (status_name, e.status_name, e.sentence))
        for w in words:
            check(w in e.sentence, "the sentence %r does not name %r" % (e.sentence, w))
        return e
    check(False, "expected an SdtrainError %s" % status_name)
    return None
