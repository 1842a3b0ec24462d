"""Stand-in for modules.script_callbacks.on_ui_tabs(callback, *, name=None): recorded."""
ui_tabs = []


def on_ui_tabs(callback, *, name=None):
    ui_tabs.append(callback)
