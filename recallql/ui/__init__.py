"""Terminal output shared by the CLI, the shell and the demo: tables and EXPLAIN (`render`),
progress bars (`progress`). Imports `recallql.api`'s result models, never `cli` or `repl`."""
