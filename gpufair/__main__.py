"""``python -m gpufair``: the ``gpufair`` command, for when the console script is not on PATH
(a venv that is not activated, ``sudo`` with a reset PATH, a systemd unit)."""

from gpufair.cli.main import main

raise SystemExit(main())
