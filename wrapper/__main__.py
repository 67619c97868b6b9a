"""`python -m fray.wrapper run ...`: see fray.wrapper.options for the command line."""

import sys

from .main import main

sys.exit(main())
