"""Storage drivers, one folder per backend."""
