"""Rendering pages in a browser only where it changes what the crawler sees
(docs/rendering.md): the settings (``config``), page templates and the raw
against rendered comparison (``templates``, ``compare``), the fleet's learned
decisions in Redis (``learning``), the gate every browser request passes
(``gate``), JSON-safe page methods (``page_methods``) and the add-on that wires
the download handler (``addon``; the handler is middlewares/render_handler.py).
"""
