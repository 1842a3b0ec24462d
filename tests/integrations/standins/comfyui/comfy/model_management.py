"""Stand-in for the comfy.model_management calls the node pack makes: unload_all_models,
soft_empty_cache, processing_interrupted, throw_exception_if_processing_interrupted,
InterruptProcessingException, interrupt_current_processing (ComfyUI's Cancel)."""
import threading

calls = []
_lock = threading.RLock()
interrupt_processing = False


class InterruptProcessingException(Exception):
    pass


def unload_all_models():
    calls.append("unload_all_models")


def soft_empty_cache(force=False):
    calls.append("soft_empty_cache")


def interrupt_current_processing(value=True):
    global interrupt_processing
    with _lock:
        interrupt_processing = value


def processing_interrupted():
    with _lock:
        return interrupt_processing


def throw_exception_if_processing_interrupted():
    global interrupt_processing
    with _lock:
        if interrupt_processing:
            interrupt_processing = False
            raise InterruptProcessingException()
