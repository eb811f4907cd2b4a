"""Readers of foreign formats into recallql: files (`files`: text, Markdown, JSONL, and the
corpus formats of `recallql.datasets.corpora`) and Hermes Agent session stores (`hermes_store`
reads one read-only; `hermes` imports it into sessions and messages)."""
