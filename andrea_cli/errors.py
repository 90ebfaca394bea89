"""The one exception type for problems the user can cause and fix."""


class AndreaError(Exception):
    """A user-facing error: the CLI prints its message on one line and exits with code 2.

    The message names the problem and the fix, e.g. "--T must be >= 1 (got 0): pass a positive length".
    """
