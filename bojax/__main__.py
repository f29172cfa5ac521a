"""``python -m bojax``: the command line, as the ``bojax`` script."""

from bojax.cli import main

main()
