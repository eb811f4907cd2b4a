"""Real test data and evaluation, outside the query engine: corpus loaders (`corpora`: CACM,
Cranfield, Debian changelogs; `locomo`: LoCoMo conversations) and IR metrics (`evaluation`:
nDCG@k, MAP, recall@k)."""
