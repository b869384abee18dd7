"""Subcommands of the ``strom`` command: storage, broker/dev and the console tools.

Each module registers its subcommands on the argparse tree (``register(subparsers)``) and
implements them as ``cmd_*(args) -> int`` functions; ``strom.core.cli`` only assembles them.
Client libraries (confluent-kafka) are imported inside the commands so ``strom --help`` and
``strom dev`` stay fast.
"""
