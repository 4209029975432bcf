"""clef: the zero-shot member of the Clef model family (training side; serving never imports it).

Frozen all-MiniLM-L6 with low-rank adapters and an option-conditioned routing head,
trained on generated generic question/option data, calibrated by temperature, exported
to ONNX for ``gateway.clef``. See ``models/clef/README.md``.
"""
