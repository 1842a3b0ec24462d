"""sdtrain for Python hosts: a pure-Python (ctypes) binding of libsdtrain.so's C ABI (abi/sdtrain.h).

    import os, sdtrain
    plugin = sdtrain.Plugin()        # a path, else $SDTRAIN_PLUGIN, else pkg-config's `plugin` variable
    trainer = plugin.embedding_trainer(on_metrics=lambda m: print(m.step, m.loss))
    os.makedirs("embeddings", exist_ok=True)  # the plugin writes into an existing folder
    path = trainer.create_embedding("star", model_path=model, output_dir="embeddings", init_text="object")
    run = trainer.start(embedding_path=path, model_path=model, dataset_dir="dataset",
                        template_file="template.txt", max_steps=200, learn_rate="0.005")
    ...                              # run.interrupt() from any thread stops after the step and saves
    print(run.wait())                # "finished" or "interrupted"; errors raise sdtrain.SdtrainError

GradScaler has torch.amp.GradScaler's calls over the plugin's loss scaler (torch optional).
docs/python.md has the whole story."""
from ._abi import ABI_VERSION_MAJOR, ABI_VERSION_MINOR, ABI_VERSION_PATCH
from ._loader import find_plugin
from .applier import KV_K, KV_V, HypernetworkApplier
from .defaults import defaults
from .errors import ScalerMisuseError, SdtrainError
from .plugin import Plugin, default_plugin
from .records import Metrics, PrepareInfo, Preview, Record, SavedFile
from .scaler import GradScaler, LossScaler
from .training import EmbeddingTrainer, HypernetworkTrainer, TrainingRun

__version__ = "%d.%d.%d" % (ABI_VERSION_MAJOR, ABI_VERSION_MINOR, ABI_VERSION_PATCH)
ABI_VERSION = __version__

__all__ = ["Plugin", "default_plugin", "find_plugin", "SdtrainError", "ScalerMisuseError", "EmbeddingTrainer",
           "HypernetworkTrainer", "TrainingRun", "LossScaler", "GradScaler", "Metrics", "Preview", "SavedFile",
           "PrepareInfo", "Record", "ABI_VERSION", "defaults", "HypernetworkApplier", "KV_K", "KV_V"]
