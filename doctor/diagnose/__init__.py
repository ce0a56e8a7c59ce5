"""Facts → findings, grouped into report areas."""
