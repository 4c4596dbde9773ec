# SPDX-License-Identifier: Apache-2.0
"""The one error family of nvmath_device."""


class MathDxError(RuntimeError):
    """Base class of the errors nvmath_device raises for failures (not for misuse).

    Misuse raises ``TypeError`` / ``ValueError`` naming the argument.
    """


class CompileError(MathDxError):
    """NVRTC failed to compile a generated shim, or could not be loaded; the message holds the
    whole NVRTC log (or why the library could not be loaded)."""


class LinkError(MathDxError):
    """nvJitLink failed; the message holds the whole linker log."""


class DriverError(MathDxError):
    """A CUDA driver call failed; the message names the call, what it was for and the driver's
    error code."""
