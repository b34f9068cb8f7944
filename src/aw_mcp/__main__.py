import sys

from aw_mcp.cli import main

sys.exit(main())
