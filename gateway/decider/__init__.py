"""The decider: everything between "ask the model" and calibrated probabilities.

Layers, each small and testable alone: ``CachedScorer(BreakerScorer(BatchingScorer(OnnxScorer)))``.
"""
