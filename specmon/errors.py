"""User-facing errors: printed as one line, never as a traceback."""


class UserError(Exception):
    """A user mistake (bad flag, missing file, unreachable server). Exit status 2."""

    exit_code = 2
