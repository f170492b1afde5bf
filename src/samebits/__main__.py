"""``python -m samebits``: the same CLI as the ``samebits`` command."""

from samebits.cli.app import main

if __name__ == "__main__":
    main()
