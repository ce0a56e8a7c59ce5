"""Probes: Host → facts with evidence. A probe never decides ok/bad; diagnose does."""
