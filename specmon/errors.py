"""User-facing errors: printed as one line, never as a traceback."""


class UserError(Exception):
    """A user mistake (bad flag, missing file, unreachable server). Exit status 2."""

    exit_code = 2


class ServerUnreachable(Exception):
    """The server stayed unreachable for --max-outage seconds: the run stopped itself, its
    exports complete. Exit status 1, one line."""
