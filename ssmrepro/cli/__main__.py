"""Tool (cli): ``python -m ssmrepro.cli`` runs the command line."""

from . import main

main()
