"""recallql benchmarks: ``python -m benchmarks [quality|latency|sessions|lineage|ingest|parse|all]``
(see `benchmarks.__main__`); each script also runs alone with ``python -m benchmarks.<name>``."""
