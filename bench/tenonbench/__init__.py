"""tenon's comparison benchmark driver (bench/run.py is the entry point)."""
