"""``python -m recallql``: the command line, for when the ``recallql`` script is not on PATH."""

from recallql.cli import main

main()
