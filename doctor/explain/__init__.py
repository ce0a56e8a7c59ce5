"""`doctor explain`: a build or run log in, the known setup problems it proves out.

patterns.py is the table (id, regexes, the real lines behind them), engine.py the one pass
over the log, advice.py the step from a matched line to this machine's concrete fix.
"""

from doctor.explain.advice import MachineFacts
from doctor.explain.engine import explain_text

__all__ = ["MachineFacts", "explain_text"]
