"""The deterministic rule table: YAML rule files -> validated -> compiled ``RuleTable``.

Rules are evaluated in order and the first match wins. A rule has a ``name``, an
optional ``description``, conditions (all must hold) and an action::

    - name: block-env-probes
      description: Secret files are never served; asking for them is a scanner's first move.
      path: ["/**/.env", "/**/.git/**"]
      action: block

Conditions: ``ip`` (CIDRs and ``list:NAME``), ``reverse_dns`` (forward-confirmed names under domains; with ``user_agent``), ``method``, ``host`` and ``path`` (globs),
``path_regex``, ``query``, ``user_agent`` (regexes; ``list:NAME`` for a named list of crawler names), ``headers`` (name -> true / false /
regex), ``body_size`` (``"> 1MiB"``), ``client`` (per-client window statistics),
``rate`` (``120/min`` token bucket keyed by client (address + fingerprint, the default), ip, prefix or header:NAME), and the groups
``not:`` and ``any:``. Actions: ``allow``, ``block`` (``status``), ``challenge``
(``difficulty``), ``route`` (``backend``, ``continue``) and ``score`` (``policy``).
"""

from gateway.rules.loader import RuleFileError, RuleOptions, from_config, load
from gateway.rules.table import ACTIONS, CompiledRule, RuleTable

__all__ = ["ACTIONS", "CompiledRule", "RuleFileError", "RuleOptions", "RuleTable", "from_config", "load"]
