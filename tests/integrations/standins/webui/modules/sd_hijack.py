"""Stand-in for A1111's modules.sd_hijack.model_hijack.embedding_db.load_textual_inversion_embeddings."""


class EmbeddingDatabase:
    def __init__(self):
        self.reloads = []

    def load_textual_inversion_embeddings(self, force_reload=False, sync_with_sd_model=True):
        self.reloads.append(force_reload)


class StableDiffusionModelHijack:
    embedding_db = EmbeddingDatabase()


model_hijack = StableDiffusionModelHijack()
