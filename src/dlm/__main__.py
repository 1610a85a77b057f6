"""`python -m dlm` is the `dlm` command."""

from dlm.cli.main import main

main()
