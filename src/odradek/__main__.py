"""`python -m odradek ...` runs the command line (see odradek.cli.main)."""

from odradek.cli.main import main

raise SystemExit(main())
