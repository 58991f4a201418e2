"""``cupyx`` of the host stand-in (see ``cupy/__init__.py``)."""
