"""The one exception type for problems the user can cause and fix."""


class AndreaError(Exception):
    """A user-facing error: the CLI prints its message on one line and exits with code 2.

    The message names the problem and the fix, e.g. "--T must be >= 1 (got 0): pass a positive length".
    """


class KernelError(AndreaError):
    """A kernel did something wrong while it ran (a fault, an endless loop, a deadlock, a crash):
    not the user's input but the kernel file, so the CLI exits with code 1, as verify does for a
    failed case."""


class SetupError(AndreaError):
    """This machine or environment cannot run what was asked (a compiler, a sanitizer runtime or a
    worker process missing or broken): not the user's input, so the CLI exits with code 1, and
    the message says what to install or repair."""


class AndreaWarning(UserWarning):
    """From the Python API, a notice the command prints in words (scores past float32's range,
    say) instead of the raw NumPy RuntimeWarning that would otherwise surface."""


def shown(value, limit: int = 40) -> str:
    """A value as an error shows it: an array (NumPy, cupy, torch) by its type, shape and dtype,
    never its entries; anything else by a repr cut to `limit` characters."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__name__} of shape {tuple(value.shape)}, {str(value.dtype).removeprefix('torch.')}"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(exc: BaseException, limit: int = 120) -> str:
    """An exception as one short line: its message's first line, or its type when it has none.
    Driver and compiler messages run long; one line is what an error or a table cell can hold."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


class KernelFallbackWarning(UserWarning):
    """scaled_dot_product_attention: the backend named runs the kernels, which cannot take this
    call (its message says why), so the NumPy path ran it. warnings.simplefilter("error",
    KernelFallbackWarning) makes it an error."""
