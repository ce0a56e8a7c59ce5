"""The advisor for every diagnosis id, in one table: the base ones (advice.py, which already folds
in the CUDA stack's), the distributed ones (dist_advice.py), the failed `import torch` ones
(python_advice.py), then the macOS/Windows ones, which wrap base advisors to speak the log's
platform. Kept apart from advice.py so that platform_advice can build on it without a circle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from doctor.explain.advice import ADVISORS as BASE_ADVISORS
from doctor.explain.advice import Advice, MachineFacts, advise_with
from doctor.explain.dist_advice import DIST_ADVISORS
from doctor.explain.platform_advice import PLATFORM_ADVISORS
from doctor.explain.python_advice import PYTHON_ADVISORS

if TYPE_CHECKING:
    from doctor.explain.engine import Match

ADVISORS = {**BASE_ADVISORS, **DIST_ADVISORS, **PYTHON_ADVISORS, **PLATFORM_ADVISORS}


def advise(match: Match, facts: MachineFacts | None) -> Advice:
    return advise_with(ADVISORS, match, facts)
