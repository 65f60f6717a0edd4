"""`python -m argwatch.server.cli`: how `argwatch serve --workers N` starts each worker."""

import sys

from argwatch.server.cli import main

sys.exit(main())
