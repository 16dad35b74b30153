"""``python -m zaqar_delay.migrate``: the zaqar-delay-migrate command."""

import sys

from zaqar_delay.migrate import cli

sys.exit(cli.main())
