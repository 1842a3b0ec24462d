"""A minimal gradio: the components and layouts the extension builds (Blocks, Tabs, Tab, Row,
Accordion, Textbox, Number, Checkbox, Dropdown, Slider, Button, HTML, Image), each recording its
arguments; Button.click records (fn, inputs, outputs) so a test can press it."""
components = []
clicks = []


class _Component:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.label = kwargs.get("label", args[0] if args else None)
        self.value = kwargs.get("value")
        components.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Blocks(_Component):
    pass


class Tabs(_Component):
    pass


class Tab(_Component):
    pass


class Row(_Component):
    pass


class Column(_Component):
    pass


class Accordion(_Component):
    pass


class Textbox(_Component):
    pass


class Number(_Component):
    pass


class Checkbox(_Component):
    pass


class Dropdown(_Component):
    pass


class Slider(_Component):
    pass


class HTML(_Component):
    pass


class Image(_Component):
    pass


class Button(_Component):
    def click(self, fn=None, inputs=None, outputs=None, **kwargs):
        clicks.append((self, fn, list(inputs or []), list(outputs or [])))
