"""`doctor explain`: a build or run log in, the known setup problems it proves out.

patterns.py is the table (id, regexes, the real lines behind them), engine.py the one pass
over the log, advice.py the step from a matched line to this machine's concrete fix, with the
fix wording of doctor/fixes.py. facts.py holds the plain facts of this machine the command
layer gathers; explain never looks at the machine itself. Imports run one way:
engine → advice → cuda_advice → facts.
"""

from doctor.explain.advice import lookups
from doctor.explain.engine import explain_text, find, findings
from doctor.explain.facts import LibtorchFacts, MachineFacts

__all__ = ["LibtorchFacts", "MachineFacts", "explain_text", "find", "findings", "lookups"]
