"""Stand-in for Forge's and reForge's modules.ui_extra_networks_textual_inversion.embedding_db
(their model_hijack has no embedding database)."""
from modules.sd_hijack import EmbeddingDatabase

embedding_db = EmbeddingDatabase()
