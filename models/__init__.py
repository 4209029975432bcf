"""The model side of clefgate: data, architecture, training, calibration, export, evaluation.

Nothing under ``gateway/`` imports this package: serving reads exported ONNX files and
their manifests from ``models/repository/``. Training imports ``gateway.features`` so
that the model is trained on exactly what the gateway will compute.
"""
