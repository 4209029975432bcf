"""clefgate: an edge gateway sidecar that forwards, challenges or blocks every request."""

__version__ = "0.1.0"
