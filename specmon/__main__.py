import sys

from specmon import stops

stops.install()  # first: a signal during the imports below still ends in complete exports

from specmon.cli import main  # noqa: E402

sys.exit(main())
