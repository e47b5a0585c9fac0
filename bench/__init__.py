"""seglog's benchmarks: each module a command (`python bench/NAME.py`, or `python -m
seglog.bench.NAME`) that ends with one JSON line; they start nodes with seglog.harness."""
