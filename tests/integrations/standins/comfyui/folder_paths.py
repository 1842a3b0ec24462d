"""Stand-in for ComfyUI's folder_paths: exactly the functions the node pack calls, with the
signatures of ComfyUI's folder_paths.py (integrations/README.md names the commit). The test sets
folder_names_and_paths and output_directory."""
import os

folder_names_and_paths = {}  # name -> ([folders], {extensions})
output_directory = ""


def get_folder_paths(folder_name):
    return list(folder_names_and_paths[folder_name][0])


def get_filename_list(folder_name):
    folders, extensions = folder_names_and_paths[folder_name]
    out = set()
    for folder in folders:
        for root, _, names in os.walk(folder):
            for n in names:
                if not extensions or os.path.splitext(n)[1].lower() in extensions:
                    out.add(os.path.relpath(os.path.join(root, n), folder))
    return sorted(out)


def get_full_path(folder_name, filename):
    if folder_name not in folder_names_and_paths:
        return None
    filename = os.path.relpath(os.path.join("/", filename), "/")
    for folder in folder_names_and_paths[folder_name][0]:
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            return path
    return None


def get_output_directory():
    return output_directory
