"""recallql benchmarks (run one with ``python -m benchmarks.<name>``)."""
