"""Benchmarks: each prints its figures beside a plain-files or raw-SQL reference run in the same
process, as a ratio. Run them with `make bench` or `python -m bench.NAME`."""
