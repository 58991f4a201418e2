"""asv benchmarks of nyhopt (see asv_bench/README.md)."""
