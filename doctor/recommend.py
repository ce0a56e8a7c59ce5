"""Moved: the recommendation is a pure function beside its tables, doctor/catalog/recommend.py.
These names stay importable for modules not yet switched (explain/advice.py, commands/check.py)."""

from doctor.catalog.cuda import uncovered
from doctor.catalog.recommend import (
    BACKEND_ENV,
    Backend,
    Considered,
    Recommendation,
    chosen_backend,
    cuda_sorted,
    known_releases,
    newest_release,
    published_variants,
    recommend,
    rocm_sorted,
    validate_backend,
)

__all__ = [
    "BACKEND_ENV", "Backend", "Considered", "Recommendation", "chosen_backend", "cuda_sorted", "known_releases", "newest_release",
    "published_variants", "recommend", "rocm_sorted", "uncovered", "validate_backend",
]
