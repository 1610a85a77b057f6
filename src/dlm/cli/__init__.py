"""The `dlm` command line (typer). Commands parse, call one library function, render."""
