"""``python -m crawlproject``: the same as the ``crawlproject`` command."""

import sys

from crawlproject.cli import main

sys.exit(main())
