"""`python -m gateway` is the `hostfinder` command."""
import sys

from gateway.cli import main

sys.exit(main())
