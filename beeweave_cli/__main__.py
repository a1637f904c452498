"""``python -m beeweave_cli``: the ``beeweave`` command without its console script."""

from beeweave_cli import main

main()
