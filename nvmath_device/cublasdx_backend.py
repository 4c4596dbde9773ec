# SPDX-License-Identifier: Apache-2.0
"""nvmath-python's ``nvmath.device.cublasdx_backend`` name that programs import: ``MAX_ALIGNMENT``."""

from .common import MAX_ALIGNMENT

__all__ = ["MAX_ALIGNMENT"]
