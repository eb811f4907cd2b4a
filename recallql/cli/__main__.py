"""``python -m recallql.cli``."""

from recallql.cli import main

main()
