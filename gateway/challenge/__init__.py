"""The proof-of-work challenge: page, verify endpoint, signed pass cookie, replay protection.

``ChallengeService`` is both the ``PageRenderer`` (challenge and block pages) and the
``LocalEndpoints`` (``/.clefgate/``) of the pipeline; ``load_signer`` turns
``challenge.keys`` into a ``Signer`` (or config problems).
"""

from gateway.challenge.service import PREFIX, ChallengeService, load_signer
from gateway.challenge.tokens import Binding, Signer, TokenError, pow_ok, solve

__all__ = ["PREFIX", "Binding", "ChallengeService", "Signer", "TokenError", "load_signer", "pow_ok", "solve"]
