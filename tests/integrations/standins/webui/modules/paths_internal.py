"""Stand-in for modules.paths_internal.data_path (the test sets it)."""
data_path = ""
