# SPDX-License-Identifier: Apache-2.0
"""The round-trip kernel of kernels._regfft shared by the simulator and GPU tests."""

import numpy as np
from numba import cuda, types


def roundtrip_kernel(fwd, inv, registers):
    """A kernel ``k(x, y, z, nrows)``: each row of ``x`` (complex: the input of ``fwd``, or the
    sample pairs of a real one) through ``fwd.execute`` into ``y`` (its ``output_ept`` values per
    thread, inside ``y``'s rows), then ``inv.execute`` back into ``z``; ``registers`` "float"
    (2 float32 per value) or "complex" (complex64). Rows of a block: ``threadIdx.y``; rows past
    ``nrows`` run on row 0's input and store nothing."""
    T, fpb, nin, nmid = fwd.stride, fwd.ffts_per_block_value, fwd.input_ept, fwd.output_ept
    cplx = registers == "complex"
    width = fwd.storage_size if cplx else 2 * fwd.storage_size
    dt = np.complex64 if cplx else np.float32

    @cuda.jit
    def k(x, y, z, nrows):
        r = cuda.local.array(width, dt)
        sc = cuda.shared.array(0, types.complex64)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        ok = row < nrows
        rr = row if ok else 0
        for i in range(nin):
            v = x[rr, t + T * i]
            if cplx:
                r[i] = v
            else:
                r[2 * i] = v.real
                r[2 * i + 1] = v.imag
        fwd.execute(r, sc)
        for i in range(nmid):
            if ok and t + T * i < y.shape[1]:
                y[row, t + T * i] = r[i] if cplx else complex(r[2 * i], r[2 * i + 1])
        cuda.syncthreads()
        inv.execute(r, sc)
        for i in range(nin):
            if ok:
                z[row, t + T * i] = r[i] if cplx else complex(r[2 * i], r[2 * i + 1])

    return k
