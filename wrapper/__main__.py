"""`python -m wrapper run ...`: see wrapper.options for the command line."""

import sys

from wrapper.main import main

sys.exit(main())
