"""``python -m seer``: the ``seer`` command line (see :mod:`seer.cli`)."""

from seer.cli import main

main()
