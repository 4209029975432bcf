"""Offline commands, apart from the serving path: ``clefgate eval``, ``replay``, ``demo`` and ``crawlers``.

They drive the same compiled pipeline as ``clefgate serve`` (``gateway.pipeline``); nothing
on the request path imports them.
"""
