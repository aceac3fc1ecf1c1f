import sys

from stash_core.cli.main import main

sys.exit(main())
